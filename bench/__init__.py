"""bench: benchmarks, each reported as a ratio against a baseline measured in the same run.

May import anything. Nothing imports bench.
"""
