"""Agreement in the daily story: the latest calibration of the day's judge model and prompt versions,
for the daily report (:func:`calibration_summary`, its ``summary.json`` part, and
:func:`calibration_section`, its HTML). The thresholds a run takes from a calibration are the
stages' (:mod:`evaluation.stages.thresholds`)."""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Annotated

import polars as pl
from pydantic import AfterValidator, BaseModel, ConfigDict

from evaluation import storage
from evaluation.pages.charts import esc
from evaluation.pages.html import table
from evaluation.pages.markup import figure as _fmt
from evaluation.pages.markup import note, section

logger = logging.getLogger(__name__)

#: A figure as ``summary.json`` holds it: None where the calibration has none or a NaN.
Figure = Annotated[float | None, AfterValidator(lambda v: v if v is None or math.isfinite(v) else None)]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Calibrated(_Row):
    """A judge's latest calibration on a golden set: the :data:`SHOWN` columns of its ``score`` row."""

    judge: str
    prompt_version: str
    set_name: str
    calibration_id: str
    calibrated_at: dt.datetime
    n: int | None
    auroc: Figure
    auroc_ci_low: Figure
    auroc_ci_high: Figure
    spearman: Figure
    kappa: Figure
    f1: Figure
    suggested_borderline: Figure
    suggested_pass: Figure
    suggested_kappa_holdout: Figure
    current_kappa_holdout: Figure
    pass_threshold: Figure
    borderline_threshold: Figure
    judge_model: str
    report_uri: str


#: The columns of a calibration the daily report shows (the ``score`` row of each judge and set).
SHOWN = tuple(name for name in Calibrated.model_fields if name not in ("judge_model", "report_uri"))


class Uncalibrated(_Row):
    """A day's judge prompt version no calibration with the judge model covers."""

    judge_model: str
    judge: str
    prompt_version: str


class Stale(_Row):
    """A judge's latest calibration on a set, made with another prompt version than the day's."""

    set_name: str
    judge: str
    calibration_id: str
    prompt_version: str
    calibrated_at: dt.datetime
    n: int | None
    judge_model: str
    current_prompt_version: str


class Calibrations(_Row):
    """The ``calibration`` part of ``summary.json`` (:func:`calibration_summary`)."""

    calibrations: list[Calibrated]
    uncalibrated: list[Uncalibrated]
    stale: list[Stale]


def calibration_summary(store: storage.Store, judge_models: list[str], prompt_versions: list[str]) -> Calibrations:
    """Per judge model of the day, the latest calibration (``score`` rows, every set) of each of the
    day's judge prompt versions (``judge@hash``), and the prompt versions no calibration covers."""
    versions: dict[str, str] = {}
    for version in prompt_versions:
        judge, _, _ = version.partition("@")
        versions.setdefault(judge, version)
    found: list[Calibrated] = []
    missing: list[Uncalibrated] = []
    stale: list[Stale] = []
    for judge_model in judge_models:
        try:
            latest = latest_calibrations(store, judge_model, versions)
            stale += stale_calibrations(store, judge_model, versions)
        except (storage.StorageError, pl.exceptions.PolarsError) as exc:  # the report must not fail on an unreadable calibration
            logger.warning("calibrations under %s could not be read: %s", store.uri("calibrations/"), exc)
            latest = None
        rows = [] if latest is None else latest.filter(pl.col("metric") == "score").select(SHOWN).to_dicts()
        found += [Calibrated(**row, judge_model=judge_model, report_uri=store.uri(
            storage.calibration_key(row["calibration_id"], "report.html"))) for row in rows]
        covered = {r["judge"] for r in rows}
        missing += [Uncalibrated(judge_model=judge_model, judge=j, prompt_version=v) for j, v in versions.items()
                    if j not in covered]
    return Calibrations(calibrations=found, uncalibrated=missing, stale=stale)


def stale_calibrations(store: storage.Store, judge_model: str, versions: dict[str, str]) -> list[Stale]:
    """The latest calibration of ``judge_model`` per (set, judge) made with another prompt version
    than the day's: it no longer applies (``thresholds_from`` refuses it)."""
    keys = [o.key for o in store.list("calibrations/") if o.key.endswith("/calibration.parquet")]
    if not keys:
        return []
    frame = (storage.scan_parquet(store, keys, hive=False)
             .filter((pl.col("judge_model") == judge_model) & (pl.col("metric") == "score"))
             .select("calibration_id", "set_name", "judge", "prompt_version", "calibrated_at", "n").collect())
    latest = frame.sort("calibrated_at").group_by("set_name", "judge").last().sort("set_name", "judge")
    rows = [r for r in latest.to_dicts() if r["judge"] in versions and r["prompt_version"] != versions[r["judge"]]]
    return [Stale(**r, judge_model=judge_model, current_prompt_version=versions[r["judge"]]) for r in rows]


