"""Seeded generator of the second recall-quality set: long user-assistant sessions.

A different idea of a conversation from :mod:`benchmarks.data.generate` (two friends
chatting in short turns): here one user works through projects and plans with an
assistant over ten months. Messages are long (a user pastes code and context, the
assistant answers in several paragraphs of 150 to 400 words that list alternatives, so
the same libraries, cities and foods come up again and again as near misses). Facts are
stated once, in passing, often at the end of a long message (past what a 256-token
embedding model reads); some change later (the user moves, switches database, changes
diet); projects run over several sessions.

Questions are asked by the user in the first person, labelled with their evidence
message ids and one of six kinds:

- ``single-fact``: a fact stated once ("What is my dog called?")
- ``paraphrased``: the same, with no content word shared with the evidence (checked by
  :func:`benchmarks.data.generate.shares_keywords`)
- ``latest-value``: a value that changed; the evidence is the message with the latest value
- ``preference``: a request whose answer depends on a stated preference ("Any ideas for
  dinner tonight?" after "I've gone vegetarian"); the evidence is the latest statement
- ``multi-session``: evidence in several messages of several sessions ("Which libraries
  did I pick for the plant tracker?")
- ``temporal``: names a time: a month or season ("in April", "last spring"), or an event
  of the user's ("two weeks after the move": evidence the move and the message then)

Run ``python -m benchmarks.data.assistant [--seed N] [--users N] [--out PATH]``; the
benchmark builds the set in memory from the seed (deterministic), nothing is committed.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from htm_core.querytime import query_timeframe

from .generate import shares_keywords

__all__ = ["KINDS", "build_assistant_set", "main"]

KINDS = ("single-fact", "paraphrased", "latest-value", "preference", "multi-session", "temporal")
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
SEASONS = {3: "spring", 4: "spring", 5: "spring", 6: "summer", 7: "summer", 8: "summer",
           9: "autumn", 10: "autumn", 11: "autumn"}

# -- facts stated once --------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A fact the user states once: ``say`` (first person), a direct question ``ask`` and
    paraphrased questions ``para`` sharing no content word with the statements."""

    kind: str
    slots: dict[str, list[str]]
    say: list[str]
    ask: list[str]
    para: list[str]


FACTS = [
    Fact("dog", {"breed": ["whippet", "shiba inu", "bernese mountain dog", "greyhound", "poodle"],
                 "name": ["Pretzel", "Juno", "Basil", "Captain", "Noodle"]},
         say=["Our {breed}, {name}, keeps pawing at me while I type this.",
              "Sorry if this is scattered, {name} (my {breed}) needed a walk halfway through."],
         ask=["What is my dog called?", "What breed is my dog {name}?"],
         para=["Which four-legged companion lives with me?", "What animal keeps me company at home?"]),
    Fact("allergy", {"food": ["peanuts", "shellfish", "sesame", "kiwi fruit", "hazelnuts"]},
         say=["Also worth knowing: I'm allergic to {food}, so I check every label.",
              "One constraint: {food} are off limits for me, allergy since childhood."],
         ask=["What am I allergic to?", "Which food allergy do I have?"],
         para=["Which ingredient could make me ill?", "What must I never eat for medical reasons?"]),
    Fact("kid", {"kid": ["Mira", "Tobias", "Elsa", "Ravi", "Greta"], "age": ["four", "six", "nine"]},
         say=["My kid {kid} turns {age} next month and wants to help with everything.",
              "{kid}, who is {age}, keeps asking what I'm building."],
         ask=["How old is {kid}?", "What is my child's name?"],
         para=["What is the age of the youngster in my household?",
               "Who is the little one I'm raising?"]),
    Fact("laptop", {"laptop": ["ThinkPad X1 Carbon", "MacBook Air M2", "Framework 13",
                               "Dell XPS 15"], "ram": ["8", "16", "32"]},
         say=["I'm on a {laptop} with {ram} GB of RAM, for what it's worth.",
              "Hardware-wise this all runs on my {laptop}, {ram} GB RAM."],
         ask=["Which laptop do I use?", "How much RAM does my {laptop} have?"],
         para=["What computer do I own?", "On what machine am I coding?"]),
    Fact("sister", {"sis": ["Ines", "Dora", "Maren", "Lucia", "Petra"],
                    "sjob": ["a midwife", "an architect", "a pilot", "a pharmacist"]},
         say=["My sister {sis} is {sjob} and laughs at my side projects.",
              "I asked my sister {sis} (she's {sjob}) and she had no idea either."],
         ask=["What is my sister's name?", "What does my sister {sis} do for work?"],
         para=["Who is my female sibling?", "How does my female sibling earn a living?"]),
    Fact("birthday", {"day": ["3rd of March", "19th of July", "27th of October", "8th of May"]},
         say=["Random aside: my birthday is the {day}, my partner is planning something.",
              "Since my birthday falls on the {day} I want this done before then."],
         ask=["When is my birthday?", "Which day is my birthday?"],
         para=["On what date was I born?", "When do I celebrate getting a year older?"]),
]

