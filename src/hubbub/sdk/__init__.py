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

Exceptions live in :mod:`hubbub.errors`; the guide is ``docs/sdk.md``.
"""

from hubbub.sdk.agent import Agent
from hubbub.sdk.agent_config import AgentConfig
from hubbub.sdk.client import Client, Disconnected, Reconnecting, Subscription
from hubbub.sdk.hooks import Unsubscribe
from hubbub.sdk.options import ClientOptions, ParticipantOptions
from hubbub.sdk.participant import Participant
from hubbub.sdk.proposals import Proposal, ProposalInbox
from hubbub.sdk.react import Thought, Turn
from hubbub.sdk.states import State
from hubbub.sdk.tools import Resource, Tool

__all__ = [
    "Agent",
    "AgentConfig",
    "Client",
    "ClientOptions",
    "Disconnected",
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
