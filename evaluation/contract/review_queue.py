"""The review queue: which of a day's records go to people (:func:`select_queue`, pure), and the
queue landed for the day (:func:`queue_day`).

The draw is two-phase and every probability in it is known:

1. A **uniform slice**: a simple random sample of ``u`` of the day's ``N`` eligible records
   (those never queued nor labelled before); each has inclusion probability ``u / N``. Only this
   slice feeds the corrected estimates (:mod:`evaluation.contract.estimate`), so they need nothing
   else to be unbiased.
2. **Targeted strata** among the records left: ``flagged`` (a model named in ``flagged_models``),
   ``disagreement`` (``rag`` and ``masis`` gave different verdicts), ``escalated`` (a cascade sent
   the row past its first level), ``borderline`` (a judge said borderline). A record in several
   counts in the first of those. The other slots are split evenly over the strata (a stratum
   with fewer records gives its spare slots to the others), and each stratum is a simple random
   sample of ``k_s`` of its ``N_s`` records: inclusion probability ``k_s / N_s``, given the slice.

Slots the targeted strata are not expected to fill (from the counts alone, before any draw, so
``u`` is fixed) go to the uniform slice; when chance still leaves them short, a ``fill`` stratum
draws the rest uniformly from the records not picked (inclusion probability ``k / N_left``, given
the draws before it), so the queue holds ``min(size, N)`` records. The generator is seeded by the day, the
run id and the seed option: a re-run of the same run picks the same records.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Collection, Sequence

import numpy as np
import polars as pl

from evaluation.contract.review import TARGETED_STRATA

#: The queue's columns (one row per queued record).
QUEUE_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "queue_id": pl.String,
    "record_dt": pl.Date,
    "run_id": pl.String,
    "record_id": pl.String,
    "model": pl.String,
    "stratum": pl.String,
    "inclusion_probability": pl.Float64,
    "eligible": pl.Int64,
}


def record_strata(evaluations: pl.DataFrame, flagged_models: Collection[str] = ()) -> pl.DataFrame:
    """One row per record of a day's ``evaluations`` (one row per record and judge): ``record_id``,
    ``model``, and a boolean column per targeted stratum."""
    verdict = pl.col("verdict")
    return (
        evaluations.group_by("record_id", "model")
        .agg(
            borderline=(verdict == "borderline").any(),
            escalated=(pl.col("cascade_calls").fill_null(0) > 1).any(),
            rag=verdict.filter(pl.col("judge") == "rag").first(),
            masis=verdict.filter(pl.col("judge") == "masis").first(),
        )
        .with_columns(
            disagreement=(pl.col("rag") != pl.col("masis")).fill_null(False),
            flagged=pl.col("model").is_in(list(flagged_models)),
        )
        .select("record_id", "model", *TARGETED_STRATA)
        .sort("record_id")
    )


def draw_seed(day: dt.date, run_id: str, seed: int) -> int:
    """The generator's seed: a hash of the day, the run id and the seed option."""
    return int.from_bytes(hashlib.sha256(f"{day.isoformat()}|{run_id}|{seed}".encode()).digest()[:8], "big")


def allocate(slots: int, sizes: Sequence[int]) -> list[int]:
    """``slots`` split as evenly as possible over strata of ``sizes`` records, none given more than
    it has: a stratum's spare share goes to the others (earlier strata take the odd slots)."""
    taken = [0] * len(sizes)
    left = slots
    open_ = [i for i, size in enumerate(sizes) if size > 0]
    while left > 0 and open_:
        share, extra = divmod(left, len(open_))
        for rank, i in enumerate(open_):
            give = min(sizes[i] - taken[i], share + (rank < extra))
            taken[i] += give
            left -= give
        open_ = [i for i in open_ if taken[i] < sizes[i]]
    return taken


def select_queue(strata: pl.DataFrame, *, size: int, uniform_share: float, seed: int,
                 exclude: Collection[str] = ()) -> pl.DataFrame:
    """The records queued from a day's :func:`record_strata` (``record_id`` in ``exclude``, those
    queued or labelled before, are never picked): ``record_id``, ``model``, ``stratum``,
    ``inclusion_probability`` and ``eligible`` (the day's eligible records), at most ``size`` rows."""
    eligible = strata.filter(~pl.col("record_id").is_in(list(exclude))).sort("record_id")
    total = eligible.height
    rng = np.random.default_rng(seed)
    # a record's stratum: the first targeted one it belongs to, none when it belongs to none
    eligible = eligible.with_columns(
        stratum=pl.coalesce(*[pl.when(pl.col(s)).then(pl.lit(s)) for s in TARGETED_STRATA], pl.lit(None, pl.String)))
    targeted_total = int(eligible["stratum"].is_not_null().sum())
    uniform = min(total, round(size * uniform_share))
    # the targeted strata are drawn from the records the slice leaves: slots they are expected not to
    # fill go to the slice, decided from counts alone, so the slice's size is fixed before any draw
    expected = int(targeted_total * (1 - uniform / total)) if total else 0
    uniform = min(total, uniform + max(0, size - uniform - expected))
    picked = np.zeros(total, dtype=bool)
    picked[rng.choice(total, size=uniform, replace=False)] = True
    parts = [eligible.filter(pl.Series(picked)).with_columns(
        stratum=pl.lit("uniform"), inclusion_probability=pl.lit(uniform / total if total else 0.0))]
    rest = eligible.filter(~pl.Series(picked))
    members = [rest.filter(pl.col("stratum") == s) for s in TARGETED_STRATA]
    for frame, slots in zip(members, allocate(size - uniform, [m.height for m in members]), strict=True):
        if slots:
            chosen = np.sort(rng.choice(frame.height, size=slots, replace=False))
            parts.append(frame[chosen.tolist()].with_columns(inclusion_probability=pl.lit(slots / frame.height)))
    taken = sum(part.height for part in parts)
    if taken < min(size, total):  # chance left the strata short: the rest of the day fills the queue
        chosen_ids = pl.concat([p.select("record_id") for p in parts])["record_id"]
        left = eligible.filter(~pl.col("record_id").is_in(chosen_ids.implode()))
        slots = min(size, total) - taken
        chosen = np.sort(rng.choice(left.height, size=slots, replace=False))
        parts.append(left[chosen.tolist()].with_columns(stratum=pl.lit("fill"),
                                                        inclusion_probability=pl.lit(slots / left.height)))
    return (pl.concat([p.select("record_id", "model", "stratum", "inclusion_probability") for p in parts])
            .with_columns(eligible=pl.lit(total, pl.Int64)).sort("stratum", "record_id"))
