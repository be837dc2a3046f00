"""The daily report (evaluation.report, evaluation.pages.charts): every number in summary.json against an
independent recomputation in plain Python from the landed rows, the intervals, the flags, the
handling of thin history (one day, missing days), escaping of hostile logged text, the page's
self-containment, landing, and the ``report`` command."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.main import main as cli_main
from evaluation.contract.config import EVALUATION_COLUMNS, JUDGE_STATUSES
from evaluation.contract.schemas import PARSED_SCHEMA, REJECT_SCHEMA
from evaluation.pages import charts
from evaluation.report import (
    ReportError,
    build_daily_report,
    mean_interval,
    t_quantile_975,
    wilson_interval,
    write_daily_report,
)
from evaluation.storage.summary import METRICS, build_daily_summary

DAY = dt.date(2026, 11, 20)
#: 13 days of history ending on DAY, with 2026-11-16 missing.
DAYS = [DAY - dt.timedelta(days=i) for i in range(12, -1, -1) if DAY - dt.timedelta(days=i) != dt.date(2026, 11, 16)]
MODELS = {"assistant-v1": 0.78, "assistant-v2": 0.86, "assistant-lite": 0.68}
HOSTILE = "<script>alert(1)</script>"
Z = 1.959963984540054

EVAL_SCHEMA: dict[str, Any] = {
    c: PARSED_SCHEMA.get(c, pl.String) for c in EVALUATION_COLUMNS if c != "dt"
}
EVAL_SCHEMA["clamps_applied"] = pl.List(pl.String)


# --------------------------------------------------------------------------------------------
# Landed tables built row by row


def verdict_of(score: float) -> str:
    return "pass" if score >= 0.8 else "borderline" if score >= 0.6 else "fail"


def row(day: dt.date, model: str, judge: str, index: int, status: str = "ok", **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {c: None for c in EVAL_SCHEMA}
    base.update(
        run_id=f"run-{day.isoformat()}", record_id=f"{day:%Y%m%d}-{model}-{index:03d}", conversation_id=f"conv-{index}",
        model=model, judge=judge, judge_model="offline/lexical", prompt_version=f"{judge}@test", rules_version="rules-test",
        judge_status=status, hits=[], misses=[], improvement_suggestions=[], citations=[], invalid_citations=[],
        clamps_applied=[], input_tokens=300 + index, output_tokens=40 + index % 7, cost_usd=0.0001 * (1 + index % 3),
        latency_ms=100.0 + (index * 37) % 90, attempts=1, cached=index % 11 == 0,
        judged_at=dt.datetime(day.year, day.month, day.day, 12, tzinfo=dt.UTC),
    )
    if status == "skipped":
        base.update(reason="not_applicable", input_tokens=0, output_tokens=0, cost_usd=0.0, latency_ms=0.0, attempts=0, cached=False)
    elif status == "call_error":
        base.update(error="Timeout: judge did not answer", input_tokens=0, output_tokens=0, cost_usd=0.0, attempts=4)
    elif status == "judge_failed":
        base.update(reason="empty_answer: the generated answer is empty")
    elif status == "parse_error" and judge == "prompt":
        base.update(score=0.0, verdict="fail")
    base.update(values)
    if status == "ok" and base["score"] is not None:
        base["verdict"] = verdict_of(base["score"])
    return base


def judged_rows(day: dt.date, model: str, quality: float, records: int, rng: random.Random,
                rag_shift: float = 0.0) -> list[dict[str, Any]]:
    rows = []
    for i in range(records):
        def draw(shift: float = 0.0) -> float:
            return round(min(1.0, max(0.0, quality + shift + rng.uniform(-0.22, 0.22))), 2)

        roll = rng.random()
        # rag
        if roll < 0.03:
            rows.append(row(day, model, "rag", i, "parse_error"))
        elif roll < 0.05:
            rows.append(row(day, model, "rag", i, "judge_failed"))
        else:
            f, c, a = draw(rag_shift), draw(0.05 + rag_shift), draw(-0.03 + rag_shift)
            s = draw(rag_shift) if i % 3 else None
            weights = [(f, 0.4), (a, 0.3), (c, 0.15)] + ([(s, 0.15)] if s is not None else [])
            score = round(sum(v * w for v, w in weights) / sum(w for _, w in weights), 3)
            clamps = ["faithfulness: 1.2 -> 1.0 (clamped to [0, 1])"] if i % 17 == 0 else []
            rows.append(row(day, model, "rag", i, score=score, faithfulness=f, context_relevance=c, answer_relevance=a,
                            semantic_similarity=s, evaluation_goal="balanced", reasoning=f"rag reasoning {i}",
                            clamps_applied=clamps))
        # masis
        if roll > 0.98:
            rows.append(row(day, model, "masis", i, "call_error"))
        else:
            dims = [draw(), draw(0.02), draw(-0.05), draw()]
            invalid = [f"ctx-{9 + i % 3}"] if i % 13 == 0 else []
            if invalid:
                dims[0] = min(dims[0], 0.4)
            score = round(0.35 * dims[0] + 0.25 * dims[1] + 0.25 * dims[2] + 0.15 * dims[3], 3)
            rows.append(row(day, model, "masis", i, score=score, faithfulness=dims[0], relevance=dims[1], completeness=dims[2],
                            reasoning_quality=dims[3], citations=["ctx-1", *invalid], invalid_citations=invalid,
                            uncited_claim_count=i % 4, hallucination_detected=bool(invalid),
                            clamps_applied=["faithfulness: capped at 0.4 (invalid citation)"] if invalid else []))
        # prompt
        if i % 5 == 4:
            rows.append(row(day, model, "prompt", i, "skipped"))
        elif roll > 0.97:
            rows.append(row(day, model, "prompt", i, "parse_error"))
        else:
            score = draw(-0.05)
            rows.append(row(day, model, "prompt", i, score=score, hits=["states the figure"],
                            misses=[] if score > 0.7 else ["misses the unit", "no citation"], reasoning=f"prompt reasoning {i}"))
    return rows


def land_day(store: storage.Store, day: dt.date, rows: list[dict[str, Any]], rejects: list[dict[str, Any]] | None = None,
             *, summary: bool = True) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=EVAL_SCHEMA)
    run = f"run-{day.isoformat()}"
    tables = {"evaluations": frame, "rejects": pl.DataFrame(rejects or [], schema=REJECT_SCHEMA)}
    if summary:
        tables["daily_summary"] = build_daily_summary(frame, run)
    for name, table in tables.items():
        storage.write_parquet(store, storage.landing_key(name, day, run), table)
    storage.commit_day(store, day, run, {name: storage.landing_key(name, day, run) for name in tables})
    return frame


def day_rejects(day: dt.date) -> list[dict[str, Any]]:
    run = f"run-{day.isoformat()}"
    uri = f"/raw/dt={day.isoformat()}/part-0.jsonl"
    hostile_line = json.dumps({"record_id": "evil-1", "model": "assistant-lite", "question": "", "answer": HOSTILE})
    return [
        {"run_id": run, "source_uri": uri, "line_no": 7, "record_id": None, "raw": '{"record_id": "x", "answer": "unterminated',
         "reasons": ["not valid JSON: Unterminated string starting at column 33"]},
        {"run_id": run, "source_uri": uri, "line_no": 9, "record_id": "evil-1", "raw": hostile_line,
         "reasons": ["question: missing", f"answer: {HOSTILE} is suspicious"]},
        {"run_id": run, "source_uri": uri, "line_no": 12, "record_id": "late-1", "raw": '{"record_id": "late-1"}',
         "reasons": ["timestamp: outside dt", "question: missing"]},
    ]


def write_history(store: storage.Store, days: list[dt.date] | None = None, *, records: int = 60) -> dict[dt.date, pl.DataFrame]:
    """Landed evaluations, daily_summary, rejects and runs for ``days`` (default DAYS); on DAY
    assistant-v2's rag metrics drop by 0.3 and a hostile text sits in a worst record and a reject."""
    landed = {}
    for day in days or DAYS:
        rows = []
        for model, quality in MODELS.items():
            rng = random.Random(f"{day.isoformat()}/{model}")
            shift = -0.3 if (day == DAY and model == "assistant-v2") else 0.0
            rows += judged_rows(day, model, quality, records, rng, rag_shift=shift)
        if day == DAY:
            rows.append(row(day, "assistant-lite", "prompt", 900, score=0.0, misses=[HOSTILE, "no <b>unit</b>"],
                            reasoning='"><img src=x onerror=alert(2)> & more', record_id=f"evil-{HOSTILE}"))
        landed[day] = land_day(store, day, rows, day_rejects(day))
        run = pl.DataFrame([{"run_id": f"run-{day.isoformat()}", "trigger": "test", "status": "success",
                             "input_records": 3 * records + 3 + (1 if day == DAY else 0), "valid_records": 3 * records,
                             "rejected_records": 3, "finished_at": dt.datetime(day.year, day.month, day.day, 13, tzinfo=dt.UTC)}])
        storage.write_parquet(store, storage.run_key(day, f"run-{day.isoformat()}"), run)
    return landed


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[storage.Store, dict[dt.date, pl.DataFrame]]:
    store = storage.open_store(str(tmp_path_factory.mktemp("report") / "out"))
    return store, write_history(store)


