"""The demo's cast: four skilled agents, a calculator, and a transcript of the activity feed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hubbub.llm.base import ChatModel
from hubbub.llm.factory import ModelSettings, pick_provider
from hubbub.llm.offline import OfflineModel, OfflineScript
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Participant

CONTESTED = "name the new project"
"""Every agent's script answers a message containing this, so all four want the floor."""

SKILLS: dict[str, tuple[str, str]] = {
    "maths": ("math", "Call it Fermat, {sender}: elegant, and nobody can prove it wrong."),
    "travel": ("travel", "Call it Meridian, {sender}: it goes everywhere."),
    "chef": ("cooking", "Call it Mise en Place, {sender}: everything ready before we start."),
    "coder": ("code", "Call it hubbub-next, {sender}, and ship it on Friday."),
}
REPERTOIRE: dict[str, list[dict[str, Any]]] = {
    "maths": [],  # arithmetic is built into the offline model (follow-ups too)
    "travel": [
        {"match": r"train to (?P<city>\w+)", "reply": "Booked the 9:40 train to {city}, {sender}."},
        {"match": r"\bhotel\b", "reply": "And a room at the Hotel de la Gare, {sender}."},
        {
            "match": r"\btrains? to (?P<city>[A-Z]\w+)",
            "reply": "Trains to {city} leave hourly until 22:00, {sender}; the 19:40 is fastest.",
        },
        {
            "match": r"\b(pack|packing|luggage|suitcase)\b",
            "reply": "Pack light, {sender}: layers, a rain jacket, good shoes, chargers and a plug "
            "adapter; roll the clothes.",
        },
        {
            "match": r"\b(best time|when (should|to) (i )?(go|visit|travel))\b",
            "reply": "Late spring or early autumn, {sender}: mild weather and fewer crowds.",
        },
        {
            "match": r"\b(route|itinerary|how (do|can) i get to)\b",
            "reply": "Go by train where you can, {sender}: centre to centre, it beats flying on "
            "trips under 4 hours.",
        },
        {
            "match": r"\b(flights?|fly|airport)\b",
            "reply": "Book 6-8 weeks ahead and be at the airport 2 hours early, {sender}.",
        },
    ],
    "chef": [
        {"match": "check the oven", "reply": "The bread is done: out of the oven at 220°C."},
        {
            "match": r"\beggs?\b",
            "reply": "Boil an egg 6 minutes for a soft yolk, 10 for hard, then cool it in cold "
            "water, {sender}.",
        },
        {
            "match": r"\b(pasta|spaghetti|noodles)\b",
            "reply": "Salted boiling water, 1 litre per 100 g, and the packet's time minus a "
            "minute, {sender}.",
        },
        {
            "match": r"\brice\b",
            "reply": "1 cup of rice to 1.5 of water, simmer covered 15 minutes, rest 5, {sender}.",
        },
        {
            "match": r"\b(dinner|lunch|recipe|cook)\b",
            "reply": "Try a quick tomato pasta, {sender}: garlic in olive oil, a tin of tomatoes, "
            "10 minutes of simmering, basil on top.",
        },
        {
            "match": r"\b(bake|baking|bread|cake|oven)\b",
            "reply": "Bread bakes at 220°C for 30-35 minutes, until it sounds hollow, {sender}.",
        },
        {
            "match": r"\b(instead of|substitute|replace)\b",
            "reply": "For 1 egg, use 1 tbsp ground flax and 3 tbsp water, {sender}.",
        },
    ],
    "coder": [
        {
            "match": r"\breverse\b",
            "reply": "In Python, {sender}: `s[::-1]` reverses a string or a list.",
        },
        {
            "match": r"\bsort",
            "reply": "`sorted(items, key=len)` returns a new list; `items.sort()` sorts in place, "
            "{sender}.",
        },
        {
            "match": r"\b(read|open)\b.*\bfile\b",
            "reply": "`with open(path) as f: text = f.read()`, {sender}: the file closes itself.",
        },
        {
            "match": r"\b(bug|error|exception|traceback|crash)",
            "reply": "Read the traceback's last line first, {sender}, then the frame of your own "
            "code just above it.",
        },
        {
            "match": r"\breturns? none\b",
            "reply": "A function without `return` returns None, {sender}: check every branch "
            "returns a value.",
        },
        {
            "match": r"\bgit\b",
            "reply": "`git switch -c my-fix` starts a branch, `git commit -am 'msg'` records it, "
            "{sender}.",
        },
    ],
}
"""Each agent's scripted repertoire in its own field (the offline model's rules, first match
wins); an agent claims an open question only when one of its rules answers it."""

ABOUT: dict[str, str] = {
    "maths": "arithmetic, like 'what is 12*7', and follow-ups like 'and times 2?'",
    "travel": "trains, hotels, routes, packing, flights and the best time to go",
    "chef": "recipes, eggs, pasta, rice, baking and substitutes",
    "coder": "small Python snippets (reverse, sort, read a file), bugs and git",
}
"""What each agent can do, said when it is addressed with something it has no rule for."""

