"""Seeded generator of the recall-quality development set (``benchmarks/data/devset.json``).

Each conversation is a chat between two friends over months: dated sessions of turns
(``Name: text``), most of them small talk and near-miss distractors (the same cities,
pets and books mentioned in passing), some of them life events. Questions come in four
kinds, each labelled with the ids of its evidence turns:

- ``single-hop``: one event ("What did Ana name her beagle?"); when the detail comes in a
  reply to the friend's follow-up question, both turns are evidence
- ``multi-hop``: two events of one person in two different sessions ("Which cities has Ana
  travelled to?", "Did Ana adopt the beagle before or after she started pottery?")
- ``temporal``: "When did ...", and "What did Ana do last May?" / "... last month?"
  relative to the question's ``now``
- ``paraphrased``: no content word (other than the people's names) shares a stem with
  the evidence; checked by :func:`shares_keywords`

Run ``python -m benchmarks.data.generate [--seed N] [--conversations N] [--out PATH]``.
The output is deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

__all__ = ["EVENTS", "build_devset", "main", "shares_keywords"]

DEFAULT_OUT = Path(__file__).with_name("devset.json")

NAMES = """Caroline Melanie Ana Tomas Priya Jonas Leila Marcus Ingrid Kenji Sofia Rafael Nadia Oliver
Amara Felix Yuki Mateo Hana Lukas Zoe Omar Clara Ethan Maya Diego Freya Samir Elena Noah Aisha Victor
Lena Gabriel Iris Hugo Mila Arjun Rosa Theo""".split()
PET_KINDS = ["beagle", "tabby cat", "golden retriever", "rabbit", "corgi", "parrot", "hamster",
             "border collie", "siamese cat", "labrador", "dachshund", "guinea pig"]
PET_NAMES = ["Biscuit", "Pepper", "Mochi", "Luna", "Waffles", "Ziggy", "Clover", "Nugget", "Olive",
             "Rocket", "Maple", "Pickles", "Juniper", "Toffee", "Bruno", "Kiwi"]
CITIES = ["Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Prague", "Vancouver", "Buenos Aires",
          "Tbilisi", "Hanoi", "Edinburgh", "Oaxaca", "Seville", "Cape Town", "Istanbul",
          "Copenhagen", "Melbourne", "Porto", "Krakow", "Havana", "Bergen", "Valencia", "Quebec"]
COMPANIES = ["Northwind Labs", "Bluefin Analytics", "Cedar Health", "Orbital Foods", "Lumen Studio",
             "Granite Bank", "Harbor Robotics", "Willow Schools", "Sparrow Media", "Atlas Freight"]
ROLES = ["data analyst", "product designer", "nurse practitioner", "backend engineer",
         "marketing lead", "teacher", "project manager", "research assistant"]
HOBBIES = ["pottery", "salsa dancing", "rock climbing", "watercolor painting", "beekeeping",
           "woodworking", "improv theater", "archery", "calligraphy", "sourdough baking"]
INSTRUMENTS = ["cello", "ukulele", "piano", "saxophone", "violin", "drums", "banjo"]
BANDS = ["The Lumineers", "Arctic Monkeys", "Florence and the Machine", "Khruangbin",
         "Vampire Weekend", "Fleetwood Mac tribute band", "Bon Iver", "Tame Impala"]
BOOKS = [("The Overstory", "Richard Powers"), ("Circe", "Madeline Miller"),
         ("Project Hail Mary", "Andy Weir"), ("Pachinko", "Min Jin Lee"),
         ("The Remains of the Day", "Kazuo Ishiguro"), ("Educated", "Tara Westover"),
         ("Piranesi", "Susanna Clarke"), ("Sapiens", "Yuval Noah Harari"),
         ("Dune", "Frank Herbert"), ("Beloved", "Toni Morrison")]
RACES = ["half marathon", "10k", "triathlon", "trail race", "charity fun run"]
DISHES = ["lemon tart", "beef wellington", "pad thai", "croissants", "lasagna", "ramen",
          "paella", "baklava"]
CARS = ["Honda Civic", "Subaru Outback", "Tesla Model 3", "Mini Cooper", "Toyota Prius",
        "Volvo station wagon"]
PARKS = ["Yosemite", "Big Sur", "the Lake District", "Banff", "the Dolomites", "Acadia",
         "Joshua Tree"]
ORGS = ["animal shelter", "food bank", "homeless kitchen", "library literacy program",
        "beach cleanup crew", "children's hospital"]
EXAMS = ["bar", "CPA", "driving", "TOEFL", "nursing board", "AWS certification"]
PLANTS = ["tomatoes", "sunflowers", "lavender", "chili peppers", "strawberries", "basil"]
RELATIVES = ["sister", "brother", "cousin", "best friend"]
BABY_NAMES = ["Ella", "Leo", "Nora", "Max", "Ivy", "Sam", "Ruby", "Finn"]
INJURIES = [("sprained my ankle", "playing basketball"), ("broke my wrist", "skateboarding"),
            ("pulled a muscle in my back", "moving furniture"), ("twisted my knee", "skiing")]
NEIGHBOURHOODS = ["Riverside", "Old Town", "Maple Heights", "the Mission district", "Brookfield",
                  "Harbor View"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]


@dataclass(frozen=True)
class Event:
    """A kind of life event: how it is said, and how it is asked about.

    ``say`` are one-turn statements; ``intro``/``ask``/``answer`` a three-turn version
    where the detail comes only in the answer to the friend's question. ``single`` asks
    for the detail, ``para`` asks the same without any shared content word, ``when`` is
    a verb phrase for "When did {P} ...?", ``what`` what the person did (past tense, for
    multi-hop order questions) and ``agg`` asks for every event of this kind.
    """

    kind: str
    slots: dict[str, list[Any]]
    say: list[str]
    single: list[str]
    para: list[str]
    when: list[str]
    what: str
    agg: str
    intro: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    answer: list[str] = field(default_factory=list)
    mention: list[str] = field(default_factory=list)


EVENTS = [
    Event("pet", {"kind": PET_KINDS, "pet": PET_NAMES},
          say=["Guess what, I adopted a {kind} and we named him {pet}!",
               "Big news: a little {kind} called {pet} lives with us now.",
               "We brought home a {kind} last weekend. His name is {pet} and he's chaos."],
          intro=["We finally adopted a {kind} from the rescue!"],
          ask=["No way, congratulations! What did you name him?", "Aww! What's his name?"],
          answer=["{pet}. He already owns the couch.", "We went with {pet}, it just fit."],
          single=["What is the name of {P}'s {kind}?", "What did {P} name the {kind}?"],
          para=["Which four-legged companion joined {P}'s family?",
                "What animal friend moved in with {P}?"],
          when=["adopt the {kind}", "get {pet}"], what="adopted a {kind}",
          agg="What pets has {P} adopted?",
          mention=["My neighbour's {kind} barked all night again.",
                   "Have you ever thought about getting a {kind}?"]),
    Event("trip", {"city": CITIES},
          say=["Just got back from {city}, the food there was incredible.",
               "I spent a week in {city} and walked everywhere.",
               "Greetings from {city}! The old town is beautiful."],
          intro=["I'm back from my holiday, totally exhausted but happy."],
          ask=["Welcome back! Where did you end up going?", "Where were you again?"],
          answer=["{city}! I'd go back tomorrow.", "{city}, for eight days."],
          single=["Which city did {P} visit?", "Where did {P} travel to?"],
          para=["Which destination did {P} go sightseeing in?",
                "What place abroad has {P} toured?"],
          when=["travel to {city}", "visit {city}"], what="travelled to {city}",
          agg="Which cities has {P} travelled to?",
          mention=["A coworker keeps telling me to go to {city} someday.",
                   "I saw a documentary about {city} yesterday."]),
    Event("job", {"company": COMPANIES, "role": ROLES},
          say=["I accepted an offer at {company} as a {role}!",
               "Today was my first day as a {role} at {company}."],
          intro=["I signed the contract for my new job today!"],
          ask=["Amazing! Which company?", "Congrats!! Where is it?"],
          answer=["{company}, as a {role}.", "It's at {company}, I'll be a {role}."],
          single=["Where did {P} start working as a {role}?", "Which company hired {P}?"],
          para=["Who is {P}'s employer these days?", "Which firm pays {P}'s salary now?"],
          when=["start the job at {company}", "join {company}"], what="started working at {company}",
          agg="Which companies has {P} worked for?",
          mention=["{company} is hiring a lot lately, I keep seeing their ads."]),
    Event("hobby", {"hobby": HOBBIES},
          say=["I signed up for {hobby} classes at the community center.",
               "I've started doing {hobby} on Tuesday evenings, I love it."],
          intro=["I picked up a new evening class this month."],
          ask=["Ooh, what kind of class?", "Nice, what is it?"],
          answer=["{hobby}! I'm terrible at it but it's so fun.", "It's {hobby}, twice a week."],
          single=["What classes did {P} sign up for?", "Which {hobby} class did {P} start?"],
          para=["What new pastime has {P} taken up?", "Which leisure pursuit did {P} begin learning?"],
          when=["start {hobby}", "begin doing {hobby}"], what="started {hobby}",
          agg="What hobbies has {P} taken up?",
          mention=["My aunt tried {hobby} once and gave up after a week."]),
    Event("race", {"race": RACES, "city": CITIES, "mins": list(range(48, 140))},
          say=["I ran the {city} {race} this morning and finished in {mins} minutes!",
               "Finished my first {race} in {city}, {mins} minutes, legs are dead."],
          single=["How long did it take {P} to finish the {race}?",
                  "What was {P}'s time in the {city} {race}?"],
          para=["How quickly did {P} complete the running event?",
                "What result did {P} get when competing on foot?"],
          when=["run the {race}", "do the {city} {race}"], what="ran the {city} {race}",
          agg="Which races has {P} run?",
          mention=["Are you training for anything? I keep thinking about a {race}."]),
    Event("concert", {"band": BANDS},
          say=["We saw {band} live last night, what a show.",
               "Got tickets last minute and saw {band} at the arena!"],
          single=["Which band did {P} see live?", "Where did {P} see {band}?"],
          para=["Which musical group performed for {P}?", "What music act did {P} attend?"],
          when=["see {band} live", "go to the {band} concert"], what="saw {band} live",
          agg="Which concerts has {P} been to?",
          mention=["{band} are touring again, apparently."]),
    Event("book", {"book": BOOKS},
          say=["I just finished reading {title} by {author}, couldn't put it down.",
               "Book club picked {title} by {author} and I loved it."],
          single=["Which book by {author} did {P} read?", "What did {P} think of {title}?"],
          para=["What novel did {P} complete?", "Which literary work has {P} devoured?"],
          when=["read {title}", "finish {title}"], what="read {title}",
          agg="Which books has {P} read?",
          mention=["Have you read anything by {author}? Everyone recommends it."]),
    Event("move", {"hood": NEIGHBOURHOODS},
          say=["We finally moved into our apartment in {hood}.",
               "Boxes everywhere, but we're officially living in {hood} now."],
          intro=["We finally moved, I'm surrounded by boxes."],
          ask=["Finally! Which part of town did you pick?", "Where's the new place?"],
          answer=["{hood}, near the little park.", "In {hood}, ten minutes from the station."],
          single=["Which neighbourhood did {P} move to?", "Where does {P} live after moving?"],
          para=["Where is {P}'s current home located?", "What district did {P} relocate to?"],
          when=["move to {hood}", "move into the apartment in {hood}"], what="moved to {hood}",
          agg="Where has {P} lived?",
          mention=["Rent in {hood} is getting ridiculous."]),
    Event("injury", {"injury": INJURIES},
          say=["Ugh, I {hurt} {doing} on Saturday.",
               "I {hurt} {doing}, so I'm stuck on the couch for a while."],
          single=["How did {P} get hurt {doing}?", "What injury did {P} have?"],
          para=["What accident left {P} injured?", "Why was {P} unable to walk or exercise?"],
          when=["get hurt {doing}"], what="got hurt {doing}",
          agg="What injuries has {P} had?",
          mention=["My brother is always {doing}, I worry he'll get hurt."]),
    Event("baby", {"rel": RELATIVES, "baby": BABY_NAMES},
          say=["My {rel} had a baby, little {baby} was born on Monday!",
               "I'm an auntie now! My {rel}'s baby {baby} arrived this week."],
          single=["What is the name of {P}'s {rel}'s baby?", "Who had a baby named {baby}?"],
          para=["Which newborn joined {P}'s relatives?", "Who is the infant in {P}'s family?"],
          when=["become an auntie", "meet baby {baby}"], what="welcomed baby {baby}",
          agg="Which babies were born in {P}'s family?"),
    Event("cook", {"dish": DISHES},
          say=["I tried making {dish} from scratch for the first time.",
               "Spent all Sunday on a {dish}, it actually turned out great."],
          single=["What dish did {P} make from scratch?", "How did {P}'s {dish} turn out?"],
          para=["What did {P} prepare in the kitchen?", "Which recipe did {P} attempt?"],
          when=["make {dish}"], what="cooked {dish}",
          agg="What dishes has {P} cooked?",
          mention=["There's a new place downtown that does amazing {dish}."]),
    Event("car", {"car": CARS},
          say=["I bought a used {car} yesterday, finally no more buses.",
               "Picked up my {car} from the dealer today!"],
          single=["What car did {P} buy?", "When did {P} pick up the {car}?"],
          para=["Which vehicle did {P} purchase?", "What automobile does {P} drive now?"],
          when=["buy the {car}"], what="bought a {car}",
          agg="What cars has {P} owned?",
          mention=["My dad swears by his old {car}."]),
    Event("camping", {"park": PARKS},
          say=["We went camping in {park} with the kids, the stars were unreal.",
               "Three nights in a tent in {park}, I smell like campfire."],
          single=["Where did {P} go camping?", "Who did {P} camp with in {park}?"],
          para=["Where did {P} sleep outdoors under canvas?",
                "Which wilderness spot did {P} spend nights in?"],
          when=["go camping in {park}", "camp in {park}"], what="went camping in {park}",
          agg="Where has {P} gone camping?",
          mention=["I've seen photos of {park}, it looks unreal."]),
    Event("volunteer", {"org": ORGS},
          say=["I volunteered at the {org} on Saturday morning.",
               "Spent the weekend helping out at the {org}, so rewarding."],
          single=["Where did {P} volunteer?", "What did {P} do at the {org}?"],
          para=["Which charity did {P} give free time to?", "Where did {P} donate labour?"],
          when=["volunteer at the {org}"], what="volunteered at the {org}",
          agg="Where has {P} volunteered?"),
    Event("exam", {"exam": EXAMS},
          say=["I passed my {exam} exam!! All that studying paid off.",
               "Results came in: I passed the {exam} exam."],
          intro=["Results came in this morning and I'm so relieved."],
          ask=["Results for what?", "Which results?"],
          answer=["The {exam} exam, I passed!", "My {exam} exam. Passed!"],
          single=["Which exam did {P} pass?", "Did {P} pass the {exam} exam?"],
          para=["What test did {P} succeed at?", "Which qualification did {P} earn?"],
          when=["pass the {exam} exam"], what="passed the {exam} exam",
          agg="Which exams has {P} passed?"),
    Event("garden", {"plant": PLANTS},
          say=["I planted {plant} in the backyard this weekend.",
               "The {plant} I planted are finally coming up!"],
          single=["What did {P} plant in the backyard?", "How are {P}'s {plant} doing?"],
          para=["What is growing in {P}'s garden?", "Which crops or flowers does {P} cultivate?"],
          when=["plant {plant}"], what="planted {plant}",
          agg="What has {P} planted?",
          mention=["The market had the most beautiful {plant} today."]),
    Event("instrument", {"instrument": INSTRUMENTS},
          say=["I started taking {instrument} lessons, my neighbours must hate me.",
               "Bought a second-hand {instrument} and booked lessons."],
          single=["Which instrument is {P} learning?", "When did {P} start {instrument} lessons?"],
          para=["What music does {P} practise playing?", "Which sound-making tool is {P} studying?"],
          when=["start {instrument} lessons"], what="started {instrument} lessons",
          agg="Which instruments has {P} learned?",
          mention=["My roommate in college played the {instrument} at 3am."]),
]

CHAT = [
    "How have you been?", "It's been a while! How are things?", "Work has been crazy lately.",
    "That sounds amazing!", "Haha, I can imagine.", "Oh no, I'm sorry to hear that.",
    "I totally get it.", "We should catch up properly soon.", "Same here, honestly.",
    "I've been so tired this week.", "The weather has been awful.", "Any plans for the weekend?",
    "Not much, just relaxing at home.", "I binge-watched a whole series on Sunday.",
    "My phone screen cracked again.", "Did you see the news this morning?",
    "I need more coffee.", "That's so exciting!", "Wow, good for you!", "Tell me everything.",
    "I'm proud of you.", "Let's grab lunch next week.", "Sorry, I was slow to reply.",
    "My mom called three times today.", "The traffic was unbelievable.",
    "I'm trying to sleep earlier.", "I finally cleaned my inbox.", "How is your family doing?",
    "Everyone is fine, thanks for asking.", "I'm thinking about taking a break from social media.",
    "Ha, classic.", "I can't believe it's already the end of the month.",
    "The kids have a school play next week.", "My back hurts from sitting all day.",
    "We ordered pizza again.", "I've been meaning to call you.", "That made my day.",
    "Talk soon!", "Good night!", "Miss you!", "Fingers crossed.", "Oh, that reminds me.",
    "I'm so happy for you.", "That's wild.", "What a week.", "Take care of yourself.",
]

#: Small talk is varied (a lead-in and a tail around a line) so it is not the same few
#: strings again and again, which no real conversation is.
LEAD = ["", "", "", "Honestly, ", "Haha, ", "Ugh, ", "Oh, ", "Anyway, ", "Well, ", "Hmm, ",
        "Okay so ", "Ha! ", "True. ", "Right? "]
TAIL = ["", "", "", " :)", " lol", " Anyway.", " How about you?", " Long day.", " Ugh.",
        " Crazy, right?", " Ha."]

REACT = ["That's wonderful!", "Wow, congratulations!", "No way, that's so cool!",
         "I love that for you.", "Amazing, send pictures!", "Oh I'm so jealous.",
         "Oh no, poor you! Feel better.", "That sounds like a lot, but exciting."]

_STOP = frozenset("""a about after again all am an and any are as at be been before being both but by
can could did do does doing during each for from had has have having he her here his how i if in into
is it its just me more most my no not now of on once only or other our out over own same she so some
such than that the their them then there these they this those through to too under until up very was
we were what when where which while who whom why will with would you your yours s t don new
""".split())
_WORD = re.compile(r"[A-Za-z0-9]+")


def _stems(text: str, names: Iterable[str] = ()) -> set[str]:
    skip = {n.lower() for n in names}
    return {w.lower()[:5] for w in _WORD.findall(text)
            if w.lower() not in _STOP and w.lower() not in skip}


def shares_keywords(question: str, evidence: Iterable[str], names: Iterable[str] = ()) -> bool:
    """Whether ``question`` shares a content word (first five letters) with any evidence text.

    Stop words and the given ``names`` are ignored; comparing 5-letter prefixes is a
    strict stand-in for stemming ("household" and "house" count as shared).

    >>> shares_keywords("Which vehicle did Ana buy?", ["Ana: I bought a car"], ["Ana"])
    False
    """
    names = list(names)
    q = _stems(question, names)
    return any(q & _stems(t, names) for t in evidence)


def _fill(template: str, values: dict[str, Any], person: str) -> str:
    return template.format(P=person, **values)


def _values(event: Event, rng: random.Random, used: set[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for slot, pool in event.slots.items():
        options = [v for v in pool if str(v) not in used] or list(pool)
        value = rng.choice(options)
        used.add(str(value))
        if slot == "book":
            values["title"], values["author"] = value
        elif slot == "injury":
            values["hurt"], values["doing"] = value
        else:
            values[slot] = value
    return values


@dataclass
class _Occurrence:
    event: Event
    person: str
    values: dict[str, Any]
    session: int
    when: datetime
    turns: list[str] = field(default_factory=list)


def _plan(rng: random.Random, people: list[str], sessions: int) -> list[tuple[int, str, Event]]:
    """Which events happen in which session: every person gets repeats of some kinds."""
    plan: list[tuple[int, str, Event]] = []
    for person in people:
        kinds = rng.sample(EVENTS, 9)
        repeated = kinds[:3]
        for event in kinds + repeated:
            plan.append((rng.randrange(sessions), person, event))
    return plan


@dataclass
class _Turns:
    """The turns of one session as they are said, numbered in order."""

    sid: str
    turns: list[dict[str, str]] = field(default_factory=list)

    def say(self, speaker: str, text: str) -> str:
        tid = f"{self.sid}-t{len(self.turns) + 1}"
        self.turns.append({"id": tid, "speaker": speaker, "text": text})
        return tid


def _session_dates(rng: random.Random, sessions: int) -> list[datetime]:
    """When each session happens: five to fourteen days apart, at a daytime quarter hour."""
    start = datetime(2023, rng.randint(1, 3), rng.randint(1, 28), tzinfo=timezone.utc)
    dates = []
    day = start
    for _ in range(sessions):
        day = day + timedelta(days=rng.randint(5, 14))
        dates.append(day.replace(hour=rng.randint(8, 21), minute=rng.choice([0, 15, 30, 45])))
    return dates


def _tell(rng: random.Random, turns: _Turns, people: list[str], event: Event,
          occ: _Occurrence) -> None:
    """One planned event told in the session: said outright, or brought up, asked about
    and answered; the friend reacts."""
    person, values = occ.person, occ.values
    other = people[1 - people.index(person)]
    if event.intro and rng.random() < 0.4:
        occ.turns.append(turns.say(person, _fill(rng.choice(event.intro), values, person)))
        turns.say(other, _fill(rng.choice(event.ask), values, other))
        occ.turns.append(turns.say(person, _fill(rng.choice(event.answer), values, person)))
    else:
        occ.turns.append(turns.say(person, _fill(rng.choice(event.say), values, person)))
    turns.say(other, rng.choice(REACT))


def _chat(rng: random.Random, turns: _Turns, speaker: str, friend: str) -> None:
    """A turn of small talk: now and then a passing mention of the friend's event."""
    roll = rng.random()
    if roll < 0.18:
        event = rng.choice([e for e in EVENTS if e.mention])
        values = _values(event, rng, set())
        turns.say(speaker, _fill(rng.choice(event.mention), values, friend))
    else:
        line = rng.choice(CHAT)
        lead = rng.choice(LEAD)
        if lead:
            line = lead + line[0].lower() + line[1:]
        turns.say(speaker, line + rng.choice(TAIL))


