"""Benchmarks of the evaluation pipeline: ``make bench`` (``python -m bench.run``).

Every measurement runs in its own child process (``python -m bench.<module> <task>``) so that
peak memory is the child's own and imports of one measurement never warm another. The children
write one JSON result each; :mod:`bench.run` turns them into the table and the result files.
"""
