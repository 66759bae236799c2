"""Helpers for ``benchmarks/fanout.py``: a cheap WebSocket load generator and a ceiling server."""
