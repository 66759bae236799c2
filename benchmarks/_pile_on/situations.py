"""The pile-on's "who answers" situations (``benchmarks/pile_on.py --situations``): a person
and N agents with mixed skills (as ``--people``: agent *i* has ``SKILLS[i % 4]``, every third
one the next skill too) and display names (``Helper A``, ``Helper B``…), under the default
floor settings (CSMA 2–8 s, settle 5 s, ``coordination.humans: coordinate``, continuity
180 s) unless ``--time-scale`` scales them. Each run of a situation:

- ``reply``: the person asks agent *k* by name (``@agentK``) about its own skill; agent *k*
  answers; the person *replies* to that answer (``correlation_id``) with an unaddressed
  question on a topic another agent covers. Right: the reply is answered by agent *k*
  alone;
- ``follow-up``: the person asks an unaddressed sum ("what is 12*7?", which two agents
  cover at N = 5); one answers; the person follows up, unaddressed ("and what about 12*8?").
  Right: the follow-up is answered by the agent that answered the question, alone;
- ``name``: the person mentions an agent by its display name (``@Helper C …``) on a topic
  another agent covers. Right: the named agent alone answers;
- ``absent``: the person mentions an agent that was in the space and is offline now
  (``@away …``) on a topic others cover. Right: nobody answers (no stand-in);
- ``best``: a fresh person asks an unaddressed question on two topics (travel and code)
  that one agent alone covers both of (others cover one). Right: that agent alone answers.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
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
from _pile_on.people import QUESTIONS, SKILLS, question_text, skills_of
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Participant

SITUATIONS = ("reply", "follow-up", "name", "absent", "best")
TARGETS = {"reply": 100.0, "follow-up": 95.0, "name": 100.0, "absent": 100.0, "best": 90.0}
"""The share of runs that must come out right, per situation (%)."""
BEST = (
    "can someone write a python script to find train times to Lyon?",
    "how do I debug the api of the railway booking site?",
    "any regex to parse flight numbers from my itinerary?",
)
"""Questions about travel and code (only an agent with both skills covers all of them)."""


def display_name(i: int) -> str:
    """Agent ``i``'s display name: ``Helper A``, ``Helper B``…"""
    return f"Helper {chr(65 + i % 26)}{'' if i < 26 else i // 26}"


@dataclass
class Run:
    """One run of a situation: who should answer, who did, how fast."""

    expected: list[str]
    answers: list[str] = field(default_factory=list)
    first_ms: float | None = None

    @property
    def right(self) -> bool:
        """Whether exactly the expected agents answered (nobody, for an absent addressee)."""
        return self.answers == self.expected


class Room:
    """A gateway, N agents and the people asking, for one situation's runs."""

    def __init__(self, url: str, agents: list[Agent], skills: dict[str, tuple[str, ...]]):
        self.url, self.agents, self.skills = url, agents, skills
        self.people: dict[str, Participant] = {}
        self.answers: dict[str, list[tuple[str, float]]] = {}
        self.asker: dict[str, str] = {}
        """Who asked each message (only the asker's stream counts its answers)."""
        self._readers: list[asyncio.Task[None]] = []

    async def person(self, pid: str) -> Participant:
        """A connected person (kind ``human``) whose stream notes the agents' answers."""
        if pid in self.people:
            return self.people[pid]
        person = Participant(gateway=self.url, participant_id=pid, kind="human")
        await person.connect()
        self.people[pid] = person
        stream = person.client.messages()

        async def read() -> None:
            try:
                async for env in stream:
                    if env.kind != "chat" or env.from_ not in self.skills:
                        continue
                    for cid in env.correlation_ids():
                        if self.asker.get(cid) == pid:
                            self.answers[cid].append((env.from_, time.perf_counter()))
            finally:
                stream.close()

        self._readers.append(asyncio.create_task(read()))
        return person

    async def ask(
        self, who: str, text: str, limit: float, reply_to: str | None = None
    ) -> tuple[Envelope, list[tuple[str, float]], float]:
        """``who`` says ``text`` in #general (a reply to ``reply_to``); once every agent has
        settled it: the message, its answers (agent, perf_counter), when it was sent."""
        person = await self.person(who)
        mine = person.client.expect(
            "chat", lambda e: e.from_ == who and e.payload.get("text") == text
        )
        sent = time.perf_counter()
        await person.client.send(
            Envelope(
                kind="chat",
                channel="#general",
                correlation_id=[reply_to] if reply_to else None,
                payload={"text": text},
            )
        )
        env = await asyncio.wait_for(mine, 10)
        self.answers.setdefault(env.id, [])
        self.asker[env.id] = who
        await until_done(self.agents, env.id, limit)
        await asyncio.sleep(0.1)  # the last answer is on its way
        return env, self.answers[env.id], sent

    async def close(self) -> None:
        """Stop the readers and disconnect the people."""
        for task in self._readers:
            task.cancel()
        for person in self.people.values():
            await person.disconnect()