# -- values that change (latest-value) and preferences ------------------------------


@dataclass(frozen=True)
class Changing:
    """A value stated, then changed once or twice in later sessions. ``first`` states the
    value; ``change`` states a new one (it may mention the old one as ``{old}``)."""

    kind: str
    values: list[str]
    first: list[str]
    change: list[str]
    ask: list[str]
    preference: bool = False


CHANGING = [
    Changing("home", ["Lisbon", "Utrecht", "Leeds", "Graz", "Ghent", "Aarhus", "Turin"],
             first=["We rent a small flat in {v} at the moment."],
             change=["Big life update: we moved from {old} to {v} this weekend, boxes everywhere.",
                     "We have officially moved to {v}; leaving {old} was harder than expected."],
             ask=["Which city do I live in now?", "Where am I currently living?"]),
    Changing("employer", ["Fernway Logistics", "Quillon Bank", "Brightpath Health",
                          "Tessellate Games", "Oakmoor Energy"],
             first=["At my day job at {v} we use a lot of spreadsheets."],
             change=["I handed in my notice at {old}; I start at {v} on Monday.",
                     "New job news: I left {old} and now work at {v}."],
             ask=["Which company do I work for now?", "Who is my current employer?"]),
    Changing("database", ["PostgreSQL", "MySQL", "SQLite", "MongoDB", "DynamoDB"],
             first=["The backend of the tracker stores everything in {v} for now."],
             change=["We migrated the tracker backend from {old} to {v} last night.",
                     "Decision made: the tracker now runs on {v} instead of {old}."],
             ask=["Which database does my tracker backend use now?",
                  "What database is the tracker on these days?"]),
    Changing("race", ["1:58", "1:52", "1:49", "1:45"],
             first=["My goal for the half marathon is {v}, which feels ambitious."],
             change=["I'm revising my half marathon goal from {old} to {v}.",
                     "New target for the half: {v} rather than {old}."],
             ask=["What is my current goal time for the half marathon?",
                  "Which finishing time am I aiming for in the half marathon now?"]),
    Changing("diet", ["vegetarian", "pescatarian", "vegan", "low-carb"],
             first=["For dinner ideas, keep in mind that I eat {v} these days."],
             change=["Heads up for recipes: I switched from {old} to {v} this month.",
                     "Dinner-wise I'm now {v}; the {old} phase is over."],
             ask=["Any ideas for dinner tonight?", "Can you suggest a recipe for a weeknight dinner?"],
             preference=True),
    Changing("editor", ["VS Code", "Neovim", "PyCharm", "Helix", "Emacs"],
             first=["I write all my code in {v}, so shortcuts for that help most."],
             change=["I finally switched my editor from {old} to {v}.",
                     "Editor change: {v} now, I uninstalled {old}."],
             ask=["Which keyboard shortcuts would help me rename a symbol in my editor?",
                  "Can you set up my editor for Python linting?"],
             preference=True),
    Changing("reading", ["hard science fiction", "historical fiction", "crime novels",
                         "narrative nonfiction"],
             first=["Book-wise, I mostly read {v}."],
             change=["My reading taste moved from {old} to {v} lately.",
                     "These days I read {v} far more than {old}."],
             ask=["Can you recommend a book for my next flight?",
                  "What should I read next?"],
             preference=True),
    Changing("training", ["early mornings before work", "lunch breaks", "late evenings"],
             first=["I do my runs in {v}, nothing else fits."],
             change=["My runs moved from {old} to {v} because of the new schedule.",
                     "Running now happens in {v}, not {old}."],
             ask=["When should I schedule my training runs next week?",
                  "Can you plan my running week around my routine?"],
             preference=True),
]

