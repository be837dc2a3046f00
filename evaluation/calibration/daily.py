"""Agreement in the daily story: the latest calibration of the day's judge model and prompt versions,
for the daily report (:func:`calibration_summary`, its ``summary.json`` part, and
:func:`calibration_section`, its HTML), and the thresholds a run takes from a calibration
(:func:`calibrated_thresholds`)."""

from __future__ import annotations

import logging
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.calibration.spec import CalibrationError
from evaluation.charts import esc
from evaluation.contract import RunConfig, Thresholds

logger = logging.getLogger(__name__)

#: The columns of a calibration the daily report shows (the ``score`` row of each judge and set).
SHOWN = ("judge", "prompt_version", "set_name", "calibration_id", "calibrated_at", "n", "auroc", "auroc_ci_low",
         "auroc_ci_high", "spearman", "kappa", "f1", "suggested_borderline", "suggested_pass",
         "suggested_kappa_holdout", "current_kappa_holdout", "pass_threshold", "borderline_threshold")


def calibration_summary(store: storage.Store, judge_models: list[str], prompt_versions: list[str]) -> dict[str, Any]:
    """Per judge model of the day, the latest calibration (``score`` rows, every set) of each of the
    day's judge prompt versions (``judge@hash``), and the prompt versions no calibration covers."""
    from evaluation.calibration.run import latest_calibrations

    versions: dict[str, str] = {}
    for version in prompt_versions:
        judge, _, _ = version.partition("@")
        versions.setdefault(judge, version)
    found: list[dict[str, Any]] = []
    missing: list[dict[str, str]] = []
    for judge_model in judge_models:
        try:
            latest = latest_calibrations(store, judge_model, versions)
        except Exception as exc:  # the report must not fail on an unreadable calibration
            logger.warning("calibrations under %s could not be read: %s", store.uri("calibrations/"), exc)
            latest = None
        rows = [] if latest is None else latest.filter(pl.col("metric") == "score").select(SHOWN).to_dicts()
        for row in rows:
            row["judge_model"] = judge_model
            row["report_uri"] = store.uri(storage.calibration_key(row["calibration_id"], "report.html"))
        found += rows
        covered = {r["judge"] for r in rows}
        missing += [{"judge_model": judge_model, "judge": j, "prompt_version": v} for j, v in versions.items()
                    if j not in covered]
    return {"calibrations": found, "uncalibrated": missing}


def _fmt(value: Any) -> str:
    return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else esc(value))


def calibration_section(summary: dict[str, Any]) -> str:
    """The daily report's "Agreement with people" section (from ``summary["calibration"]``)."""
    data = summary.get("calibration") or {"calibrations": [], "uncalibrated": []}
    parts = ["<section id='agreement'><h2>Agreement with people</h2>"]
    rows = data["calibrations"]
    if rows:
        parts.append("<p class='note'>The latest calibration of the day's judge model and prompt versions on each "
                     "golden set (<code>python -m evaluation calibrate</code>, the <code>judge_calibration</code> DAG): "
                     "AUROC of the score against the human labels, and Cohen's κ and F1 of <code>fail</code> "
                     "against the records labelled not faithful, at the thresholds the calibration ran at.</p>")
        head = ("<tr><th>judge</th><th>judge model</th><th>golden set</th><th class='num'>records</th>"
                "<th class='num'>AUROC (95% CI)</th><th class='num'>κ of fail</th><th class='num'>F1</th>"
                "<th class='num'>Spearman</th><th class='num'>suggested borderline / pass (κ held out)</th>"
                "<th>calibrated</th></tr>")
        body = []
        for r in rows:
            ci = "" if r["auroc_ci_low"] is None else f" ({_fmt(r['auroc_ci_low'])} – {_fmt(r['auroc_ci_high'])})"
            suggested = ("–" if r["suggested_borderline"] is None else
                         f"{_fmt(r['suggested_borderline'])} / {_fmt(r['suggested_pass'])} "
                         f"({_fmt(r['suggested_kappa_holdout'])} vs {_fmt(r['current_kappa_holdout'])} now)")
            body.append(
                f"<tr><td><code>{esc(r['judge'])}</code></td><td><code>{esc(r['judge_model'])}</code></td>"
                f"<td>{esc(r['set_name'])}</td><td class='num'>{r['n']}</td><td class='num'>{_fmt(r['auroc'])}{ci}</td>"
                f"<td class='num'>{_fmt(r['kappa'])}</td><td class='num'>{_fmt(r['f1'])}</td>"
                f"<td class='num'>{_fmt(r['spearman'])}</td><td class='num'>{suggested}</td>"
                f"<td class='text'>{esc(str(r['calibrated_at'])[:19])} · <code>{esc(r['calibration_id'])}</code><br>"
                f"<code>{esc(r['report_uri'])}</code></td></tr>")
        parts.append(f"<div class='table-wrap'><table class='compact'><thead>{head}</thead><tbody>{''.join(body)}"
                     "</tbody></table></div>")
    for item in data["uncalibrated"]:
        parts.append(f"<p class='note'>No calibration of <code>{esc(item['judge'])}</code> "
                     f"(<code>{esc(item['prompt_version'])}</code>) with <code>{esc(item['judge_model'])}</code> "
                     "exists: its verdicts' agreement with people is unmeasured.</p>")
    if not rows and not data["uncalibrated"]:
        parts.append("<p class='note'>No judge ran this day: no calibration to show.</p>")
    parts.append("</section>")
    return "".join(parts)


def calibrated_thresholds(store: storage.Store, reference: str) -> Thresholds:
    """The suggested thresholds of a calibration's ``score`` row: ``reference`` is
    ``<calibration id>/<judge>``, or the id alone when the calibration suggests for one judge only."""
    calibration, _, judge = reference.partition("/")
    key = storage.calibration_key(calibration, "calibration.parquet")
    if not store.exists(key):
        raise CalibrationError(f"thresholds_from {reference!r}: no calibration at {store.uri(key)}")
    scores = storage.read_parquet(store, key).filter(pl.col("metric") == "score")
    table = scores.filter(pl.col("suggested_borderline").is_not_null())
    if judge:
        table = table.filter(pl.col("judge") == judge)
    if table.height != 1:
        judges = ", ".join(scores["judge"].to_list())
        raise CalibrationError(f"thresholds_from {reference!r}: name one judge of the calibration as "
                               f"<calibration id>/<judge> (judges with a suggestion: {judges or 'none'})")
    row = table.row(0, named=True)
    return Thresholds.model_validate({"pass": max(row["suggested_pass"], row["suggested_borderline"]),
                                      "borderline": row["suggested_borderline"]})


def with_calibrated_thresholds(cfg: RunConfig, store: storage.Store) -> RunConfig:
    """``cfg`` with the thresholds of its ``thresholds_from`` calibration (unchanged without one)."""
    reference = cfg.thresholds_from
    if not reference:
        return cfg
    thresholds = calibrated_thresholds(store, reference)
    logger.info("run %s: thresholds pass %s / borderline %s from calibration %s", cfg.run_id, thresholds.pass_,
                thresholds.borderline, reference)
    return cfg.model_copy(update={"thresholds": thresholds})
