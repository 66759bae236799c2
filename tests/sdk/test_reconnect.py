"""The reconnect rules without a gateway: each way a connection ends, and the step after it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hubbub.errors import AuthRefused, ConnectionFailed
from hubbub.sdk.options import ClientOptions
from hubbub.sdk.reconnect import Backoff, Dial, GiveUp, ReconnectPolicy, Step

A, B, C = "ws://a:1/ws", "ws://b:1/ws", "ws://c:1/ws"
DOWN = ConnectionFailed("could not connect")
REFUSED = AuthRefused("bad token", "auth_failed")


def policy(*urls: str, last: str | None = None, **options: object) -> ReconnectPolicy:
    opts = ClientOptions(
        participant_id="alice", gateway=list(urls), reconnect_jitter=0.0, **options
    )  # type: ignore[arg-type]
    return ReconnectPolicy(opts, last, lambda: 0.5)


def dropped(p: ReconnectPolicy, url: str, *, ready: bool = True, refused: bool = False) -> Step:
    """The step after a connection that got to READY (unless ``ready=False``) closed."""
    return p.ended(url, None, "closed", first=False, reached_ready=ready, refused=refused)


def failed(
    p: ReconnectPolicy, url: str, exc: ConnectionFailed = DOWN, *, first: bool = False
) -> Step:
    return p.ended(url, exc, str(exc), first=first, reached_ready=False, refused=False)


def test_a_first_connect_tries_each_url_once_then_fails_with_every_reason() -> None:
    p = policy(A, B)
    assert p.first() == A
    assert failed(p, A, first=True) == Dial(B)
    step = failed(p, B, first=True)
    assert isinstance(step, GiveUp) and not step.report
    assert "any of the 2 gateways" in str(step.failure) and A in str(step.failure)


def test_a_first_connect_to_one_url_fails_with_its_own_error() -> None:
    p = policy(A)
    p.first()
    assert failed(p, A, first=True) == GiveUp(DOWN)


def test_rounds_start_with_the_last_ready_url_and_back_off_exponentially() -> None:
    p = policy(A, B, C, last=B, reconnect_delay=1.0, max_reconnect_delay=3.0)
    assert p.first() == B
    assert dropped(p, B) == Dial(C)  # a drop moves on at once
    assert failed(p, C) == Dial(A)
    assert failed(p, A) == Backoff(1, 1.0, str(DOWN))
    assert p.next_round() == B
    assert failed(p, B) == Dial(C) and failed(p, C) == Dial(A)
    assert failed(p, A) == Backoff(2, 2.0, str(DOWN))
    assert p.next_round() == B
    assert failed(p, B) == Dial(C) and failed(p, C) == Dial(A)
    assert failed(p, A) == Backoff(3, 3.0, str(DOWN))  # capped


def test_reaching_ready_resets_the_attempts() -> None:
    p = policy(A, reconnect_delay=1.0)
    p.first()
    assert dropped(p, A) == Backoff(1, 1.0, "closed")
    p.next_round()
    assert failed(p, A) == Backoff(2, 2.0, str(DOWN))
    p.next_round()
    assert dropped(p, A) == Backoff(1, 1.0, "closed")


def test_giving_up_after_max_attempts_is_reported() -> None:
    p = policy(A, max_reconnect_attempts=2)
    p.first()
    assert isinstance(dropped(p, A), Backoff)
    p.next_round()
    assert isinstance(failed(p, A), Backoff)
    p.next_round()
    step = failed(p, A)
    assert isinstance(step, GiveUp) and step.report
    assert "after 2 attempts" in str(step.failure)


def test_without_reconnect_a_drop_ends_the_client() -> None:
    p = policy(A, B, reconnect=False)
    p.first()
    step = dropped(p, A)
    assert isinstance(step, GiveUp) and "reconnect=False" in str(step.failure)


def test_a_close_code_that_forbids_retrying_ends_the_client() -> None:
    p = policy(A, B)
    p.first()
    step = dropped(p, A, refused=True)
    assert isinstance(step, GiveUp) and "is not retried" in str(step.failure)
    first = policy(A, B)
    first.first()
    refused_first = first.ended(A, DOWN, "x", first=True, reached_ready=False, refused=True)
    assert refused_first == GiveUp(DOWN)  # connect() gets the reason itself


def test_a_round_of_refusals_gives_up_with_the_refusal() -> None:
    p = policy(A, B)
    p.first()
    assert dropped(p, A) == Dial(B)
    p2 = policy(A, B)
    p2.first()
    assert failed(p2, A, REFUSED) == Dial(B)
    assert failed(p2, B, REFUSED) == GiveUp(REFUSED, report=True)


@given(
    n=st.integers(1, 4),
    outcomes=st.lists(st.sampled_from(["down", "ready", "refused-auth"]), min_size=1, max_size=40),
)
def test_every_step_is_legal_whatever_happens(n: int, outcomes: list[str]) -> None:
    urls = [f"ws://g{i}:1/ws" for i in range(n)]
    p = policy(*urls, reconnect_delay=0.5, max_reconnect_delay=4.0)
    url = p.first()
    tried: list[str] = [url]  # this round's URLs
    for outcome in outcomes:
        if outcome == "ready":
            step = dropped(p, url)
            tried = [url]
        else:
            step = failed(p, url, REFUSED if outcome == "refused-auth" else DOWN)
        if isinstance(step, Dial):
            assert step.url in urls and step.url not in tried  # each URL once per round
            url = step.url
            tried.append(url)
        elif isinstance(step, Backoff):
            assert 0 < step.delay <= 4.0 and step.attempt == p.attempt >= 1
            url = p.next_round()
            tried = [url]
        else:
            assert isinstance(step.failure, AuthRefused)  # reconnect=True: only refusals end it
            assert step.report
            return