# -- projects over several sessions (multi-session, temporal) -------------------------

PROJECTS = [
    ("plant tracker", "a small web app that reminds me when to water each houseplant"),
    ("budget dashboard", "a dashboard that pulls my bank exports and charts spending"),
    ("photo backup tool", "a command-line tool that backs up and deduplicates my photos"),
    ("recipe scraper", "a scraper that collects recipes from blogs into one searchable list"),
    ("bike route planner", "a planner that picks quiet cycling routes from OpenStreetMap data"),
    ("book club bot", "a chat bot that runs the reading schedule of my book club"),
]
CHOICES = {
    "charting": ["Plotly", "Altair", "Chart.js", "ECharts", "Vega-Lite"],
    "web framework": ["FastAPI", "Flask", "Django", "Litestar", "Starlette"],
    "task queue": ["Celery", "RQ", "Dramatiq", "Huey", "arq"],
    "testing": ["pytest", "Hypothesis", "unittest", "ward"],
    "packaging": ["Poetry", "uv", "Hatch", "PDM"],
    "hosting": ["Fly.io", "Render", "Railway", "a Hetzner box", "Heroku"],
}
BUGS = ["a timezone bug that shifted every reminder by an hour",
        "a memory leak when parsing large CSV files",
        "duplicate rows after the nightly import",
        "a race condition between two workers writing the same file",
        "unicode errors on file names with accents",
        "a slow query that took eight seconds on the main page"]

# -- long text ----------------------------------------------------------------------