def latest_calibrations(store: storage.Store, judge_model: str, versions: dict[str, str]) -> pl.DataFrame | None:
    """The latest ``calibrations`` rows of ``judge_model`` per (set, judge), for the judges'
    current prompt versions (``versions``: judge -> prompt version); None when there are none."""
    keys = [o.key for o in store.list("calibrations/") if o.key.endswith("/calibration.parquet")]
    if not keys:
        return None
    frame = storage.scan_parquet(store, keys, hive=False).filter(pl.col("judge_model") == judge_model).collect()
    frame = frame.filter(pl.col("prompt_version") == pl.col("judge").replace_strict(
        {j: v for j, v in versions.items() if v}, default=None, return_dtype=pl.String))
    if frame.is_empty():
        return None
    latest = frame.group_by("set_name", "judge").agg(pl.col("calibrated_at").max())
    return frame.join(latest, on=["set_name", "judge", "calibrated_at"], how="semi").sort("set_name", "judge", "metric")


def calibration_section(calibration: Calibrations | None) -> str:
    """The daily report's "Agreement with people" section (from ``summary.json``'s ``calibration``:
    :func:`calibration_summary`)."""
    data = calibration or Calibrations(calibrations=[], uncalibrated=[], stale=[])
    parts = []
    rows = data.calibrations
    if rows:
        parts.append(note("The latest calibration of the day's judge model and prompt versions on each "
                          "golden set (<code>python -m evaluation calibrate</code>, the <code>judge_calibration</code> "
                          "DAG): AUROC of the score against the human labels, and Cohen's κ and F1 of "
                          "<code>fail</code> against the records labelled not faithful, at the thresholds the "
                          "calibration ran at."))
        head = ("<th>judge</th><th>judge model</th><th>golden set</th><th class='num'>records</th>"
                "<th class='num'>AUROC (95% CI)</th><th class='num'>κ of fail</th><th class='num'>F1</th>"
                "<th class='num'>Spearman</th><th class='num'>suggested borderline / pass (κ held out)</th>"
                "<th>calibrated</th>")
        body = []
        for r in rows:
            ci = "" if r.auroc_ci_low is None else f" ({_fmt(r.auroc_ci_low)} – {_fmt(r.auroc_ci_high)})"
            suggested = ("–" if r.suggested_borderline is None else
                         f"{_fmt(r.suggested_borderline)} / {_fmt(r.suggested_pass)} "
                         f"({_fmt(r.suggested_kappa_holdout)} vs {_fmt(r.current_kappa_holdout)} now)")
            body.append(
                f"<tr><td><code>{esc(r.judge)}</code></td><td><code>{esc(r.judge_model)}</code></td>"
                f"<td>{esc(r.set_name)}</td><td class='num'>{r.n}</td><td class='num'>{_fmt(r.auroc)}{ci}</td>"
                f"<td class='num'>{_fmt(r.kappa)}</td><td class='num'>{_fmt(r.f1)}</td>"
                f"<td class='num'>{_fmt(r.spearman)}</td><td class='num'>{suggested}</td>"
                f"<td class='text'>{esc(r.calibrated_at.isoformat()[:19])} · <code>{esc(r.calibration_id)}</code><br>"
                f"<code>{esc(r.report_uri)}</code></td></tr>")
        parts.append(table([head], body, compact=True))
    for item in data.uncalibrated:
        parts.append(note(f"No calibration of <code>{esc(item.judge)}</code> "
                          f"(<code>{esc(item.prompt_version)}</code>) with <code>{esc(item.judge_model)}</code> "
                          "exists: its verdicts' agreement with people is unmeasured."))
    for stale in data.stale:
        parts.append(note(f"<b>stale</b>: calibration <code>{esc(stale.calibration_id)}</code> of "
                          f"<code>{esc(stale.judge)}</code> with <code>{esc(stale.judge_model)}</code> on "
                          f"{esc(stale.set_name)} ({stale.n} records, {esc(stale.calibrated_at.isoformat()[:10])}) "
                          f"was made with prompt <code>{esc(stale.prompt_version)}</code>; the day ran "
                          f"<code>{esc(stale.current_prompt_version)}</code>, so it no longer applies."))
    if not rows and not data.uncalibrated:
        parts.append(note("No judge ran this day: no calibration to show."))
    return section("agreement", "Agreement with people", *parts)