def _session(rng: random.Random, turns: _Turns, people: list[str],
             today: list[tuple[str, Event]], budget: int, when: tuple[int, datetime],
             used: set[str]) -> list[_Occurrence]:
    """One session of ``budget`` turns: an opening exchange, then small talk with the
    day's planned events told at random places. ``when`` is (session number, date)."""
    opener = rng.choice(people)
    turns.say(opener, rng.choice(CHAT[:3]))
    turns.say(people[1 - people.index(opener)], rng.choice(CHAT))
    slots = sorted(rng.sample(range(2, budget - 4), k=min(len(today), budget - 6)))
    k = 0
    occurrences: list[_Occurrence] = []
    while len(turns.turns) < budget:
        speaker = people[len(turns.turns) % 2]
        friend = people[1 - people.index(speaker)]
        if k < len(slots) and len(turns.turns) >= slots[k]:
            person, event = today[k]
            k += 1
            occ = _Occurrence(event, person, _values(event, rng, used), *when)
            _tell(rng, turns, people, event, occ)
            occurrences.append(occ)
            continue
        _chat(rng, turns, speaker, friend)
    return occurrences


def _conversation(rng: random.Random, cid: str, sessions: int, turns_per_session: int
                  ) -> tuple[dict[str, Any], list[_Occurrence]]:
    """Two friends' sessions, with the events they told (the evidence of the questions)."""
    people = rng.sample(NAMES, 2)
    dates = _session_dates(rng, sessions)
    plan = _plan(rng, people, sessions)
    used: set[str] = set()
    occurrences: list[_Occurrence] = []
    out_sessions = []
    for s, when in enumerate(dates, start=1):
        turns = _Turns(f"{cid}-s{s}")
        today = [(p, e) for (i, p, e) in plan if i == s - 1]
        rng.shuffle(today)
        occurrences += _session(rng, turns, people, today, turns_per_session, (s, when), used)
        out_sessions.append({"id": turns.sid, "date": when.isoformat(), "turns": turns.turns})
    return {"id": cid, "speakers": people, "sessions": out_sessions}, occurrences


