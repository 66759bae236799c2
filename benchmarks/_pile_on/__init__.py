"""Parts of ``benchmarks/pile_on.py``: what its cases share, and the people cases."""
