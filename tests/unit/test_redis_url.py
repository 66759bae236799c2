"""Redis URLs shown to people (logs, errors, ``/health``) never show a credential."""

from __future__ import annotations

import pytest

from hubbub.store.redis import redacted_url

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        (f"redis://alice:{SECRET}@h:6379/0", "redis://***@h:6379/0"),
        (f"redis://:{SECRET}@h:6379/0", "redis://***@h:6379/0"),
        (f"rediss://default:{SECRET}@h:6380/1", "rediss://***@h:6380/1"),
        (f"redis://h:6379/0?password={SECRET}", "redis://h:6379/0?password=***"),
        (
            f"redis://h/0?username=alice&password={SECRET}&db=2",
            "redis://h/0?username=***&password=***&db=2",
        ),
        (f"rediss://h:6380/0?password={SECRET}", "rediss://h:6380/0?password=***"),
        (
            f"unix:///run/redis.sock?password={SECRET}&db=1",
            "unix:///run/redis.sock?password=***&db=1",
        ),
        (f"unix://alice:{SECRET}@/run/redis.sock", "unix://***@/run/redis.sock"),
        (
            f"redis://h/0?client_name=x&auth_token={SECRET}",
            "redis://h/0?client_name=***&auth_token=***",
        ),
        (f"redis://h/0?password={SECRET}#frag", "redis://h/0?password=***"),
    ],
)
def test_every_credential_form_is_hidden(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        "redis://:p@ss/w?rd#x@h:6379/0",  # an unescaped "@", "/", "?" and "#" in the password
        "redis://u:p%40ss@h:6379/0",
        "redis://h:6379/0?password=p@ss",
        "redis://h:6379/0?pass?word=p@ss",
    ],
)
def test_odd_passwords_never_show(url: str) -> None:
    shown = redacted_url(url)
    assert "p@ss" not in shown and "p%40ss" not in shown and "rd#x" not in shown
    assert "ss/w" not in shown