@pytest.fixture(scope="module")
def built(history: tuple[storage.Store, dict[dt.date, pl.DataFrame]]) -> tuple[str, dict[str, Any]]:
    return build_daily_report(history[0], DAY)


# --------------------------------------------------------------------------------------------
# Independent recomputation (plain Python over the rows)


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    root = Z * math.sqrt(Z * Z + 4 * n * p * (1 - p))
    return ((2 * n * p + Z * Z - root) / (2 * (n + Z * Z)), (2 * n * p + Z * Z + root) / (2 * (n + Z * Z)))


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def rows_of(frame: pl.DataFrame, model: str, judge: str) -> list[dict[str, Any]]:
    return [r for r in frame.iter_rows(named=True) if r["model"] == model and r["judge"] == judge]


def close(a: float | None, b: float | None, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def test_summary_numbers_equal_a_recomputation_from_the_rows(
    history: tuple[storage.Store, dict[dt.date, pl.DataFrame]], built: tuple[str, dict[str, Any]]
) -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    _, landed = history
    _, summary = built
    today = landed[DAY]
    assert summary["dt"] == DAY.isoformat()
    groups = {(g["model"], g["judge"]): g for g in summary["groups"]}
    assert set(groups) == {(m, j) for m in MODELS for j in ("rag", "masis", "prompt")}
    assert [g["judge"] for g in summary["groups"]] == sorted((g["judge"] for g in summary["groups"]), key=["rag", "masis", "prompt"].index)
    trailing_days = [d for d in DAYS if DAY - dt.timedelta(days=7) <= d < DAY]
    previous_day = max(trailing_days)
    for (model, judge), g in groups.items():
        rows = rows_of(today, model, judge)
        ok = [r for r in rows if r["judge_status"] == "ok"]
        assert g["rows"] == len(rows)
        assert g["status_counts"] == {s: sum(r["judge_status"] == s for r in rows) for s in JUDGE_STATUSES}
        for s in JUDGE_STATUSES:
            assert close(g["status_rates"][s], sum(r["judge_status"] == s for r in rows) / len(rows))
        for verdict in ("pass", "borderline", "fail"):
            k = sum(r["verdict"] == verdict for r in ok)
            measure = g["rates"][verdict]
            assert (measure["n"], measure["count"]) == (len(ok), k)
            assert close(measure["value"], k / len(ok))
            low, high = wilson(k, len(ok))
            assert close(measure["ci_low"], max(low, 0.0)) and close(measure["ci_high"], min(high, 1.0))
            prev_ok = [r for r in rows_of(landed[previous_day], model, judge) if r["judge_status"] == "ok"]
            prev_value = sum(r["verdict"] == verdict for r in prev_ok) / len(prev_ok)
            assert measure["previous"]["dt"] == previous_day.isoformat()
            assert close(measure["previous"]["value"], prev_value)
            assert close(measure["previous"]["delta"], k / len(ok) - prev_value)
            assert measure["previous"]["outside_ci"] == (not low <= prev_value <= high)
            trail_ok = [r for d in trailing_days for r in rows_of(landed[d], model, judge) if r["judge_status"] == "ok"]
            trail_value = sum(r["verdict"] == verdict for r in trail_ok) / len(trail_ok)
            assert measure["trailing_7d"]["days"] == [d.isoformat() for d in trailing_days]
            assert close(measure["trailing_7d"]["value"], trail_value)
            assert measure["trailing_7d"]["n"] == len(trail_ok)
            assert measure["trailing_7d"]["outside_ci"] == (not low <= trail_value <= high)
        for metric in METRICS:
            values = [r[metric] for r in ok if r[metric] is not None]
            measure = g["metrics"][metric]
            assert measure["n"] == len(values)
            if not values:
                assert measure["value"] is None and measure["ci_low"] is None and measure["trailing_7d"] is None
                continue
            mean, sd = statistics.fmean(values), statistics.stdev(values)
            half = float(scipy_stats.t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))
            assert close(measure["value"], mean) and close(measure["std"], sd)
            assert close(measure["ci_low"], mean - half, 1e-7) and close(measure["ci_high"], mean + half, 1e-7)
            for q in (10, 50, 90):
                assert close(measure[f"p{q}"], quantile(values, q / 100))
            trail_values = [r[metric] for d in trailing_days for r in rows_of(landed[d], model, judge)
                            if r["judge_status"] == "ok" and r[metric] is not None]
            assert close(measure["trailing_7d"]["value"], statistics.fmean(trail_values))
            assert close(measure["trailing_7d"]["delta"], mean - statistics.fmean(trail_values))
            prev_values = [r[metric] for r in rows_of(landed[previous_day], model, judge) if r["judge_status"] == "ok" and r[metric] is not None]
            assert close(measure["previous"]["value"], statistics.fmean(prev_values))
        health = g["health"]
        assert health["input_tokens"] == sum(r["input_tokens"] for r in rows)
        assert health["output_tokens"] == sum(r["output_tokens"] for r in rows)
        assert close(health["cost_usd"], sum(r["cost_usd"] for r in rows))
        assert health["n_cached"] == sum(r["cached"] for r in rows)
        latencies = [r["latency_ms"] for r in rows if r["attempts"] > 0]
        assert close(health["latency_p50_ms"], quantile(latencies, 0.5))
        assert close(health["latency_p95_ms"], quantile(latencies, 0.95))
        for s in ("parse_error", "judge_failed", "call_error", "skipped"):
            assert close(health[f"{s}_rate"], sum(r["judge_status"] == s for r in rows) / len(rows))
        # trend: one point per landed day of the window, pass rate per day
        assert [p["dt"] for p in g["trend"]] == [d.isoformat() for d in DAYS]
        for point, day in zip(g["trend"], DAYS, strict=True):
            day_ok = [r for r in rows_of(landed[day], model, judge) if r["judge_status"] == "ok"]
            assert close(point["pass_rate"], sum(r["verdict"] == "pass" for r in day_ok) / len(day_ok))

    totals = summary["totals"]
    assert totals["rows"] == today.height
    assert totals["records"] == len(set(today["record_id"].to_list()))
    assert close(totals["cost_usd"], sum(today["cost_usd"].to_list()))
    assert totals["status_counts"] == dict(Counter(today["judge_status"].to_list())) | {
        s: 0 for s in JUDGE_STATUSES if s not in set(today["judge_status"].to_list())
    }
    # rejects: records per rule and per reason
    rejects = summary["rejects"]
    assert rejects["total"] == 3
    assert {r["rule"]: r["records"] for r in rejects["by_rule"]} == {"question": 2, "not valid JSON": 1, "timestamp": 1, "answer": 1}
    assert sum(r["count"] for r in rejects["by_reason"]) == 5
    # histograms: counts per bin of the ok rows' values
    for item in summary["distributions"]:
        for model, counts in item["counts"].items():
            values = [r[item["metric"]] for r in rows_of(today, model, item["judge"])
                      if r["judge_status"] == "ok" and r[item["metric"]] is not None]
            expected = [0] * 10
            for v in values:
                expected[min(int(math.floor(round(v * 10, 9))), 9)] += 1
            assert counts == expected and item["n"][model] == len(values)
    # worst records: the lowest ok scores per judge
    for judge in ("rag", "masis", "prompt"):
        worst = [r for r in summary["worst_records"] if r["judge"] == judge]
        scores = sorted(r["score"] for r in today.iter_rows(named=True) if r["judge"] == judge and r["judge_status"] == "ok")
        assert [r["score"] for r in worst] == scores[:10]


