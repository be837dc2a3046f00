"""Reliability tests: faults, resume after a kill, hostile input, privacy, budget, stale runs."""
