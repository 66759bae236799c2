"""Where a gateway listens unless told otherwise (shared by the server, the SDK and the CLI)."""

from __future__ import annotations

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_GATEWAY = f"ws://{LOOPBACK}:{DEFAULT_PORT}/ws"
