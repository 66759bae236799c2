"""Persistence behind one async interface: memory, SQLite (default), Redis (cluster)."""

from hubbub.store.base import Store, StoredMessage
from hubbub.store.memory import MemoryStore
from hubbub.store.sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore", "Store", "StoredMessage"]
