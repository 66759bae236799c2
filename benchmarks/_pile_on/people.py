"""The pile-on's people cases (``benchmarks/pile_on.py --people``): questions from people
(participants of kind ``human``) to N agents with mixed skills, under the default
coordination (``both``, ``coordination.humans: coordinate``).

Agents: agent *i* has the skill ``SKILLS[i % 4]`` and, for every third one, the next skill
too (N = 5: math, cooking, travel + code, code, math). They run on the offline model, whose
relevance judgement answers what an agent's skills cover; an answer's inference takes a
uniform random 1-3 s (x the time scale), CSMA and the settle window are scaled alike.

Cases, each question from a person:

- ``to``: a channel message with ``to: [agent]``, on a topic *another* agent's skills cover
  (the hardest case: the others would answer it if it were unaddressed);
- ``mention``: the same as ``@agent …`` in the text, without ``to``;
- ``covered``: unaddressed, on a topic some agents' skills cover;
- ``uncovered``: unaddressed, on a topic nobody's skills cover;
- ``burst``: three people post 10 covered questions at once (4 + 3 + 3).

Measured: answers per question; for addressed questions the share answered by the addressee
alone (target 100 %); for covered ones the share with exactly one answer (target >= 99 %) and
the share whose answer came from an agent with the question's skill (target >= 95 %); the
first answer's delay, p50 / p99 (at the time scale).
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _pile_on.common import (
    Inference,
    TimedModel,
    log,
    pct,
    scaled_floor,
    start_gateway,
    until_done,
)
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Participant

SKILLS = ("math", "cooking", "travel", "code")
QUESTIONS: dict[str, tuple[str, ...]] = {
    "math": (
        "what is {a}*{b}?",
        "can someone calculate {a} + {b} for me?",
        "I need help with a sum: {a} plus {b}",
    ),
    "cooking": (
        "hello everyone, who can help me plan dinner for {a} people?",
        "any recipe ideas for a quick lunch?",
        "what should I bake for the party on day {a}?",
    ),
    "travel": (
        "are there trains to Lyon on day {a}?",
        "can someone find me a hotel in Rome for {a} nights?",
        "how long is the flight to Oslo?",
    ),
    "code": (
        "can someone look at python bug {a}?",
        "why does my function return None?",
        "how do I write a regex for dates?",
    ),
    "": (
        "what is the capital of Peru?",
        "who won the match last night?",
        "is it going to rain on day {a}?",
    ),
}
"""Question templates per skill; ``""``: topics no agent's skills cover."""
CASES = ("to", "mention", "covered", "uncovered", "burst")
TARGETS = {"addressee_only_pct": 100.0, "exactly_one_pct": 99.0, "skilled_pct": 95.0}
PEOPLE = ("alice", "bob", "carol")


def skills_of(i: int) -> tuple[str, ...]:
    """The skills of agent ``i`` (mixed: one, or two for every third agent)."""
    first = SKILLS[i % len(SKILLS)]
    if i % 3 == 2:
        return (first, SKILLS[(i + 1) % len(SKILLS)])
    return (first,)


@dataclass
class Asked:
    """One question: its topic, to whom it was addressed, the answers it got."""

    topic: str
    addressee: str | None = None
    sent_at: float = 0.0
    answers: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class CaseResult:
    """The measures of one (N, case) run."""

    agents: int
    case: str
    asked: list[Asked] = field(default_factory=list)
    spent_s: float = 0.0
    wasted_s: float = 0.0

    def row(self, skills: dict[str, tuple[str, ...]]) -> dict[str, Any]:
        """The summary of the run."""
        n = len(self.asked) or 1
        counts = [len(a.answers) for a in self.asked]
        firsts = sorted(
            (min(t for _, t in a.answers) - a.sent_at) * 1000 for a in self.asked if a.answers
        )
        answered = [a for a in self.asked if a.answers]
        out: dict[str, Any] = {
            "agents": self.agents,
            "case": self.case,
            "questions": len(self.asked),
            "answers_mean": statistics.fmean(counts) if counts else 0.0,
            "exactly_one_pct": 100 * sum(c == 1 for c in counts) / n,
            "none_pct": 100 * sum(c == 0 for c in counts) / n,
            "first_p50_ms": pct(firsts, 0.5),
            "first_p99_ms": pct(firsts, 0.99),
            "spent_s": self.spent_s,
            "wasted_s": self.wasted_s,
        }
        if self.case in ("to", "mention"):
            only = sum([w for w, _ in a.answers] == [a.addressee] for a in self.asked)
            out["addressee_only_pct"] = 100 * only / n
        if self.case in ("covered", "burst"):
            skilled = sum(all(a.topic in skills[w] for w, _ in a.answers) for a in answered)
            out["skilled_pct"] = 100 * skilled / (len(answered) or 1)
        return out