CONTEXT = [
    "I have been going back and forth on this for a while and I would rather get it right "
    "than redo it in a month.",
    "For context, this is a side project I work on in the evenings, so simple beats clever.",
    "I tried reading the official docs but they assume I already know how the pieces fit.",
    "Last time we talked you suggested keeping things small, and that worked well.",
    "It does not need to scale to millions of users, maybe a dozen friends at most.",
    "I would like to understand the trade-offs instead of just copying an answer.",
    "Here is roughly what I have so far, it runs but it feels messy.",
    "My partner thinks I overthink these things, which is probably fair.",
]
CODE = [
    "```python\ndef load(path):\n    rows = []\n    with open(path) as fh:\n        for line in fh:\n"
    "            rows.append(line.strip().split(','))\n    return rows\n\n\ndef main():\n"
    "    data = load('export.csv')\n    print(len(data))\n```",
    "```python\nclass Store:\n    def __init__(self, url):\n        self.url = url\n"
    "        self.items = {}\n\n    def put(self, key, value):\n        self.items[key] = value\n\n"
    "    def get(self, key, default=None):\n        return self.items.get(key, default)\n```",
    "```python\nimport datetime as dt\n\nSCHEDULE = {'mon': 2, 'thu': 3}\n\n\ndef due(last, days):\n"
    "    return last + dt.timedelta(days=days) <= dt.date.today()\n\n\nfor name, days in "
    "SCHEDULE.items():\n    print(name, due(dt.date(2024, 1, 1), days))\n```",
    "```bash\nset -euo pipefail\nfor f in \"$SRC\"/*; do\n  sum=$(sha256sum \"$f\" | cut -d' ' -f1)\n"
    "  [ -e \"$DEST/$sum\" ] || cp \"$f\" \"$DEST/$sum\"\ndone\n```",
]
ADVICE = [
    "There are a few reasonable ways to approach this, and the right one depends mostly on "
    "how much you expect the project to grow and how much time you want to spend on upkeep.",
    "A good first step is to write down the two or three things the tool must never get "
    "wrong, and to keep everything else as simple as possible until real use shows a need.",
    "Whatever you pick, keep configuration in one place, log what the program decides and "
    "why, and add a test for each bug you fix so it cannot come back quietly.",
    "If you are unsure, start with the option that has the best documentation and the "
    "largest community; switching later is usually cheaper than people fear.",
    "It is worth measuring before optimising: a quick timing of the slow path often shows "
    "that the problem is somewhere other than where it seemed to be.",
    "For a side project the boring choice is often the best one, because it leaves your "
    "evenings for the part of the project that is actually fun.",
    "Let me know how it goes, and paste the error message if something fails; the exact "
    "text usually points straight at the cause.",
]
OPTIONS = [
    "Popular options here are {a}, {b} and {c}. {a} is the most established, {b} is lighter "
    "and quicker to set up, and {c} shines when you need more control.",
    "You could compare {a} with {b}: both work well for this size of project, while {c} is "
    "probably more than you need right now.",
    "Many people in your situation use {a}; {b} and {c} are good alternatives worth a look.",
]
FOODS = ["lentil curry", "mushroom risotto", "grilled salmon", "chickpea stew", "tofu stir-fry",
         "shakshuka", "roast chicken", "pasta primavera", "black bean tacos", "miso soup"]
CITIES = ["Lisbon", "Utrecht", "Leeds", "Graz", "Ghent", "Aarhus", "Turin", "Bologna", "Porto",
          "Bruges", "Tallinn", "Basel"]
BOOKS = ["hard science fiction", "historical fiction", "crime novels", "narrative nonfiction",
         "fantasy epics", "poetry collections"]
TOPICS = {
    "cooking": ("Can you help me plan meals for the week? I cook for two and hate waste.",
                "What can I make with what is left in the fridge: {a}, some rice and spinach?"),
    "travel": ("What is a sensible way to pack a carry-on for a week away?",
               "How do I get over jet lag faster after a long flight?"),
    "fitness": ("Can you suggest a stretching routine for after long runs?",
                "My knees ache after intervals; how should I adjust the plan?"),
    "writing": ("Can you tighten this paragraph for my newsletter about {a}?",
                "Help me outline a short talk about side projects for a local meetup."),
    "money": ("How should I think about an emergency fund versus paying off the car early?",
              "Can you explain index funds like I'm new to this?"),
    "home": ("Any tips for keeping houseplants alive in a dark flat?",
             "How do I fix a dripping kitchen tap without calling a plumber?"),
}
TRIPS = ["I'm planning a long weekend in {a}; what should I not miss?",
         "Could you sketch a four-day itinerary for {a}, arriving by train from {b}?",
         "We booked a few days in {a} with friends. Where should we eat and walk?"]
TOPIC_WORDS = {"cooking": FOODS, "travel": CITIES, "fitness": ["intervals", "tempo runs", "hills"],
               "writing": BOOKS, "money": ["index funds", "savings accounts", "bonds"],
               "home": ["monstera", "pothos", "snake plant"]}


def _options(rng: random.Random, pool: list[str]) -> str:
    a, b, c = rng.sample(pool, 3)
    return rng.choice(OPTIONS).format(a=a, b=b, c=c)


