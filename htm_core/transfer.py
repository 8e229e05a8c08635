"""Moving memories between stores: JSON Lines export/import and store-to-store copy.

Everything a memory is travels (content, key, times, tags, metadata, the forgotten state and,
when asked, the embedding); working-memory membership and the operations log stay behind.
Import and copy are resumable (a key already in the target is skipped), written in batches of
one transaction each (docs/cli.md, "htm export", "htm import", "htm copy")::

    source = open_store("memories.db")
    export_jsonl(source, "backup.jsonl", with_embeddings=True)
    copy_store(source, open_store("postgresql://localhost/htm"))   # run again to resume
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from . import _exportfile, serialize
from ._provenance import check_confidence, check_source
from ._values import check_created_at, check_metadata
from .consolidation.kinds import DEFAULT_KIND, check_kind
from .embeddings import embedder_name, store_embedder_hint
from .errors import (
    DatabaseCorruptError,
    DuplicateKeyError,
    EmbedderMismatchError,
    EmbeddingError,
    SchemaError,
    StoreError,
    ValidationError,
)
from .models import Memory
from .store.base import BulkLoad, LongTermStore, NewMemory, capability, content_hash
from .store.one_embedder import mismatch_advice
from .validation import check_content

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "Progress",
    "TransferResult",
    "copy_store",
    "export_jsonl",
    "import_jsonl",
    "memory_from_record",
    "memory_to_record",
    "open_source",
    "verify_copy",
]

#: The ``format`` field of an export's header line.
EXPORT_FORMAT = "htm-export"
#: The version of the export format this code writes (2: with an end line and checksum).
#: A memory's ``kind``, ``source`` and ``confidence`` are optional fields of its line.
EXPORT_VERSION = 2
#: The export format versions this code reads (a line without a kind is ``episodic``).
READ_VERSIONS = (1, 2)

#: Called after each batch with (memories done so far, total or None when unknown).
Progress = Callable[[int, "int | None"], None]

_FIELDS = ("key", "content", "robot", "importance", "token_count", "created_at", "last_accessed",
           "access_count", "tags", "metadata", "forgotten_at", "kind", "source", "confidence")


@dataclass(frozen=True, kw_only=True)
class TransferResult:
    """What an import or a copy did.

    ``seen`` memories were read from the source; ``written`` were new to the target and
    were written; ``skipped`` were already in the target (a resumed run) and were left
    alone. ``verified`` is True when the final check ran and passed.
    """

    seen: int = 0
    written: int = 0
    skipped: int = 0
    verified: bool = False
    embedded: int = 0
    notes: tuple[str, ...] = field(default=())


def _parse_time(value: Any, name: str, line: int) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"line {line}: {name} must be an ISO 8601 string, got {value!r}")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"line {line}: {name}={value!r} is not an ISO 8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


def memory_to_record(memory: Memory, *, with_embedding: bool = False) -> dict[str, Any]:
    """A memory as one JSON-serialisable export record
    (:func:`htm_core.serialize.memory_to_record`)."""
    return serialize.memory_to_record(memory, include_embedding=with_embedding)


def memory_from_record(record: Any, *, line: int = 0) -> NewMemory:
    """An export record back as a :class:`~htm_core.store.NewMemory`, checked field by field.

    Raises :class:`~htm_core.errors.ValidationError` naming the line and the field when
    the record is malformed.
    """
    if not isinstance(record, dict):
        raise ValidationError(f"line {line}: expected a JSON object, got {type(record).__name__}")
    missing = [f for f in ("key", "content", "robot", "created_at") if f not in record]
    if missing:
        raise ValidationError(f"line {line}: missing field(s) {missing}; is this an htm export?")
    unknown = set(record) - set(_FIELDS) - {"embedding", "embedder"}
    if unknown:
        raise ValidationError(f"line {line}: unknown field(s) {sorted(unknown)}")
    for name in ("key", "content", "robot"):
        if not isinstance(record[name], str) or not record[name]:
            raise ValidationError(f"line {line}: {name} must be a non-empty string")
    created = _parse_time(record["created_at"], "created_at", line)
    assert created is not None
    embedding = record.get("embedding")
    if embedding is not None and (not isinstance(embedding, list)
                                  or not all(isinstance(x, (int, float)) for x in embedding)):
        raise ValidationError(f"line {line}: embedding must be a list of numbers")
    tags = record.get("tags") or []
    metadata = record.get("metadata") or {}
    if not isinstance(tags, list) or not isinstance(metadata, dict):
        raise ValidationError(f"line {line}: tags must be a list and metadata an object")
    try:
        return _checked(NewMemory(
            key=record["key"], content=record["content"], robot=record["robot"],
            importance=float(record.get("importance", 1.0)),
            token_count=int(record.get("token_count", 0)),
            created_at=created, tags=tuple(str(t) for t in tags), metadata=metadata,
            embedding=embedding, embedder=record.get("embedder") if embedding else None,
            explicit_key=True,
            last_accessed=_parse_time(record.get("last_accessed"), "last_accessed", line),
            access_count=int(record.get("access_count", 0)),
            forgotten_at=_parse_time(record.get("forgotten_at"), "forgotten_at", line),
            kind=check_kind(record.get("kind") or DEFAULT_KIND),
            source=check_source(record.get("source")),
            confidence=check_confidence(record.get("confidence")),
        ), f"line {line}")
    except ValidationError:
        raise
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"line {line}: {exc}") from None


def _checked(memory: NewMemory, where: str) -> NewMemory:
    """``memory`` if every value can be stored on both backends (see :mod:`htm_core._values`);
    else the specific error, prefixed with ``where`` (a line of a file, a source's key)."""
    try:
        check_content(memory.content)
        return replace(memory, metadata=check_metadata(memory.metadata),
                       created_at=check_created_at(memory.created_at))
    except ValidationError as exc:
        raise type(exc)(f"{where}: {exc}; nothing of this batch was written") from None


def _new_from_memory(memory: Memory) -> NewMemory:
    return _checked(NewMemory(
        key=memory.key, content=memory.content, robot=memory.robot, importance=memory.importance,
        token_count=memory.token_count, created_at=memory.created_at, tags=memory.tags,
        metadata=dict(memory.metadata), embedding=memory.embedding,
        embedder=memory.embedder if memory.embedding is not None else None, explicit_key=True,
        last_accessed=memory.last_accessed, access_count=memory.access_count,
        forgotten_at=memory.forgotten_at, kind=memory.kind, source=memory.source,
        confidence=memory.confidence,
    ), f"memory {memory.key!r} of the source")


def open_source(url: str | Path | None) -> LongTermStore:
    """Open an existing store to read from (``htm export``, the source of ``htm copy``).

    Never creates anything: a SQLite path that does not exist, is not SQLite or holds no
    htm tables is refused (:class:`~htm_core.errors.DatabaseUnavailableError`), and a
    PostgreSQL database without htm's schema is a :class:`~htm_core.errors.SchemaError`.
    """
    from .store import is_postgres_url, open_store

    if is_postgres_url(url):
        try:
            return open_store(url, migrate=False)
        except SchemaError as exc:
            raise SchemaError(f"cannot read from it: {exc}; is it the right database?") from None
    from .store.sqlite.files import existing_database_file

    existing_database_file(url)
    return open_store(url)


def _total(store: LongTermStore) -> int:
    counts = store.counts("")
    return counts.total + counts.forgotten


def _keys(store: LongTermStore) -> set[str]:
    """Every key in ``store`` (forgotten included): what a resumed run must skip."""
    return set(store.keys_with_prefix("", include_forgotten=True))


#: Fewer memories than this coming in are written into the indexes as they are.
BULK_MIN = 1_000


def _loading(target: LongTermStore, incoming: int | None, held: int
             ) -> AbstractContextManager[object]:
    """``target.bulk_load()`` when at least :data:`BULK_MIN` memories are coming in and no
    fewer than the target holds (a new store, a move to PostgreSQL, a resumed run): its
    indexes are built once at the end rather than entered row by row, which on PostgreSQL
    means the HNSW graph (a few hundred rows a second). Into a store larger than what is
    coming in, rows go into its indexes as they are (rebuilding those would cost more,
    and the store's own recalls would meanwhile scan)."""
    if isinstance(target, BulkLoad) and incoming is not None and incoming >= max(held, BULK_MIN):
        return target.bulk_load()
    return nullcontext()


def export_jsonl(
    store: LongTermStore,
    target: str | Path | IO[str],
    *,
    with_embeddings: bool = False,
    include_forgotten: bool = True,
    batch_size: int = 1000,
    progress: Progress | None = None,
) -> int:
    """Write every memory of ``store`` to ``target`` (a path or a text file) as JSON Lines.

    Returns how many memories were written. Forgotten memories are included (with their
    ``forgotten_at``) unless ``include_forgotten=False``. A path is written to a temporary
    file beside it and renamed over it only when the export is complete, so an export that
    fails or is killed leaves an earlier backup at that path as it was; the file ends with
    a line holding the count and a SHA-256 checksum, which :func:`import_jsonl` checks (see
    :mod:`htm_core._exportfile`).
    """
    if isinstance(target, (str, Path)) and str(target) == "-":
        raise ValidationError("give a file path; '-' (standard input/output) is not supported")
    total = _total(store) if include_forgotten else store.counts("").total
    info = store.embedding_info()
    header = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "count": total,
              "embedder": info[0] if info and with_embeddings else None,
              "dim": info[1] if info and with_embeddings else None,
              "exported_at": datetime.now(timezone.utc).isoformat()}
    with ExitStack() as stack:
        fh: IO[bytes] | IO[str] = target if not isinstance(target, (str, Path)) \
            else stack.enter_context(_exportfile.atomic_file(target))
        writer = _exportfile.ExportWriter(fh, header, rewritable=isinstance(target, (str, Path)))
        for batch in capability(store, BulkLoad, "export").iter_memories(
                batch_size=batch_size, include_forgotten=include_forgotten,
                include_embedding=with_embeddings):
            for m in batch:
                _check_intact(store, m)
                writer.write(memory_to_record(m, with_embedding=with_embeddings))
            if progress is not None:
                progress(writer.count, total)
        writer.finish()
    return writer.count


