"""The page's capability matcher answers as the gateway's does, on one table of cases.

``web/common/capabilities.js`` is a port of the part of ``hubbub.protocol.capabilities`` that
the page needs to decide which controls to offer. Every case of the table goes through both:
the Python matcher directly, the served JS module in Chromium. Both must give the same answer,
except that the JS leaves a decision that rests on a ``/regex/`` pattern to the gateway
(``null``): it must then be a case whose capabilities hold a regex.
"""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from playwright.async_api import Page

from hubbub.protocol.capabilities import (
    can_send,
    glob_tokens,
    pattern_type,
    validate_capabilities,
)
from tests.conftest import RunningGateway
from tests.webchat.conftest import OpenPage

Case = tuple[list[dict[str, Any]], dict[str, Any]]

PROPOSAL = {
    "method": "tools/call",
    "params": {"name": "add", "arguments": {"a": 1234, "b": 4321}},
}

HAND: list[Case] = [
    # kinds: literals, globs (* within a segment, ** across, ? one char), negation, lists
    ([{"kind": "chat"}], {"kind": "chat"}),
    ([{"kind": "chat"}], {"kind": "chat/acknowledge"}),
    ([{"kind": "*"}], {"kind": "chat"}),
    ([{"kind": "*"}], {"kind": "mcp/request"}),
    ([{"kind": "**"}], {"kind": "mcp/request"}),
    ([{"kind": "***"}], {"kind": "a/b/c"}),
    ([{"kind": "mcp/*"}], {"kind": "mcp/request"}),
    ([{"kind": "mcp/*"}], {"kind": "mcp/a/b"}),
    ([{"kind": "mcp/*"}], {"kind": "mcp"}),
    ([{"kind": "mcp/**"}], {"kind": "mcp/a/b"}),
    ([{"kind": "mcp/**"}], {"kind": "mcp/"}),
    ([{"kind": "channel/?oin"}], {"kind": "channel/join"}),
    ([{"kind": "channel/?oin"}], {"kind": "channel//oin"}),
    ([{"kind": "chan*/create"}], {"kind": "channel/create"}),
    ([{"kind": "a.b"}], {"kind": "axb"}),
    ([{"kind": "a.*"}], {"kind": "a.b"}),
    ([{"kind": "a[b]*"}], {"kind": "a[b]c"}),
    ([{"kind": "(x)|*"}], {"kind": "(x)|y"}),
    ([{"kind": "!system/**"}], {"kind": "chat"}),
    ([{"kind": "!system/**"}], {"kind": "system/heartbeat"}),
    ([{"kind": "!!chat"}], {"kind": "chat"}),
    ([{"kind": "!capability/*"}], {"kind": "capability/grant"}),
    ([{"kind": "!capability/*"}], {"kind": "channel/create"}),
    ([{"kind": ["chat", "channel/*"]}], {"kind": "channel/create"}),
    ([{"kind": ["chat", "channel/*"]}], {"kind": "mcp/request"}),
    ([{"kind": "é?"}], {"kind": "é😀"}),
    ([{"kind": "?"}], {"kind": "😀"}),
    ([{"kind": "a*b"}], {"kind": "a\nb"}),
    ([], {"kind": "chat"}),
    ([{"kind": "chat"}], {"kind": 5}),
    ([{"kind": "**"}], {}),
    # union: a negation never takes away what another capability gives
    (
        [{"kind": "mcp/*"}, {"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": ["mcp/response"]}, {"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        {"kind": "mcp/request", "payload": {"method": "tools/list"}},
    ),
    (
        [{"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        {"kind": "mcp/request", "payload": {}},
    ),
    (
        [{"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        {"kind": "mcp/request", "payload": {"method": 7}},
    ),
    # payload patterns: presence, nesting, one-of lists, typed scalars
    (
        [
            {
                "kind": "mcp/request",
                "payload": {"method": "tools/call", "params": {"name": "read_*"}},
            }
        ],
        {
            "kind": "mcp/request",
            "payload": {"method": "tools/call", "params": {"name": "read_file"}},
        },
    ),
    (
        [
            {
                "kind": "mcp/request",
                "payload": {"method": "tools/call", "params": {"name": "read_*"}},
            }
        ],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"params": {"name": "add"}}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"params": {"arguments": {"a": 1234}}}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"params": {"arguments": {"a": 1234.0}}}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"params": {"arguments": {"a": "1234"}}}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"method": ["tools/list", "tools/call"]}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"method": ["tools/list", {"x": 1}]}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    (
        [{"kind": "mcp/request", "payload": {"params": [{"name": "sub"}, {"name": "add"}]}}],
        {"kind": "mcp/request", "payload": PROPOSAL},
    ),
    ([{"kind": "mcp/request", "payload": {"method": "tools/call"}}], {"kind": "mcp/request"}),
    (
        [{"kind": "mcp/request", "payload": {"method": "tools/call"}}],
        {"kind": "mcp/request", "payload": ["tools/call"]},
    ),
    ([{"kind": "mcp/request", "payload": {}}], {"kind": "mcp/request"}),
    ([{"kind": "mcp/request", "payload": None}], {"kind": "mcp/request", "payload": None}),
    ([{"kind": "x", "payload": {"flag": True}}], {"kind": "x", "payload": {"flag": True}}),
    ([{"kind": "x", "payload": {"flag": True}}], {"kind": "x", "payload": {"flag": 1}}),
    ([{"kind": "x", "payload": {"n": 1}}], {"kind": "x", "payload": {"n": True}}),
    ([{"kind": "x", "payload": {"n": 0}}], {"kind": "x", "payload": {"n": False}}),
    ([{"kind": "x", "payload": {"n": None}}], {"kind": "x", "payload": {"n": None}}),
    ([{"kind": "x", "payload": {"n": None}}], {"kind": "x", "payload": {}}),
    ([{"kind": "x", "payload": {"n": "null"}}], {"kind": "x", "payload": {"n": None}}),
    ([{"kind": "x", "payload": {"o": {}}}], {"kind": "x", "payload": {"o": {"a": 1}}}),
    ([{"kind": "x", "payload": {"o": {}}}], {"kind": "x", "payload": {"o": [1]}}),
    ([{"kind": "x", "payload": {"s": ""}}], {"kind": "x", "payload": {"s": ""}}),
    ([{"kind": "x", "payload": {"s": "!"}}], {"kind": "x", "payload": {"s": ""}}),
    ([{"kind": "x", "payload": {"s": "!"}}], {"kind": "x", "payload": {"s": "a"}}),
    ([{"kind": "x", "payload": {"s": "/"}}], {"kind": "x", "payload": {"s": "/"}}),
    ([{"kind": "x", "payload": {"s": "!*"}}], {"kind": "x", "payload": {"s": 3}}),
    (
        [{"kind": "x", "payload": {"uri": "/public/**"}}],
        {"kind": "x", "payload": {"uri": "/public/a/b.txt"}},
    ),
    (
        [{"kind": "x", "payload": {"uri": "/public/**"}}],
        {"kind": "x", "payload": {"uri": "/private/x"}},
    ),
    ([{"kind": "x", "payload": {"__proto__": "a"}}], {"kind": "x", "payload": {"__proto__": "a"}}),
    ([{"kind": "x", "payload": {"toString": "*"}}], {"kind": "x", "payload": {}}),
    # the page's own actions
    (
        [{"kind": "channel/create", "payload": {"channel": "#team-*"}}],
        {"kind": "channel/create", "payload": {"channel": "#team-a"}},
    ),
    (
        [{"kind": "channel/create", "payload": {"channel": "#team-*"}}],
        {"kind": "channel/create", "payload": {"channel": "#ideas"}},
    ),
    (
        [{"kind": "channel/join", "payload": {"channel": "!#secret"}}],
        {"kind": "channel/join", "payload": {"channel": "#secret"}},
    ),
    (
        [{"kind": "!capability/*"}, {"kind": "capability/grant-ack"}],
        {"kind": "mcp/reject", "payload": {"reason": "no"}},
    ),
    # regexes: the gateway decides (JS null) unless another capability settles it
    ([{"kind": "/^chat$/"}], {"kind": "chat"}),
    ([{"kind": "!/^chat$/"}], {"kind": "chat"}),
    ([{"kind": "/^chat$/"}, {"kind": "chat"}], {"kind": "chat"}),
    ([{"kind": "/^chat$/"}, {"kind": "mcp/*"}], {"kind": "mcp/x"}),
    (
        [{"kind": "x", "payload": {"q": "/^SELECT /", "db": "prod"}}],
        {"kind": "x", "payload": {"q": "SELECT 1", "db": "staging"}},
    ),
    ([{"kind": "x", "payload": {"q": "/^SELECT /"}}], {"kind": "x", "payload": {"q": 5}}),
    ([{"kind": "x", "payload": {"q": ["/^a/", "b"]}}], {"kind": "x", "payload": {"q": "b"}}),
    ([{"kind": "x", "payload": {"q": ["/^a/", "b"]}}], {"kind": "x", "payload": {"q": "ab"}}),
    ([{"kind": "/x/", "payload": {"n": 1}}], {"kind": "x", "payload": {"n": 2}}),
]

# Hostile globs (issue 21): a backtracking matcher takes minutes on these (the page froze);
# both automatons answer at once.
ADVERSARIAL: list[Case] = (
    [
        (
            [{"kind": "chat", "payload": {"text": "*a*a*b"}}],
            {"kind": "chat", "payload": {"text": t}},
        )
        for t in ("a" * 4096, "a" * 60_000, "a" * 60_000 + "b", "a" * 30_000 + "/b")
    ]
    + [
        (
            [{"kind": "mcp/request", "payload": {"params": {"name": "*search*"}}}],
            {"kind": "mcp/request", "payload": {"params": {"name": name}}},
        )
        for name in ("search" * 10_000 + "/", "search" * 10_000, "x" * 60_000)
    ]
    + [
        ([{"kind": "**/x"}], {"kind": "a/" * 30_000 + "x"}),
        ([{"kind": "*" + "?*" * 100 + "/"}], {"kind": "a" * 20_000}),
        ([{"kind": "?" * 500}], {"kind": "é" * 500}),
    ]
)

# Generated: every small kind pattern against every small kind, and payload patterns against
# payloads, so that a rule the hand-written cases miss still cannot drift.
KIND_PATTERNS = ["a", "*", "**", "a/*", "a/**", "*/b", "a?", "?/?", "!a/*", "!**", "a*b", "!!a"]
KINDS = ["a", "ab", "a/b", "a/b/c", "b", "/", "a/", "/b", "", "a*b", "axb", "a/xb"]
VALUE_PATTERNS: list[Any] = [
    "v",
    "v*",
    "!v",
    "**",
    "*",
    1,
    1.5,
    True,
    False,
    None,
    ["v", 1],
    {"k": "v"},
    {},
    "",
]
VALUES: list[Any] = [
    "v",
    "vw",
    "w",
    "",
    1,
    1.0,
    1.5,
    True,
    False,
    None,
    {"k": "v"},
    {"k": 1},
    [],
    ["v"],
]


def _filler(rng: random.Random, wildcard: str) -> str:
    """Random text for one glob wildcard (a ``/`` now and then, which only ``**`` takes)."""
    size = 1 if wildcard == "?" else rng.randint(0, 3)
    return "".join(rng.choice("ab/c") for _ in range(size))


def _generated() -> list[Case]:
    cases: list[Case] = [
        ([{"kind": p}], {"kind": k}) for p, k in itertools.product(KIND_PATTERNS, KINDS)
    ]
    for pattern, value in itertools.product(VALUE_PATTERNS, VALUES):
        cases.append(
            ([{"kind": "x", "payload": {"f": pattern}}], {"kind": "x", "payload": {"f": value}})
        )
        cases.append(
            ([{"kind": "x", "payload": {"f": pattern}}], {"kind": "x", "payload": {"g": value}})
        )
    rng = random.Random(14)  # unions of a few capabilities, the same every run
    for _ in range(300):
        caps = [
            {"kind": rng.choice(KIND_PATTERNS), "payload": {"f": rng.choice(VALUE_PATTERNS)}}
            if rng.random() < 0.5
            else {"kind": rng.choice(KIND_PATTERNS)}
            for _ in range(rng.randint(1, 3))
        ]
        cases.append((caps, {"kind": rng.choice(KINDS), "payload": {"f": rng.choice(VALUES)}}))
    for _ in range(600):  # random globs against random values: the two automatons agree
        glob = "".join(rng.choice("ab/*?\né") for _ in range(rng.randint(1, 7)))
        if pattern_type(glob) not in ("glob", "literal"):
            continue
        if rng.random() < 0.5:  # a value written from the glob, wildcards filled at random
            value = "".join(
                t if t not in ("*", "**", "?") else _filler(rng, t) for t in glob_tokens(glob)
            )
        else:
            value = "".join(rng.choice("ab/c\né*?") for _ in range(rng.randint(0, 9)))
        cases.append(([{"kind": glob}], {"kind": value}))
    return cases


CASES = HAND + ADVERSARIAL + _generated()


def _has_regex(caps: list[dict[str, Any]]) -> bool:
    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        if isinstance(value, dict):
            return [s for item in value.values() for s in strings(item)]
        return []

    return any(pattern_type(s.lstrip("!")) == "regex" for s in strings(caps))


async def _js_answers(page: Page, cases: list[Case]) -> list[bool | None]:
    answers: list[bool | None] = await page.evaluate(
        """async (text) => {
            const m = await import("/web/common/capabilities.js");
            return JSON.parse(text).map(([caps, env]) => m.canSend(caps, env));
        }""",
        json.dumps([[caps, env] for caps, env in cases]),  # parsed as the page parses frames
    )
    return answers


async def test_the_page_and_the_gateway_answer_alike(gw: RunningGateway, pages: OpenPage) -> None:
    for caps, _ in CASES:
        validate_capabilities(caps)  # every case is a capability list the gateway accepts
    page = await pages(f"{gw.http}/chat")
    js = await _js_answers(page, CASES)
    python = [can_send(caps, env) for caps, env in CASES]
    drift = [
        (caps, env, py, j)
        for (caps, env), py, j in zip(CASES, python, js, strict=True)
        if j != py and not (j is None and _has_regex(caps))
    ]
    assert drift == [], f"{len(drift)} cases differ, e.g. {drift[:5]}"
    undecided = [case for case, j in zip(CASES, js, strict=True) if j is None]
    assert all(_has_regex(caps) for caps, _ in undecided)
    assert 0 < len(undecided) < 10  # only the regex cases no other capability settles
    assert sum(python) > len(CASES) // 5 and sum(not a for a in python) > len(CASES) // 5


async def test_allows_some_kind(gw: RunningGateway, pages: OpenPage) -> None:
    """``allowsSome(kind)``: whether a control could be allowed at all (its payload aside)."""
    page = await pages(f"{gw.http}/chat")
    answers = await page.evaluate(
        """async () => {
            const { Capabilities } = await import("/web/common/capabilities.js");
            const ask = (caps, kind) => new Capabilities(caps).allowsSome(kind);
            return [
              ask([{kind: "channel/create", payload: {channel: "#team-*"}}], "channel/create"),
              ask([{kind: "!capability/*"}], "channel/create"),
              ask([{kind: ["chat", "channel/join"]}], "channel/create"),
              ask([{kind: "/^channel/"}], "channel/create"),
              ask([], "chat"),
            ];
        }"""
    )
    assert answers == [True, True, False, None, False]
