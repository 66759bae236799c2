"""The exceptions of the hubbub SDK: one class per thing a user must handle.

```
HubbubError
├── ConnectionFailed (ConnectionError)   could not connect, or gave up reconnecting
│   └── AuthRefused                      the gateway refused the join (token, space, id)
├── NotConnected                         used before connect() or after disconnect()
├── GatewayError                         the gateway answered something we sent with system/error
│   └── CapabilityDenied (PermissionError)  not allowed to send it (checked locally or remotely)
├── RequestTimeout (TimeoutError)        no answer to a request or proposal in time
├── ProposalRejected                     a proposal was answered with mcp/reject
├── ProposalWithdrawn                    we withdrew our own proposal while waiting for it
├── RequestFailed                        the target answered with a JSON-RPC error
└── ToolError                            a tool call returned ``isError: true``
    └── InvalidArguments                 ... because its arguments failed the tool's schema
```

A tool may also raise :class:`ToolError` itself: the participant then answers the call with an
MCP error result carrying just the message (any other exception is answered the same way, with
the exception's message).
"""

from __future__ import annotations

from typing import Any


class HubbubError(Exception):
    """Base class of every exception the hubbub SDK raises on purpose."""


class ConnectionFailed(HubbubError, ConnectionError):
    """Could not connect to the gateway, or gave up reconnecting (the message says why)."""


class AuthRefused(ConnectionFailed):
    """The gateway refused the join: unknown token, wrong space, illegal id, ..."""

    def __init__(self, message: str, code: str = "auth_failed") -> None:
        super().__init__(message)
        self.code = code


class NotConnected(HubbubError):
    """The client is not connected: call ``connect()`` (or use ``async with``) first."""


class GatewayError(HubbubError):
    """The gateway answered an envelope we sent with ``system/error``."""

    def __init__(self, code: str, message: str, payload: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.payload = payload or {}


class CapabilityDenied(GatewayError, PermissionError):
    """This participant may not send that envelope; ask an admin for a ``capability/grant``."""

    def __init__(self, message: str, kind: str = "", payload: dict[str, Any] | None = None) -> None:
        super().__init__("capability_violation", message, payload)
        self.kind = kind

    def __str__(self) -> str:
        """The message alone (it already names the kind and the fix)."""
        return self.message


class RequestTimeout(HubbubError, TimeoutError):
    """No response to a request (or no fulfilment of a proposal) within its timeout."""


class ProposalRejected(HubbubError):
    """A participant answered our proposal with ``mcp/reject``."""

    def __init__(self, by: str, reason: str, proposal_id: str = "") -> None:
        super().__init__(f"Proposal rejected by {by}: {reason}")
        self.by = by
        self.reason = reason
        self.proposal_id = proposal_id


class ProposalWithdrawn(HubbubError):
    """The proposer withdrew its own proposal (``Participant.withdraw``) while waiting for it."""

    def __init__(self, proposal_id: str, reason: str) -> None:
        super().__init__(f"Proposal {proposal_id} withdrawn: {reason}")
        self.proposal_id = proposal_id
        self.reason = reason


class RequestFailed(HubbubError):
    """The target answered an MCP request with a JSON-RPC error (unknown tool, method, ...)."""

    def __init__(self, code: int, message: str, data: Any = None, target: str = "") -> None:
        who = f"{target} answered " if target else ""
        super().__init__(f"{who}error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.target = target


class ToolError(HubbubError):
    """A tool failed: raised by a tool to report a clean message, or by ``call_tool`` when the
    result has ``isError: true`` (``result`` is then the ``CallToolResult``)."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.result = result


class InvalidArguments(ToolError):
    """Tool arguments that do not match the tool's input schema (the message lists why)."""


__all__ = [
    "AuthRefused",
    "CapabilityDenied",
    "ConnectionFailed",
    "GatewayError",
    "HubbubError",
    "InvalidArguments",
    "NotConnected",
    "ProposalRejected",
    "ProposalWithdrawn",
    "RequestFailed",
    "RequestTimeout",
    "ToolError",
]
