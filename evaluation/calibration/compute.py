"""The calibration's figures: per judge and metric, agreement of the judged values and verdicts with
the human labels (:func:`calibration_rows`), from the judged rows of a golden set and its labels.

The figures are the share of each ``judge_status``, AUROC, Spearman, κ, F1, precision and recall of
``fail``, the agreement with expected verdicts and the suggested thresholds. What each is and how it
is measured: docs/golden-sets.md, "What is measured"; the conventions: :mod:`evaluation.calibration.metrics`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import polars as pl

from evaluation.calibration import metrics
from evaluation.compare.stats import rng_for
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.config import JUDGE_STATUSES, RULES_VERSION, VERDICTS, Thresholds
from evaluation.contract.schemas import CALIBRATIONS_SCHEMA
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS

#: Metrics calibrated per judge, in report order.
JUDGE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("score", *RAG_METRICS),
    "masis": ("score", *MASIS_DIMENSIONS),
    "prompt": ("score",),
}


def forced_fail() -> pl.Expr:
    """Rows whose verdict a contract rule forces to ``fail`` whatever the thresholds: rag's
    faithfulness of 0.0 (CONTRACT §2.2 (5)), prompt's unsatisfied required rubric (§2.4) and an
    empty answer (§2.5). Over parsed-and-scored rows (``required_unsatisfied`` and ``empty_answer``
    are parsed-row columns)."""
    ok = pl.col("judge_status") == "ok"
    rag = (pl.col("judge") == "rag") & (pl.col("faithfulness") == 0.0)
    prompt = (pl.col("judge") == "prompt") & pl.col("required_unsatisfied").fill_null(False)
    return (ok & (rag | prompt | pl.col("empty_answer").fill_null(False))).fill_null(False).alias("forced_fail")


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
    all_values = frame[metric].to_numpy().astype(np.float64)
    all_split = frame["split"].to_numpy()
    # the score's verdict is the landed one (forcing rules included); another metric is cut like a score
    all_forced = frame["forced_fail"].to_numpy() if metric == "score" else np.zeros(frame.height, bool)
    all_verdicts = (frame["verdict"].to_numpy().astype(object) if metric == "score"
                    else metrics.verdicts_at(all_values, thresholds.borderline, thresholds.pass_))

    labelled = frame["good"].is_not_null().to_numpy()
    values, forced, verdicts = all_values[labelled], all_forced[labelled], all_verdicts[labelled]
    good = frame["good"].to_numpy()[labelled].astype(bool)
    row.update(n_good=int(good.sum()), n_bad=int((~good).sum()))
    if values.size:
        row["auroc"] = metrics.auroc(values, good)
        interval = metrics.auroc_interval(values, good, rng, spec.bootstrap)
        if interval is not None:
            row["auroc_ci_low"], row["auroc_ci_high"] = interval
        detection = metrics.Detection.of(verdicts == "fail", ~good)
        row.update(kappa=detection.kappa, f1=detection.f1, precision=detection.precision, recall=detection.recall,
                   tp=detection.tp, fp=detection.fp, fn=detection.fn, tn=detection.tn,
                   confusion=json.dumps({v: {"good": int(((verdicts == v) & good).sum()),
                                             "bad": int(((verdicts == v) & ~good).sum())} for v in VERDICTS}))

    with_expected = frame["verdict_label"].is_not_null().to_numpy()
    expected = frame["verdict_label"].to_numpy()[with_expected].astype(object)
    if expected.size:
        matrix = metrics.confusion(list(all_verdicts[with_expected]), list(expected), VERDICTS)
        row.update(n_expected=expected.size, verdict_kappa=metrics.kappa_from_confusion(matrix),
                   verdict_accuracy=float(np.trace(matrix) / matrix.sum()),
                   verdict_confusion=json.dumps({p: {e: int(matrix[i, j]) for j, e in enumerate(VERDICTS)}
                                                 for i, p in enumerate(VERDICTS)}))
    if expected.size >= 2:
        row.update(_verdict_suggestion(all_values[with_expected], expected, all_forced[with_expected],
                                       all_split[with_expected], spec))
    elif values.size:
        suggested_by = "faithful" if frame["faithful"].drop_nulls().len() else "verdict"
        row.update(_fail_suggestion(values, good, forced, all_split[labelled], spec, suggested_by))
    return row


def _verdict_suggestion(values: np.ndarray, expected: np.ndarray, forced: np.ndarray, split: np.ndarray,
                        spec: CalibrationSpec) -> dict[str, Any]:
    """Against expected verdicts: both thresholds fitted at once on the fit split (three-class κ),
    and the κ they and the current ones give."""
    current = (spec.thresholds.borderline, spec.thresholds.pass_)
    fit, held = split == "fit", split == "holdout"
    out: dict[str, Any] = {"suggested_by": "verdict", "n_fit": int(fit.sum()), "n_holdout": int(held.sum())}

    def kappa_at(mask: np.ndarray, borderline: float, passing: float) -> float | None:
        if not mask.any():
            return None
        predicted = metrics.verdicts_at(values[mask], borderline, passing, forced[mask])
        return metrics.kappa_from_confusion(metrics.confusion(list(predicted), list(expected[mask]), VERDICTS))

    out["current_kappa_holdout"] = kappa_at(held, *current)
    both = metrics.best_verdict_cuts(values, expected, forced=forced, prefer=current)
    if both is not None:
        out.update(best_borderline=both[0].threshold, best_pass=both[1].threshold, best_kappa=both[0].kappa)
    found = metrics.best_verdict_cuts(values[fit], expected[fit], forced=forced[fit], prefer=current)
    if found is not None:
        borderline, passing = found
        out.update(suggested_borderline=borderline.threshold, suggested_pass=passing.threshold,
                   suggested_kappa_fit=borderline.kappa,
                   suggested_kappa_holdout=kappa_at(held, borderline.threshold, passing.threshold))
    return out


def _fail_and_pass_cuts(values: np.ndarray, good: np.ndarray, forced: np.ndarray,
                        thresholds: Thresholds) -> tuple[metrics.Cut, float] | None:
    """The κ-maximising borderline cut for ``fail``, and the κ-maximising pass threshold at or above
    it (else the current one, raised to the cut)."""
    fail_cut = metrics.best_cut(values, good, forced=forced, prefer=thresholds.borderline)
    if fail_cut is None:
        return None
    pass_cut = metrics.best_cut(values, good, forced=forced, prefer=thresholds.pass_, at_least=fail_cut.threshold)
    return fail_cut, pass_cut.threshold if pass_cut is not None else max(fail_cut.threshold, thresholds.pass_)


def _fail_suggestion(values: np.ndarray, good: np.ndarray, forced: np.ndarray, split: np.ndarray,
                     spec: CalibrationSpec, suggested_by: str) -> dict[str, Any]:
    """Against the binary label: the thresholds fitted on the fit split, and the κ of ``fail`` they
    and the current ones give."""
    thresholds = spec.thresholds
    fit, held = split == "fit", split == "holdout"
    out: dict[str, Any] = {"suggested_by": suggested_by, "n_fit": int(fit.sum()), "n_holdout": int(held.sum())}

    def kappa_held(borderline: float) -> float | None:
        return metrics.Detection.of((values[held] < borderline) | forced[held], ~good[held]).kappa if held.any() else None

    out["current_kappa_holdout"] = kappa_held(thresholds.borderline)
    best = _fail_and_pass_cuts(values, good, forced, thresholds)
    if best is not None:  # in-sample, over every labelled row: the ceiling of a threshold on this set
        out.update(best_borderline=best[0].threshold, best_kappa=best[0].kappa, best_pass=best[1])
    fitted = _fail_and_pass_cuts(values[fit], good[fit], forced[fit], thresholds)
    if fitted is not None:
        fail_cut, suggested_pass = fitted
        out.update(suggested_borderline=fail_cut.threshold, suggested_pass=suggested_pass,
                   suggested_kappa_fit=fail_cut.kappa, suggested_kappa_holdout=kappa_held(fail_cut.threshold))
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
) -> pl.DataFrame:
    """``calibrations`` rows: one per (judge, metric) of the spec, over the set's judged rows
    (``evaluations`` columns plus ``forced_fail``) and its labels (:data:`LABELS_SCHEMA`)."""
    rows = joined(evaluations, labels)
    out: list[dict[str, Any]] = []
    for judge in spec.judges:
        judged = rows.filter(pl.col("judge") == judge)
        versions = sorted(set(judged["prompt_version"].drop_nulls()))
        base = {
            "calibration_id": calibration_id, "set_name": spec.set_name, "set_uri": spec.golden_uri,
            "judge": judge, "judge_model": spec.judge_name, "prompt_version": ",".join(versions) or None,
            "rules_version": RULES_VERSION, "seed": spec.seed, "bootstrap": spec.bootstrap,
            "calibrated_at": calibrated_at, **_status_rates(judged),
        }
        ok = judged.filter((pl.col("judge_status") == "ok") & pl.col("score").is_not_null())
        for metric in JUDGE_METRICS[judge]:
            out.append({**base, **metric_row(ok, metric, spec, rng_for(spec.seed, "calibration", judge, metric))})
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
