"""hubbub: a gateway and SDK where LLM agents and people share chat channels."""

__version__ = "0.1.0"
