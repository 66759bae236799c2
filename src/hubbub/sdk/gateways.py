"""A client's list of gateway URLs: how it is written, checked, and the order of a round.

One URL, a sequence of URLs, or one string of comma-separated URLs
(``"ws://a:8080/ws,ws://b:8080/ws"``) all name the gateways a client may use; the client tries
them in :func:`next_urls` order (see ``docs/sdk.md``, "Several gateways and failover").
"""

from __future__ import annotations

from collections.abc import Sequence

from websockets.exceptions import InvalidURI
from websockets.uri import parse_uri

from hubbub.defaults import DEFAULT_GATEWAY

SEPARATOR = ","
"""Separates the URLs of a gateway list written as one string."""


def parse_gateways(value: str | Sequence[str]) -> tuple[str, ...]:
    """The gateway URLs that ``value`` names, checked; ``ValueError`` names a bad entry and
    the fix."""
    if not isinstance(value, str | Sequence):
        raise ValueError(
            f"gateway {value!r} is neither a URL nor a list of URLs: give e.g. {DEFAULT_GATEWAY!r}"
        )
    parts = [value] if isinstance(value, str) else list(value)
    if not parts or parts == [""]:
        raise ValueError(f"gateway lists no URL: give one, e.g. {DEFAULT_GATEWAY!r}")
    urls: list[str] = []
    for part in parts:
        if not isinstance(part, str):
            raise ValueError(f"gateway entry {part!r} is not a string: give WebSocket URLs")
        for raw in part.split(SEPARATOR):
            url = raw.strip()
            if not url:
                raise ValueError(
                    f"gateway {_written(value)!r} has an empty entry: separate URLs with one "
                    f"comma and no trailing comma, e.g. 'ws://a:8080/ws,ws://b:8080/ws'"
                )
            _check_url(url)
            if url in urls:
                raise ValueError(f"gateway {url!r} is listed twice: name each URL once")
            urls.append(url)
    return tuple(urls)


def next_urls(urls: Sequence[str], last_ok: str | None) -> list[str]:
    """The order of one connect round: every URL once, starting with ``last_ok`` (the one
    last connected, so a working gateway is kept) and going on in list order, wrapping round;
    list order when ``last_ok`` is ``None`` or not in the list."""
    if last_ok is None or last_ok not in urls:
        return list(urls)
    start = list(urls).index(last_ok)
    return [*urls[start:], *urls[:start]]


def join_gateways(urls: Sequence[str]) -> str:
    """The one-string form of a gateway list (one URL stays as it is)."""
    return SEPARATOR.join(urls)


def _written(value: str | Sequence[str]) -> str:
    return value if isinstance(value, str) else join_gateways([str(v) for v in value])


def _check_url(url: str) -> None:
    if url.startswith(("http://", "https://")):
        hint = "ws" + url.removeprefix("http")
        raise ValueError(f"gateway {url!r} must be a WebSocket URL: use {hint!r}")
    if not url.startswith(("ws://", "wss://")):
        raise ValueError(
            f"gateway {url!r} is not a WebSocket URL: use one like {DEFAULT_GATEWAY} "
            "(several: separate them with commas)"
        )
    if any(c.isspace() for c in url):
        raise ValueError(f"gateway {url!r} contains a space: remove it")
    try:
        parse_uri(url)
    except InvalidURI as exc:
        raise ValueError(f"gateway {url!r} is not a valid URL ({exc.msg}): fix it") from None
    except ValueError as exc:  # a port that is not a number, a broken IPv6 address
        raise ValueError(f"gateway {url!r} is not a valid URL ({exc}): fix it") from None


__all__ = ["SEPARATOR", "join_gateways", "next_urls", "parse_gateways"]