def test_intervals_contain_the_estimate(built: tuple[str, dict[str, Any]]) -> None:
    _, summary = built
    checked = 0
    for g in summary["groups"]:
        for measure in [*g["rates"].values(), *g["metrics"].values()]:
            if measure["ci_low"] is None:
                continue
            assert measure["ci_low"] <= measure["value"] <= measure["ci_high"]
            assert 0.0 <= measure["ci_low"] or measure["interval"] == "student_t"
            checked += 1
        for point in g["trend"]:
            if point["pass_ci"]:
                assert point["pass_ci"][0] <= point["pass_rate"] <= point["pass_ci"][1]
            if point["score_ci"]:
                assert point["score_ci"][0] <= point["score_mean"] <= point["score_ci"][1]
    assert checked > 50


def test_t_quantile_975_gives_the_published_table() -> None:
    # Student's t 0.975 quantiles as printed in the standard tables (to 10 digits), and the normal's.
    published = {1: 12.7062047362, 2: 4.3026527297, 5: 2.5705818356, 10: 2.2281388520, 30: 2.0422724563}
    for df, value in published.items():
        assert math.isclose(t_quantile_975(df), value, abs_tol=1e-9), df
    assert math.isclose(t_quantile_975(10**9), 1.959963984540054, abs_tol=1e-8)
    with pytest.raises(ValueError, match="at least one degree of freedom"):
        t_quantile_975(0)


