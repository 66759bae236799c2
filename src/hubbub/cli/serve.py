"""``hubbub serve``: run the gateway (one process, several workers, or a cluster node)."""

from __future__ import annotations

import ipaddress
import logging
import resource
from pathlib import Path

import click

from hubbub import __version__
from hubbub.cli.options import log_level_option
from hubbub.defaults import DEFAULT_PORT, LOOPBACK
from hubbub.process import run_until_signal, setup_logging
from hubbub.server.config import (
    ConfigError,
    Limits,
    engine_settings_from_env,
    limits_from_env,
    load_space,
)


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _is_name(host: str) -> bool:
    """Whether ``--host`` is a host name (not an address such as 0.0.0.0 or ::1)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return False
    except ValueError:
        return True


@click.command()
@click.option("--host", default=None, help="Interface to bind [default: 127.0.0.1].")
@click.option(
    "--port",
    default=DEFAULT_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on; one that is taken is an error (0: any free port).",
)
@click.option(
    "--space-config",
    "space_configs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A space.yaml (repeat for several spaces). Without one: open mode on loopback.",
)
@click.option(
    "--data-dir",
    default=".hubbub",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the SQLite history lives.",
)
@click.option(
    "--store",
    type=click.Choice(["sqlite", "memory"]),
    default="sqlite",
    show_default=True,
    help="History store; memory forgets everything on exit.",
)
@click.option(
    "--durability",
    type=click.Choice(["process", "power"]),
    default="process",
    show_default=True,
    help="What an acknowledged message survives: a kill -9 of the gateway (process), or "
    "also a power loss (power: an fsync per group commit, slower).",
)
@click.option(
    "--rate-limit", type=float, default=None, help="Messages/s per participant (0 = off) [20]."
)
@click.option("--rate-burst", type=int, default=None, help="Burst allowance [40].")
@click.option("--max-frame-bytes", type=int, default=None, help="Largest frame accepted [262144].")
@click.option("--history-on-join", type=int, default=None, help="Messages sent on join [50].")
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="A web origin (http://host:port) besides the gateway's own whose pages may open /ws "
    "and POST (repeat for several).",
)
@click.option(
    "--allowed-hosts",
    "allowed_hosts",
    multiple=True,
    metavar="HOSTS",
    help="Names besides localhost and IP addresses that requests may be addressed to "
    "(comma-separated or repeated; .example.com: it and its subdomains; *: any). "
    "Others get 421, which stops DNS rebinding.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(0),
    default=None,
    help="Connections served at once; more get 503 [0: derived from `ulimit -n`].",
)
@click.option(
    "--max-connections-per-ip",
    type=click.IntRange(0),
    default=None,
    help="Connections one address may hold [0: half of --max-connections].",
)
@click.option(
    "--cluster",
    "cluster_url",
    metavar="redis://HOST:PORT/DB | redis+cluster://HOST:PORT[,HOST:PORT...]",
    default=None,
    envvar="HUBBUB_CLUSTER",
    help="Run as one node of a cluster sharing its spaces through this Redis (docs/cluster.md).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Node processes sharing --port on this machine (needs --cluster).",
)
@click.option("--node", "node_name", default=None, help="This node's name [hostname-pid].")
@click.option(
    "--link-host",
    default=LOOPBACK,
    show_default=True,
    help="Interface where the nodes reach each other (use a private one across machines).",
)
@click.option(
    "--link-port", type=click.IntRange(0, 65535), default=0, help="Port for the nodes [any free]."
)
@click.option(
    "--advertise", default=None, help="Host the other nodes use to reach --link-host [same]."
)
@click.option(
    "--lease-ms",
    type=click.IntRange(500, 60_000),
    default=3000,
    show_default=True,
    help="Leadership lease: a dead leader is replaced within it.",
)
@click.option(
    "--reuse-port",
    is_flag=True,
    hidden=True,
    help="Share --port with the other workers (set by --workers).",
)
@log_level_option("info")
def serve(
    host: str | None,
    port: int,
    space_configs: tuple[Path, ...],
    data_dir: Path,
    store: str,
    durability: str,
    rate_limit: float | None,
    rate_burst: int | None,
    max_frame_bytes: int | None,
    history_on_join: int | None,
    allow_origins: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    max_connections: int | None,
    max_connections_per_ip: int | None,
    cluster_url: str | None,
    workers: int,
    node_name: str | None,
    link_host: str,
    link_port: int,
    advertise: str | None,
    lease_ms: int,
    reuse_port: bool,
    log_level: str,
) -> None:
    """Run the gateway: WebSocket at /ws, HTTP API, metrics."""
    if workers > 1:
        if cluster_url is None:
            raise click.ClickException(
                "--workers needs --cluster redis://HOST:PORT/DB: the processes share their "
                "spaces through Redis (docs/cluster.md)"
            )
        import asyncio

        from hubbub.cluster.node import RedisUnreachable, check_redis
        from hubbub.cluster.workers import run_workers

        try:  # before any worker starts: N workers would each fail, restarted for ever
            asyncio.run(check_redis(cluster_url))
        except (RedisUnreachable, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        raise SystemExit(run_workers(workers, link_port))
    from hubbub.server.app import make_router
    from hubbub.server.config import open_space
    from hubbub.server.memory_report import install_from_env as install_memory_report

    setup_logging(log_level)
    try:
        install_memory_report()  # HUBBUB_TRACEMALLOC: opt-in, SIGUSR1 logs where memory grew
        limits = limits_from_env(Limits())
        if rate_limit is not None:
            limits.rate_per_s = rate_limit
        if rate_burst is not None:
            limits.rate_burst = rate_burst
        if max_frame_bytes is not None:
            limits.max_frame_bytes = max_frame_bytes
        if history_on_join is not None:
            limits.history_on_join = history_on_join
        if allow_origins:
            limits.allowed_origins = list(allow_origins)
        if allowed_hosts:
            limits.allowed_hosts = [h for arg in allowed_hosts for h in arg.split(",") if h]
        if host is not None and _is_name(host):
            limits.allowed_hosts.append(host)  # the name the gateway is bound to answers
        if max_connections is not None:
            limits.max_connections = max_connections
        if max_connections_per_ip is not None:
            limits.max_connections_per_ip = max_connections_per_ip
        limits.validate()
        spaces = [load_space(p) for p in space_configs] or [open_space()]
        engines = engine_settings_from_env()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    ids = [s.space for s in spaces]
    if len(set(ids)) != len(ids):
        raise click.ClickException(f"two space configs declare the same space id: {ids}")
    bind = host or LOOPBACK
    open_ids = [s.space for s in spaces if s.open]
    if open_ids and host is not None and host not in (LOOPBACK, "localhost", "::1"):
        click.echo(
            f"warning: open-mode space(s) {open_ids} accept anyone, and you bound {host}",
            err=True,
        )
    _raise_fd_limit()
    if cluster_url is not None:
        from hubbub.cluster.run import serve_cluster

        serve_cluster(
            cluster_url,
            spaces,
            limits,
            engines,
            host=bind,
            port=port,
            node=node_name,
            link_host=link_host,
            link_port=link_port,
            advertise=advertise,
            lease_ms=lease_ms,
            reuse_port=reuse_port,
        )
        return
    router = make_router(
        spaces,
        data_dir=None if store == "memory" else data_dir,
        limits=limits,
        engines=engines,
        durability="power" if durability == "power" else "process",
    )
    mode = f"open mode, space {open_ids[0]!r}" if open_ids else f"spaces {ids}"
    where = "memory" if store == "memory" else str(data_dir / "hubbub.db")

    def listening(bound: int) -> None:
        """Said once the port is bound, not before."""
        log = logging.getLogger("hubbub")
        log.info(
            "hubbub %s serving ws://%s:%d/ws (%s), history in %s",
            __version__,
            bind,
            bound,
            mode,
            where,
        )
        log.info("dashboard: http://%s:%d/dashboard", bind, bound)
        log.info("chat: http://%s:%d/chat", bind, bound)

    async def serve_until_signalled() -> None:
        from hubbub.server.app import serve_forever
        from hubbub.server.listener import listen_error
        from hubbub.store.base import StoreError

        try:
            await serve_forever(router, bind, port, listening=listening)
        except StoreError as exc:
            raise click.ClickException(str(exc)) from None
        except OSError as exc:
            raise listen_error(exc, bind, port) from None

    run_until_signal(serve_until_signalled, "gateway")
