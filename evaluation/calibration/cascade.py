"""A calibration of a cascade: the bands it fits and the figures of each level (``cascade.parquet``).

The set is judged in full with every model of the cascade (each level's rows, ``levels.parquet``),
then :func:`fit_bands` fits the bands the spec does not give, on the fit split, **for the cost**:
the bands that make the cascade cheapest (each level's cost per row, :func:`unit_costs`, times the
rows that reach it) while the κ of ``fail`` of the cascade stays within ``band_loss`` of the judge
model's own κ, **a level never credited for beating the judge model**: where a level before the
judge model decides a row and is right, the fit counts the judge model's verdict there (right or
wrong), and only where the level is wrong its own. Credited, a band wins κ on the fit split where a
cheaper level happens to be right more often than the judge model, spends that gain on the next
level's errors, and loses it out of sample (the bench measured a held-out loss of 0.03–0.04 for
``band_loss`` 0.02 so, on fit splits of 300 and 1,250 records). A spec's ``band_confidence`` adds a
margin for the split's sampling noise: the loss must also stay within ``band_loss`` at that upper
bound, the quantile of the loss over :data:`RESAMPLES` bootstrap resamples of the fit split's
records (the two κ taken on the same resample; a fixed seed).

The search is by coordinate: every band to fit starts wide open (the level sends every row on: the
judge model alone, which loses nothing), then each level's band is fitted in turn with the others'
as they stand, the dearest level's first (the one just below the judge model: a row it decides saves
the judge model's call, where a row the free offline judge decides saves only the next level's), and
the round repeats until no band changes (at most :data:`MAX_PASSES` rounds). Fitting the cheapest
level first instead spends the κ budget where it saves least: the free level takes it all, and the
level whose decisions save the dear calls is left none. The candidate band ends are 0, 1 and the
midpoints between the level's distinct scores; ties go to the higher κ, then the narrower band. κ
is taken over the labelled records whose judge-model row is ``ok``, for the cascade and the judge
model alike.

:func:`cascade_table` then gives, per level and judge: the band and where it came from, the model
alone (κ on the whole set and on the held-out split, its cost on the set), the rows that reach the
level in the cascade and the rows it decides, its cost in the cascade, and the cascade's κ. Costs
are at litellm's online prices for each model of the tokens its calls reported (a reply reused from
the ledger counts at its price too), so they do not depend on what the ledger held.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import numpy as np
import polars as pl

from evaluation.calibration import metrics
from evaluation.calibration.spec import CalibrationSpec
from evaluation.contract import JudgeName
from evaluation.schemas import CASCADE_SCHEMA
from evaluation.stages.thresholds import Bands

#: Distinct scores of a level beyond which the candidate band ends are quantiles of them.
MAX_BAND_ENDS = 80
#: Bootstrap resamples of the fit split's records, and their seed (fixed: the same set fits the same bands).
RESAMPLES = 400
BOOTSTRAP_SEED = 0
#: Rounds over the levels to fit (each level's band refitted with the others' as they stand).
MAX_PASSES = 3


class _Judged:
    """One judge's labelled records as every level judged them (numpy columns, aligned by record):
    each level's ``ok``, score and fail verdict, the label (``bad``) and the split."""

    def __init__(self, levels: list[pl.DataFrame], labels: pl.DataFrame, judge: str) -> None:
        frame = labels.filter(pl.col("good").is_not_null()).select("record_id", "split", bad=~pl.col("good"))
        for k, rows in enumerate(levels):
            frame = frame.join(
                rows.filter(pl.col("judge") == judge).select(
                    "record_id", (pl.col("judge_status") == "ok").alias(f"ok_{k}"), pl.col("score").alias(f"score_{k}"),
                    (pl.col("verdict") == "fail").fill_null(False).alias(f"fail_{k}")),
                on="record_id", how="inner")
        frame = frame.sort("record_id")
        self.bad = frame["bad"].to_numpy().astype(bool)
        self.fit = (frame["split"] == "fit").to_numpy()
        self.holdout = (frame["split"] == "holdout").to_numpy()
        self.score = [frame[f"score_{k}"].fill_null(np.nan).to_numpy().astype(np.float64) for k in range(len(levels))]
        self.ok = [frame[f"ok_{k}"].to_numpy().astype(bool) & ~np.isnan(self.score[k]) for k in range(len(levels))]
        self.fail = [frame[f"fail_{k}"].to_numpy().astype(bool) for k in range(len(levels))]
        #: the judge model's (the last level's) row is ok: the records every κ is taken over
        self.scored = frame[f"ok_{len(levels) - 1}"].to_numpy().astype(bool)

    def subset(self, mask: np.ndarray) -> _Judged:
        """The same records, ``mask``'s only."""
        part = object.__new__(_Judged)
        part.bad, part.fit, part.holdout, part.scored = self.bad[mask], self.fit[mask], self.holdout[mask], self.scored[mask]
        part.score = [a[mask] for a in self.score]
        part.ok = [a[mask] for a in self.ok]
        part.fail = [a[mask] for a in self.fail]
        return part

    def part(self, split: Literal["fit", "holdout"]) -> _Judged:
        """The records of ``split`` whose judge-model row is ``ok`` (those every κ is taken over)."""
        return self.subset((self.fit if split == "fit" else self.holdout) & self.scored)

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


