"""Gateway counters, kept as plain integers on the hot path and rendered for Prometheus."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from hubbub.protocol.dialects import DIALECTS


class Metrics:
    """Counts connections, messages in and out, and errors by code."""

    def __init__(self) -> None:
        self.connections: Counter[str] = Counter()
        self.messages_in = 0
        self.messages_out = 0
        self.errors: Counter[str] = Counter()
        self.slow_consumer_disconnects = 0
        self.resends = 0
        """Messages sent again under an id already stored (answered, not delivered twice)."""
        self.cluster_links = 0
        """Follower nodes linked to this gateway while it leads a cluster (docs/cluster.md)."""
        self.connections_refused: Counter[str] = Counter()
        """Connections refused or cut by the listener, by reason (see server/listener.py)."""
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Collector(self))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)


class _Collector(Collector):
    def __init__(self, m: Metrics) -> None:
        self.m = m

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        conns = GaugeMetricFamily(
            "hubbub_connections", "Open WebSocket connections by dialect", labels=["dialect"]
        )
        for dialect in DIALECTS:
            conns.add_metric([dialect], self.m.connections[dialect])
        yield conns
        yield CounterMetricFamily(
            "hubbub_messages_in", "Frames accepted from participants", value=self.m.messages_in
        )
        yield CounterMetricFamily(
            "hubbub_messages_out", "Frames delivered to participants", value=self.m.messages_out
        )
        yield GaugeMetricFamily(
            "hubbub_event_loop_tasks",
            "asyncio tasks alive in the gateway's event loop (a leak shows as growth)",
            value=_tasks(),
        )
        errors = CounterMetricFamily("hubbub_errors", "Errors answered, by code", labels=["code"])
        for code, n in sorted(self.m.errors.items()):
            errors.add_metric([code], n)
        yield errors
        yield CounterMetricFamily(
            "hubbub_slow_consumer_disconnects",
            "Connections closed because their send buffer overflowed",
            value=self.m.slow_consumer_disconnects,
        )
        yield CounterMetricFamily(
            "hubbub_resends",
            "Messages resent under a stored id: answered with the original, not delivered again",
            value=self.m.resends,
        )
        refused = CounterMetricFamily(
            "hubbub_connections_refused",
            "Connections refused at the limits or cut at the request-head timeout, by reason",
            labels=["reason"],
        )
        for reason, n in sorted(self.m.connections_refused.items()):
            refused.add_metric([reason], n)
        yield refused


def _tasks() -> int:
    """Tasks of the running event loop (0 when rendered outside one)."""
    try:
        return len(asyncio.all_tasks())
    except RuntimeError:
        return 0