def _run(expected: list[str], got: list[tuple[str, float]], sent: float) -> Run:
    run = Run(expected, [w for w, _ in got])
    if got:
        run.first_ms = (min(t for _, t in got) - sent) * 1000
    return run


async def one_run(room: Room, case: str, k: int, rng: random.Random, limit: float) -> Run:
    """Run ``case`` once (the ``k``-th time)."""
    names = list(room.skills)
    if case == "follow-up":
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        _, got, _ = await room.ask("alice", f"what is {a}*{b}?", limit)
        first = [w for w, _ in got]
        if len(first) != 1:
            return Run(["(one answer to the question)"], first)
        _, again, sent = await room.ask("alice", f"and what about {a}*{b + 1}?", limit)
        return _run(first, again, sent)
    if case == "reply":
        agent = names[k % len(names)]
        own = room.skills[agent][0]
        _, got, _ = await room.ask("alice", "@" + agent + " " + question_text(own, k, rng), limit)
        mine = [w for w, _ in got]
        if mine != [agent]:
            return Run([agent], mine)
        answer_id = await _answer_id(room, "alice", agent)
        other = next(s for s in SKILLS if s not in room.skills[agent])
        text = "thanks! and " + question_text(other, k, rng)
        _, again, sent = await room.ask("alice", text, limit, reply_to=answer_id)
        return _run([agent], again, sent)
    if case == "name":
        i = k % len(names)
        other = next(s for s in SKILLS if s not in room.skills[names[i]])
        text = f"@{display_name(i)} {question_text(other, k, rng)}"
        _, got, sent = await room.ask("alice", text, limit)
        return _run([names[i]], got, sent)
    if case == "absent":
        text = f"@away {question_text(SKILLS[k % len(SKILLS)], k, rng)}"
        _, got, sent = await room.ask("alice", text, limit)
        return _run([], got, sent)
    if case == "best":
        best = [n for n, tags in room.skills.items() if {"travel", "code"} <= set(tags)]
        _, got, sent = await room.ask(f"asker{k}", BEST[k % len(BEST)], limit)
        return _run(best[:1], got, sent)
    raise SystemExit(f"unknown situation {case!r} (situations: {', '.join(SITUATIONS)})")


async def _answer_id(room: Room, who: str, agent: str) -> str:
    """The id of ``agent``'s latest chat as ``who`` saw it (what a reply names)."""
    page = await room.people[who].history("#general", limit=20)
    chats = [e for e in page if e.kind == "chat" and e.from_ == agent]
    return chats[-1].id


