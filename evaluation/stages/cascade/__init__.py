"""Cascade judging: a chunk judged level by level, cheapest judge model first.

A run's ``cascade`` names judge models tried before its own judge model, each with an uncertainty
band (given, or fitted by a calibration of the cascade: ``band_from``); each level decides the rows
it scores ``ok`` outside its band and sends the others on, and the judge model, the last level,
decides what is left. Each level judges exactly as a run with that judge model judges a chunk
(:mod:`evaluation.stages.chunk`). Rows settled without a call (not applicable, empty answer,
sampled out) are the judge model's. Which rows go on, what a re-run pays and what lands:
docs/cascade.md (the columns: docs/tables.md).

The modules, in the order a chunk meets them: ``bands`` (each level's band), ``levels`` (the level
loop over a chunk), ``escalation`` (which rows go on), ``estimate`` (each level in the plan) and
``summary`` (what the run's levels did). This ``__init__`` loads nothing: import the modules.
"""

__all__ = ["bands", "escalation", "estimate", "levels", "summary"]
