"""LoCoMo conversations as a recall-quality set (:mod:`benchmarks.recall_quality`).

LoCoMo (Maharana et al., ACL 2024) is ten long real-style conversations between two people,
each with questions labelled with their evidence turns. The files are not part of this
repository: :func:`load_locomo` reads a folder of them (one ``<id>.json`` per conversation,
the layout of ``data/locomo10.zip`` in ``snap-research/locomo``) and turns them into the
benchmark's set format, the way the held-out measurement reads them:

- one memory per turn, text ``"Speaker: text"`` plus ``" [shares image: <caption>]"`` when
  the turn shared an image, ``created_at`` = the session's date and time (every turn of a
  session alike), key = the turn's ``dia_id``;
- each question asked with its text only, of its own conversation's store, at the time of
  the conversation's last session;
- kinds by category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop (together: the
  ``all`` row), 5 adversarial (the question names the wrong speaker; reported apart).

Malformed evidence ids are repaired when the intent is plain (``D:11:26`` → ``D11:26``,
``D30:05`` → ``D30:5``, ``D8:6; D9:17`` → two ids); ids naming no turn are dropped, and a
question left with no evidence is skipped. :class:`Repairs` counts each case.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["CATEGORIES", "Repairs", "load_locomo", "parse_evidence"]

#: LoCoMo's question categories, by number.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
              5: "adversarial"}
_SESSION = re.compile(r"session_(\d+)")
_ID = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass
class Repairs:
    """What loading changed or left out: evidence ids repaired (``repaired``), ids naming
    no turn dropped (``dropped``), questions skipped for having no evidence left
    (``no_evidence``), by conversation id."""

    repaired: dict[str, list[str]] = field(default_factory=dict)
    dropped: dict[str, list[str]] = field(default_factory=dict)
    no_evidence: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the counts over every conversation."""
        return (f"{sum(map(len, self.repaired.values()))} malformed evidence ids repaired, "
                f"{sum(map(len, self.dropped.values()))} dropped (no such turn), "
                f"{sum(self.no_evidence.values())} questions without evidence skipped")


def parse_evidence(raw: str) -> tuple[list[str], bool]:
    """The turn ids an evidence entry names, and whether it had to be repaired.

    >>> parse_evidence("D3:4")
    (['D3:4'], False)
    >>> parse_evidence("D8:6; D9:17")
    (['D8:6', 'D9:17'], True)
    >>> parse_evidence("D:11:26"), parse_evidence("D30:05"), parse_evidence("D")
    ((['D11:26'], True), (['D30:5'], True), ([], True))
    """
    found = [f"D{m.group(1)}:{m.group(2)}" for m in _ID.finditer(raw)]
    return found, found != [raw.strip()]


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn["text"])
    caption = turn.get("blip_caption")
    return f"{text} [shares image: {caption}]" if caption else text


def _sessions(raw: dict[str, Any]) -> list[dict[str, Any]]:
    numbers = sorted(int(m.group(1)) for key in raw if (m := _SESSION.fullmatch(key)))
    sessions = []
    for n in numbers:
        turns = raw[f"session_{n}"]
        if not turns:
            continue
        date = datetime.strptime(raw[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        sessions.append({"id": f"S{n}", "date": date.isoformat(), "turns": [
            {"id": t["dia_id"], "speaker": t["speaker"], "text": _turn_text(t)} for t in turns]})
    return sessions


def _questions(conv_id: str, raw: dict[str, Any], turn_ids: set[str], now: str,
               repairs: Repairs) -> list[dict[str, Any]]:
    out = []
    for i, qa in enumerate(raw["qa"]):
        evidence: list[str] = []
        for entry in qa.get("evidence") or []:
            ids, repaired = parse_evidence(entry)
            if repaired:
                repairs.repaired.setdefault(conv_id, []).append(entry)
            for turn in ids:
                if turn not in turn_ids:
                    repairs.dropped.setdefault(conv_id, []).append(turn)
                elif turn not in evidence:
                    evidence.append(turn)
        if not evidence:
            repairs.no_evidence[conv_id] = repairs.no_evidence.get(conv_id, 0) + 1
            continue
        out.append({"id": f"{conv_id}-q{i}", "conversation": conv_id,
                    "kind": CATEGORIES[int(qa["category"])], "question": qa["question"],
                    "evidence": evidence, "now": now})
    return out


def load_locomo(folder: Path) -> tuple[dict[str, Any], Repairs]:
    """The conversations of ``folder`` (every ``*.json`` in it, by name) as a benchmark set
    (``conversations`` and ``questions``, the layout of :func:`recall_quality.load_set`),
    and what loading repaired or dropped."""
    paths = sorted(folder.glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no LoCoMo conversation (*.json) in {folder}")
    repairs = Repairs()
    conversations: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for path in paths:
        raw = json.loads(path.read_text(encoding="utf-8"))
        conv_id = path.stem
        sessions = _sessions(raw)
        turn_ids = {t["id"] for s in sessions for t in s["turns"]}
        conversations.append({"id": conv_id, "speakers": [raw["speaker_a"], raw["speaker_b"]],
                              "sessions": sessions, "turn_seconds": 0})
        questions.extend(_questions(conv_id, raw, turn_ids, sessions[-1]["date"], repairs))
    return {"conversations": conversations, "questions": questions}, repairs
