"""Cascade judging: a chunk judged level by level, cheapest judge model first.

A run's ``cascade`` names judge models tried before its own judge model, each with an uncertainty
band (given, or fitted by a calibration of the cascade: ``band_from``). Level 0 judges every
(record, judge) pair of the chunk that needs a call; a pair it scores ``ok`` outside its band is
decided there, any other pair (a score inside the band, both ends included, or a row that is not
``ok``) goes to the next level, and the judge model, the last level, decides what is left. Each
level judges exactly as a run with that judge model judges a chunk (the same prompts, ledger and
client, :mod:`evaluation.stages.chunk`), so a re-run finds every level's replies in the ledger,
pays nothing at any level and takes the same path through the levels.

A pair's landed row is the deciding level's row, with ``decided_by`` (that level's judge model)
and ``cascade_calls`` (the levels it was sent to), and its tokens, cost, latency and attempts
summed over those levels (``cached`` only when every level's reply came from the ledger);
``judge_calls`` keeps every level's call. Rows settled without a call (not applicable, empty
answer, sampled out) are the judge model's, with ``cascade_calls`` 0 and no ``decided_by``.

The modules, in the order a chunk meets them:

* :mod:`~evaluation.stages.cascade.bands`: each level's band (given, or read from a calibration
  of a cascade) and the share of rows its calibration sent on;
* :mod:`~evaluation.stages.cascade.levels`: the level loop over one chunk (:func:`run_levels`),
  online or in batch mode (:func:`judge_cascade_chunk`, :func:`judge_cascade_batch_step`, which
  the judge stage calls for a run with a cascade);
* :mod:`~evaluation.stages.cascade.escalation`: the escalation step after each level, which rows
  go on and what the others land as;
* :mod:`~evaluation.stages.cascade.estimate`: each level's expected calls and cost, for the plan;
* :mod:`~evaluation.stages.cascade.summary`: what the run's levels did, for its ``runs`` row and
  the report.

This ``__init__`` loads nothing: import the modules.
"""

__all__ = ["bands", "escalation", "estimate", "levels", "summary"]
