"""The dashboard over HTTP: the page, who is looking, and the live server-sent event stream.

``GET /dashboard`` serves the page (``web/dashboard/index.html``; its ES modules and stylesheet
come from ``/web/``, see :mod:`hubbub.server.web_assets`). ``GET /dashboard/events`` is a
``text/event-stream``: a ``snapshot`` event on connect, then every ``activity`` event of the
space as it happens, and a ``state`` event (the same shape as the snapshot, without the recent
activity and without the proposals, which change only through the feed's proposal events)
after any batch of events that changed what the panels show, at most every
``STATE_INTERVAL_S``. ``GET /dashboard/proposals/{id}`` answers a proposal's full payload,
which the feed leaves out past ``observe.PAYLOAD_MAX`` (the board loads it when opened).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from aiohttp import web

from hubbub.server.gateway import Gateway
from hubbub.server.http import observe
from hubbub.server.http.access import (
    AccessDenied,
    Viewer,
    as_viewer,
    request_token,
    resolve_viewer,
)
from hubbub.server.json_body import json_body
from hubbub.server.state.activity import Event
from hubbub.server.state.space import SpaceState
from hubbub.server.web_assets import page_response

STATE_INTERVAL_S = 0.2
"""Shortest time between two ``state`` events of one stream."""
KEEPALIVE_S = 15.0
"""A comment line is sent after this long without events (keeps proxies from closing)."""
STREAMS_KEY: web.AppKey[set[asyncio.Task[Any]]] = web.AppKey("dashboard_streams")


def _encode(name: str, data: Any) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + msgspec.json.encode(data) + b"\n\n"


def _changes_state(event: Event, space: SpaceState) -> bool:
    """Whether an event may change what the panels show (chat only when someone sleeps)."""
    if event.get("event") != "message":
        return True
    return any(ch.sleepers for ch in space.channels.values())


class _Stream:
    """One dashboard's event stream."""

    def __init__(self, router: Gateway, viewer: Viewer, resp: web.StreamResponse) -> None:
        self.router = router
        self.viewer = viewer
        self.space = viewer.space
        self.resp = resp
        self.last_state = 0.0

    def _view(self, st: dict[str, Any]) -> dict[str, Any]:
        """A snapshot or state push as this viewer may see it (private channels)."""
        return observe.state_for(self.space, st, self.viewer.id, self.viewer.can_admin)

    async def run(self) -> None:
        router, space = self.router, self.space
        loop = asyncio.get_running_loop()
        queue = router.activity.subscribe()
        try:
            # built right after subscribing, without awaiting: nothing is missed or doubled
            first = self._view(observe.snapshot(router, space, self.viewer.describe()))
            await self.resp.write(_encode("snapshot", first))
            self.last_state = loop.time()
            dirty = False
            while True:
                timeout = KEEPALIVE_S
                if dirty:
                    timeout = max(0.0, self.last_state + STATE_INTERVAL_S - loop.time())
                try:
                    batch = [await asyncio.wait_for(queue.get(), timeout)]
                except TimeoutError:
                    batch = []
                while not queue.empty():
                    batch.append(queue.get_nowait())
                chunks = []
                for event in batch:
                    if event.get("space") != space.id:
                        continue
                    seen = observe.for_viewer(space, event, self.viewer.id, self.viewer.can_admin)
                    if seen is None:
                        continue  # about a private channel this viewer may not see
                    chunks.append(_encode("activity", seen))
                    dirty = dirty or _changes_state(event, space)
                if dirty and loop.time() - self.last_state >= STATE_INTERVAL_S:
                    chunks.append(_encode("state", self._view(observe.state(router, space))))
                    self.last_state = loop.time()
                    dirty = False
                if not chunks and not batch:
                    chunks.append(b": keepalive\n\n")
                if chunks:
                    await self.resp.write(b"".join(chunks))
        finally:
            router.activity.unsubscribe(queue)


def add_dashboard_routes(app: web.Application, key: web.AppKey[Gateway]) -> None:
    """Register ``/dashboard``, ``/dashboard/session``, ``/dashboard/events`` and
    ``/dashboard/proposals/{id}``."""
    app[STREAMS_KEY] = set()

    async def page(request: web.Request) -> web.StreamResponse:
        router = request.app[key]
        try:
            resolve_viewer(router, request, "page")
        except AccessDenied as exc:
            if "text/html" not in request.headers.get("Accept", ""):
                return exc.response()
            # A browser gets the page anyway: it holds no data, and it asks for a token (or
            # finds one it stored) before /dashboard/session and /dashboard/events answer.
            # Without a token that is the normal first step (200); a refused token is not.
            status = 200 if request_token(request) is None else exc.status
            return page_response("dashboard", status, **{"X-Hubbub-Error": exc.error})
        return page_response("dashboard")

    async def session(request: web.Request, router: Gateway, viewer: Viewer) -> web.Response:
        return json_body(viewer.describe())

    async def events(request: web.Request, router: Gateway, viewer: Viewer) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await resp.prepare(request)
        streams = request.app[STREAMS_KEY]
        task = asyncio.current_task()
        assert task is not None
        streams.add(task)
        try:
            await _Stream(router, viewer, resp).run()
        except (ConnectionError, asyncio.CancelledError):
            pass  # the browser went away, or the server is shutting down
        finally:
            streams.discard(task)
        return resp

    async def proposal(request: web.Request, router: Gateway, viewer: Viewer) -> web.Response:
        found = observe.proposal_payload(
            viewer.space, request.match_info["pid"], viewer.id, viewer.can_admin
        )
        if found is None:
            return web.json_response(
                {
                    "error": "unknown_proposal",
                    "message": f"no recent proposal {request.match_info['pid']!r} in space "
                    f"{viewer.space.id!r} (settled long ago, or never made)",
                },
                status=404,
            )
        return web.json_response(found, headers={"Cache-Control": "no-store"})

    async def close_streams(app: web.Application) -> None:
        streams = app[STREAMS_KEY]
        for task in list(streams):
            task.cancel()

    app.on_shutdown.append(close_streams)
    app.router.add_get("/dashboard", page)
    app.router.add_get("/dashboard/", page)
    app.router.add_get("/dashboard/session", as_viewer(key, "page", session))
    app.router.add_get("/dashboard/events", as_viewer(key, "observe", events))
    app.router.add_get("/dashboard/proposals/{pid}", as_viewer(key, "observe", proposal))
