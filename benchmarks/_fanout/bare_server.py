"""The fan-out ceiling: a bare aiohttp broadcast server with no validation, routing or storage.

Every text frame received on ``/ws`` is forwarded to every connected client, the sender
included (the hubbub gateway echoes channel messages to their sender too). Two techniques:

* ``write``: build the server frame bytes once (FIN+text opcode ``0x81``, unmasked, 7/16/64-bit
  length, exactly as aiohttp's ``WebSocketWriter`` lays them out) and call
  ``transport.write(frame)`` on every client's transport;
* ``send_str``: ``await ws.send_str(text)`` on every client (the message text is decoded once;
  aiohttp encodes and frames it per client);
* ``batch``: hubbub's technique (``hubbub.server.connection``): the frame bytes built once are
  queued on every client, and at the end of the event-loop turn each client's queued frames
  leave in one ``transport.write`` (joined when there are several), so a burst of messages
  costs one write per client, not one per frame.

``GET /health`` answers 200 once the server listens. Run as a subprocess:
``python bare_server.py --port 8765 --technique write [--loop uvloop]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import struct
from typing import cast

from aiohttp import WSMsgType, web

_PACK_LEN2 = struct.Struct("!BBH").pack
_PACK_LEN3 = struct.Struct("!BBQ").pack


def server_frame(payload: bytes) -> bytes:
    """An unmasked server→client text frame (FIN set), laid out like aiohttp's writer."""
    n = len(payload)
    if n < 126:
        return bytes((0x81, n)) + payload
    if n < 65536:
        return _PACK_LEN2(0x81, 126, n) + payload
    return _PACK_LEN3(0x81, 127, n) + payload


class Broadcaster:
    """Connected clients and the two forwarding techniques."""

    def __init__(self) -> None:
        self.clients: dict[web.WebSocketResponse, asyncio.Transport] = {}
        self._transports: tuple[asyncio.Transport, ...] = ()
        self._sockets: tuple[web.WebSocketResponse, ...] = ()
        self._out: dict[asyncio.Transport, list[bytes]] = {}
        self._scheduled = False

    def add(self, ws: web.WebSocketResponse, transport: asyncio.Transport) -> None:
        self.clients[ws] = transport
        self._refresh()

    def remove(self, ws: web.WebSocketResponse) -> None:
        self.clients.pop(ws, None)
        self._refresh()

    def _refresh(self) -> None:
        self._transports = tuple(self.clients.values())
        self._sockets = tuple(self.clients)

    def forward_write(self, text: str) -> None:
        frame = server_frame(text.encode())
        for transport in self._transports:
            if not transport.is_closing():
                transport.write(frame)

    def forward_batch(self, text: str) -> None:
        frame = server_frame(text.encode())
        for transport in self._transports:
            out = self._out.get(transport)
            if out is None:
                out = self._out[transport] = []
                if not self._scheduled:
                    self._scheduled = True
                    asyncio.get_running_loop().call_soon(self._flush)
            out.append(frame)

    def _flush(self) -> None:
        """One write per client of the frames queued during this loop turn."""
        self._scheduled = False
        queued, self._out = self._out, {}
        for transport, out in queued.items():
            if not transport.is_closing():
                transport.write(out[0] if len(out) == 1 else b"".join(out))

    async def forward_send_str(self, text: str) -> None:
        for ws in self._sockets:
            if not ws.closed:
                with contextlib.suppress(ConnectionError):
                    await ws.send_str(text)


async def health(_request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def make_app(technique: str) -> web.Application:
    hub = Broadcaster()

    async def ws_handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False, max_msg_size=1 << 20)
        await ws.prepare(request)
        # a stream transport (uvloop's does not subclass asyncio.Transport)
        transport = cast(asyncio.Transport, request.transport)
        hub.add(ws, transport)
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                if technique == "write":
                    hub.forward_write(msg.data)
                elif technique == "batch":
                    hub.forward_batch(msg.data)
                else:
                    await hub.forward_send_str(msg.data)
        finally:
            hub.remove(ws)
        return ws

    app = web.Application()
    app.router.add_get("/ws", ws_handler)
    app.router.add_get("/health", health)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--technique", choices=("write", "send_str", "batch"), default="write")
    parser.add_argument(
        "--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the event loop"
    )
    args = parser.parse_args()
    loop: asyncio.AbstractEventLoop | None = None
    if args.loop == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    web.run_app(
        make_app(args.technique),
        host=args.host,
        port=args.port,
        access_log=None,
        print=None,
        loop=loop,
    )


if __name__ == "__main__":
    main()