def _reply(rng: random.Random, pool: list[str], paragraphs: int) -> str:
    """A long assistant reply: advice paragraphs around a list of alternatives."""
    parts = rng.sample(ADVICE, paragraphs)
    parts.insert(rng.randrange(1, paragraphs), _options(rng, pool))
    if rng.random() < 0.4:
        parts.insert(rng.randrange(1, len(parts)), rng.choice(CODE))
    return "\n\n".join(parts)


def _user(rng: random.Random, request: str, fact: str | None, *, late: bool) -> str:
    """A user message: the request, some context, maybe code, and the fact somewhere
    (after everything else when ``late``, where a 256-token model no longer reads)."""
    parts = [request, *rng.sample(CONTEXT, rng.randint(1, 3))]
    if late:
        parts += [rng.choice(CODE), rng.choice(CONTEXT), rng.choice(ADVICE)]
    if fact is not None:
        parts.insert(len(parts) if late else rng.randrange(1, len(parts) + 1), fact)
    return " ".join(parts[:1]) + "\n\n" + " ".join(parts[1:])


# -- one user -----------------------------------------------------------------------


@dataclass
class _Session:
    id: str
    date: datetime
    topic: str
    #: (provisional id, user text, assistant text); shuffled and numbered at the end
    exchanges: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, user: str, assistant: str) -> str:
        key = f"{self.id}-x{len(self.exchanges) + 1}"
        self.exchanges.append((key, user, assistant))
        return key

    def text(self, key: str) -> str:
        return next(u for k, u, _ in self.exchanges if k == key)


@dataclass
class _User:
    cid: str
    sessions: list[_Session]
    questions: list[dict[str, Any]] = field(default_factory=list)

    def ask(self, kind: str, question: str, evidence: list[str], now: datetime, **extra: Any
            ) -> None:
        self.questions.append({"id": f"{self.cid}-q{len(self.questions) + 1}",
                               "conversation": self.cid, "kind": kind, "question": question,
                               "evidence": sorted(set(evidence)), "now": now.isoformat(),
                               **extra})


def _exchange(rng: random.Random, session: _Session, request: str, fact: str | None = None,
              *, late: bool = False, pool: list[str] | None = None) -> str:
    """A user message (returned id) and the assistant's long reply."""
    return session.add(_user(rng, request, fact, late=late),
                       _reply(rng, pool or CITIES + FOODS, rng.randint(3, 5)))


def _filler(rng: random.Random, session: _Session, n: int) -> None:
    for _ in range(n):
        words = TOPIC_WORDS[session.topic]
        a, b = rng.sample(words, 2)
        request = rng.choice(TOPICS[session.topic]).format(a=a, b=b)
        _exchange(rng, session, request, pool=words)


def _topic_request(rng: random.Random, session: _Session) -> str:
    """An everyday request on the session's topic, the carrier of a stated fact."""
    return rng.choice(TOPICS[session.topic]).format(
        a=rng.choice(TOPIC_WORDS[session.topic]), b=rng.choice(CITIES))


def _sessions(rng: random.Random, cid: str, n_sessions: int) -> list[_Session]:
    """The user's sessions, five to nine days apart, each on one topic."""
    start = datetime(2024, 2, rng.randint(1, 20), tzinfo=timezone.utc)
    sessions: list[_Session] = []
    day = start
    for i in range(n_sessions):
        day += timedelta(days=rng.randint(5, 9))
        sessions.append(_Session(f"{cid}-s{i + 1}", day.replace(hour=rng.randint(7, 22)),
                                 rng.choice(sorted(TOPICS))))
    return sessions


def _facts(rng: random.Random, user: _User, slots: list[int], end: datetime) -> None:
    """Facts stated once: direct and paraphrased questions about each."""
    for fact in rng.sample(FACTS, len(FACTS)):
        values = {k: rng.choice(v) for k, v in fact.slots.items()}
        session = user.sessions[slots.pop()]
        mid = _exchange(rng, session, _topic_request(rng, session),
                        rng.choice(fact.say).format(**values), late=rng.random() < 0.5)
        user.ask("single-fact", rng.choice(fact.ask).format(**values), [mid], end)
        para = [p for p in fact.para
                if not shares_keywords(p.format(**values), [session.text(mid)])]
        if para:
            user.ask("paraphrased", rng.choice(para).format(**values), [mid], end)


