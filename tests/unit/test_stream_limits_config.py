"""The stream allowance's settings: defaults, environment overrides, refusals naming the key."""

from __future__ import annotations

import pytest

from hubbub.server.config import ConfigError, Limits, limits_from_env


def test_stream_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUBBUB_STREAM_RATE_PER_S", "1000")
    monkeypatch.setenv("HUBBUB_STREAM_RATE_BURST", "2000")
    monkeypatch.setenv("HUBBUB_STREAM_BYTES_PER_S", "0")
    lim = limits_from_env()
    assert (lim.stream_rate_per_s, lim.stream_rate_burst, lim.stream_bytes_per_s) == (
        1000.0,
        2000,
        0.0,
    )
    assert lim.stream_bytes_burst == Limits().stream_bytes_burst


@pytest.mark.parametrize(
    "field", ["stream_rate_per_s", "stream_rate_burst", "stream_bytes_per_s", "stream_bytes_burst"]
)
def test_a_negative_stream_limit_is_refused_by_name(field: str) -> None:
    lim = Limits()
    setattr(lim, field, -1)
    with pytest.raises(ConfigError, match=field):
        lim.validate()
