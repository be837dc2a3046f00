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
from evaluation.contract import JudgeThresholds, RunConfig, Thresholds

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


#: Labelled rows of a judge's fit split below which a calibration's thresholds are not taken: a cut
#: chosen to maximise κ on fewer rows follows the sample more than the judge.
MIN_FIT_ROWS = 30


def calibrated_thresholds(store: storage.Store, reference: str, configured: Thresholds) -> JudgeThresholds:
    """The thresholds a calibration fitted for one judge (its ``score`` row). ``reference`` is
    ``<calibration id>/<judge>``, or the id alone when the calibration covers one judge.

    Refused (:class:`CalibrationError`) when the judge had fewer than :data:`MIN_FIT_ROWS`
    labelled rows to fit on, or no thresholds were fitted. Fitted against expected verdicts, both
    cuts are the calibration's; fitted against a binary label, only the pass cut is: the borderline
    stays ``configured``'s, or, where that is not below the fitted pass cut, sits the configured
    band's width under it, so the band never collapses onto the pass cut unless it was fitted so."""
    calibration, _, judge = reference.partition("/")
    key = storage.calibration_key(calibration, "calibration.parquet")
    if not store.exists(key):
        raise CalibrationError(f"thresholds_from {reference!r}: no calibration at {store.uri(key)}")
    scores = storage.read_parquet(store, key).filter(pl.col("metric") == "score")
    judges = ", ".join(scores["judge"].to_list()) or "none"
    rows = scores.filter(pl.col("judge") == judge) if judge else scores
    if rows.height != 1:
        raise CalibrationError(f"thresholds_from {reference!r}: name one judge of calibration {calibration} as "
                               f"<calibration id>/<judge> (its judges: {judges})")
    row = rows.row(0, named=True)
    source = f"{calibration}/{row['judge']}"
    fitted_on = row["n_fit"] or 0
    if fitted_on < MIN_FIT_ROWS:
        raise CalibrationError(
            f"thresholds_from {reference!r}: judge {row['judge']} had {fitted_on} labelled rows to fit thresholds "
            f"on ({row['n_ok']} ok rows of {row['n_records']} records); at least {MIN_FIT_ROWS} are needed: "
            "calibrate on a larger golden set, or leave this judge at the run's own thresholds")
    passing, borderline = row["suggested_pass"], row["suggested_borderline"]
    if passing is None or borderline is None:
        raise CalibrationError(f"thresholds_from {reference!r}: calibration {calibration} fitted no thresholds for "
                               f"judge {row['judge']} (its labels on the fit split may all be of one class)")
    if row["suggested_by"] == "verdict":  # three verdicts labelled: the band itself was fitted
        return JudgeThresholds.model_validate({"pass": max(passing, borderline), "borderline": borderline,
                                               "source": source})
    if configured.borderline >= passing:
        width = configured.pass_ - configured.borderline
        borderline = round(max(0.0, passing - width), 6)
    else:
        borderline = configured.borderline
    return JudgeThresholds.model_validate({"pass": passing, "borderline": borderline, "source": source})


def with_calibrated_thresholds(cfg: RunConfig, store: storage.Store) -> RunConfig:
    """``cfg`` with its ``thresholds_in_force``: for each judge its ``thresholds_from`` names, the
    thresholds that calibration fitted for it; for every other selected judge, the run's own."""
    calibrated: dict[str, JudgeThresholds] = {}
    for reference in (cfg.thresholds_from or "").split(","):
        if not reference:
            continue
        thresholds = calibrated_thresholds(store, reference, cfg.thresholds)
        judge = thresholds.source.rpartition("/")[2]
        if judge not in cfg.judges:
            raise CalibrationError(f"thresholds_from {reference!r}: the run does not select judge {judge} "
                                   f"(judges: {', '.join(cfg.judges)})")
        if judge in calibrated:
            raise CalibrationError(f"thresholds_from names judge {judge} twice ({calibrated[judge].source} and "
                                   f"{thresholds.source})")
        calibrated[judge] = thresholds
        logger.info("run %s: judge %s verdicts at pass %s / borderline %s from calibration %s", cfg.run_id, judge,
                    thresholds.pass_, thresholds.borderline, thresholds.source)
    return cfg.with_thresholds_in_force(calibrated)
