"""The notification messages (pure functions) and the channels being off without Connections."""

from __future__ import annotations

from typing import Any

import pytest
from evaluation_notifications import (
    LANDED_ASSETS,
    LANDED_TABLES,
    MAX_MESSAGE_CHARS,
    REPORT_BASE_URL_ENV,
    change_line,
    deliver,
    failure_message,
    largest_changes,
    regression_message,
    report_base_url,
    report_link,
)

from evaluation import storage
from evaluation.report.alerts import build_headline
from evaluation.report.summary import Flag

DAY = "2026-10-07"
REPORT = f"s3://out/reports/dt={DAY}/index.html"
BASE = "https://reports.example.org/llm"


def _change(judge: str, measure: str, before: float, after: float, baseline: str = "trailing_7d") -> dict:
    return {"judge": judge, "measure": measure, "baseline": baseline, "before": before, "after": after,
            "delta": after - before, "p_adjusted": 1e-6, "assessment": "worse"}


REGRESSED = {"model": "assistant-v2", "status": "regressed", "other_flags": 2, "changes": [
    _change("rag", "faithfulness_mean", 0.861, 0.712),
    _change("rag", "pass_rate", 0.85, 0.344),
    _change("masis", "score_mean", 0.80, 0.75, "previous"),
    _change("rag", "score_mean", 0.82, 0.41),
    _change("masis", "fail_rate", 0.10, 0.60),
]}
IMPROVED = {"model": "assistant-lite", "status": "improved", "other_flags": 0,
            "changes": [{**_change("rag", "pass_rate", 0.5, 0.7), "assessment": "better"}]}
STEADY = {"model": "assistant-v1", "status": "steady", "changes": [], "other_flags": 1}


def _summary(*lines: dict) -> dict:
    return {"dt": DAY, "headline": list(lines), "alerting": [x["model"] for x in lines if x["status"] == "regressed"]}


@pytest.mark.parametrize(("change", "expected"), [
    (_change("rag", "pass_rate", 0.85, 0.344), "rag pass rate 85.0% → 34.4% (−50.6 pp vs the trailing 7 days)"),
    (_change("masis", "score_mean", 0.8, 0.75, "previous"), "masis score 0.800 → 0.750 (−0.050 vs the previous day)"),
    (_change("rag", "answer_relevance_mean", 0.9, 0.2), "rag answer relevance 0.900 → 0.200 (−0.700 vs the trailing 7 days)"),
    ({**_change("rag", "fail_rate", 0.1, 0.35), "before": None, "delta": None}, "rag fail rate n/a → 35.0% (n/a vs the trailing 7 days)"),
])
def test_change_line_says_judge_measure_before_after_and_baseline(change, expected) -> None:
    assert change_line(change) == expected


def test_largest_changes_are_the_three_largest_absolute_changes() -> None:
    assert [c["measure"] for c in largest_changes(REGRESSED["changes"])] == ["pass_rate", "fail_rate", "score_mean"]
    assert [c["judge"] for c in largest_changes(REGRESSED["changes"])] == ["rag", "masis", "rag"]


def test_a_regression_names_only_the_regressed_model_with_its_largest_changes_and_one_link() -> None:
    message = regression_message(_summary(REGRESSED, IMPROVED, STEADY), REPORT)
    assert message is not None
    assert message.subject == f"LLM evaluation {DAY}: assistant-v2 regressed"
    assert "assistant-lite" not in message.body and "assistant-v1" not in message.body
    assert message.body.splitlines() == [
        f"1 of 3 model(s) regressed on {DAY}; the other 2 are not regressed.",
        "",
        "assistant-v2:",
        "  - rag pass rate 85.0% → 34.4% (−50.6 pp vs the trailing 7 days)",
        "  - masis fail rate 10.0% → 60.0% (+50.0 pp vs the trailing 7 days)",
        "  - rag score 0.820 → 0.410 (−0.410 vs the trailing 7 days)",
        "  - and 2 more change(s) in the report",
        "",
        f"Report: {REPORT}",
    ]
    assert message.body.count("s3://") == 1


def test_the_link_is_https_under_the_configured_base_url() -> None:
    message = regression_message(_summary(REGRESSED), REPORT, BASE)
    assert message is not None
    assert message.body.endswith(f"Report: {BASE}/reports/dt={DAY}/index.html#evidence")  # at the failing records
    assert "s3://" not in message.body and message.body.count("https://") == 1
    assert report_link(DAY, REPORT, None) == REPORT


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("", None), ("  ", None), ("https://reports.example.org/llm/", BASE),
    ("http://reports.example.org/llm", None), ("s3://out", None),
])
def test_the_base_url_setting_is_an_https_address(monkeypatch, value, expected) -> None:
    if value is None:
        monkeypatch.delenv(REPORT_BASE_URL_ENV, raising=False)
    else:
        monkeypatch.setenv(REPORT_BASE_URL_ENV, value)
    assert report_base_url() == expected