def _no_credit(verdict: np.ndarray, decided: list[np.ndarray], judged: _Judged) -> np.ndarray:
    """The cascade's verdicts as the fit counts them: where a level before the judge model decided a
    row and was right, the judge model's verdict (right or wrong), so that a level is never credited
    for beating the judge model; where it was wrong, its own."""
    before = ~decided[-1]
    return np.where(before & (verdict != judged.bad), verdict, judged.fail[-1])


def _counted(judged: _Judged, bands: list[tuple[float, float]], level: int, band: tuple[float, float],
             credit: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
    """The cascade's verdicts as the fit counts them (:func:`_no_credit`, or as they are with
    ``credit``) with ``band`` at ``level`` and ``bands`` elsewhere, and the rows each level decides."""
    verdict, decided = judged.cascade([*bands[:level], band, *bands[level + 1:]])
    return (verdict if credit else _no_credit(verdict, decided, judged)), decided


def _kappa(flagged: np.ndarray, bad: np.ndarray) -> float | None:
    return metrics.Detection.of(flagged, bad).kappa if flagged.size else None


def _band_ends(scores: np.ndarray) -> np.ndarray:
    distinct = np.unique(scores[~np.isnan(scores)])
    if distinct.size > MAX_BAND_ENDS:
        distinct = np.unique(np.quantile(distinct, np.linspace(0.0, 1.0, MAX_BAND_ENDS)))
    middles = (distinct[:-1] + distinct[1:]) / 2 if distinct.size > 1 else np.array([])
    return np.unique(np.round(np.concatenate([[0.0], middles, [1.0]]), 4))


def _resamples(size: int) -> np.ndarray | None:
    """:data:`RESAMPLES` bootstrap resamples of ``size`` records as counts per record (a fixed seed:
    the same set fits the same bands); None for no records."""
    if not size:
        return None
    return np.random.default_rng(BOOTSTRAP_SEED).multinomial(size, np.full(size, 1.0 / size), size=RESAMPLES)


def _loss_bound(verdict: np.ndarray, bad: np.ndarray, weights: np.ndarray, judge_model: np.ndarray,
                confidence: float) -> float:
    """The ``confidence`` quantile over the resamples of the judge model's κ less the cascade's (the
    two taken on the same resample: a paired difference); a resample where either is undefined
    counts as an unbounded loss."""
    losses = judge_model - metrics.detection_kappas(verdict, bad, weights)
    return float(np.quantile(np.where(np.isnan(losses), np.inf, losses), confidence))


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
              given: list[Bands | None], loss: float, *, costs: list[float] | None = None,
              confidence: float | None = None, split: Literal["fit", "holdout"] = "fit",
              credit: bool = False) -> list[Bands]:
    """Each level's band per judge (``levels``: every level's scored rows, the judge model's last;
    ``given``: a level's bands when the spec gives them, else None to fit them; ``costs``: each
    level's cost per row, :func:`unit_costs`, default :func:`_ordinal_costs`); see the module docstring.
    ``confidence`` (a spec's ``band_confidence``, e.g. 0.9) also keeps the loss's bootstrap upper bound at that
    level within ``loss``; None keeps the loss as counted on the fit split within it. ``split``
    ``holdout`` and ``credit`` (each level's verdicts counted as they are) give the bench's ceiling:
    the bands that would have been best for the held-out split itself, known only after the fact."""
    costs = costs if costs is not None else _ordinal_costs(len(levels))
    fitted: list[Bands] = [{} for _ in given]
    free = [level for level in reversed(range(len(given))) if given[level] is None]
    for judge in judges:
        judged = _Judged(levels, labels, judge)
        usable = judged.part(split)
        target = (_kappa(usable.fail[-1], usable.bad) or 0.0) - loss
        weights = _resamples(usable.bad.size) if confidence is not None else None
        margin = (None if weights is None or confidence is None else
                  (weights, metrics.detection_kappas(usable.fail[-1], usable.bad, weights), confidence))
        # every band to fit starts wide open (the level sends every row on: the judge model alone)
        bands = [known[judge] if known is not None else (0.0, 1.0) for known in given]
        ends = [_band_ends(usable.score[level][usable.ok[level]]) for level in range(len(given))]

        for _ in range(MAX_PASSES):
            before = list(bands)
            for level in free:
                candidates = []
                for i, low in enumerate(ends[level]):
                    for high in ends[level][i:]:
                        band = (float(low), float(high))
                        verdict, decided = _counted(usable, bands, level, band, credit)
                        kappa = _kappa(verdict, usable.bad)
                        if kappa is None or kappa < target - 1e-12:
                            continue
                        candidates.append((_cost(decided, costs), -kappa, band[1] - band[0], band))
                candidates.sort(key=lambda c: c[:3])
                for *_, band in candidates:
                    # the bootstrap last, in the order of the cost: it is the dear test
                    counted = _counted(usable, bands, level, band, credit)[0]
                    if margin is None or _loss_bound(counted, usable.bad, *margin) <= loss + 1e-12:
                        bands[level] = band
                        break
            if bands == before:
                break
        for level, band in enumerate(bands):
            fitted[level][judge] = band
    return fitted


