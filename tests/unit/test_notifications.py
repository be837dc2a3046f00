"""The notification messages (pure functions) and the channels being off without Connections."""

from __future__ import annotations

import pytest
from evaluation_notifications import (
    LANDED_ASSETS,
    LANDED_TABLES,
    deliver,
    failure_message,
    flag_line,
    flags_message,
)

from evaluation import storage

REPORT = "s3://out/reports/dt=2026-10-07/index.html"
FLAG = {"model": "assistant-v2", "judge": "rag", "measure": "faithfulness_mean", "baseline": "trailing_7d",
        "baseline_dt": None, "value": 0.112, "baseline_value": 0.861, "delta": -0.749, "ci_low": 0.08,
        "ci_high": 0.14, "direction": "down", "assessment": "worse"}


@pytest.mark.parametrize(("flag", "expected"), [
    (FLAG, "day 2026-10-07 | model assistant-v2 | judge rag | metric faithfulness_mean | change -0.749 "
           "(0.861 on the trailing 7 days -> 0.112, 95% interval 0.080-0.140; worse) | report " + REPORT),
    ({**FLAG, "measure": "fail_rate", "baseline": "previous", "baseline_dt": "2026-10-06", "delta": 0.25,
      "value": 0.5, "baseline_value": 0.25, "assessment": "worse"},
     "day 2026-10-07 | model assistant-v2 | judge rag | metric fail_rate | change +0.250 "
     "(0.250 on 2026-10-06 -> 0.500, 95% interval 0.080-0.140; worse) | report " + REPORT),
])
def test_flag_line_names_day_model_judge_metric_change_and_report(flag, expected) -> None:
    assert flag_line("2026-10-07", flag, REPORT) == expected


def test_flags_message_lists_every_flag_and_names_the_worse_models() -> None:
    better = {**FLAG, "model": "assistant-lite", "delta": 0.2, "assessment": "better"}
    message = flags_message({"dt": "2026-10-07", "flags": [FLAG, better]}, REPORT)
    assert message is not None
    assert message.subject == "LLM evaluation 2026-10-07: 2 quality flags (worse: assistant-v2)"
    assert "model assistant-v2 | judge rag" in message.body and "model assistant-lite | judge rag" in message.body
    assert message.body.endswith(f"Report: {REPORT}")
    assert flags_message({"dt": "2026-10-07", "flags": []}, REPORT) is None


def test_failure_message() -> None:
    message = failure_message(dag_id="daily_evaluation", run_id="r1", day="2026-10-12", task_id="ingest_validate",
                              reason="task_failure")
    assert message.subject == "LLM evaluation 2026-10-12: run r1 of daily_evaluation failed"
    assert message.body.startswith("day 2026-10-12 | DAG daily_evaluation | run r1 | failed task ingest_validate")


def test_channels_are_off_without_their_connections(monkeypatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_EVALUATION_SMTP", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_EVALUATION_WEBHOOK", raising=False)
    assert deliver(failure_message(dag_id="d", run_id="r", day="2026-10-12", task_id=None, reason=None)) == []


def test_one_asset_per_landed_table() -> None:
    assert LANDED_TABLES == storage.TABLES
    assert [a.name for a in LANDED_ASSETS] == [f"llm_evaluation.{t}" for t in storage.TABLES]
