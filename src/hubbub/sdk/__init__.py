"""The hubbub SDK (document 003, layers 1 and 2): :class:`Client` and :class:`Participant`.

```python
from hubbub.sdk import Participant

async with Participant(gateway="ws://127.0.0.1:8080/ws", participant_id="calc") as calc:

    @calc.tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    await calc.serve_forever()
```

Exceptions live in :mod:`hubbub.errors`; the guide is ``docs/sdk.md``. ``Client`` comes with
the core install; ``Participant``, ``Agent``, ``Tool`` and ``Resource`` need the ``agents``
extra (``pip install 'hubbub[agents]'``) and are imported when first used.
"""

import importlib
from typing import TYPE_CHECKING, Any

from hubbub.extras import extra_needed
from hubbub.sdk.agent_config import AgentConfig
from hubbub.sdk.client import Client, Disconnected, Failover, Reconnecting, Subscription
from hubbub.sdk.hooks import Unsubscribe
from hubbub.sdk.options import ClientOptions, ParticipantOptions
from hubbub.sdk.proposals import Proposal, ProposalInbox
from hubbub.sdk.react import Thought, Turn
from hubbub.sdk.states import State

if TYPE_CHECKING:
    from hubbub.sdk.agent import Agent
    from hubbub.sdk.participant import Participant
    from hubbub.sdk.tools import Resource, Tool

_WITH_AGENTS_EXTRA = {
    "Agent": "hubbub.sdk.agent",
    "Participant": "hubbub.sdk.participant",
    "Resource": "hubbub.sdk.tools",
    "Tool": "hubbub.sdk.tools",
}


def __getattr__(name: str) -> Any:
    """Participant, Agent, Tool, Resource: imported on first use (they need ``[agents]``)."""
    module = _WITH_AGENTS_EXTRA.get(name)
    if module is None:
        raise AttributeError(f"module 'hubbub.sdk' has no attribute {name!r}")
    with extra_needed("agents"):
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Agent",
    "AgentConfig",
    "Client",
    "ClientOptions",
    "Disconnected",
    "Failover",
    "Participant",
    "ParticipantOptions",
    "Proposal",
    "ProposalInbox",
    "Reconnecting",
    "Resource",
    "State",
    "Subscription",
    "Thought",
    "Tool",
    "Turn",
    "Unsubscribe",
]