def question_text(topic: str, k: int, rng: random.Random) -> str:
    """The ``k``-th question on ``topic``."""
    templates = QUESTIONS[topic]
    return templates[k % len(templates)].format(a=rng.randint(2, 99), b=rng.randint(2, 99))


async def run_case(
    n: int, case: str, questions: int, scale: float, seed: int, real_model: bool
) -> tuple[CaseResult, dict[str, tuple[str, ...]]]:
    """N agents, one case, M questions (the burst: M // 10 bursts of 10)."""
    result = CaseResult(n, case)
    inferences: list[Inference] = []
    rng = random.Random(seed)
    skills = {f"agent{i:02d}": skills_of(i) for i in range(n)}
    with tempfile.TemporaryDirectory(prefix="hubbub-pile-on-people-") as tmp:
        runner, url = await start_gateway(Path(tmp))
        agents: list[Agent] = []
        people = [Participant(gateway=url, participant_id=p, kind="human") for p in PEOPLE]
        try:
            for i, (name, tags) in enumerate(skills.items()):
                agent_rng = random.Random(seed * 1000 + i)
                model = None if real_model else TimedModel(name, scale, agent_rng, inferences)
                agent = Agent(
                    participant_id=name,
                    gateway=url,
                    model=model,
                    rng=agent_rng,
                    skills=tags,
                    **scaled_floor(scale),
                )
                await agent.start()
                agents.append(agent)
            for person in people:
                await person.connect()
            for agent in agents:  # everyone known, so that every @mention is recognised
                await agent.wait_until(
                    lambda a=agent: all(  # type: ignore[misc]
                        p in a.participant.client.participants for p in [*skills, *PEOPLE]
                    ),
                    timeout=30,
                )
            await asyncio.sleep(0.2)
            limit = 30 * scale + 10
            if case == "burst":
                for _ in range(max(1, questions // 10)):
                    await burst(people, agents, rng, result, limit)
            else:
                await one_by_one(people[0], agents, case, questions, rng, skills, result, limit)
        finally:
            await asyncio.gather(*(a.stop() for a in agents), return_exceptions=True)
            for person in people:
                await person.disconnect()
            await runner.cleanup()
    done = [i for i in inferences if i.ended]
    result.spent_s = sum(i.ended - i.started for i in done)
    result.wasted_s = sum(i.ended - i.started for i in done if i.cancelled)
    return result, skills


def _reader(person: Participant, asked: dict[str, Asked]) -> asyncio.Task[None]:
    """Note every answer to a question of ``asked`` that ``person`` sees."""
    stream = person.client.messages()

    async def read() -> None:
        try:
            async for env in stream:
                if env.kind != "chat" or env.from_ in PEOPLE:
                    continue
                for cid in env.correlation_ids():
                    if cid in asked:
                        asked[cid].answers.append((env.from_, time.perf_counter()))
        finally:
            stream.close()

    return asyncio.create_task(read())


async def _post(person: Participant, text: str, to: list[str] | None) -> Envelope:
    """``person`` says ``text`` in #general; the message as the gateway stored it."""
    mine = person.client.expect(
        "chat", lambda e: e.from_ == person.id and e.payload["text"] == text
    )
    await person.client.send(
        Envelope(kind="chat", channel="#general", to=to, payload={"text": text})
    )
    return await asyncio.wait_for(mine, 10)


async def one_by_one(
    person: Participant,
    agents: list[Agent],
    case: str,
    questions: int,
    rng: random.Random,
    skills: dict[str, tuple[str, ...]],
    result: CaseResult,
    limit: float,
) -> None:
    """Ask ``questions`` one at a time, each once every agent settled the previous one."""
    asked: dict[str, Asked] = {}
    reader = _reader(person, asked)
    names = list(skills)
    try:
        for k in range(questions):
            if case == "uncovered":
                topic, addressee = "", None
            else:
                topic = SKILLS[k % len(SKILLS)]
                addressee = None
                if case in ("to", "mention"):  # someone whose skills do not cover it
                    others = [a for a in names if topic not in skills[a]]
                    addressee = others[k % len(others)]
            text = question_text(topic, k, rng)
            if case == "mention":
                text = f"@{addressee} {text}"
            entry = Asked(topic, addressee, time.perf_counter())
            env = await _post(person, text, [addressee] if case == "to" and addressee else None)
            asked[env.id] = entry
            result.asked.append(entry)
            await until_done(agents, env.id, limit)
            await asyncio.sleep(0.05)  # the last answer is on its way
            if (k + 1) % 10 == 0:
                log(f"    {k + 1}/{questions} questions")
    finally:
        reader.cancel()


async def burst(
    people: Sequence[Participant],
    agents: list[Agent],
    rng: random.Random,
    result: CaseResult,
    limit: float,
) -> None:
    """Three people post 10 covered questions at once (4 + 3 + 3); wait until all settle."""
    asked: dict[str, Asked] = {}
    readers = [_reader(people[0], asked)]
    plan = [(people[k % len(people)], SKILLS[k % len(SKILLS)]) for k in range(10)]
    texts = [(p, topic, question_text(topic, rng.randint(0, 99), rng)) for p, topic in plan]
    started = time.perf_counter()
    try:
        envs = await asyncio.gather(*(_post(p, text, None) for p, _, text in texts))
        for env, (_, topic, _) in zip(envs, texts, strict=True):
            entry = Asked(topic, None, started)
            asked[env.id] = entry
            result.asked.append(entry)
        for env in envs:
            await until_done(agents, env.id, limit)
        await asyncio.sleep(0.1)
    finally:
        for reader in readers:
            reader.cancel()


def table(rows: list[dict[str, Any]], scale: float) -> str:
    """The people cases as a Markdown table."""

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}"

    def share(row: dict[str, Any], key: str) -> str:
        return f"{row[key]:.0f} %" if key in row else "-"

    out = [
        f"time scale {scale:g}: CSMA {2000 * scale:.0f}-{8000 * scale:.0f} ms, settle "
        f"{5000 * scale:.0f} ms, inference {1000 * scale:.0f}-{3000 * scale:.0f} ms",
        "",
        "| N | case | questions | answers/q | addressee only | exactly one | none | "
        "from a skilled agent | first answer p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['agents']} | {r['case']} | {r['questions']} | {r['answers_mean']:.2f} | "
            f"{share(r, 'addressee_only_pct')} | {r['exactly_one_pct']:.0f} % | "
            f"{r['none_pct']:.0f} % | {share(r, 'skilled_pct')} | "
            f"{ms(r['first_p50_ms'])} / {ms(r['first_p99_ms'])} ms |"
        )
    return "\n".join(out)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """The targets, checked on every row they apply to."""
    out = []
    for r in rows:
        checks: list[tuple[str, float, float]] = []
        if "addressee_only_pct" in r:
            checks.append(("answered by the addressee alone", r["addressee_only_pct"], 100.0))
        if r["case"] in ("covered", "burst"):
            checks.append(("exactly one answer", r["exactly_one_pct"], 99.0))
            checks.append(("from a skilled agent", r["skilled_pct"], 95.0))
        for what, value, target in checks:
            ok = value >= target
            out.append(
                f"{'PASS' if ok else 'FAIL'} N={r['agents']} {r['case']}: {what} "
                f"{value:.1f} % (target >= {target:g} %)"
            )
    return out


async def run_people(
    sizes: list[int], cases: list[str], questions: int, scale: float, seed: int, real: bool
) -> list[dict[str, Any]]:
    """Every (N, case) run, in order; the summary rows."""
    rows = []
    for n in sizes:
        for case in cases:
            if case not in CASES:
                raise SystemExit(f"unknown people case {case!r} (cases: {', '.join(CASES)})")
            log(f"N={n} people case {case}: {questions} questions ...")
            result, skills = await run_case(n, case, questions, scale, seed, real)
            row = result.row(skills)
            rows.append(row)
            log(
                f"  answers/q {row['answers_mean']:.2f}, exactly one "
                f"{row['exactly_one_pct']:.0f} %, none {row['none_pct']:.0f} %"
            )
    return rows


__all__ = ["CASES", "QUESTIONS", "SKILLS", "run_people", "skills_of", "table", "verdict"]
