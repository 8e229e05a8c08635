"""The export file on disk: written atomically, sealed with a count and a checksum, checked on read.

An export (version 2) is JSON Lines: a header line, one line per memory, and an end line
(``{"format": "htm-export-end", "count": ..., "sha256": ...}``) whose checksum covers every
byte before it. :class:`ExportWriter` writes one, :func:`atomic_file` puts it at a path
through a temporary file renamed over the target when complete, and :func:`check_file`
tells a complete file from a truncated or altered one before anything is imported (version 1
files, with no end line, are checked by their header's count). See docs/cli.md ("htm export").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from .errors import IncompleteExportError, ValidationError

__all__ = ["END_FORMAT", "ExportWriter", "check_file", "open_export"]

#: The ``format`` field of an export's end line.
END_FORMAT = "htm-export-end"
_TMP_SUFFIX = ".htm-tmp"
#: Room kept in the header line so the final count can be written into it in place.
_HEADER_ROOM = 24


def _dumps(obj: Any) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate kept by an older htm: written escaped
        return (json.dumps(obj, allow_nan=False) + "\n").encode("ascii")


class ExportWriter:
    """Writes one export: ``header``, then :meth:`write` per record, then :meth:`finish`."""

    def __init__(self, fh: IO[bytes] | IO[str], header: dict[str, Any], *, rewritable: bool) -> None:
        self._fh = fh
        self._binary = not hasattr(fh, "encoding")
        self._header = dict(header)
        self._rewritable = rewritable
        self._sha = hashlib.sha256()
        self.count = 0
        first = _dumps(self._header)
        if rewritable:  # padded, so the exact count fits in when the export ends
            first = first[:-1] + b" " * _HEADER_ROOM + b"\n"
        self._header_size = len(first)
        self._put(first)

    def _put(self, data: bytes) -> None:
        if not self._rewritable:
            self._sha.update(data)
        self._emit(data)

    def _emit(self, data: bytes) -> None:
        if self._binary:
            cast("IO[bytes]", self._fh).write(data)
        else:
            cast("IO[str]", self._fh).write(data.decode("utf-8"))

    def write(self, record: dict[str, Any]) -> None:
        """Append one memory record."""
        self._put(_dumps(record))
        self.count += 1

    def finish(self) -> None:
        """Write the exact count into the header (paths) and append the end line."""
        if self._rewritable:
            fh = cast("IO[bytes]", self._fh)
            end = fh.tell()
            header = _dumps({**self._header, "count": self.count})
            if len(header) > self._header_size:  # pragma: no cover - the room covers 20 digits
                raise ValidationError("export header grew past its reserved room")
            fh.seek(0)
            fh.write(header[:-1] + b" " * (self._header_size - len(header)) + b"\n")
            fh.flush()
            fh.seek(0)
            left = end
            while left:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:  # pragma: no cover - the file shrank under us
                    raise ValidationError("the export file changed while it was written")
                self._sha.update(chunk)
                left -= len(chunk)
            fh.seek(end)
        end_line = {"format": END_FORMAT, "count": self.count, "sha256": self._sha.hexdigest()}
        self._emit(_dumps(end_line))


def _remove_stale(target: Path) -> None:
    """Remove temporary files of earlier exports to ``target`` that were killed."""
    for stale in target.parent.glob(f".{target.name}.*{_TMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            stale.unlink()


@contextmanager
def atomic_file(target: str | Path) -> Iterator[IO[bytes]]:
    """A new file (0600) that replaces ``target`` only when the block ends without error."""
    path = Path(target).expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ValidationError(f"cannot write {path}: the folder {folder} does not exist; "
                              "create it or give another path")
    if path.is_dir():
        raise ValidationError(f"cannot write {path}: it is a folder; give a file name")
    _remove_stale(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise ValidationError(f"cannot write in {folder}: {exc.strerror}") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w+b") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


@dataclass(frozen=True)
class FileCheck:
    """What :func:`check_file` found: the header, the records counted, and any problem."""

    header: Any
    records: int
    problem: str | None
    sealed: bool


def _lines(source: Iterable[bytes] | Iterable[str]) -> Iterator[bytes]:
    for line in source:
        yield line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")


def check_file(source: Iterable[bytes] | Iterable[str]) -> FileCheck:
    """Read ``source`` once and say whether it is a complete, unaltered export."""
    sha = hashlib.sha256()
    header: Any = None
    records = 0
    end: Any = None
    after_end = False
    for raw in _lines(source):
        if end is not None:
            if raw.strip():
                after_end = True
            continue
        if not raw.strip():
            sha.update(raw)
            continue
        if header is None:
            try:
                header = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return FileCheck(None, 0, None, False)  # import_jsonl names the problem
            sha.update(raw)
            continue
        if raw.startswith(b'{"format": "' + END_FORMAT.encode()):
            try:
                end = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                end = None
            if isinstance(end, dict) and end.get("format") == END_FORMAT:
                continue
            end = None
        sha.update(raw)
        records += 1
    if not isinstance(header, dict) or header.get("version") not in (1, 2):
        return FileCheck(header, records, None, False)  # import_jsonl names the problem
    promised = header.get("count")
    if header.get("version") == 1:
        if isinstance(promised, int) and promised != records:
            return FileCheck(header, records, f"its header promises {promised} memories but it "
                             f"holds {records}: the file is truncated or altered", False)
        return FileCheck(header, records, None, False)
    if end is None:
        return FileCheck(header, records, "it has no end line: the file is truncated (an export "
                         f"that did not finish?); it holds {records} of the {promised} memories "
                         "its header promises", False)
    if after_end:
        return FileCheck(header, records, "there is data after its end line", False)
    if end.get("count") != records:
        return FileCheck(header, records, f"its end line says {end.get('count')} memories but "
                         f"it holds {records}", False)
    if end.get("sha256") != sha.hexdigest():
        return FileCheck(header, records, "its checksum does not match: the file was altered "
                         "or damaged after it was written", False)
    return FileCheck(header, records, None, True)


def refuse(name: str, problem: str) -> IncompleteExportError:
    """The error for an export file that failed :func:`check_file`."""
    return IncompleteExportError(
        f"{name} is not a complete htm export: {problem}; nothing was imported. Re-export "
        "the store, or import what the file holds with `htm import --partial` "
        "(import_jsonl(..., partial=True))")


@contextmanager
def open_export(source: str | Path | IO[str]) -> Iterator[IO[str]]:
    """The export at ``source`` opened for reading (a path must name an existing file)."""
    if not isinstance(source, (str, Path)):
        yield source
        return
    if str(source) == "-":
        raise ValidationError("give a file path; '-' (standard input/output) is not supported")
    path = Path(source).expanduser()
    if not path.exists():
        raise ValidationError(f"cannot open {source}: no such file; check the path "
                              f"(relative to {Path.cwd()})")
    if path.is_dir():
        raise ValidationError(f"cannot open {source}: it is a folder, not an export file")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
            yield fh
    except OSError as exc:
        raise ValidationError(f"cannot open {source}: {exc.strerror}") from None
