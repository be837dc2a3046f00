"""Segments of the daily report: per-segment rows of ``daily_summary``, their own family of flags
(steady days over a simulated fortnight raise none, however many segments), the headline line that
names the segment that moved and the segments too small to monitor; and the large non-significant
changes the page names (a failed latest run on the page: tests/integration/test_report_runs.py)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import numpy as np
import polars as pl
import pytest
from evaluation_notifications import regression_message

from evaluation.report import AlertPolicy, compute_summary, render_html
from evaluation.report.compute import ReportInputs
from evaluation.report.segments import SEGMENT_MIN_ROWS
from evaluation.report.summary import DaySummary
from evaluation.storage.summary import MISSING_SEGMENT, OTHER_SEGMENT, build_daily_summary, segment_values

LAST = dt.date(2026, 11, 20)


def test_segment_values_keep_the_top_values_and_call_the_rest_other() -> None:
    locales = ["en"] * 5 + ["de"] * 3 + ["fr"] * 2 + ["es", "it"]
    records = pl.DataFrame({
        "record_id": [f"r{i}" for i in range(len(locales) + 1)],
        "metadata": [json.dumps({"locale": v, "customer": {"tier": "gold" if i % 2 else "free"}})
                     for i, v in enumerate(locales)] + [json.dumps({"channel": "web"})],
    })
    values = segment_values(records.lazy(), ["metadata.locale", "metadata.customer.tier"], top=4)  # ties by value: (none) before es
    locale = dict(values.filter(pl.col("segment_key") == "metadata.locale").select("record_id", "segment_value").iter_rows())
    assert [locale[f"r{i}"] for i in (0, 5, 8, 10, 11, 12)] == ["en", "de", "fr", OTHER_SEGMENT, OTHER_SEGMENT, "(none)"]
    assert MISSING_SEGMENT == "(none)"
    tiers = values.filter(pl.col("segment_key") == "metadata.customer.tier")["segment_value"].value_counts()
    assert dict(tiers.iter_rows()) == {"gold": 6, "free": 6, "(none)": 1}


def test_segment_rows_add_up_to_the_whole_model_rows() -> None:
    rng = np.random.default_rng(3)
    n = 300
    rows = pl.DataFrame({
        "record_id": [f"r{i}" for i in range(n)], "model": ["m1", "m2"] * (n // 2), "judge": "rag",
        "judge_status": "ok", "score": rng.uniform(0, 1, n), "input_tokens": 10, "output_tokens": 2, "cost_usd": 0.001,
        "cached": False, "attempts": 1, "latency_ms": 100.0,
        **{m: None for m in ("faithfulness", "relevance", "completeness", "reasoning_quality", "context_relevance",
                             "answer_relevance", "semantic_similarity")},
    }).with_columns(verdict=pl.when(pl.col("score") >= 0.8).then(pl.lit("pass"))
                    .when(pl.col("score") >= 0.6).then(pl.lit("borderline")).otherwise(pl.lit("fail")))
    segments = segment_values(pl.LazyFrame({"record_id": rows["record_id"], "metadata": [
        json.dumps({"locale": ["en", "de", "fr"][i % 3]}) for i in range(n)]}), ["metadata.locale"])
    summary = build_daily_summary(rows, "run-1", segments)
    whole = summary.filter(pl.col("segment_key").is_null()).sort("model")
    parts = (summary.filter(pl.col("segment_key") == "metadata.locale").group_by("model")
             .agg(pl.col("rows", "n_ok", "n_pass", "n_fail").sum()).sort("model"))
    assert whole.select("model", "rows", "n_ok", "n_pass", "n_fail").equals(parts.select(whole.select(
        "model", "rows", "n_ok", "n_pass", "n_fail").columns))
    assert summary.filter(pl.col("segment_key").is_not_null())["segment_value"].unique().sort().to_list() == ["de", "en", "fr"]


# --------------------------------------------------------------------------------------------
# A simulated fortnight of summaries (no evaluations: the flags read daily_summary alone)

KEYS = {"metadata.locale": ["en", "de", "fr", "es", OTHER_SEGMENT],
        "metadata.route": ["search", "billing", "support", "account"],
        "metadata.tier": ["free", "pro", "enterprise"]}


def _summary_row(day: dt.date, model: str, n: int, p: float, rng: np.random.Generator,
                 segment: tuple[str, str] | None) -> dict[str, Any]:
    n_pass = int(rng.binomial(n, p))
    n_fail = int(rng.binomial(n - n_pass, 0.6))
    score = 0.45 + 0.45 * (n_pass / n)
    return {"dt": day, "run_id": f"run-{day}", "model": model, "judge": "rag", "rows": n, "n_ok": n,
            "n_parse_error": 0, "n_judge_failed": 0, "n_call_error": 0, "n_skipped": 0, "n_pass": n_pass,
            "n_borderline": n - n_pass - n_fail, "n_fail": n_fail, "pass_rate": n_pass / n,
            "score_mean": float(score), "score_std": 0.25, "score_n": n,
            "segment_key": segment[0] if segment else None, "segment_value": segment[1] if segment else None}


def fortnight(seed: int, regressed: tuple[str, str, str] | None = None,
              drops: dict[dt.date, float] | None = None) -> pl.DataFrame:
    """14 days of daily_summary rows of two models, whole and per value of three keys; each
    segment's pass rate drifts from day to day (its own level, plus a daily wobble); ``regressed``
    (model, key, value) drops by ``drops[day]`` on those days (30 pp on the last day)."""
    drops = {LAST: 0.3} if drops is None else drops
    rng = np.random.default_rng(seed)
    days = [LAST - dt.timedelta(days=i) for i in range(13, -1, -1)]
    level = {(m, k, v): rng.uniform(0.6, 0.85) for m in ("m1", "m2") for k, vs in KEYS.items() for v in vs}
    rows = []
    for day in days:
        for model in ("m1", "m2"):
            rows.append(_summary_row(day, model, 600, 0.75 + rng.normal(0, 0.01), rng, None))
            for key, values in KEYS.items():
                for value in values:
                    p = level[(model, key, value)] + rng.normal(0, 0.02)
                    if regressed == (model, key, value):
                        p -= drops.get(day, 0.0)
                    n = 25 if value == "account" else 120  # one value too small to monitor
                    rows.append(_summary_row(day, model, n, min(max(p, 0.01), 0.99), rng, (key, value)))
    return pl.DataFrame(rows)


def summary_of(history: pl.DataFrame, day: dt.date) -> dict[str, Any]:
    return compute_summary(ReportInputs(day=day, root="mem://", history_days=14, history=history.filter(pl.col("dt") <= day),
                                        evaluations=None, rejects=None, runs=None, summary_source="daily_summary"),
                           policy=AlertPolicy()).model_dump()


def page_of(summary: dict[str, Any]) -> str:
    """The page of a summary as ``summary.json`` holds it, read back as its model."""
    return render_html(DaySummary.model_validate(summary))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_steady_days_raise_no_segment_flag_over_a_fortnight(seed: int) -> None:
    history = fortnight(seed)
    tested = 0
    for offset in range(11, -1, -1):  # every day with at least one earlier day
        summary = summary_of(history, LAST - dt.timedelta(days=offset))
        segments = summary["segments"]
        tested += sum(1 for g in segments["groups"] for m in g["rates"].values()
                      if (m.get("reference") or {}).get("p_value") is not None)
        assert segments["flags"] == [] and segments["headline"] == [] and summary["alerting"] == []
    assert tested > 500  # the family is large: without a correction across it, steady days would flag


def test_a_segment_regression_is_named_and_the_others_steady() -> None:
    summary = summary_of(fortnight(1, regressed=("m2", "metadata.locale", "de")), LAST)
    lines = summary["segments"]["headline"]
    assert [(line["model"], line["segment"]) for line in lines] == [("m2", {"key": "metadata.locale", "value": "de"})]
    assert lines[0]["others_steady"] and {c["measure"] for c in lines[0]["changes"]} >= {"pass_rate"}
    assert summary["alerting"] == ["m2"]
    assert {(f["model"], f["segment"]["value"]) for f in summary["segments"]["flags"] if f["alerts"]} == {("m2", "de")}
    page = page_of(summary)
    line = page.split("<code>m2</code>", 1)[1].split("</li>", 1)[0]
    assert "regressed in locale=de</span>: rag " in line and "rag pass rate" in line and "other locale values steady" in line


def test_a_segment_regression_stays_regressed_pages_once_and_recovers() -> None:
    days = [LAST - dt.timedelta(days=i) for i in range(6, -1, -1)]
    drops = {days[1]: 0.3, days[2]: 0.3, days[3]: 0.3, days[4]: 0.6}  # worse on the fourth day, back on the fifth
    history = fortnight(1, regressed=("m2", "metadata.locale", "de"), drops=drops)
    summaries = [summary_of(history, day) for day in days]
    lines = [summary["segments"]["headline"] for summary in summaries]
    assert lines[0] == [] and lines[5] == [] and lines[6] == []  # before the drop; recovered
    regressed = [found[0] for found in lines[1:5]]
    assert all(len(found) == 1 and (found[0]["model"], found[0]["segment"]["value"]) == ("m2", "de") for found in lines[1:5])
    assert [line["since"] for line in regressed] == [days[1].isoformat()] * 4 and [line["day"] for line in regressed] == [1, 2, 3, 4]
    assert [line["pages"] for line in regressed] == [True, False, False, True]  # pages once, and again when worse
    assert regressed[1]["text"] == f"still regressed since {days[1].isoformat()} (day 2)"
    pass_rate = next(c for c in regressed[2]["changes"] if c["measure"] == "pass_rate")
    assert pass_rate["baseline"] == "before_regression" and pass_rate["delta"] < -0.2  # against the level before, not the drop's days
    assert all(s["alerting"] == ["m2"] for s in summaries[1:5]) and summaries[5]["alerting"] == []
    messages = [regression_message(s, "file:///report.html") for s in summaries]
    assert [m is not None for m in messages] == [False, True, False, False, True, False, False]
    page = page_of(summaries[2])
    line = page.split("<code>m2</code>", 1)[1].split("</li>", 1)[0]
    assert f"still regressed in locale=de since {days[1].isoformat()} (day 2)</span> (paged before)" in line


def test_segments_too_small_to_monitor_say_so() -> None:
    summary = summary_of(fortnight(2, regressed=("m1", "metadata.route", "account")), LAST)
    too_few = summary["segments"]["too_few"]
    assert {(t["model"], t["segment"]["value"], t["n_ok"]) for t in too_few} == {("m1", "account", 25), ("m2", "account", 25)}
    assert all(t["needed"] == SEGMENT_MIN_ROWS for t in too_few)
    assert summary["segments"]["flags"] == []  # its drop is not tested at that volume
    assert "Too few records to monitor" in page_of(summary)


# --------------------------------------------------------------------------------------------
# A failed latest run


def test_a_large_change_that_is_not_significant_says_so() -> None:
    rng = np.random.default_rng(5)
    days = [LAST - dt.timedelta(days=i) for i in range(7, -1, -1)]
    rows = [_summary_row(day, "small", 40, 0.35 if day == LAST else 0.6, rng, None) for day in days]
    rows += [_summary_row(day, "large", 600, 0.75, rng, None) for day in days]
    summary = summary_of(pl.DataFrame(rows), LAST)
    small = [c for c in summary["not_significant"] if c["model"] == "small" and c["measure"] == "pass_rate"]
    assert summary["alerting"] == [] and len(small) == 1  # the larger of its two changes, once
    change = small[0]
    assert change["n"] == 40 and change["delta"] <= -0.05 and change["p_adjusted"] >= 0.05 and change["assessment"] == "worse"
    assert not [c for c in summary["not_significant"] if c["model"] == "large"]  # no large change: not listed
    assert "pass rate" in page_of(summary).split("not significant at n = 40", 1)[0].rsplit("small rag", 1)[1]