@pytest.mark.parametrize("lines", [(STEADY,), (IMPROVED, STEADY), ()])
def test_a_day_without_a_regressed_model_sends_nothing(lines) -> None:
    assert regression_message(_summary(*lines), REPORT) is None


def test_the_headline_the_report_builds_drives_the_message() -> None:
    """Flags as the report decides them: an alerting flag regresses its model, a better one does not."""
    def flag(model: str, measure: str, before: float, after: float, assessment: str, alerts: bool) -> Flag:
        return Flag(model=model, judge="rag", measure=measure, baseline="previous", baseline_days=[],
                    baseline_value=before, value=after, delta=after - before, delta_ci_low=None, delta_ci_high=None,
                    ci_low=None, ci_high=None, p_value=0.001, p_adjusted=0.001, min_effect=0.05,
                    direction="up" if after > before else "down", assessment=assessment, headline=True, alerts=alerts)

    def headline(models: list[str], flags: list[Flag]) -> list[dict[str, Any]]:  # as summary.json holds it
        return [line.model_dump() for line in build_headline(models, flags)]

    flags = [flag("b", "pass_rate", 0.8, 0.5, "worse", True), flag("a", "pass_rate", 0.5, 0.8, "better", False)]
    message = regression_message({"dt": DAY, "headline": headline(["a", "b", "c"], flags)}, REPORT)
    assert message is not None and message.subject == f"LLM evaluation {DAY}: b regressed"
    assert "rag pass rate 80.0% → 50.0% (−30.0 pp vs the previous day)" in message.body
    assert regression_message({"dt": DAY, "headline": headline(["a", "c"], flags[1:])}, REPORT) is None


def test_a_day_of_many_regressions_stays_within_the_limit_and_keeps_its_link() -> None:
    lines = [{**REGRESSED, "model": f"assistant-{i:02d}-" + "x" * 200} for i in range(40)]
    message = regression_message(_summary(*lines), REPORT, BASE)
    assert message is not None
    assert len(message.subject) + 1 + len(message.body) <= MAX_MESSAGE_CHARS
    assert message.subject.startswith(f"LLM evaluation {DAY}: assistant-00-") and message.subject.endswith(
        "and 37 more regressed")
    assert "… (cut: the report has the rest)" in message.body
    assert message.body.endswith(f"Report: {BASE}/reports/dt={DAY}/index.html#evidence")  # at the failing records
    assert "x" * 81 not in message.body  # long model names are cut


def test_failure_message() -> None:
    message = failure_message(dag_id="daily_evaluation", run_id="r1", day="2026-10-12", task_id="ingest_validate",
                              reason="task_failure", report_url=f"{BASE}/reports/dt=2026-10-12/index.html")
    assert message.subject == "LLM evaluation 2026-10-12: run r1 of daily_evaluation failed"
    assert message.body.startswith("day 2026-10-12 | DAG daily_evaluation | run r1 | failed task ingest_validate")
    assert message.body.endswith(f"Report (last landed): {BASE}/reports/dt=2026-10-12/index.html")
    long = failure_message(dag_id="d", run_id="r", day="2026-10-12", task_id=None, reason="boom " * 2000)
    assert len(long.subject) + 1 + len(long.body) <= MAX_MESSAGE_CHARS and "reason boom" in long.body


def test_channels_are_off_without_their_connections(monkeypatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_EVALUATION_SMTP", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_EVALUATION_WEBHOOK", raising=False)
    assert deliver(failure_message(dag_id="d", run_id="r", day="2026-10-12", task_id=None, reason=None)) == []


def test_one_asset_per_landed_table() -> None:
    assert LANDED_TABLES == storage.TABLES
    assert [a.name for a in LANDED_ASSETS] == [f"llm_evaluation.{t}" for t in storage.TABLES]


def test_a_regression_in_one_segment_is_named_with_its_segment() -> None:
    change = {"judge": "rag", "measure": "pass_rate", "baseline": "trailing_7d", "before": 0.81, "after": 0.52,
              "delta": -0.29, "p_adjusted": 0.001, "assessment": "worse"}
    summary = {"dt": DAY, "headline": [{"model": "assistant-v2", "status": "steady", "changes": []},
                                       {"model": "assistant-v1", "status": "steady", "changes": []}],
               "segments": {"headline": [{"model": "assistant-v2", "segment": {"key": "metadata.locale", "value": "de"},
                                          "changes": [change], "others_steady": True}]}}
    message = regression_message(summary, REPORT)
    assert message is not None and message.subject == f"LLM evaluation {DAY}: assistant-v2 regressed"
    assert "assistant-v2 in locale=de:\n  - rag pass rate 81.0% → 52.0%" in message.body
    assert message.body.startswith(f"1 of 2 model(s) regressed on {DAY}")