def _changing_values(rng: random.Random, user: _User, end: datetime) -> None:
    """Values that change; the move is the anchor of a temporal question."""
    sessions = user.sessions
    for changing in rng.sample(CHANGING, 7):
        values = rng.sample(changing.values, rng.randint(2, 3))
        order = sorted(rng.sample(range(len(sessions)), len(values)))
        ids = []
        for i, (where, value) in enumerate(zip(order, values, strict=True)):
            text = (rng.choice(changing.first) if i == 0 else rng.choice(changing.change)
                    ).format(v=value, old=values[i - 1] if i else "")
            session = sessions[where]
            ids.append(_exchange(rng, session, _topic_request(rng, session), text,
                                 late=rng.random() < 0.3))
        kind = "preference" if changing.preference else "latest-value"
        user.ask(kind, rng.choice(changing.ask), [ids[-1]], end)
        if changing.kind == "home":
            _after_the_move(rng, user, sessions[order[-1]], ids[-1], end)


def _after_the_move(rng: random.Random, user: _User, moved: _Session, move_id: str,
                    end: datetime) -> None:
    """A dish cooked for guests about two weeks after the move, asked about relative to it."""
    later = [s for s in user.sessions if 10 <= (s.date - moved.date).days <= 18]
    if later:
        target = later[0]
        dish = rng.choice(FOODS)
        mid = _exchange(rng, target, f"I want to cook {dish} for friends who are "
                        "visiting the new place. How do I scale it for six people?",
                        pool=FOODS)
        user.ask("temporal", "Which dish did I want to cook for guests about two "
                 "weeks after the move?", [move_id, mid], end)


def _projects(rng: random.Random, user: _User, end: datetime) -> None:
    """Projects over several sessions: three choices, then a bug."""
    sessions = user.sessions
    for name, blurb in rng.sample(PROJECTS, 3):
        stages = sorted(rng.sample(range(len(sessions)), 4))
        picks: list[tuple[_Session, str, str, str]] = []
        for where, part in zip(stages[:3], rng.sample(sorted(CHOICES), 3), strict=True):
            session = sessions[where]
            lib = rng.choice(CHOICES[part])
            request = (f"Still working on the {name}, {blurb}. For the {part} I went with "
                       f"{lib} after our last chat. How should I structure that part?")
            mid = _exchange(rng, session, request, late=rng.random() < 0.5,
                            pool=CHOICES[part])
            picks.append((session, mid, part, lib))
        bug_session = sessions[stages[3]]
        bug = rng.choice(BUGS)
        bug_id = _exchange(rng, bug_session, f"The {name} has {bug}. Here is the code; where "
                           "would you start looking?", late=True,
                           pool=[c for v in CHOICES.values() for c in v])
        _ask_about_project(rng, user, name, picks, bug, bug_id, end)


def _ask_about_project(rng: random.Random, user: _User, name: str,
                       picks: list[tuple[_Session, str, str, str]], bug: str, bug_id: str,
                       end: datetime) -> None:
    """What was picked, everything said, a choice within a month, and when the bug came."""
    user.ask("multi-session", f"Which tools and libraries did I pick for the {name}?",
             [mid for _, mid, _, _ in picks], end)
    user.ask("multi-session", f"Summarise everything I have told you about the {name} "
             "so far.", [mid for _, mid, _, _ in picks] + [bug_id], end)
    session = rng.choice(picks)[0]
    month = MONTHS[session.date.month - 1]
    window = query_timeframe(f"in {month}", end)
    inside = [m for s, m, _, _ in picks if window and window.start <= s.date < window.end]
    if inside:
        user.ask("temporal", f"What did I choose for the {name} in {month}?", inside, end,
                 timeframe=f"in {month}")
    user.ask("temporal", f"When did I run into {bug.split(' that ')[0]} on the {name}?",
             [bug_id], end)