PROPOSER_CAPS: list[dict[str, Any]] = [
    {"kind": ["chat", "reasoning/*", "floor/*", "channel/*", "history/request", "system/*"]},
    {"kind": ["mcp/proposal", "mcp/withdraw", "mcp/response", "capability/grant-ack"]},
    {"kind": "mcp/request", "payload": {"method": "!tools/call"}},
]
"""The coder may list tools but not call them: a tool call becomes a proposal."""

Say = Callable[[str], None]


def _tidy(x: float) -> float:
    """84.0 reads better as 84."""
    return int(x) if float(x).is_integer() else x


def offline_mode() -> bool:
    """Whether the agents run on the offline model (no OPENAI_*/ANTHROPIC_API_KEY set)."""
    return pick_provider(ModelSettings()) == "offline"


def make_calculator(url: str, say: Say) -> Participant:
    """A service participant offering ``multiply`` and ``add`` (it prints every call)."""
    calc = Participant(gateway=url, participant_id="calculator", kind="service")

    @calc.tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        result = _tidy(a * b)
        say(f"  [tool]     calculator runs multiply({_tidy(a)}, {_tidy(b)}) = {result}")
        return result

    @calc.tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        result = _tidy(a + b)
        say(f"  [tool]     calculator runs add({_tidy(a)}, {_tidy(b)}) = {result}")
        return result

    return calc


def make_agent(name: str, url: str, latency_s: float) -> Agent:
    """One of the four agents (offline model unless a real one is configured)."""
    skill, answer = SKILLS[name]
    model: ChatModel | None = None
    if offline_mode():
        rules = [{"match": CONTESTED, "reply": answer}, *REPERTOIRE[name]]
        unknown = (
            f"Sorry {{sender}}, I have no rule for that. I am {name}, the {skill} expert of "
            f"this offline demo: ask me about {ABOUT[name]}."
        )
        script = OfflineScript.from_mapping(
            {"rules": rules, "default_reply": unknown}, f"{name}'s script"
        )
        model = OfflineModel(script, latency_s=latency_s)
    extra: dict[str, Any] = {"capabilities": PROPOSER_CAPS} if name == "coder" else {}
    return Agent(
        participant_id=name,
        gateway=url,
        model=model,
        skills=[skill],
        system_prompt=f"You are {{name}}, the team's {skill} expert. Answer in one sentence.",
        coordination="both",
        csma_min_ms=0,
        csma_max_ms=0,
        settle_ms=0,
        rate_limit_per_minute=0,
        proposal_timeout=3600,
        **extra,
    )


def short(msg_id: object) -> str:
    """The tail of a message id, enough to tell messages apart in the transcript."""
    return "…" + str(msg_id)[-6:]


def describe_activity(event: dict[str, Any], dashboard: str) -> str | None:
    """One transcript line for a gateway activity event (``None``: not worth a line)."""
    e, who = event.get("event"), event.get("participant")
    if e == "message":
        kind = event.get("kind")
        if kind == "chat" and event.get("channel") and "text" in event:
            return f"  {event['channel']:<9}  {who}: {event['text']}"
        return None  # DMs: the feed hides their text; the demo prints what alice receives
    if e == "claim":
        return f"  [floor]    {who} claims the floor on {short(event['msg_id'])}"
    if e == "yield":
        return f"  [floor]    YIELD: {who} yields {short(event['msg_id'])} to {event.get('winner')}"
    if e == "claim-released":
        return f"  [floor]    {who} releases {short(event['msg_id'])} ({event.get('reason')})"
    if e == "callback-scheduled":
        return f"  [callback] {who} scheduled callback {short(event['cb_id'])}"
    if e == "callback-fired":
        return f"  [callback] fired for {who} (callback {short(event['cb_id'])})"
    if e == "sleep":
        return f"  [sleep]    {who} is asleep (mode {event.get('mode')}); DMs will be buffered"
    if e == "wake":
        return f"  [wake]     {who} woke up ({event.get('reason')}): {event['buffered']} buffered"
    if e == "proposal":
        return (
            f"  [proposal] {who} proposes {event.get('method')} {event.get('tool')} "
            f"{event.get('arguments')} to {', '.join(event.get('to', []))}: "
            f"WAITING for an operator to approve or reject it at {dashboard}"
        )
    if e == "proposal-approved":
        return f"  [proposal] approved by {who}"
    if e == "proposal-result":
        return f"  [proposal] result: {event.get('result') or event.get('error')}"
    if e in ("proposal-rejected", "proposal-withdrawn"):
        return f"  [proposal] {e.split('-')[1]} by {who}: {event.get('reason')}"
    if e == "error":
        return f"  [error]    to {who}: {event.get('code')}: {event.get('message')}"
    return None


def describe_dm(env: Envelope, me: str) -> str | None:
    """A transcript line for a DM ``me`` received (the feed hides DM text)."""
    text = env.payload.get("text")
    if env.kind != "chat" or env.channel is not None or env.from_ == me:
        return None
    if not isinstance(text, str) or text.startswith("@@"):
        return None
    return f"  [dm]       {env.from_} → {me}: {text}"
