"""Persistence behind one async interface: memory, SQLite (default), Redis (cluster)."""

from hubbub.store.base import StoredMessage, Store
from hubbub.store.memory import MemoryStore
from hubbub.store.sqlite import SqliteStore

__all__ = ["MemoryStore", "SqliteStore", "Store", "StoredMessage"]