def _trips(rng: random.Random, user: _User, end: datetime) -> None:
    """Trips, planned in the travel sessions: where (multi-session) and when (a season)."""
    trips = []
    for session in user.sessions:
        if session.topic == "travel":
            a, b = rng.sample(CITIES, 2)
            request = rng.choice(TRIPS).format(a=a, b=b)
            trips.append((session, _exchange(rng, session, request, pool=CITIES)))
    if len(trips) >= 2:
        user.ask("multi-session", "Which places have I asked you about for trips?",
                 [mid for _, mid in trips], end)
    seasons = sorted({SEASONS[s.date.month] for s, _ in trips if s.date.month in SEASONS})
    for season in rng.sample(seasons, min(2, len(seasons))):
        window = query_timeframe(f"last {season}", end)
        inside = [mid for s, mid in trips if window and window.start <= s.date < window.end]
        if inside:
            user.ask("temporal", f"Which trips did I plan with you last {season}?", inside,
                     end, timeframe=f"last {season}")


def _user_set(rng: random.Random, cid: str, n_sessions: int) -> tuple[_User, dict[str, Any]]:
    """One user's sessions and questions: facts, changing values, projects and trips,
    then everyday filler in every session."""
    sessions = _sessions(rng, cid, n_sessions)
    user = _User(cid, sessions)
    end = sessions[-1].date + timedelta(days=rng.randint(3, 20))
    slots = list(range(n_sessions))
    rng.shuffle(slots)
    _facts(rng, user, slots, end)
    _changing_values(rng, user, end)
    _projects(rng, user, end)
    _trips(rng, user, end)
    for session in sessions:
        _filler(rng, session, rng.randint(1, 3) if session.exchanges else rng.randint(2, 4))
    return user, _numbered(user)


def _numbered(user: _User) -> dict[str, Any]:
    """The conversation as JSON: each session's exchanges in a random but seeded order
    (facts do not always come first), messages numbered; question evidence renamed."""
    out, rename = [], {}
    for session in user.sessions:
        messages = []
        for key, text, reply in session.exchanges:
            rename[key] = f"{session.id}-m{len(messages) + 1}"
            messages.append({"id": rename[key], "speaker": "user", "text": text})
            messages.append({"id": f"{session.id}-m{len(messages) + 1}", "speaker": "assistant",
                             "text": reply})
        out.append({"id": session.id, "date": session.date.isoformat(), "turns": messages})
    for q in user.questions:
        q["evidence"] = sorted(rename[e] for e in q["evidence"])
    return {"id": user.cid, "speakers": ["user", "assistant"], "sessions": out}


def build_assistant_set(seed: int = 11, users: int = 6, sessions: int = 40) -> dict[str, Any]:
    """The whole set as a JSON-ready dict (deterministic for the arguments)."""
    rng = random.Random(seed)
    convs, questions = [], []
    for i in range(users):
        user, conv = _user_set(rng, f"a{i + 1}", sessions)
        convs.append(conv)
        questions.extend(user.questions)
    return {"seed": seed, "version": 1, "name": "assistant", "conversations": convs,
            "questions": questions}


def main(argv: list[str] | None = None) -> None:
    """Write the set to ``--out`` (for reading; the benchmark builds it from the seed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path("assistant-set.json"))
    args = parser.parse_args(argv)
    data = build_assistant_set(args.seed, args.users, args.sessions)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for q in data["questions"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    messages = sum(len(s["turns"]) for c in data["conversations"] for s in c["sessions"])
    print(f"wrote {args.out}: {len(data['conversations'])} users, {messages} messages, "
          f"{len(data['questions'])} questions {kinds}")


if __name__ == "__main__":
    main()