def split_figures(levels: list[pl.DataFrame], labels: pl.DataFrame, judge: str, bands: list[tuple[float, float]],
                  costs: list[float], split: Literal["fit", "holdout"] = "holdout") -> dict[str, float | None]:
    """The cascade with ``bands`` (one per level before the judge model) on one split of the set, for
    one judge: its κ of ``fail`` and the judge model's alone, and its cost and the judge model's
    alone at ``costs`` per row (:func:`unit_costs`)."""
    part = _Judged(levels, labels, judge).part(split)
    verdict, decided = part.cascade(bands)
    return {"kappa": _kappa(verdict, part.bad), "kappa_alone": _kappa(part.fail[-1], part.bad),
            "cost": _cost(decided, costs), "cost_alone": costs[-1] * part.bad.size}


def _call_cost(prices: tuple[float, float]) -> pl.Expr:
    """A row's call at (input, output) USD per token, of the tokens it reports."""
    return pl.col("input_tokens").fill_null(0) * prices[0] + pl.col("output_tokens").fill_null(0) * prices[1]


def _list_cost(rows: pl.DataFrame, prices: tuple[float, float]) -> float:
    """The rows' calls at (input, output) USD per token, of the tokens they report."""
    return round(float(rows.select(_call_cost(prices).sum()).item() or 0.0), 6)


def cascade_table(levels: list[pl.DataFrame], cascade_rows: pl.DataFrame, labels: pl.DataFrame,
                  spec: CalibrationSpec, bands: list[Bands], sources: list[str], prices: list[tuple[float, float]],
                  *, calibration_id: str, calibrated_at: dt.datetime) -> pl.DataFrame:
    """``cascade.parquet``: one row per (level, judge); see the module docstring. ``cascade_rows``
    are the cascade's own rows (``decided_by``, ``cascade_calls``); ``sources`` says where each
    level's band came from (``fitted``, ``given`` or the calibration it was taken from)."""
    models = spec.models
    final = len(models) - 1
    out: list[dict[str, Any]] = []
    for judge in spec.judges:
        judged = _Judged(levels, labels, judge)
        scored, fit, held = judged.scored, judged.scored & judged.fit, judged.scored & judged.holdout
        verdict, _ = judged.cascade([bands[k][judge] for k in range(final)])
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
                "calibrated_at": calibrated_at,
            })
    return pl.DataFrame(out, schema=CASCADE_SCHEMA)
