"""Seeded generator of the periods set: questions about months, weeks and long projects.

Four users each talk with an assistant for five months (two to four sessions a week, a
handful of turns each). Every user has a few running threads: decisions that change
from month to month (the wedding venue, the caterer, the holiday destination...), a long
project whose progress is reported now and then (a thesis, a marathon plan...), and one
notable event in some weeks. Around them: small talk that names the same things in
passing ("the venue", "my thesis") without saying anything new.

Questions, each with its evidence turn ids and one of four kinds:

- ``month-decision``: "What did we decide about the venue in February?" / "... last
  month?"; the evidence is that thread's decision turns of that month
- ``progress``: "Summarise my progress on the thesis."; every progress turn of the
  project (many, over months)
- ``week``: "What happened in the week of 3 March?"; the events of that ISO week
- ``month-topic``: "How did the garden go in March?"; that thread's turns of that month

Every question is asked after the last session (``now`` = the day after). Run
``python -m benchmarks.data.periods [--seed N] [--out PATH]``; the benchmark builds the
set in memory from the seed (deterministic), nothing is committed.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "build_periods_set", "main"]

KINDS = ("month-decision", "progress", "week", "month-topic")
START = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)  # a Monday
WEEKS = 21
MONTHS = ["January", "February", "March", "April", "May", "June"]

#: Threads with a decision each month: name, what is decided, the choices.
DECISIONS = {
    "venue": ("the wedding venue", ["the Harbour Hall", "Castle Rowan", "the old mill at Brede",
                                    "the botanical glasshouse", "St Anne's barn"]),
    "caterer": ("the caterer", ["Saffron & Salt", "Greenleaf Kitchen", "Marlowe Catering",
                                "the taco truck from Elm Street", "Chef Okafor"]),
    "holiday": ("the summer holiday", ["Lisbon", "the Dolomites", "Crete", "Oslo and Bergen",
                                       "a canal boat in Burgundy"]),
    "car": ("the new car", ["a used Skoda Octavia estate", "a Renault Zoe", "a Toyota Yaris",
                            "a cargo bike instead", "a Volvo V60"]),
    "school": ("the school for Mira", ["Hillcrest Primary", "the Montessori on Fen Road",
                                       "Riverside Academy", "St Jude's"]),
}
#: Long projects: name, phrase, progress steps (said in order, one a fortnight or so).
PROJECTS = {
    "thesis": ("my thesis", ["finished the literature review on soil microbes",
                             "the ethics form for the field study was approved",
                             "collected the first forty soil samples from the north plot",
                             "the sequencing results came back with odd nitrogen readings",
                             "rewrote chapter two around the nitrogen anomaly",
                             "my supervisor signed off the methods chapter",
                             "ran the mixed model and the effect held up",
                             "drafted the discussion, eleven pages so far",
                             "submitted the full draft to the committee"]),
    "marathon": ("my marathon training", ["ran my first 10k without stopping",
                                          "bought proper trail shoes after a blister",
                                          "did a 16 mile long run at 5:40 pace",
                                          "the physio says the knee pain is IT band",
                                          "back to 30 miles a week after physio",
                                          "finished the half marathon in 1:52",
                                          "tapered and did the 20 mile dress rehearsal",
                                          "registered for the Rotterdam marathon"]),
    "novel": ("my novel", ["outlined the three acts of the lighthouse story",
                           "wrote the first chapter with the keeper's daughter",
                           "cut the smuggler subplot, it dragged",
                           "reached 40,000 words",
                           "my writing group loved the storm chapter",
                           "sent three chapters to an agent in Leeds",
                           "the agent asked for the full manuscript"]),
    "kitchen": ("the kitchen renovation", ["got three quotes for the kitchen, took the middle one",
                                           "the old units were ripped out on Monday",
                                           "the plumber moved the sink under the window",
                                           "the oak worktops arrived two weeks late",
                                           "tiles are up, green zellige",
                                           "the electrician signed off the wiring",
                                           "the kitchen is finished, we cooked risotto"]),
}
#: Weekly events: something that happened (each week at most one).
EVENTS = ["my sister Jo got engaged at the lake", "the boiler broke and we had no heating",
          "I got a promotion to team lead", "our cat Pepper had surgery on her paw",
          "we hosted a dinner for twelve people", "I sprained my wrist ice skating",
          "my grandmother turned ninety", "the basement flooded after the storm",
          "I gave a talk at the city library", "we adopted a rescue greyhound named Comet",
          "I passed the driving test on the second try", "our street held a jumble sale",
          "the power was out for two days", "I ran into my old teacher Mr Patel",
          "we planted the apple trees in the garden", "my laptop was stolen on the train"]
TOPIC_LINES = {  # the month-topic threads: what the user reports
    "garden": ["the tomatoes in the greenhouse are sprouting", "slugs ate half the lettuce",
               "I built a raised bed from old pallets", "the beans climbed the trellis",
               "harvested the first radishes", "the compost heap is finally warm"],
    "choir": ["the choir started on the Fauré Requiem", "I got the alto solo in the Pie Jesu",
              "rehearsal ran late, the tenors were lost", "we sang at the cathedral on Sunday",
              "the choir director is leaving in summer", "recorded our concert for the radio"],
}
SMALL_TALK = ["Morning! Coffee first, then questions.", "Thanks, that helps a lot.",
              "Sorry, busy day, I'll be quick.", "Ha, fair enough.", "Let me think about that.",
              "Good point, I hadn't thought of it.", "OK, noted.", "Talk soon!"]
PASSING = ["Still thinking about {t} but nothing new there.", "No news on {t} yet.",
           "My partner keeps asking about {t}.", "Remind me later about {t}, no rush.",
           "I dreamt about {t} last night, funny."]
ASSISTANT = ["Happy to help. Here is what I would consider: {x}.", "That sounds good; {x}.",
             "Noted. One thing to keep in mind: {x}.", "Understood, {x}."]
NAMES = ["Ada", "Bruno", "Chloe", "Dev"]


def _week_label(day: datetime) -> str:
    return f"the week of {day.day} {MONTHS[day.month - 1]}"


class _Conversation:
    """One user's sessions, built turn by turn, with the evidence of each thread."""

    def __init__(self, cid: str, name: str, rng: random.Random) -> None:
        self.cid, self.name, self.rng = cid, name, rng
        self.sessions: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []
        self.decided: dict[tuple[str, int], list[str]] = {}   # (thread, month) -> turn ids
        self.progress: dict[str, list[str]] = {}
        self.events: dict[datetime, list[str]] = {}           # Monday -> turn ids
        self.topics: dict[tuple[str, int], list[str]] = {}

    def say(self, speaker: str, text: str) -> str:
        sid = self.sessions[-1]["id"]
        tid = f"{sid}-t{len(self.turns) + 1}"
        self.turns.append({"id": tid, "speaker": speaker, "text": text})
        return tid

    def reply(self, about: str) -> None:
        self.say("Assistant", self.rng.choice(ASSISTANT).format(x=about))

    def session(self, day: datetime) -> None:
        self.sessions.append({"id": f"{self.cid}-s{len(self.sessions) + 1}",
                              "date": day.isoformat(), "turns": []})
        self.turns = self.sessions[-1]["turns"]