def test_interval_formulas() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in [*range(1, 40), 50, 99, 100, 250, 1000, 10_000]:
        assert math.isclose(t_quantile_975(df), float(scipy_stats.t.ppf(0.975, df)), abs_tol=1e-7), df
    low, high = wilson_interval(0, 10)  # type: ignore[misc]
    assert low == 0.0 and math.isclose(high, 0.2775327998628892, rel_tol=1e-9)
    low, high = wilson_interval(10, 10)  # type: ignore[misc]
    assert math.isclose(low, 1 - 0.2775327998628892, rel_tol=1e-9) and high == 1.0
    assert wilson_interval(0, 0) is None
    assert mean_interval(0.5, 0.1, 1) is None and mean_interval(None, None, 0) is None
    low, high = mean_interval(0.5, 0.2, 4)  # type: ignore[misc]
    assert math.isclose(high - 0.5, 3.1824463053 * 0.2 / 2, rel_tol=1e-9) and math.isclose(0.5 - low, high - 0.5)


def test_flags_fire_when_a_mean_moves_well_outside(tmp_path: Path) -> None:
    """A steady model (the same rows every day) never flags; a model whose scores collapse on the
    last day flags against both baselines, downwards, as worse, and alerts."""
    store = storage.open_store(str(tmp_path / "out"))
    days = [DAY - dt.timedelta(days=i) for i in range(8, -1, -1)]
    steady = [0.62, 0.71, 0.8, 0.84, 0.9, 0.66, 0.77, 0.93, 0.88, 0.81] * 4
    for day in days:
        rows = [row(day, "steady", "prompt", i, score=v) for i, v in enumerate(steady)]
        drifting = [v - 0.45 for v in steady] if day == DAY else steady
        rows += [row(day, "drifting", "prompt", i, score=round(v, 2)) for i, v in enumerate(drifting)]
        land_day(store, day, rows)
    html_page, summary = build_daily_report(store, DAY)
    flagged = {(f["model"], f["measure"], f["baseline"]) for f in summary["flags"]}
    assert ("drifting", "score_mean", "trailing_7d") in flagged
    assert not any(baseline == "previous" for *_, baseline in flagged)  # the previous day is shown, not tested
    assert ("drifting", "pass_rate", "trailing_7d") in flagged
    assert ("drifting", "fail_rate", "trailing_7d") in flagged
    assert not any(model == "steady" for model, _, _ in flagged)
    flag = next(f for f in summary["flags"] if f["model"] == "drifting" and f["measure"] == "score_mean" and f["baseline"] == "trailing_7d")
    assert flag["direction"] == "down" and flag["assessment"] == "worse"
    assert flag["baseline_value"] > flag["ci_high"]
    fail_flag = next(f for f in summary["flags"] if f["model"] == "drifting" and f["measure"] == "fail_rate")
    assert fail_flag["direction"] == "up" and fail_flag["assessment"] == "worse"
    steady_score = next(g for g in summary["groups"] if g["model"] == "steady")["metrics"]["score"]
    assert steady_score["trailing_7d"]["outside_ci"] is False and close(steady_score["trailing_7d"]["delta"], 0.0)
    assert flag["alerts"] and flag["p_adjusted"] < 0.05 and flag["delta_ci_high"] < 0
    assert summary["alerting"] == ["drifting"]
    # 40 records a day: the unchanged model cannot catch a 20 pp drop, and says so
    assert [(line["model"], line["status"]) for line in summary["headline"]] == [("drifting", "regressed"), ("steady", "too_few")]
    assert 'class="flag worse">▼' in html_page
    assert "flag(s) (" in html_page and "alerting; most severe first" in html_page


