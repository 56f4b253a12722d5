"""Benchmarks for approval_guard: ``python -m benchmarks`` (``--quick`` for a smoke run).

Each benchmark measures a figure beside its baseline in the same run, prints a
table, and writes ``benchmarks/results/<name>.json``; the run also writes
``benchmarks/results/latest.md``, the combined table the README shows.
Benchmarks are not tests: CI runs them only with ``--quick``.
"""
