"""Which answer belongs to which request of ours, without a gateway (sdk/correlation.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.envelope import Envelope
from hubbub.sdk.correlation import OpenRequests, Pending

ME = "agent"


def response(
    sender: str,
    cid: str | None,
    payload_id: str = "x",
    to: list[str] | None = None,
    channel: str | None = None,
) -> Envelope:
    return Envelope(
        kind="mcp/response",
        from_=sender,
        to=[ME] if to is None else to,
        channel=channel,
        correlation_id=[cid] if cid else None,
        payload={"jsonrpc": "2.0", "id": payload_id, "result": {}},
    )


def opened(*entries: Pending) -> OpenRequests:
    requests = OpenRequests()
    for entry in entries:
        requests.open(entry)
    return requests


def test_a_response_quoting_the_request_id_answers_it_once() -> None:
    requests = opened(Pending("t1", "request", ["calc"], "tools/call"))
    assert requests.response(response("calc", "t1"), ME) is not None
    assert requests.response(response("calc", "t1"), ME) is None  # answered: closed
    assert len(requests) == 0


def test_a_response_without_correlation_matches_by_payload_id_from_a_target_only() -> None:
    requests = opened(Pending("t1", "request", ["calc"], "tools/call"))
    assert requests.response(response("mallory", None, payload_id="t1"), ME) is None
    assert requests.response(response("calc", None, payload_id="t1", to=["bob"]), ME) is None
    assert requests.response(response("calc", None, payload_id="t1"), ME) is not None


def test_the_fulfilment_of_our_proposal_answers_it() -> None:
    requests = opened(Pending("p1", "proposal", ["calc"], "tools/call", "#general"))
    fulfilment = Envelope(
        kind="mcp/request", id="f1", from_="human", to=["calc"], correlation_id=["p1"]
    )
    requests.request_seen(fulfilment)
    # calc answers the human's fulfilment; the gateway shows the answer to us too
    answer = requests.response(response("calc", "f1", payload_id="zzz", to=["human"]), ME)
    assert answer is not None and answer.token == "p1"
    assert requests.proposals() == []


def test_a_proposal_is_answered_by_payload_id_or_as_the_only_one_waiting_on_that_target() -> None:
    requests = opened(Pending("p1", "proposal", ["calc"], "tools/call"))
    by_id = requests.response(response("calc", "unknown", payload_id="p1", to=["human"]), ME)
    assert by_id is not None and by_id.token == "p1"
    requests = opened(
        Pending("p1", "proposal", ["calc"], "m"), Pending("p2", "proposal", ["calc"], "m")
    )
    assert requests.response(response("calc", "f9", to=["human"]), ME) is None  # ambiguous
    requests.close("p2")
    only = requests.response(response("calc", "f9", to=["human"]), ME)
    assert only is not None and only.token == "p1"
    assert requests.response(response("calc", "f9", to=["human"], channel="#general"), ME) is None


def test_rejections_and_refusals_close_what_they_name() -> None:
    requests = opened(
        Pending("p1", "proposal", ["calc"], "m"), Pending("t1", "request", ["calc"], "m")
    )
    reject = Envelope(kind="mcp/reject", from_="human", correlation_id=["t1", "p1"])
    assert [p.token for p in requests.rejected(reject, lambda pid, p: True)] == [
        "p1"
    ]  # a request is not rejected
    error = Envelope(kind="system/error", correlation_id=["t1", "nope"])
    assert [p.token for p in requests.refused(error)] == ["t1"]
    assert len(requests) == 0


def test_one_fulfilment_at_a_time_per_proposal() -> None:
    requests = opened(Pending("f1", "fulfilment", ["calc"], "m", proposal="p1"))
    assert requests.fulfilling("p1") and not requests.fulfilling("p2")
    requests.close("f1")
    assert not requests.fulfilling("p1")


@given(
    st.lists(
        st.tuples(st.sampled_from(["request", "proposal"]), st.sampled_from(["calc", "db"])),
        min_size=1,
        max_size=8,
    ),
    st.data(),
)
def test_every_response_answers_at_most_one_entry_and_each_entry_once(
    entries: list[tuple[Any, str]], data: st.DataObject
) -> None:
    requests = opened(*(Pending(f"t{i}", kind, [t], "m") for i, (kind, t) in enumerate(entries)))
    answered: list[str] = []
    for _ in range(20):
        i = data.draw(st.integers(0, len(entries) - 1))
        sender = data.draw(st.sampled_from(["calc", "db", "mallory"]))
        cid = data.draw(st.sampled_from([f"t{i}", None, "other"]))
        match = requests.response(response(sender, cid, f"t{i}"), ME)
        if match is not None:
            assert match.token not in answered
            assert sender in match.targets  # only from a target, whatever the correlation
            answered.append(match.token)
    assert len(requests) == len(entries) - len(answered)


def test_a_forged_response_from_a_bystander_answers_nothing() -> None:
    """Issue 21 item 5: the correlation id is not enough; the responder must be addressed."""
    requests = opened(Pending("t1", "request", ["calc"], "tools/call"))
    assert requests.response(response("mallory", "t1"), ME) is None
    assert requests.get("t1") is not None  # still waiting for calc
    assert requests.response(response("calc", "t1"), ME) is not None


def test_a_forged_answer_to_our_proposal_counts_only_from_its_targets() -> None:
    requests = opened(Pending("p1", "proposal", ["calc"], "tools/call", "#general"))
    assert requests.response(response("mallory", "p1", payload_id="p1", to=["agent"]), ME) is None
    fake = Envelope(
        kind="mcp/request", id="f1", from_="mallory", to=["mallory"], correlation_id=["p1"]
    )
    requests.request_seen(fake)  # a "fulfilment" mallory answers itself
    assert requests.response(response("mallory", "f1", to=["mallory"]), ME) is None
    assert requests.proposals() == ["p1"]
    real = Envelope(kind="mcp/request", id="f2", from_="human", to=["calc"], correlation_id=["p1"])
    requests.request_seen(real)
    answer = requests.response(response("calc", "f2", to=["human"]), ME)
    assert answer is not None and answer.token == "p1"


def test_a_reject_counts_only_from_an_addressee_or_one_who_may_fulfil() -> None:
    requests = opened(Pending("p1", "proposal", ["calc"], "tools/call"))

    def operator(pid: str, pending: Pending) -> bool:
        return pid == "human"

    forged = Envelope(kind="mcp/reject", from_="mallory", correlation_id=["p1"])
    assert requests.rejected(forged, operator) == []
    assert requests.proposals() == ["p1"]
    by_human = Envelope(kind="mcp/reject", from_="human", correlation_id=["p1"])
    assert [p.token for p in requests.rejected(by_human, operator)] == ["p1"]
    requests = opened(Pending("p2", "proposal", ["calc"], "tools/call"))
    by_target = Envelope(kind="mcp/reject", from_="calc", correlation_id=["p2"])
    assert [p.token for p in requests.rejected(by_target, operator)] == ["p2"]