async def run_situation(
    n: int, case: str, runs: int, scale: float, seed: int
) -> tuple[list[Run], float, float]:
    """N agents, one situation, ``runs`` runs: the runs, LLM-seconds spent and wasted."""
    rng = random.Random(seed)
    inferences: list[Inference] = []
    skills = {f"agent{i:02d}": skills_of(i) for i in range(n)}
    out: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="hubbub-pile-on-situations-") as tmp:
        runner, url = await start_gateway(Path(tmp))
        agents: list[Agent] = []
        room = Room(url, agents, skills)
        try:
            away = Participant(gateway=url, participant_id="away", kind="agent")
            await away.connect()  # known in the space, then offline
            for i, (pid, tags) in enumerate(skills.items()):
                agent_rng = random.Random(seed * 1000 + i)
                agent = Agent(
                    participant_id=pid,
                    name=display_name(i),
                    gateway=url,
                    model=TimedModel(pid, scale, agent_rng, inferences),
                    rng=agent_rng,
                    skills=tags,
                    **scaled_floor(scale),
                )
                await agent.start()
                agents.append(agent)
            await away.disconnect()
            await room.person("alice")
            for agent in agents:  # everyone known, so that every mention is recognised
                await agent.wait_until(
                    lambda a=agent: all(  # type: ignore[misc]
                        p in a.participant.client.participants for p in [*skills, "alice"]
                    ),
                    timeout=30,
                )
            await asyncio.sleep(0.2)
            limit = 30 * scale + 10
            for k in range(runs):
                out.append(await one_run(room, case, k, rng, limit))
        finally:
            await room.close()
            await asyncio.gather(*(a.stop() for a in agents), return_exceptions=True)
            await runner.cleanup()
    done = [i for i in inferences if i.ended]
    spent = sum(i.ended - i.started for i in done)
    wasted = sum(i.ended - i.started for i in done if i.cancelled)
    return out, spent, wasted


async def run_situations(
    sizes: list[int], cases: list[str], runs: int, scale: float, seed: int
) -> list[dict[str, Any]]:
    """Every (N, situation), in order; the summary rows."""
    rows = []
    for n in sizes:
        for case in cases:
            if case not in SITUATIONS:
                known = ", ".join(SITUATIONS)
                raise SystemExit(f"unknown situation {case!r} (situations: {known})")
            log(f"N={n} situation {case}: {runs} runs ...")
            started = time.perf_counter()
            result, spent, wasted = await run_situation(n, case, runs, scale, seed)
            firsts = sorted(r.first_ms for r in result if r.first_ms is not None)
            row = {
                "agents": n,
                "situation": case,
                "runs": len(result),
                "right": sum(r.right for r in result),
                "right_pct": 100 * sum(r.right for r in result) / (len(result) or 1),
                "first_p50_ms": pct(firsts, 0.5),
                "spent_s": spent,
                "wasted_s": wasted,
                "wall_s": time.perf_counter() - started,
                "wrong": [
                    {"expected": r.expected, "answers": r.answers} for r in result if not r.right
                ],
            }
            rows.append(row)
            log(f"  right {row['right']}/{row['runs']} ({row['right_pct']:.0f} %)")
    return rows


RIGHT = {
    "reply": "answered by the replied-to agent alone",
    "follow-up": "answered by the previous answerer alone",
    "name": "answered by the named agent alone",
    "absent": "no stand-in answered",
    "best": "answered by the best-suited agent alone",
}


def table(rows: list[dict[str, Any]], scale: float) -> str:
    """The situations as a Markdown table."""
    out = [
        f"time scale {scale:g}: CSMA {2000 * scale:.0f}-{8000 * scale:.0f} ms, settle "
        f"{5000 * scale:.0f} ms, inference {1000 * scale:.0f}-{3000 * scale:.0f} ms",
        "",
        "| N | situation | right means | runs | right | first answer p50 |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        first = "-" if r["first_p50_ms"] is None else f"{r['first_p50_ms']:,.0f} ms"
        out.append(
            f"| {r['agents']} | {r['situation']} | {RIGHT[r['situation']]} | {r['runs']} | "
            f"{r['right']}/{r['runs']} ({r['right_pct']:.0f} %) | {first} |"
        )
    return "\n".join(out)


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """The targets, per row."""
    out = []
    for r in rows:
        target = TARGETS[r["situation"]]
        ok = r["right_pct"] >= target
        out.append(
            f"{'PASS' if ok else 'FAIL'} N={r['agents']} {r['situation']}: "
            f"{RIGHT[r['situation']]} {r['right_pct']:.1f} % (target >= {target:g} %)"
        )
        for wrong in r["wrong"]:
            out.append(f"    expected {wrong['expected']}, got {wrong['answers']}")
    return out


__all__ = ["QUESTIONS", "SITUATIONS", "run_situations", "table", "verdict"]