def _texts(conv: dict[str, Any]) -> dict[str, str]:
    return {t["id"]: f"{t['speaker']}: {t['text']}" for s in conv["sessions"] for t in s["turns"]}


@dataclass
class _Asked:
    """The questions about one conversation, numbered in the order they are asked."""

    conv: dict[str, Any]
    out: list[dict[str, Any]] = field(default_factory=list)

    def add(self, kind: str, question: str, evidence: list[str], now: datetime, **extra: Any
            ) -> None:
        qid = f"{self.conv['id']}-q{len(self.out) + 1}"
        self.out.append({"id": qid, "conversation": self.conv["id"], "kind": kind,
                         "question": question, "now": now.isoformat(),
                         "evidence": sorted(set(evidence)), **extra})

    @property
    def last(self) -> datetime:
        """The date of the conversation's last session."""
        return datetime.fromisoformat(self.conv["sessions"][-1]["date"])


def _after(rng: random.Random, asked: _Asked, occ: _Occurrence) -> datetime:
    """When a question about ``occ`` is asked: up to twenty days after the conversation."""
    return max(asked.last, occ.when) + timedelta(days=rng.randint(1, 20))


def _single_hop(rng: random.Random, asked: _Asked, pool: list[_Occurrence], per_kind: int
                ) -> None:
    """Direct questions, then paraphrased ones that share no keyword with their evidence."""
    texts = _texts(asked.conv)
    names = asked.conv["speakers"]
    for occ in pool[:per_kind]:
        q = _fill(rng.choice(occ.event.single), occ.values, occ.person)
        asked.add("single-hop", q, occ.turns, _after(rng, asked, occ))
    count = 0
    for occ in pool[per_kind:] + pool[:per_kind]:
        if count >= per_kind:
            break
        options = [p for p in occ.event.para
                   if not shares_keywords(_fill(p, occ.values, occ.person),
                                          [texts[t] for t in occ.turns], names)]
        if options:
            asked.add("paraphrased", _fill(rng.choice(options), occ.values, occ.person),
                      occ.turns, _after(rng, asked, occ))
            count += 1


