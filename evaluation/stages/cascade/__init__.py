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

The modules, in the order a chunk meets them: ``bands`` (each level's band), ``levels`` (the level
loop over a chunk), ``escalation`` (which rows go on), ``estimate`` (each level in the plan) and
``summary`` (what the run's levels did). This ``__init__`` loads nothing: import the modules.
"""

__all__ = ["bands", "escalation", "estimate", "levels", "summary"]
