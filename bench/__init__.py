"""Benchmarks: throughput, pickup latency, enqueue rate, claim cost and page latency.

Run ``python -m bench`` (full) or ``python -m bench --smoke`` (tiny sizes, used by CI so the
benchmark cannot rot). Results and the machine they ran on go to ``docs/benchmarks.md``.
Timings are measured here and never asserted in tests.
"""