def _temporal(rng: random.Random, asked: _Asked, pool: list[_Occurrence],
              occs: list[_Occurrence], per_kind: int) -> None:
    """When an event happened, then what a person did in a month named by a time phrase."""
    for occ in pool[:per_kind // 2]:
        verb = _fill(rng.choice(occ.event.when), occ.values, occ.person)
        asked.add("temporal", f"When did {occ.person} {verb}?", occ.turns,
                  _after(rng, asked, occ))
    months: dict[tuple[str, int, int], list[_Occurrence]] = {}
    for occ in occs:
        months.setdefault((occ.person, occ.when.year, occ.when.month), []).append(occ)
    keys = sorted(months)
    rng.shuffle(keys)
    for person, year, month in keys[: per_kind - per_kind // 2]:
        evidence = [t for o in months[(person, year, month)] for t in o.turns]
        if rng.random() < 0.5:
            now = datetime(year + 1, rng.randint(1, 3), rng.randint(1, 28), 12, tzinfo=timezone.utc)
            phrase = rng.choice([f"last {MONTHS[month - 1]}", f"in {MONTHS[month - 1]} {year}"])
        else:
            nxt = datetime(year + (month == 12), month % 12 + 1, rng.randint(1, 28), 12,
                           tzinfo=timezone.utc)
            now, phrase = nxt, "last month"
        template = rng.choice(["What did {P} do {t}?", "What happened in {P}'s life {t}?",
                               "What was {P} up to {t}?"])
        asked.add("temporal", template.format(P=person, t=phrase), evidence, now,
                  timeframe=phrase)


def _multi_hop(rng: random.Random, asked: _Asked, occs: list[_Occurrence], per_kind: int
               ) -> None:
    """Events of one kind over several sessions, then the order of two events."""
    last = asked.last
    by_kind: dict[tuple[str, str], list[_Occurrence]] = {}
    for occ in occs:
        by_kind.setdefault((occ.person, occ.event.kind), []).append(occ)
    multi = 0
    groups = [g for g in by_kind.values() if len({o.session for o in g}) >= 2]
    rng.shuffle(groups)
    for group in groups[: per_kind // 2]:
        evidence = [t for o in group for t in o.turns]
        asked.add("multi-hop", group[0].event.agg.format(P=group[0].person), evidence, last
                  + timedelta(days=3))
        multi += 1
    pairs = [(a, b) for a in occs for b in occs
             if a.person == b.person and a.session < b.session and a.event.kind != b.event.kind]
    rng.shuffle(pairs)
    for a, b in pairs[: per_kind - multi]:
        first, second = (a, b) if rng.random() < 0.5 else (b, a)
        q = (f"Did {a.person} {_fill(first.event.when[0], first.values, a.person)} before or "
             f"after they {_fill(second.event.what, second.values, a.person)}?")
        asked.add("multi-hop", q, first.turns + second.turns, last + timedelta(days=3))


def _questions(rng: random.Random, conv: dict[str, Any], occs: list[_Occurrence],
               per_kind: int) -> list[dict[str, Any]]:
    """The questions about one conversation, ``per_kind`` of each kind at most."""
    asked = _Asked(conv)
    pool = occs[:]
    rng.shuffle(pool)
    _single_hop(rng, asked, pool, per_kind)
    _temporal(rng, asked, pool, occs, per_kind)
    _multi_hop(rng, asked, occs, per_kind)
    return asked.out


def build_devset(seed: int = 7, conversations: int = 6, sessions: int = 24,
                 turns_per_session: int = 20, per_kind: int = 14) -> dict[str, Any]:
    """The whole development set as a JSON-ready dict (deterministic for the arguments)."""
    rng = random.Random(seed)
    convs = []
    questions = []
    for i in range(conversations):
        conv, occs = _conversation(rng, f"c{i + 1}", sessions, turns_per_session)
        convs.append(conv)
        questions.extend(_questions(rng, conv, occs, per_kind))
    return {"seed": seed, "version": 1, "conversations": convs, "questions": questions}


def main(argv: list[str] | None = None) -> None:
    """Write the development set (``--out``, default ``benchmarks/data/devset.json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--sessions", type=int, default=24)
    parser.add_argument("--turns", type=int, default=20, help="turns per session")
    parser.add_argument("--per-kind", type=int, default=14, help="questions per kind and conversation")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    data = build_devset(args.seed, args.conversations, args.sessions, args.turns, args.per_kind)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    turns = sum(len(s["turns"]) for c in data["conversations"] for s in c["sessions"])
    kinds: dict[str, int] = {}
    for q in data["questions"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(f"wrote {args.out}: {len(data['conversations'])} conversations, {turns} turns, "
          f"{len(data['questions'])} questions {kinds}")


if __name__ == "__main__":
    main()