def test_hostile_logged_text_is_escaped(built: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    page, summary = built
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page.lower() and "onerror=alert" not in page.replace("&quot;&gt;&lt;img src=x onerror=alert", "")
    assert "no &lt;b&gt;unit&lt;/b&gt;" in page
    # the hostile texts are in the summary as data, unchanged
    assert any(HOSTILE in m for r in summary["worst_records"] for m in r["misses"])
    assert any(HOSTILE in s["raw"] for s in summary["rejects"]["samples"])
    # hostile model and judge names reach chart labels and tooltips escaped too
    store = storage.open_store(str(tmp_path / "out"))
    evil = 'm"><script>alert(3)</script>'
    for day in (DAY - dt.timedelta(days=1), DAY):
        land_day(store, day, [row(day, evil, "prompt", i, score=0.1 * (i % 10)) for i in range(20)])
    evil_page, _ = build_daily_report(store, DAY)
    assert "<script" not in evil_page.lower()
    assert "m&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in evil_page


def test_page_fetches_nothing(built: tuple[str, dict[str, Any]]) -> None:
    page, _ = built
    assert "http://" not in page and "https://" not in page
    tags = re.findall(r"<[a-zA-Z][^>]*>", page)  # real tags only: logged text is escaped, it has no raw "<"
    assert tags and not any(re.search(r"\s(src|srcset|action|formaction|xlink:href|poster)\s*=", t, re.IGNORECASE) for t in tags)
    hrefs = [h for t in tags for h in re.findall(r"\shref\s*=\s*\"([^\"]*)\"", t, re.IGNORECASE)]
    assert hrefs and all(h.startswith("#") for h in hrefs)
    assert not any(t.lower().startswith(("<iframe", "<object", "<embed", "<img", "<audio", "<video", "<link")) for t in tags)
    assert "url(" not in page and "@import" not in page and "<link" not in page.lower()
    assert "default-src 'none'" in page  # the CSP forbids loads even if something slipped through
    assert page.count("<svg") >= 14 and "<script" not in page


def test_page_shows_the_sections_and_numbers(built: tuple[str, dict[str, Any]]) -> None:
    page, summary = built
    for heading in ("Overview", "Flags", "Quality by model and judge", "Verdict and status mix", "Trends (last 30 days)",
                    "Metric distributions (ok rows)", "Judge health", "Rejected input records", "Worst records"):
        assert f">{heading}" in page, heading
    assert "No landed summary for 1 day(s): 2026-11-16" in page
    assert summary["source"]["missing_days"] == ["2026-11-16"]
    group = next(g for g in summary["groups"] if g["model"] == "assistant-v2" and g["judge"] == "rag")
    shown = f"{group['rates']['pass']['value'] * 100:.1f}%"
    assert f'<td class="num">{shown}</td>' in page
    assert any(f["model"] == "assistant-v2" and f["judge"] == "rag" and f["measure"] == "score_mean" for f in summary["flags"])
    assert 'style="' not in page  # styling lives in the one inline stylesheet
    assert "td.num" in page and "tabular-nums" in page


def test_single_day_of_history(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    write_history(store, [DAY], records=20)
    page, summary = build_daily_report(store, DAY)
    assert "No trend yet: only one day of history (2026-11-20)" in page
    assert "No earlier day within 7 days to compare with yet." in page
    assert summary["flags"] == []
    assert summary["source"]["days_with_summary"] == ["2026-11-20"] and summary["source"]["missing_days"] == []
    for g in summary["groups"]:
        assert len(g["trend"]) == 1
        assert all(m["previous"] is None and m["trailing_7d"] is None for m in [*g["rates"].values(), *g["metrics"].values()])


def test_missing_days_use_the_latest_landed_day(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    landed = [DAY - dt.timedelta(days=10), DAY - dt.timedelta(days=4), DAY]
    write_history(store, landed, records=20)
    _, summary = build_daily_report(store, DAY)
    score = summary["groups"][0]["metrics"]["score"]
    assert score["previous"]["dt"] == (DAY - dt.timedelta(days=4)).isoformat()
    assert score["trailing_7d"]["days"] == [(DAY - dt.timedelta(days=4)).isoformat()]
    assert summary["source"]["days_with_summary"] == [d.isoformat() for d in landed]
    assert len(summary["source"]["missing_days"]) == 8
    _, short = build_daily_report(store, DAY, history_days=5)
    assert short["source"]["days_with_summary"] == [landed[1].isoformat(), DAY.isoformat()]


def test_summary_falls_back_to_evaluations(history: tuple[storage.Store, dict[dt.date, pl.DataFrame]], tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    landed = history[1]
    for day in (DAY - dt.timedelta(days=1), DAY):
        land_day(store, day, landed[day].to_dicts(), day_rejects(day), summary=day != DAY)
    _, summary = build_daily_report(store, DAY)
    assert summary["source"]["summary_from"] == "evaluations"
    _, reference = build_daily_report(history[0], DAY)
    mine = {(g["model"], g["judge"]): g["metrics"]["score"]["value"] for g in summary["groups"]}
    theirs = {(g["model"], g["judge"]): g["metrics"]["score"]["value"] for g in reference["groups"]}
    assert mine == theirs


def test_nothing_landed_is_an_error(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    with pytest.raises(ReportError, match="no daily_summary or evaluations landed for 2026-11-20"):
        build_daily_report(store, DAY)


def test_an_empty_day_renders(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land_day(store, DAY, [])
    page, summary = build_daily_report(store, DAY)
    assert summary["groups"] == [] and summary["totals"]["rows"] == 0
    assert "No evaluations landed for this day." in page and "No input record was rejected." in page


def test_write_daily_report_lands_both_files_deterministically(history: tuple[storage.Store, dict[dt.date, pl.DataFrame]]) -> None:
    store = history[0]
    uris = write_daily_report(store, DAY)
    assert uris == {"html": store.uri(storage.report_key(DAY, "index.html")), "summary": store.uri(storage.report_key(DAY, "summary.json"))}
    first = store.read_bytes(storage.report_key(DAY, "index.html"))
    landed_summary = json.loads(store.read_bytes(storage.report_key(DAY, "summary.json")))
    assert landed_summary == build_daily_report(store, DAY)[1]
    write_daily_report(store, DAY)
    assert store.read_bytes(storage.report_key(DAY, "index.html")) == first
    assert "NaN" not in store.read_bytes(storage.report_key(DAY, "summary.json")).decode()


def test_report_command(history: tuple[storage.Store, dict[dt.date, pl.DataFrame]], tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    store = history[0]
    assert cli_main(["report", "--date", DAY.isoformat(), "--output", store.root]) == 0
    assert capsys.readouterr().out.strip() == store.uri(storage.report_key(DAY, "index.html"))
    target = tmp_path / "site"
    assert cli_main(["report", "--date", DAY.isoformat(), "--output", store.root, "--report-output", str(target)]) == 0
    assert capsys.readouterr().out.strip() == str(target / "index.html")
    assert (target / "index.html").is_file() and json.loads((target / "summary.json").read_text())["dt"] == DAY.isoformat()
    assert cli_main(["report", "--date", "2026-01-01", "--output", store.root]) == 1
    assert "no daily_summary or evaluations landed for 2026-01-01" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# Charts


def test_charts_are_deterministic_labelled_and_escaped() -> None:
    evil = "<script>x</script>"
    line = charts.line_chart(["11-19", "11-20", "11-21"], [charts.LineSeries(evil, [0.5, None, 0.7], [(0.4, 0.6), None, (0.6, 0.8)])],
                             title=f"t {evil}", y_label="score")
    bars = charts.stacked_bar_chart([charts.BarRow(evil, [3, 1, 0])],
                                    [charts.Segment("pass", "#009E73"), charts.Segment("fail", "#D55E00"), charts.Segment("x", "#000000")],
                                    title="mix")
    interval = charts.interval_chart([charts.Interval(evil, 0.5, 0.4, 0.6, 0.3, True), charts.Interval("none", None, None, None)],
                                     title="ci", x_label="score")
    hist = charts.histogram([charts.HistogramSeries(evil, [1, 2, 0, 4, 0, 0, 0, 0, 0, 1])], title="h", x_label="score")
    for svg in (line, bars, interval, hist):
        assert svg.startswith('<svg class="chart"') and svg.endswith("</svg>")
        assert 'role="img"' in svg and 'aria-label="' in svg and "<title>" in svg
        assert "<script" not in svg and "http" not in svg
    assert "&lt;script&gt;x&lt;/script&gt;" in line
    assert line == charts.line_chart(["11-19", "11-20", "11-21"], [charts.LineSeries(evil, [0.5, None, 0.7], [(0.4, 0.6), None, (0.6, 0.8)])],
                                     title=f"t {evil}", y_label="score")
    assert "<path" not in line.split("</g>", 1)[1]  # two isolated points: no line across the gap
    assert "no data" in interval and "outside the interval" in interval


def test_histogram_bins() -> None:
    values = pl.Series([0.0, 0.1, 0.3, 0.7, 0.9999, 1.0, 0.2999999, -0.5, 1.5])
    assert pl.select(charts.bin_expr(pl.lit(values))).to_series().to_list() == [0, 1, 3, 7, 9, 9, 2, 0, 9]
    assert charts.nice_ticks(0, 1) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert charts.nice_ticks(0.43, 0.91)[0] <= 0.43 and charts.nice_ticks(0.43, 0.91)[-1] >= 0.91
