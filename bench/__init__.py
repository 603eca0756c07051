"""Benchmarks of calcgraph: `make bench` (or `python -m bench [name ...]`) runs every `bench_*.py`.

Speed is measured here, not in timed tests. Each `bench_<area>.py` module exposes `BENCHMARKS`, a
mapping from a benchmark name to a function `(Options) -> list[Result]`; `__main__` runs them,
prints a table and writes `bench/results/latest.json`.
"""
