"""The pages' mention rule (``web/common/mentions.js``) answers as ``hubbub.protocol.mentions``.

The web chat puts the ids a person mentions in ``to`` and highlights mentions with the served
module; the gateway, the SDK and ``hubbub chat`` use the Python one. One table of texts goes
through both — the Python functions directly, the served module in Chromium — for
``mentions`` (ids and display names), ``mentioned_ids`` and ``addresses``, and every answer must
be the same. ``mentionAt`` (where the renderer marks a mention) must mark exactly the ids that
``mentioned_ids`` finds.
"""

from __future__ import annotations

import random
from typing import Any

from hubbub.protocol.addressing import addressing, mentioned
from hubbub.protocol.mentions import addresses, mentioned_ids, mentions
from tests.conftest import RunningGateway
from tests.webchat.conftest import OpenPage

KNOWN = ["maths", "chef", "travel", "coder", "a.b-c", "x_1", "Bob", "bob.smith", "x" * 32]
NAMES = [None, "Chef Anna", "Zoë", "straße", "Σοφία", "日本", "O'Neil (ops)", "a+b", "k"]

HAND = [
    "@maths what is 6*7?",
    "hey @maths",
    "hey @Maths, please",
    "ask @MATHS.",
    "(@maths)",
    "@maths: hi",
    "bob@maths.org",
    "see @maths.org",
    "@mathsy",
    "@maths-bot",
    "@maths_2",
    "maths, what is 6*7?",
    "@@maths",
    "",
    "@",
    "@.",
    "@maths...",
    "@maths.\nnext line",
    "thanks @Chef Anna!",
    "thanks @Chef Annabel",
    "@chef and @maths. then @chef again, @nobody",
    "mail bob@chef.org",
    "ping @a.b-c now",
    "ping @a.b-cd now",
    "@bob.smith and @bob.",
    "@BOB.SMITH.",
    "@x_1é",
    "é@maths",
    "@mathsé",
    "@maths²",
    "²@maths",
    "@maths\u0301",
    "@maths😀",
    "😀@maths",
    "@" + "x" * 32,
    "@" + "x" * 33,
    "@" + "x" * 32 + ".",
    "hi @Zoë!",
    "hi @ZOË!",
    "@zoëy",
    "@STRASSE",
    "@STRAẞE ok",
    "@σοφία.",
    "@ΣΟΦΊΑ",
    "@日本語",
    "@日本 ok",
    "@O'Neil (ops) said",
    "@a+b=c",
    "@K",  # the Kelvin sign folds to k in both
    "-@maths",
    ".@maths",
    "_@maths",
    "@-maths",
    "@maths.-",
    "@maths._",
    "@maths.ä",
    "@travel,@coder;@chef",
    "`@maths`",
    "**@maths**",
]

ALPHABET = [*"@@@@ .-_,!?aAmMsStThHcCoO0123456789", "é", "²", "\u0301", "😀", "ß", "Σ", "\n"]


def _texts() -> list[str]:
    rng = random.Random(22)  # the same texts every run
    pieces = ["@maths", "@chef", "@Bob", "@bob.smith", "@a.b-c", "@Zoë", "@Chef Anna", "@x_1"]
    out = list(HAND)
    for _ in range(600):
        parts = []
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.5:
                parts.append(rng.choice(pieces))
            else:
                parts.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4))))
        out.append("".join(parts))
    return out


ROSTER: dict[str, str | None] = {
    "maths": None, "chef": "Chef Anna", "travel": "Zoë", "coder": "Ada", "a.b-c": None,
    "x_1": "Σοφία", "Bob": "bob.smith", "bob.smith": None, "x" * 32: "ada",
}  # fmt: skip
"""id → display name: "Ada" is shared (case aside) and "bob.smith" is another's id, so
neither addresses anyone by name; the other names do."""
AUTHORS = {"m-1": "chef", "m-2": "maths", "m-3": "alice"}
SENDERS = ["alice", "chef", "maths"]


def _cases() -> list[dict[str, Any]]:
    cases = []
    for i, text in enumerate(_texts()):
        pid = KNOWN[i % len(KNOWN)]
        name = NAMES[i % len(NAMES)]
        to = [KNOWN[(i + 1) % len(KNOWN)]] if i % 3 == 0 else None
        reply = [None, ["m-1"], "m-2", ["m-3", "m-9"], ["m-9"]][i % 5]
        sender = SENDERS[i % len(SENDERS)]
        cases.append(
            {"text": text, "pid": pid, "name": name, "to": to, "reply": reply, "from": sender}
        )
    return cases


def _python(case: dict[str, Any]) -> dict[str, Any]:
    text, pid, name = case["text"], case["pid"], case["name"]
    return {
        "mentions": [mentions(text, p) for p in KNOWN],
        "byName": mentions(text, pid, name),
        "ids": mentioned_ids(text, KNOWN),
        "addresses": addresses(case["to"], text, pid, name),
        "byNames": mentioned(text, ROSTER),
        "addressees": addressing(
            sender=case["from"],
            to=case["to"],
            text=text,
            replies_to=[reply] if isinstance(reply := case["reply"], str) else reply or [],
            names=ROSTER,
            author_of=AUTHORS.get,
        ).ids,
    }


async def test_the_page_and_the_gateway_find_the_same_mentions(
    gw: RunningGateway, pages: OpenPage
) -> None:
    page = await pages(f"{gw.http}/chat")
    cases = _cases()
    js: list[dict[str, Any]] = await page.evaluate(
        """async ([cases, known, roster, authors]) => {
            const m = await import("/web/common/mentions.js");
            return cases.map((c) => {
              const marked = [];
              for (let i = 0; i < c.text.length; i++) {
                const at = m.mentionAt(c.text, i, known);
                if (at && !marked.includes(at.id)) marked.push(at.id);
              }
              return {
                mentions: known.map((p) => m.mentions(c.text, p)),
                byName: m.mentions(c.text, c.pid, c.name),
                ids: m.mentionedIds(c.text, known),
                addresses: m.addresses(c.to, c.text, c.pid, c.name),
                byNames: m.mentioned(c.text, roster),
                addressees: m.addressees(
                  {from: c.from, to: c.to, payload: {text: c.text}, correlation_id: c.reply},
                  roster, (id) => authors[id] || null),
                marked,
              };
            });
        }""",
        [cases, KNOWN, ROSTER, AUTHORS],
    )
    assert len(js) == len(cases)
    differ = []
    for case, answer in zip(cases, js, strict=True):
        marked = answer.pop("marked")
        if answer != _python(case) or sorted(marked) != sorted(answer["ids"]):
            differ.append((case, _python(case), answer, marked))
    assert differ == [], differ[:5]
    # the table is not trivial: it holds mentions and non-mentions of ids and names
    answers = [_python(c) for c in cases]
    assert sum(any(a["mentions"]) for a in answers) > 100
    assert sum(not any(a["mentions"]) for a in answers) > 100
    assert sum(a["byName"] for a in answers) > 20
    by_name = {"chef": "@chef anna", "travel": "@zoë", "x_1": "@σοφία"}
    named = 0
    for case, answer in zip(cases, answers, strict=True):
        lower = case["text"].lower()
        named += any(by_name[p] in lower for p in answer["byNames"] if p in by_name)
    assert named > 20  # display names address their participants
    assert sum(len(a["addressees"]) > len(set(a["byNames"]) | set(a["ids"])) for a in answers) > 50
