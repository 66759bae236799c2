"""The tools an agent's model may call, and running the calls it makes.

:class:`ToolCatalog` joins the tools discovered on other participants
(:class:`~hubbub.sdk.discovery.ToolDirectory`) and the agent's own (its
:class:`~hubbub.sdk.Participant`'s), under provider-safe names (``participant__tool``) that
map back to ``participant/tool``. :meth:`ToolCatalog.run` executes one tool call: the agent's
own tool in process, another participant's through ``mcp_request`` (a proposal a human may
approve when only that is allowed). A failing tool is an error *result* the model reads,
never an exception.
"""

from __future__ import annotations

import json
import logging

import mcp.types as mt

from hubbub.errors import (
    CapabilityDenied,
    HubbubError,
    NotConnected,
    ProposalRejected,
    RequestTimeout,
)
from hubbub.llm.base import Message, ToolCall, ToolSpec
from hubbub.sdk.agent_config import AgentConfig
from hubbub.sdk.discovery import DiscoveredTool, ToolDirectory
from hubbub.sdk.participant import Participant
from hubbub.sdk.tool_names import encode_tool_name
from hubbub.sdk.tools import Tool, result_text

log = logging.getLogger("hubbub.agent")


class ToolCatalog:
    """Every tool one agent's model may call, by provider-safe name."""

    def __init__(self, participant: Participant, directory: ToolDirectory, config: AgentConfig):
        self.participant = participant
        self.directory = directory
        """Tools discovered on other participants."""
        self.config = config

    @property
    def me(self) -> str:
        """The agent's participant id (its own tools are ``<id>/<tool>``)."""
        return self.participant.id

    def specs(self) -> list[ToolSpec]:
        """The tools offered to the model now: discovered ones, then the agent's own."""
        me = self.me
        own = [
            ToolSpec(
                name=self.directory.names.name_for(me, t.name),
                description=f"{me}/{t.name}: {t.description or '(no description)'} (my own tool)",
                parameters=t.input_schema or {"type": "object"},
                display_name=f"{me}/{t.name}",
            )
            for t in self.participant.tools.values()
        ]
        return self.directory.specs() + own

    def label(self, provider_name: str) -> str:
        """``participant/tool`` for a provider-safe name (the name itself if unknown)."""
        try:
            participant, tool = self.directory.names.resolve(provider_name)
        except KeyError:
            return provider_name
        return f"{participant}/{tool}"

    def tool_name(self, name: str) -> str:
        """The provider-safe name of ``participant/tool`` (a provider-safe name, which never
        holds a ``/``, is returned as it is)."""
        participant, slash, tool = name.partition("/")
        if not slash:
            return name
        known = (
            tool in self.participant.tools
            if participant == self.me
            else any(t.name == tool for t in self.directory.of(participant))
        )
        if known:
            return self.directory.names.name_for(participant, tool)
        return encode_tool_name(participant, tool)  # unknown: not remembered

    async def run(self, call: ToolCall) -> Message:
        """Execute one of the model's tool calls; never raises for a failing tool (the model
        reads the failure as the call's result)."""
        if call.error is not None:
            return Message.tool_result(call, f"Invalid call: {call.error}", is_error=True)
        own = self._own_tool(call.name)
        if own is not None:
            return await self._run_own(call, own)
        tool = self.directory.resolve(call.name)
        if tool is None:
            offered = ", ".join(s.display_name for s in self.specs()) or "none"
            wanted = self.label(call.name)
            log.warning("%s: the model called an unknown tool %r", self.me, wanted)
            return Message.tool_result(
                call, f"Unknown tool {wanted!r}. Tools available now: {offered}", is_error=True
            )
        return await self._run_remote(call, tool)

    def _own_tool(self, provider_name: str) -> Tool | None:
        try:
            participant, name = self.directory.names.resolve(provider_name)
        except KeyError:
            return None
        return self.participant.tools.get(name) if participant == self.me else None

    async def _run_own(self, call: ToolCall, tool: Tool) -> Message:
        log.info("%s: calling its own tool %s %s", self.me, tool.name, call.arguments)
        try:
            result = await tool.call(call.arguments)
        except Exception as exc:
            return Message.tool_result(call, str(exc) or type(exc).__name__, is_error=True)
        return Message.tool_result(call, result_content(result), is_error=bool(result.is_error))

    async def _run_remote(self, call: ToolCall, tool: DiscoveredTool) -> Message:
        params = {"name": tool.name, "arguments": call.arguments}
        payload = {"method": "tools/call", "params": params}
        probe = {"jsonrpc": "2.0", "id": "probe", **payload}
        direct = self.participant.can_send({"kind": "mcp/request", "payload": probe})
        timeout = self.config.tool_timeout if direct else self.config.proposal_timeout
        how = "directly" if direct else "as a proposal for a human to approve"
        log.info("%s: calling %s %s %s", self.me, tool.qualified, call.arguments, how)
        try:
            raw = await self.participant.mcp_request(tool.participant, payload, timeout)
        except ProposalRejected as exc:
            text = f"{exc.by} rejected the proposal to call {tool.qualified}: {exc.reason}"
            return self._failed(call, text)
        except RequestTimeout:
            what = f"{tool.participant} did not answer" if direct else "nobody approved a proposal"
            return self._failed(call, f"{what} to call {tool.qualified} within {timeout:g}s")
        except CapabilityDenied as exc:
            return self._failed(call, f"not allowed to call {tool.qualified}: {exc}")
        except (HubbubError, NotConnected) as exc:
            return self._failed(call, f"calling {tool.qualified} failed: {exc}")
        try:
            result = mt.CallToolResult.model_validate(raw)
        except ValueError:
            return Message.tool_result(call, json.dumps(raw))
        content = result_content(result)
        log.info("%s: %s answered %s", self.me, tool.qualified, short(content))
        return Message.tool_result(call, content, is_error=bool(result.is_error))

    def _failed(self, call: ToolCall, text: str) -> Message:
        log.info("%s: tool call failed: %s", self.me, text)
        return Message.tool_result(call, text, is_error=True)


def result_content(result: mt.CallToolResult) -> str:
    """What the model reads of a tool result: its text, else its structured content."""
    text = result_text(result)
    if text:
        return text
    if result.structured_content is not None:
        return json.dumps(result.structured_content)
    return "(no content)"


def short(text: str, limit: int = 120) -> str:
    """``text`` on one line, cut to ``limit`` characters (for the log)."""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["ToolCatalog", "result_content", "short"]
