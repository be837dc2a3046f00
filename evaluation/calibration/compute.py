"""The calibration's figures: per judge and metric, agreement of the judged values and verdicts with
the human labels (:func:`calibration_rows`), from the judged rows of a golden set and its labels.

What is measured (see :mod:`evaluation.calibration.metrics` for the conventions):

* the share of each ``judge_status`` among the set's records (every other figure uses ``ok`` rows);
* AUROC of each metric against the binary label, with a 95% stratified bootstrap interval;
* Spearman's correlation of each metric with the finest label there is: the record's human score
  for that metric (``labels.scores``), else its ``rating``, else the binary label as 0/1;
* Cohen's κ, F1, precision and recall of ``fail`` (for ``score``: the landed verdict; for another
  metric: the value below the borderline threshold) as a detector of the records labelled not
  faithful, with the verdict × label confusion matrix; against expected verdicts, when the set
  has them, the three-class κ and accuracy;
* suggested thresholds: fitted on the ``fit`` split (the κ-maximising borderline cut for ``fail``,
  then the κ-maximising pass cut above it; or both at once against expected verdicts), with the
  κ they give on the fit split and on the held-out split, next to the κ of the current thresholds
  on the held-out split. Contract rules that force ``fail`` whatever the thresholds (rag's zero
  faithfulness, prompt's unsatisfied required rubric) stay in force while the cuts move.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import polars as pl

from evaluation.calibration import metrics
from evaluation.calibration.spec import CalibrationSpec
from evaluation.contract import JUDGE_STATUSES, RULES_VERSION, VERDICTS
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS
from evaluation.stages.schemas import CALIBRATIONS_SCHEMA

#: Metrics calibrated per judge, in report order.
JUDGE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("score", *RAG_METRICS),
    "masis": ("score", *MASIS_DIMENSIONS),
    "prompt": ("score",),
}


def rng_for(seed: int, *parts: str) -> np.random.Generator:
    """A Generator seeded by ``seed`` and the names of what it draws for (order independent)."""
    from evaluation.compare import rng_for as seeded

    return seeded(seed, "calibration", *parts)


def forced_fail(judged: pl.DataFrame) -> pl.Expr:
    """Rows whose verdict a contract rule forces to ``fail`` whatever the thresholds: rag's
    faithfulness of 0.0 (CONTRACT §2.2 (5)) and prompt's unsatisfied required rubric (§2.4). Over
    parsed-and-scored rows (``required_unsatisfied`` is a parsed-row column)."""
    ok = pl.col("judge_status") == "ok"
    rag = (pl.col("judge") == "rag") & (pl.col("faithfulness") == 0.0)
    prompt = (pl.col("judge") == "prompt") & pl.col("required_unsatisfied").fill_null(False)
    return (ok & (rag | prompt)).fill_null(False).alias("forced_fail")


def _json(counts: dict[str, dict[str, int]]) -> str:
    return json.dumps(counts, sort_keys=False)


def _verdict_label_counts(verdicts: np.ndarray, good: np.ndarray) -> str:
    return _json({v: {"good": int(((verdicts == v) & good).sum()), "bad": int(((verdicts == v) & ~good).sum())}
                  for v in VERDICTS})


def _spearman_target(frame: pl.DataFrame, metric: str) -> tuple[str, pl.Series] | None:
    """The finest label for ``metric``: its human score, else the rating, else the binary label."""
    scores = frame["scores"].map_elements(lambda s: json.loads(s).get(metric) if s else None, return_dtype=pl.Float64)
    if scores.drop_nulls().len() >= 2:
        return f"scores.{metric}", scores
    if frame["rating"].drop_nulls().len() >= 2:
        return "rating", frame["rating"].cast(pl.Float64)
    if frame["good"].drop_nulls().len() >= 2:
        return "faithful" if frame["faithful"].drop_nulls().len() else "verdict", frame["good"].cast(pl.Float64)
    return None


def _holdout_kappa(flagged: np.ndarray, bad: np.ndarray) -> float | None:
    return metrics.Detection.of(flagged, bad).kappa if flagged.size else None


def metric_row(frame: pl.DataFrame, metric: str, spec: CalibrationSpec, rng: np.random.Generator) -> dict[str, Any]:
    """The figures of one judge's ``metric`` over its ``ok`` rows joined with their labels
    (columns: the metric, ``verdict``, ``forced_fail``, and the :data:`LABELS_SCHEMA` columns)."""
    thresholds = spec.thresholds
    frame = frame.filter(pl.col(metric).is_not_null())
    row: dict[str, Any] = {"metric": metric, "n": frame.height, "pass_threshold": thresholds.pass_,
                           "borderline_threshold": thresholds.borderline}
    if frame.height:
        row["mean"] = float(frame[metric].mean())  # type: ignore[arg-type]
    target = _spearman_target(frame, metric)
    if target is not None:
        label, values = target
        paired = pl.DataFrame({"x": frame[metric], "y": values}).drop_nulls()
        row["spearman"] = metrics.spearman(paired["x"].to_numpy(), paired["y"].to_numpy())
        row["spearman_label"] = label
    # the score's verdict is the landed one (forcing rules included); another metric is cut like a score
    forced_all = frame["forced_fail"].to_numpy() if metric == "score" else np.zeros(frame.height, bool)
    if metric == "score":
        verdicts_all = frame["verdict"].to_numpy().astype(object)
    else:
        verdicts_all = metrics.verdicts_at(frame[metric].to_numpy(), thresholds.borderline, thresholds.pass_)

    labelled = frame["good"].is_not_null().to_numpy()
    values = frame[metric].to_numpy()[labelled].astype(np.float64)
    good = frame["good"].to_numpy()[labelled].astype(bool)
    forced = forced_all[labelled]
    verdicts = verdicts_all[labelled]
    split = frame["split"].to_numpy()[labelled]
    row.update(n_good=int(good.sum()), n_bad=int((~good).sum()))
    if values.size:
        row["auroc"] = metrics.auroc(values, good)
        interval = metrics.auroc_interval(values, good, rng, spec.bootstrap)
        if interval is not None:
            row["auroc_ci_low"], row["auroc_ci_high"] = interval
        detection = metrics.Detection.of(verdicts == "fail", ~good)
        row.update(kappa=detection.kappa, f1=detection.f1, precision=detection.precision, recall=detection.recall,
                   tp=detection.tp, fp=detection.fp, fn=detection.fn, tn=detection.tn,
                   confusion=_verdict_label_counts(verdicts, good))

    expected_mask = frame["verdict_label"].is_not_null().to_numpy()
    if expected_mask.any():
        expected = frame["verdict_label"].to_numpy()[expected_mask].astype(object)
        matrix = metrics.confusion(list(verdicts_all[expected_mask]), list(expected), VERDICTS)
        row.update(n_expected=int(expected_mask.sum()), verdict_kappa=metrics.kappa_from_confusion(matrix),
                   verdict_accuracy=float(np.trace(matrix) / matrix.sum()),
                   verdict_confusion=_json({p: {e: int(matrix[i, j]) for j, e in enumerate(VERDICTS)}
                                            for i, p in enumerate(VERDICTS)}))
    row.update(_suggestion(frame, metric, values, good, forced, split, expected_mask, spec))
    return row


def _suggestion(frame: pl.DataFrame, metric: str, values: np.ndarray, good: np.ndarray, forced: np.ndarray,
                split: np.ndarray, expected_mask: np.ndarray, spec: CalibrationSpec) -> dict[str, Any]:
    """Thresholds fitted on the fit split, and the κ they and the current ones give."""
    thresholds = spec.thresholds
    current = (thresholds.borderline, thresholds.pass_)
    if expected_mask.sum() >= 2:  # expected verdicts: both thresholds at once, three-class κ
        all_forced = frame["forced_fail"].to_numpy() if metric == "score" else np.zeros(frame.height, bool)
        all_values = frame[metric].to_numpy().astype(np.float64)[expected_mask]
        expected = frame["verdict_label"].to_numpy()[expected_mask].astype(object)
        all_forced = all_forced[expected_mask]
        all_split = frame["split"].to_numpy()[expected_mask]
        fit, held = all_split == "fit", all_split == "holdout"
        found = metrics.best_verdict_cuts(all_values[fit], expected[fit], forced=all_forced[fit], prefer=current)
        out: dict[str, Any] = {"suggested_by": "verdict", "n_fit": int(fit.sum()), "n_holdout": int(held.sum())}

        def kappa_at(mask: np.ndarray, borderline: float, passing: float) -> float | None:
            if not mask.any():
                return None
            predicted = metrics.verdicts_at(all_values[mask], borderline, passing, all_forced[mask])
            return metrics.kappa_from_confusion(metrics.confusion(list(predicted), list(expected[mask]), VERDICTS))

        out["current_kappa_holdout"] = kappa_at(held, *current)
        both = metrics.best_verdict_cuts(all_values, expected, forced=all_forced, prefer=current)
        if both is not None:
            out.update(best_borderline=both[0].threshold, best_pass=both[1].threshold, best_kappa=both[0].kappa)
        if found is not None:
            borderline, passing = found
            out.update(suggested_borderline=borderline.threshold, suggested_pass=passing.threshold,
                       suggested_kappa_fit=borderline.kappa,
                       suggested_kappa_holdout=kappa_at(held, borderline.threshold, passing.threshold))
        return out
    if not values.size:
        return {}
    fit, held = split == "fit", split == "holdout"
    out = {"suggested_by": "faithful" if frame["faithful"].drop_nulls().len() else "verdict",
           "n_fit": int(fit.sum()), "n_holdout": int(held.sum())}
    if held.any():
        out["current_kappa_holdout"] = _holdout_kappa((values[held] < thresholds.borderline) | forced[held], ~good[held])
    best = metrics.best_fail_cut(values, good, forced=forced, prefer=thresholds.borderline)
    if best is not None:  # in-sample, over every labelled row: the ceiling of a threshold on this set
        best_pass = metrics.best_pass_cut(values, good, forced=forced, prefer=thresholds.pass_, at_least=best.threshold)
        out.update(best_borderline=best.threshold, best_kappa=best.kappa,
                   best_pass=best_pass.threshold if best_pass is not None else max(best.threshold, thresholds.pass_))
    fail_cut = metrics.best_fail_cut(values[fit], good[fit], forced=forced[fit], prefer=thresholds.borderline)
    if fail_cut is None:
        return out
    pass_cut = metrics.best_pass_cut(values[fit], good[fit], forced=forced[fit], prefer=thresholds.pass_,
                                     at_least=fail_cut.threshold)
    out.update(suggested_borderline=fail_cut.threshold,
               suggested_pass=pass_cut.threshold if pass_cut is not None else max(fail_cut.threshold, thresholds.pass_),
               suggested_kappa_fit=fail_cut.kappa)
    if held.any():
        out["suggested_kappa_holdout"] = _holdout_kappa((values[held] < fail_cut.threshold) | forced[held], ~good[held])
    return out


def _status_rates(rows: pl.DataFrame) -> dict[str, Any]:
    total = rows.height
    counts = dict(rows.group_by("judge_status").len().iter_rows())
    return {"n_records": total, "n_ok": int(counts.get("ok", 0)),
            **{f"rate_{s}": (counts.get(s, 0) / total if total else None) for s in JUDGE_STATUSES}}


def joined(evaluations: pl.DataFrame, labels: pl.DataFrame) -> pl.DataFrame:
    """The judged rows with their labels (``verdict`` is the judge's, ``verdict_label`` the human's)."""
    return evaluations.join(labels.rename({"verdict": "verdict_label"}), on="record_id", how="left")


def calibration_rows(
    evaluations: pl.DataFrame,
    labels: pl.DataFrame,
    spec: CalibrationSpec,
    *,
    calibration_id: str,
    calibrated_at: dt.datetime,
    set_uri: str | None = None,
) -> pl.DataFrame:
    """``calibrations`` rows: one per (judge, metric) of the spec, over the set's judged rows
    (``evaluations`` columns plus ``forced_fail``) and its labels (:data:`LABELS_SCHEMA`)."""
    rows = joined(evaluations, labels)
    out: list[dict[str, Any]] = []
    for judge in spec.judges:
        judged = rows.filter(pl.col("judge") == judge)
        versions = sorted(set(judged["prompt_version"].drop_nulls()))
        base = {
            "calibration_id": calibration_id, "set_name": spec.set_name, "set_uri": set_uri or spec.golden_uri,
            "judge": judge, "judge_model": spec.judge_model, "prompt_version": ",".join(versions) or None,
            "rules_version": RULES_VERSION, "seed": spec.seed, "bootstrap": spec.bootstrap,
            "calibrated_at": calibrated_at, **_status_rates(judged),
        }
        ok = judged.filter((pl.col("judge_status") == "ok") & pl.col("score").is_not_null())
        for metric in JUDGE_METRICS[judge]:
            out.append({**base, **metric_row(ok, metric, spec, rng_for(spec.seed, judge, metric))})
    return pl.DataFrame(out, schema=CALIBRATIONS_SCHEMA)


def roc_curves(evaluations: pl.DataFrame, labels: pl.DataFrame, judges: list[str]) -> dict[str, dict[str, list[tuple[float, float, float]]]]:
    """Per judge and metric, the ROC curve of flagging a low value as a hallucination detector."""
    rows = joined(evaluations, labels).filter((pl.col("judge_status") == "ok") & pl.col("good").is_not_null())
    curves: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for judge in judges:
        judged = rows.filter(pl.col("judge") == judge)
        for metric in JUDGE_METRICS[judge]:
            frame = judged.filter(pl.col(metric).is_not_null())
            points = metrics.roc_points(frame[metric].to_numpy(), frame["good"].to_numpy())
            if points:
                curves.setdefault(judge, {})[metric] = points
    return curves
