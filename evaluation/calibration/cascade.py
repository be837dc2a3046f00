"""A calibration of a cascade: the bands it fits and the figures of each level (``cascade.parquet``).

The set is judged in full with every model of the cascade (each level's rows, ``levels.parquet``),
then :func:`fit_bands` fits the bands the spec does not give, on the fit split: it tests the
candidates of :func:`candidate_sequence` (each level's band narrowing around the fail cut in
:data:`STEPS` steps, :func:`band_at`) in their fixed order, each by :func:`disagreement_bound`, stops
at the first that fails, and keeps the cheapest of those passed (each level's cost per row:
:func:`unit_costs`). :func:`split_figures` measures a cascade on one split; :func:`cascade_table`
gives the figures per level and judge. Costs are at litellm's online prices for each model of the
tokens its calls reported (a reply reused from the ledger counts at its price too), so they do not
depend on what the ledger held.

The method, its guarantee and what can break it: docs/cascade.md, "Fitting the bands"; the table's
columns are there too.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Literal

import numpy as np
import polars as pl

from evaluation.calibration import metrics
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.config import JudgeName
from evaluation.contract.schemas import CASCADE_SCHEMA
from evaluation.stages.cascade.bands import Bands

logger = logging.getLogger(__name__)

#: Steps in which a fitted band narrows, from wide open (the level decides nothing) to nothing
#: around the fail cut (it decides every row it scores ``ok``): the fixed sequence's grain.
STEPS = 20


class _Judged:
    """One judge's labelled records as every level judged them (numpy columns, aligned by record):
    each level's ``ok``, score and fail verdict, the label (``bad``) and the split. With ``split``,
    only that split's records whose judge-model row is ``ok`` (those every κ is taken over)."""

    def __init__(self, levels: list[pl.DataFrame], labels: pl.DataFrame, judge: str,
                 split: Literal["fit", "holdout"] | None = None) -> None:
        frame = labels.filter(pl.col("good").is_not_null()).select("record_id", "split", bad=~pl.col("good"))
        for k, rows in enumerate(levels):
            frame = frame.join(
                rows.filter(pl.col("judge") == judge).select(
                    "record_id", (pl.col("judge_status") == "ok").alias(f"ok_{k}"), pl.col("score").alias(f"score_{k}"),
                    (pl.col("verdict") == "fail").fill_null(False).alias(f"fail_{k}")),
                on="record_id", how="inner")
        frame = frame.sort("record_id")
        if split is not None:
            frame = frame.filter((pl.col("split") == split) & pl.col(f"ok_{len(levels) - 1}"))
        self.bad = frame["bad"].to_numpy().astype(bool)
        self.fit = (frame["split"] == "fit").to_numpy()
        self.holdout = (frame["split"] == "holdout").to_numpy()
        self.score = [frame[f"score_{k}"].fill_null(np.nan).to_numpy().astype(np.float64) for k in range(len(levels))]
        self.ok = [frame[f"ok_{k}"].to_numpy().astype(bool) & ~np.isnan(self.score[k]) for k in range(len(levels))]
        self.fail = [frame[f"fail_{k}"].to_numpy().astype(bool) for k in range(len(levels))]
        #: the judge model's (the last level's) row is ok: the records every κ is taken over
        self.scored = frame[f"ok_{len(levels) - 1}"].to_numpy().astype(bool)

    def cascade(self, bands: list[tuple[float, float]]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The fail verdict of the levels with ``bands`` (the first ``len(bands)`` levels), then the
        judge model for every row they send on; and the rows each of those levels decides (the
        judge model's last)."""
        verdict = self.fail[-1].copy()
        open_rows = np.ones(self.bad.size, dtype=bool)
        decided: list[np.ndarray] = []
        for level, (low, high) in enumerate(bands):
            with np.errstate(invalid="ignore"):
                inside = (self.score[level] >= low) & (self.score[level] <= high)
            here = open_rows & self.ok[level] & ~inside
            verdict[here] = self.fail[level][here]
            decided.append(here)
            open_rows &= ~here
        decided.append(open_rows)
        return verdict, decided


def _kappa(flagged: np.ndarray, bad: np.ndarray) -> float | None:
    return metrics.Detection.of(flagged, bad).kappa if flagged.size else None


def disagreement_bound(disagreements: int, records: int, confidence: float) -> float:
    """The one-sided Clopper–Pearson upper bound at ``confidence`` of a rate seen ``disagreements``
    times in ``records`` (1 for no records): exact for a binomial count, so the fixed sequence's
    tests are at their stated level on any number of records."""
    if records <= 0 or disagreements >= records:
        return 1.0
    from scipy.stats import beta  # scipy's import is heavy: only the fit needs it

    return float(beta.ppf(confidence, disagreements + 1, records - disagreements))


def _disagreements(judged: _Judged, bands: list[tuple[float, float]]) -> int:
    """Records where the cascade with ``bands`` gives another fail verdict than the judge model alone."""
    return int(np.count_nonzero(judged.cascade(bands)[0] != judged.fail[-1]))


def band_at(step: int, cut: float) -> tuple[float, float]:
    """The band of a level ``step`` steps (of :data:`STEPS`) narrowed from wide open around the fail
    ``cut``: each end moves a ``step / STEPS`` share of its way to the cut."""
    width = 1.0 - step / STEPS
    return round(cut * (1.0 - width), 6), round(cut + (1.0 - cut) * width, 6)


def candidate_sequence(given: list[tuple[float, float] | None], cut: float) -> list[list[tuple[float, float]]]:
    """The bands tested, in the fixed order (docs/cascade.md, "Fitting the bands"): the first wide open at every level
    to fit (``given``: a level's band when the spec gives it, else None), then each such level's
    band narrowing step by step, the dearest level first, the dearer ones kept at their narrowest."""
    current = [band if band is not None else band_at(0, cut) for band in given]
    sequence = [list(current)]
    for level in reversed(range(len(given))):
        if given[level] is not None:
            continue
        for step in range(1, STEPS + 1):
            current[level] = band_at(step, cut)
            sequence.append(list(current))
    return sequence


def _cost(decided: list[np.ndarray], unit_costs: list[float]) -> float:
    """What the rows cost through the cascade: each level's unit cost for every row reaching it."""
    reaching, total = sum(int(d.sum()) for d in decided), 0.0
    for level, unit in enumerate(unit_costs):
        total += unit * reaching
        reaching -= int(decided[level].sum())
    return total


def _ordinal_costs(levels: int) -> list[float]:
    """1, 10, 100, ... per row: the levels' order standing in for their prices (cheapest first)."""
    return [10.0 ** level for level in range(levels)]


def unit_costs(levels: list[pl.DataFrame], prices: list[tuple[float, float]]) -> list[float]:
    """Each level's cost per row: its calls' mean tokens on the set at its model's (input, output)
    USD per token. When the judge model's price is unknown (0), the levels' order stands in for
    their prices (:func:`_ordinal_costs`)."""
    costs = []
    for rows, level_prices in zip(levels, prices, strict=True):
        called = rows.filter(pl.col("input_tokens").is_not_null())
        costs.append(float(called.select(_call_cost(level_prices).mean()).item() or 0.0) if called.height else 0.0)
    if not costs or costs[-1] <= 0.0:
        return _ordinal_costs(len(levels))
    return costs


def fit_bands(levels: list[pl.DataFrame], labels: pl.DataFrame, judges: list[JudgeName],
              given: list[Bands | None], loss: float, *, cut: float, confidence: float,
              costs: list[float] | None = None) -> list[Bands]:
    """Each level's band per judge (``levels``: every level's scored rows, the judge model's last;
    ``given``: a level's bands when the spec gives them, else None to fit them; ``cut``: the score
    below which a verdict is fail; ``costs``: each level's cost per row, :func:`unit_costs`, default
    :func:`_ordinal_costs`): the cheapest bands passed in the fixed sequence of
    :func:`candidate_sequence`, each with its fit-split disagreement's upper bound at ``confidence``
    within ``loss``; the method: docs/cascade.md."""
    costs = costs if costs is not None else _ordinal_costs(len(levels))
    fitted: list[Bands] = [{} for _ in given]
    for judge in judges:
        usable = _Judged(levels, labels, judge, "fit")
        sequence = candidate_sequence([known[judge] if known is not None else None for known in given], cut)
        passed = []
        for bands in sequence:
            if disagreement_bound(_disagreements(usable, bands), usable.bad.size, confidence) > loss:
                break
            passed.append(bands)
        if not passed:  # the given bands alone already exceed the loss: the bands to fit stay wide open
            logger.warning("cascade bands for %s: the given bands alone disagree with the judge model beyond %g at "
                           "%g confidence on the fit split; the bands to fit are left wide open", judge, loss, confidence)
            passed = sequence[:1]
        cheapest = min(passed, key=lambda bands: _cost(usable.cascade(bands)[1], costs))
        logger.info("cascade bands for %s: %d of the fixed sequence's candidates passed; the cheapest %s",
                    judge, len(passed), cheapest)
        for level, band in enumerate(cheapest):
            fitted[level][judge] = band
    return fitted


def split_figures(levels: list[pl.DataFrame], labels: pl.DataFrame, judge: str, bands: list[tuple[float, float]],
                  costs: list[float], split: Literal["fit", "holdout"] = "holdout") -> dict[str, float | None]:
    """The cascade with ``bands`` (one per level before the judge model) on one split of the set, for
    one judge: its κ of ``fail`` and the judge model's alone, the share of records where its verdict
    differs from the judge model's (the rate :func:`fit_bands` bounds), and its cost and the judge
    model's alone at ``costs`` per row (:func:`unit_costs`)."""
    part = _Judged(levels, labels, judge, split)
    verdict, decided = part.cascade(bands)
    return {"kappa": _kappa(verdict, part.bad), "kappa_alone": _kappa(part.fail[-1], part.bad),
            "disagreement": _rate(verdict != part.fail[-1]),
            "cost": _cost(decided, costs), "cost_alone": costs[-1] * part.bad.size}


def _rate(flags: np.ndarray) -> float | None:
    return float(flags.mean()) if flags.size else None


def _call_cost(prices: tuple[float, float]) -> pl.Expr:
    """A row's call at (input, output) USD per token, of the tokens it reports."""
    return pl.col("input_tokens").fill_null(0) * prices[0] + pl.col("output_tokens").fill_null(0) * prices[1]


def _list_cost(rows: pl.DataFrame, prices: tuple[float, float]) -> float:
    """The rows' calls at (input, output) USD per token, of the tokens they report."""
    return round(float(rows.select(_call_cost(prices).sum()).item() or 0.0), 6)


def cascade_table(levels: list[pl.DataFrame], cascade_rows: pl.DataFrame, labels: pl.DataFrame,
                  spec: CalibrationSpec, bands: list[Bands], sources: list[str], prices: list[tuple[float, float]],
                  *, calibration_id: str, calibrated_at: dt.datetime) -> pl.DataFrame:
    """``cascade.parquet``: one row per (level, judge); its columns: docs/cascade.md. ``cascade_rows``
    are the cascade's own rows (``decided_by``, ``cascade_calls``); ``sources`` says where each
    level's band came from (``fitted``, ``given`` or the calibration it was taken from)."""
    models = spec.models
    final = len(models) - 1
    out: list[dict[str, Any]] = []
    for judge in spec.judges:
        judged = _Judged(levels, labels, judge)
        scored, fit, held = judged.scored, judged.scored & judged.fit, judged.scored & judged.holdout
        verdict, _ = judged.cascade([bands[k][judge] for k in range(final)])
        differs = verdict != judged.fail[-1]
        rows = cascade_rows.filter(pl.col("judge") == judge)
        called = rows.filter(pl.col("cascade_calls") > 0)
        for level, model in enumerate(models):
            own = levels[level].filter(pl.col("judge") == judge)
            reached_ids = called.filter(pl.col("cascade_calls") > level)["record_id"]
            reached = own.filter(pl.col("record_id").is_in(reached_ids.implode()))
            decided = int((rows["decided_by"] == model).sum())
            band = bands[level][judge] if level < final else None
            out.append({
                "calibration_id": calibration_id, "set_name": spec.set_name, "level": level, "judge_model": model,
                "judge": judge, "band_low": band[0] if band else None, "band_high": band[1] if band else None,
                "band_source": sources[level] if level < final else None, "band_loss": spec.band_loss,
                "n_fit": int(fit.sum()),
                "kappa_alone": _kappa(judged.fail[level][scored], judged.bad[scored]),
                "kappa_alone_fit": _kappa(judged.fail[level][fit], judged.bad[fit]),
                "kappa_alone_holdout": _kappa(judged.fail[level][held], judged.bad[held]),
                "rows": called.height, "reached": reached.height, "decided": decided,
                "share_decided": decided / called.height if called.height else None,
                "share_sent_on": ((reached.height - decided) / reached.height
                                  if reached.height and level < final else None),
                "cost_alone_usd": _list_cost(own, prices[level]),
                "cost_usd": _list_cost(reached, prices[level]),
                "kappa_cascade": _kappa(verdict[scored], judged.bad[scored]),
                "kappa_cascade_fit": _kappa(verdict[fit], judged.bad[fit]),
                "kappa_cascade_holdout": _kappa(verdict[held], judged.bad[held]),
                "band_confidence": spec.band_confidence,
                "disagreement_fit": _rate(differs[fit]),
                "disagreement_bound": disagreement_bound(int(differs[fit].sum()), int(fit.sum()), spec.band_confidence),
                "disagreement_holdout": _rate(differs[held]),
                "calibrated_at": calibrated_at,
            })
    return pl.DataFrame(out, schema=CASCADE_SCHEMA)
