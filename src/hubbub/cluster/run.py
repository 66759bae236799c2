"""``hubbub serve --cluster``: one node process, until a signal stops it."""

from __future__ import annotations

import logging

from hubbub import __version__
from hubbub.cluster.app import serve_node
from hubbub.cluster.node import ClusterSettings, Node
from hubbub.process import run_until_signal
from hubbub.server.app import build_app
from hubbub.server.config import EngineSettings, Limits, SpaceConfig
from hubbub.server.gateway import Gateway
from hubbub.server.listener import listen_error
from hubbub.server.state.metrics import Metrics
from hubbub.store.base import Store
from hubbub.store.redis import redacted_url

log = logging.getLogger("hubbub")


def serve_cluster(
    redis_url: str,
    spaces: list[SpaceConfig],
    limits: Limits,
    engines: EngineSettings,
    *,
    host: str,
    port: int,
    node: str | None,
    link_host: str,
    link_port: int,
    advertise: str | None,
    lease_ms: int,
    reuse_port: bool,
) -> None:
    """Run this process as a node of the cluster on ``redis_url``."""
    settings = ClusterSettings(
        redis_url, lease_ms=lease_ms, link_host=link_host, link_port=link_port, advertise=advertise
    )
    if node:
        settings.node = node
    metrics = Metrics()

    def build_router(configs: list[SpaceConfig], store: Store) -> Gateway:
        return Gateway(configs, store, limits, metrics, engine_settings=engines)

    def listening(bound: int) -> None:
        """Said once the node has joined the cluster and its port is bound, not before."""
        log.info(
            "hubbub %s node %s serving ws://%s:%d/ws in the cluster on %s",
            __version__,
            settings.node,
            host,
            bound,
            redacted_url(redis_url),
        )
        log.info("dashboard: http://%s:%d/dashboard", host, bound)
        log.info("chat: http://%s:%d/chat", host, bound)

    async def main() -> None:
        node_ = Node(settings, spaces, build_router, metrics, build_app)
        try:
            await serve_node(node_, limits, host, port, reuse_port, listening)
        except OSError as exc:
            raise listen_error(exc, host, port) from None

    run_until_signal(main, "node")