def _check_intact(store: LongTermStore, memory: Memory) -> None:
    """Refuse to export a memory whose text no longer matches its stored checksum: a
    backup must never carry damage under a valid checksum of its own."""
    if memory.content_hash and content_hash(memory.content) != memory.content_hash:
        raise DatabaseCorruptError(
            f"memory {memory.key!r} (id {memory.id}) in {store.url} does not match its stored "
            "checksum: its text was damaged; the export was stopped and no backup written. "
            "Run `htm check` to list every damaged memory")


def _read_records(source: Iterable[str], *, partial: bool,
                  skipped: list[int]) -> Iterator[tuple[int, Any]]:
    for number, raw in enumerate(source, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            if partial and number > 1:
                skipped.append(number)
                continue
            raise ValidationError(f"line {number} is not valid JSON ({exc.msg}); is the file "
                                  "complete? re-export it") from None
        if isinstance(record, dict) and record.get("format") == _exportfile.END_FORMAT:
            return
        yield number, record


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_new(target: LongTermStore, records: Sequence[NewMemory], existing: set[str]
               ) -> int:
    """Write the records whose keys are not in ``existing``; return how many."""
    fresh = [r for r in records if r.key not in existing]
    if fresh:
        results = target.add_many(fresh)
        for rec, res in zip(fresh, results, strict=True):
            if not res.created:  # pragma: no cover - guarded by the key set
                raise DuplicateKeyError(f"key {rec.key!r} appeared in the target during the copy")
        existing.update(r.key for r in fresh)
    return len(fresh)


def _import_embedder(target: LongTermStore, file_embedder: Any, embedder: Any,
                     reembed: bool) -> str | None:
    """The embedder whose vectors may enter ``target``; refuse any other before writing."""
    name = embedder_name(embedder) if embedder is not None else None
    info = target.embedding_info()
    store = info[0] if info else None
    if reembed and name is None:
        raise ValidationError("reembed=True needs an embedder to compute the new vectors with")
    if store is not None and name is not None and name != store:
        raise EmbedderMismatchError(
            f"the target store's vectors were made by {store!r} but the embedder is {name!r}; "
            f"nothing was imported; {mismatch_advice(store)}")
    expected = store or name or (file_embedder if isinstance(file_embedder, str) else None)
    if not reembed and isinstance(file_embedder, str) and expected != file_embedder:
        _refuse(file_embedder, str(expected), target_has_vectors=store is not None)
    return expected


def _refuse(found: str, expected: str, *, target_has_vectors: bool) -> None:
    which = "the target store's embedder" if target_has_vectors else "the embedder asked for"
    raise EmbedderMismatchError(
        f"the file's vectors were made by {found!r} but {which} is {expected!r}; vectors of "
        "two models cannot share a store, so nothing was imported; run `htm import --reembed "
        f"FILE` (import_jsonl(..., reembed=True)) to compute new vectors with {expected!r}, "
        f"or import with the embedder the file was made with{store_embedder_hint(found)}")


def import_jsonl(
    target: LongTermStore,
    source: str | Path | IO[str],
    *,
    embedder: Any = None,
    reembed: bool = False,
    batch_size: int = 500,
    progress: Progress | None = None,
    partial: bool = False,
) -> TransferResult:
    """Load an :func:`export_jsonl` file into ``target``; resumable, never duplicates.

    The whole file is checked first: a file that is truncated, altered or damaged (its end
    line, count or checksum do not match) is refused with
    :class:`~htm_core.errors.IncompleteExportError` before anything is written, unless
    ``partial=True``, which imports every intact memory it holds and skips damaged lines
    (``notes`` of the result says what was skipped).

    A key already in the target is skipped (a re-run after an interruption picks up where
    it stopped). Vectors in the file are kept when they come from the target's embedder
    (for a target without vectors yet: from ``embedder``, or, without one, the file's own);
    vectors from any other embedder are refused with
    :class:`~htm_core.errors.EmbedderMismatchError` before anything is written. With
    ``reembed=True`` the file's vectors are ignored and every memory is embedded with
    ``embedder``. Memories the file carries without a vector are embedded with
    ``embedder`` when given (in batches), else stored without one (``HTM.flush`` or a
    background worker embeds them later). A large file going into a store holding no more
    than it does is written inside ``target.bulk_load()`` (see :data:`BULK_MIN`).
    """
    with _exportfile.open_export(source) as fh:
        lines: Iterable[str] = fh
        if isinstance(source, (str, Path)) or fh.seekable():
            start = fh.tell()
            check = _exportfile.check_file(fh)
            fh.seek(start)
        else:  # a stream read once: keep its lines to check them before writing any
            lines = list(fh)
            check = _exportfile.check_file(lines)
        notes: list[str] = []
        if check.problem is not None:
            if not partial:
                raise _exportfile.refuse(str(getattr(source, "name", source)), check.problem)
            notes.append(f"the file is not a complete export ({check.problem}); imported "
                         "what it holds")
        elif not check.sealed and check.header is not None:
            notes.append("a version 1 export carries no checksum: it was read as it is")
        result = _import_lines(target, lines, embedder=embedder, reembed=reembed,
                               batch_size=batch_size, progress=progress, partial=partial)
    return replace(result, notes=(*notes, *result.notes))


def _import_lines(target: LongTermStore, lines: Iterable[str], *, embedder: Any, reembed: bool,
                  batch_size: int, progress: Progress | None, partial: bool) -> TransferResult:
    existing = _keys(target)
    seen = written = skipped = embedded = 0
    name = embedder_name(embedder) if embedder is not None else None
    broken: list[int] = []
    records = _read_records(lines, partial=partial, skipped=broken)
    first = next(records, None)
    if first is None:
        raise ValidationError("the file is empty; expected an htm export (JSON Lines)")
    _, header = first
    if not isinstance(header, dict) or header.get("format") != EXPORT_FORMAT:
        raise ValidationError("the first line is not an htm export header; create the file "
                              "with `htm export`")
    if header.get("version") not in READ_VERSIONS:
        raise ValidationError(f"export format version {header.get('version')!r} is not "
                              f"supported (this htm reads versions {list(READ_VERSIONS)})")
    total = header.get("count") if isinstance(header.get("count"), int) else None
    expected = _import_embedder(target, header.get("embedder"), embedder, reembed)
    with _loading(target, total, len(existing)):
        for batch in _batches(records, batch_size):
            memories = _memories(batch, partial=partial, skipped=broken)
            seen += len(memories)
            fresh = [m for m in memories if m.key not in existing]
            skipped += len(memories) - len(fresh)
            if reembed:
                fresh = [replace(m, embedding=None, embedder=None) for m in fresh]
            for m in fresh:
                if m.embedding is not None and expected is not None and m.embedder != expected:
                    _refuse(str(m.embedder), str(expected),
                            target_has_vectors=target.embedding_info() is not None)
            if embedder is not None and name is not None:
                fresh, count = _embed_missing(fresh, embedder, name)
                embedded += count
            written += _write_new(target, fresh, existing)
            if progress is not None:
                progress(seen, total)
    notes = (f"skipped {len(broken)} damaged line(s) (e.g. line {broken[0]})",) if broken else ()
    return TransferResult(seen=seen, written=written, skipped=skipped, embedded=embedded,
                          notes=notes)


def _memories(batch: list[tuple[int, Any]], *, partial: bool, skipped: list[int]
              ) -> list[NewMemory]:
    """The batch's records as memories; with ``partial``, records that fail are left out."""
    if not partial:
        return [memory_from_record(rec, line=n) for n, rec in batch]
    out = []
    for n, rec in batch:
        try:
            out.append(memory_from_record(rec, line=n))
        except ValidationError:
            skipped.append(n)
    return out


def _embed_missing(records: list[NewMemory], embedder: Any, name: str
                   ) -> tuple[list[NewMemory], int]:
    todo = [i for i, r in enumerate(records) if r.embedding is None]
    if not todo:
        return records, 0
    try:
        vectors = embedder.embed_documents([records[i].content for i in todo])
    except Exception as exc:
        raise EmbeddingError(f"embedder {name} failed during import: {exc}; nothing of this "
                             "batch was written, re-run to resume") from exc
    out = list(records)
    for i, vector in zip(todo, vectors, strict=True):
        out[i] = replace(records[i], embedding=[float(x) for x in vector], embedder=name)
    return out, len(todo)


def copy_store(
    source: LongTermStore,
    target: LongTermStore,
    *,
    batch_size: int = 500,
    progress: Progress | None = None,
    verify: bool = True,
    sample: int = 100,
) -> TransferResult:
    """Copy every memory (forgotten ones and embeddings included) from ``source`` to ``target``.

    Batches follow the source's id order (``iter_memories(after_id=...)``), each one
    transaction in the target. A key already in the target is skipped, so an interrupted
    copy is resumed by running it again. With ``verify`` (the default) the copy ends with
    :func:`verify_copy`. A large copy into a store holding no more than the source is
    written inside ``target.bulk_load()`` (see :data:`BULK_MIN`).
    """
    if source.url == target.url and source.backend == target.backend:
        raise ValidationError(f"source and target are the same database ({source.url}); give "
                              "two different URLs")
    theirs, ours = source.embedding_info(), target.embedding_info()
    if theirs is not None and ours is not None and theirs[0] != ours[0]:
        raise EmbedderMismatchError(
            f"the source's vectors were made by {theirs[0]!r} and the target's by {ours[0]!r}; "
            "a store keeps one embedder's vectors, so nothing was copied; export the source "
            "(`htm export`) and load it with `htm import --reembed FILE`, or re-embed one of "
            "the stores (`htm reembed`) first")
    total = _total(source)
    existing = _keys(target)
    seen = written = skipped = 0
    with _loading(target, total, len(existing)):
        for batch in capability(source, BulkLoad, "copy").iter_memories(
                batch_size=batch_size, include_forgotten=True, include_embedding=True):
            seen += len(batch)
            count = _write_new(target, [_new_from_memory(m) for m in batch], existing)
            written += count
            skipped += len(batch) - count
            if progress is not None:
                progress(seen, total)
    result = TransferResult(seen=seen, written=written, skipped=skipped)
    if verify:
        verify_copy(source, target, sample=sample)
        result = TransferResult(seen=seen, written=written, skipped=skipped, verified=True)
    return result


def _comparable(memory: Memory) -> dict[str, Any]:
    record = memory_to_record(memory)
    record["has_embedding"] = memory.embedding is not None
    return record


def verify_copy(source: LongTermStore, target: LongTermStore, *, sample: int = 100,
                seed: int = 0) -> None:
    """Check that every memory of ``source`` is in ``target`` and that a sample is identical.

    Raises :class:`~htm_core.errors.StoreError` describing the first difference.
    """
    source_keys = _keys(source)
    missing = source_keys - _keys(target)
    if missing:
        raise StoreError(f"{len(missing)} of {len(source_keys)} memories are missing from the "
                         f"target (e.g. {sorted(missing)[:3]}); run the copy again to resume")
    rng = random.Random(seed)
    for key in rng.sample(sorted(source_keys), min(sample, len(source_keys))):
        src = source.get(key, include_forgotten=True, include_embedding=True)
        dst = target.get(key, include_forgotten=True, include_embedding=True)
        if src is None or dst is None or _comparable(src) != _comparable(dst):
            raise StoreError(f"memory {key!r} differs between source and target after the copy; "
                             "the target may have held a different memory under that key")

