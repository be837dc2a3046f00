"""The daily report: one self-contained HTML page and ``summary.json`` per day (CONTRACT §3, §5).

Computing and rendering are apart: :mod:`evaluation.report.compute` reads the landed tables in
place and works out every number (:func:`compute_summary`, the content of ``summary.json``);
:mod:`evaluation.report.render` draws the page from those numbers (:func:`render_html`), so the
two always agree. :func:`write_daily_report` lands both at ``reports/dt=YYYY-MM-DD/``
(:func:`evaluation.storage.report_key`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from typing import Any

from evaluation.calibration.daily import calibration_summary
from evaluation.report.alerts import FLAG_BASELINES, AlertPolicy, t_quantile_975
from evaluation.report.compute import (
    ReportError,
    compute_summary,
    load_inputs,
    mean_interval,
    report_days,
    wilson_interval,
)
from evaluation.report.people import people_summary
from evaluation.report.render import render_html
from evaluation.storage import Store, read_consistently, read_json, report_key, write_json

logger = logging.getLogger(__name__)

__all__ = ["FLAG_BASELINES", "AlertPolicy", "ReportError", "build_daily_report", "compute_summary", "load_inputs",
           "mean_interval", "render_html", "t_quantile_975", "wilson_interval", "write_daily_report"]


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def build_daily_report(
    store: Store, day: dt.date, *, history_days: int = 30, policy: AlertPolicy | None = None
) -> tuple[str, dict[str, Any]]:
    """The day's page and its summary (the content of ``summary.json``), without landing them;
    ``policy`` decides the flags (:mod:`evaluation.report.alerts`, its defaults when None)."""

    # read again from the start when a day is landed again under the reading (read_consistently)
    computed = read_consistently(store, report_days(day, history_days), lambda landed: compute_summary(
        load_inputs(store, day, history_days=history_days, landed=landed), policy=policy))
    # agreement with people: the latest calibration of the day's judge model and prompt versions
    calibration = calibration_summary(store, computed.run.judge_models, computed.run.prompt_versions)
    # people's labels: their count and age, agreement, and the headline rates they correct
    people = people_summary(store, day)
    # the JSON of summary.json: DaySummary's keys, in its fields' order, then the two parts
    summary = _json_safe({**computed.model_dump(), "calibration": calibration.model_dump(),
                          "people": people.model_dump()})
    return render_html(computed, calibration=calibration, people=people), summary


def write_daily_report(
    store: Store,
    day: dt.date,
    *,
    history_days: int = 30,
    report_store: Store | None = None,
    policy: AlertPolicy | None = None,
) -> dict[str, str]:
    """Build and land the day's report: ``reports/dt=D/index.html`` and ``summary.json`` under the
    output root, or ``index.html`` and ``summary.json`` at the root of ``report_store`` when given.
    Returns their URIs as ``{"html": ..., "summary": ...}``, and ``replaced_fuller`` saying so when
    the report it replaced covered more rows or more days of trends (:func:`report_extent`)."""
    page, summary = build_daily_report(store, day, history_days=history_days, policy=policy)
    target, html_key, json_key = ((report_store, "index.html", "summary.json") if report_store is not None
                                  else (store, report_key(day, "index.html"), report_key(day, "summary.json")))
    before = report_extent(read_json(target, json_key)) if target.exists(json_key) else None
    write_json(target, json_key, summary)
    target.write_bytes(html_key, page.encode("utf-8"))
    written = {"html": target.uri(html_key), "summary": target.uri(json_key)}
    after = report_extent(summary)
    if before is not None and (after["rows"] < before["rows"] or after["trend_days"] < before["trend_days"]):
        written["replaced_fuller"] = (f"replaced the report at {written['html']}, which covered {before['rows']:,} rows "
                                      f"and {before['trend_days']} days of trends, with one covering {after['rows']:,} "
                                      f"rows and {after['trend_days']} days (fewer tables under {store.root}?)")
        logger.info("%s", written["replaced_fuller"])
    return written


def report_extent(summary: dict[str, Any]) -> dict[str, int]:
    """How much a report covers: the day's evaluation rows and the days its trends show."""
    days = {point.get("dt") for group in summary.get("groups", []) for point in group.get("trend", [])}
    return {"rows": int((summary.get("totals") or {}).get("rows") or 0), "trend_days": len(days)}