def _conversation(cid: str, name: str, rng: random.Random) -> _Conversation:
    conv = _Conversation(cid, name, rng)
    decisions = rng.sample(sorted(DECISIONS), 2)
    project = rng.choice(sorted(PROJECTS))
    topic = rng.choice(sorted(TOPIC_LINES))
    steps = list(PROJECTS[project][1])
    choices = {d: rng.sample(DECISIONS[d][1], len(DECISIONS[d][1])) for d in decisions}
    for week in range(WEEKS):
        monday = START + timedelta(days=7 * week)
        event_day = rng.randrange(3) if rng.random() < 0.7 else None
        for n, offset in enumerate(sorted(rng.sample(range(7), rng.randint(2, 4)))):
            day = monday + timedelta(days=offset, hours=rng.randint(0, 10))
            conv.session(day)
            conv.say(name, rng.choice(SMALL_TALK))
            if n == event_day:
                tid = conv.say(name, f"Big news this week: {EVENTS[week % len(EVENTS)]}.")
                conv.events.setdefault(monday, []).append(tid)
                conv.reply("that is quite a week")
            for thread in decisions:
                what, _ = DECISIONS[thread]
                if rng.random() < 0.18:
                    pick = choices[thread][day.month % len(choices[thread])]
                    tid = conv.say(name, f"We decided on {pick} for {what}.")
                    conv.decided.setdefault((thread, day.month), []).append(tid)
                    conv.reply(f"{pick} it is")
                elif rng.random() < 0.3:
                    conv.say(name, rng.choice(PASSING).format(t=what))
            if steps and rng.random() < 0.22:
                tid = conv.say(name, f"Update on {PROJECTS[project][0]}: {steps.pop(0)}.")
                conv.progress.setdefault(project, []).append(tid)
                conv.reply("steady progress")
            if rng.random() < 0.3:
                tid = conv.say(name, f"About the {topic}: {rng.choice(TOPIC_LINES[topic])}.")
                conv.topics.setdefault((topic, day.month), []).append(tid)
            conv.say(name, rng.choice(SMALL_TALK))
    return conv


def _questions(conv: _Conversation, now: datetime, rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    last_month = (now - timedelta(days=now.day)).month

    def ask(kind: str, text: str, evidence: list[str]) -> None:
        if evidence:
            out.append({"id": f"{conv.cid}-q{len(out) + 1}", "conversation": conv.cid,
                        "kind": kind, "question": text, "now": now.isoformat(),
                        "evidence": evidence})

    for (thread, month), ids in sorted(conv.decided.items()):
        what = DECISIONS[thread][0]
        when = "last month" if month == last_month else f"in {MONTHS[month - 1]}"
        ask("month-decision", f"What did we decide about {what} {when}?", ids)
    for project, ids in conv.progress.items():
        ask("progress", f"Summarise my progress on {PROJECTS[project][0]}.", ids)
    for monday, ids in sorted(conv.events.items()):
        if rng.random() < 0.6:
            ask("week", f"What happened in {_week_label(monday)}?", ids)
    for (topic, month), ids in sorted(conv.topics.items()):
        ask("month-topic", f"How did the {topic} go in {MONTHS[month - 1]}?", ids)
    return out


def build_periods_set(seed: int = 7, users: int = 4) -> dict[str, Any]:
    """The set: ``conversations`` (one per user) and ``questions``, from ``seed``."""
    rng = random.Random(seed)
    conversations, questions = [], []
    for n in range(users):
        conv = _conversation(f"p{n + 1}", NAMES[n % len(NAMES)], rng)
        conversations.append({"id": conv.cid, "speakers": [conv.name, "Assistant"],
                              "sessions": conv.sessions})
        now = START + timedelta(days=7 * WEEKS + 1)
        questions += _questions(conv, now, rng)
    return {"seed": seed, "version": 1, "conversations": conversations, "questions": questions}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    data = build_periods_set(args.seed, args.users)
    text = json.dumps(data, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        kinds = [q["kind"] for q in data["questions"]]
        print({k: kinds.count(k) for k in KINDS},
              sum(len(s["turns"]) for c in data["conversations"] for s in c["sessions"]))


if __name__ == "__main__":
    main()
