"""Helpers of ``benchmarks/engines.py``: MEW agents on the raw client, and the three scenarios."""
