"""A failed run says why: rejects by reason (printed, in ``runs``, in the failure notification,
queryable as ``failed_rejects``), and "no input" names the URI read and what it holds, before the
judge is probed."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from evaluation_notifications import failure_message

from evaluation import storage
from evaluation.cli.main import main
from evaluation.contract.reject_summary import reason_lines, summarise_rejects
from evaluation.contract.schemas import REJECT_SCHEMA
from evaluation.storage import sql
from evaluation.testing import synthetic

DAY = dt.date(2026, 9, 10)
#: A judge nobody answers for: a run that got as far as the probe would fail on it instead.
UNREACHABLE = ["--judge-model", "openai/judge", "--api-base", "http://127.0.0.1:9/v1", "--max-attempts", "1"]


def _rejects(rows: list[tuple[str | None, int, list[str]]]) -> pl.DataFrame:
    return pl.DataFrame([{"run_id": "r", "source_uri": f"s3://b/raw/dt=x/part-{line // 100}.jsonl", "line_no": line,
                          "record_id": rid, "raw": "{}", "reasons": reasons} for rid, line, reasons in rows],
                        schema=REJECT_SCHEMA)


@pytest.mark.parametrize(("rows", "expected"), [
    ([("a", 1, ["contexts: item 1 is not an object"]), ("b", 2, ["contexts: item 3 is not an object"]),
      ("c", 3, ["question: missing or blank"])],
     [("contexts: item N is not an object", 2, ["a at part-0.jsonl:1", "b at part-0.jsonl:2"]),
      ("question: missing or blank", 1, ["c at part-0.jsonl:3"])]),
    ([(None, 105, ["not valid JSON: Expecting value: line 1 column 5 (char 4)"]),
      ("d", 7, ["timestamp: falls outside 2026-09-10 (UTC 2026-09-01T00:00:00Z)", "question: missing or blank"])],
     [("not valid JSON: Expecting value: line N column N", 1, ["(no id) at part-1.jsonl:105"]),
      ("question: missing or blank", 1, ["d at part-0.jsonl:7"]),
      ("timestamp: falls outside 2026-09-10", 1, ["d at part-0.jsonl:7"])]),
    ([(f"r{i}", i, ["record_id: repeated"]) for i in range(5)],
     [("record_id: repeated", 5, ["r0 at part-0.jsonl:0", "r1 at part-0.jsonl:1", "r2 at part-0.jsonl:2"])]),
])
def test_rejects_are_counted_by_reason_with_examples(rows: list[Any], expected: list[Any]) -> None:
    found = summarise_rejects(_rejects(rows))
    assert [(r.reason, r.count, r.examples) for r in found] == expected


def test_a_run_failed_on_rejects_says_why_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    synthetic.write_day(storage.open_store(str(tmp_path / "raw")), DAY, 20)  # with planted bad records
    code = main(["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "out"),
                 "--judge-model", "offline/lexical", "--no-progress"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 1 and printed["status"] == "failed"
    reasons = {r["reason"]: r for r in printed["rejects_by_reason"]}
    assert reasons["question: missing or blank"]["examples"] == ["bad-no-question at part-001.jsonl.gz:9"]
    assert "rejects by reason: " in printed["error"] and "question: missing or blank (1: e.g. bad-no-question" in printed[
        "error"]

    out = storage.open_store(str(tmp_path / "out"))
    row = storage.scan_table(out, "runs").collect().row(0, named=True)  # type: ignore[union-attr]
    assert row["status"] == "failed" and json.loads(row["reject_reasons"]) == printed["rejects_by_reason"]
    message = failure_message(dag_id="daily_evaluation", run_id=row["run_id"], day=DAY.isoformat(),
                              task_id="ingest_validate", reason="task_failure", run_row=row)
    cause = row["message"].split("; rejects by reason: ")[0]  # the reasons follow, one a line
    assert f"Cause: {cause}" in message.body and cause.startswith(f"run {row['run_id']} of {DAY} failed validation")
    assert "  rejected 1: question: missing or blank (e.g. bad-no-question at part-001.jsonl.gz:9)" in message.body

    queried = sql.run_sql(out, "SELECT dt, record_id, reasons FROM failed_rejects WHERE dt = DATE '2026-09-10' "
                               "ORDER BY record_id")
    assert queried.height == row["rejected_records"] > 0
    assert "bad-no-question" in queried["record_id"].to_list()
    assert queried["dt"].unique().to_list() == [DAY]


def _no_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "out"),
                 "--no-progress", *UNREACHABLE])
    printed = json.loads(capsys.readouterr().out)
    assert code == 1 and printed["status"] == "failed"
    assert "judge model" not in printed["error"]  # found before the judge was probed
    return str(printed["error"])


def test_no_input_names_the_uri_and_what_it_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    day_uri = str(tmp_path / "raw" / f"dt={DAY}")
    assert f"{day_uri} does not exist, nor does the input root {tmp_path / 'raw'}" in _no_input(tmp_path, capsys)

    (tmp_path / "raw" / f"dt={DAY - dt.timedelta(days=2)}").mkdir(parents=True)
    (tmp_path / "raw" / f"dt={DAY - dt.timedelta(days=2)}" / "a.jsonl").write_text("")
    assert f"{day_uri} does not exist (the input root holds earlier days: dt=2026-09-08)" in _no_input(tmp_path, capsys)

    (tmp_path / "raw" / f"dt={DAY}").mkdir()
    assert f"{day_uri} exists but holds no objects" in _no_input(tmp_path, capsys)

    for name in ("a.csv", "b.csv", "_SUCCESS", "c.json.bz2"):
        (tmp_path / "raw" / f"dt={DAY}" / name).write_text("x")
    assert (f"{day_uri} holds 4 object(s), none of them logs (.jsonl, .jsonl.gz, .parquet): found .csv ×2, "
            ".json.bz2, _SUCCESS") in _no_input(tmp_path, capsys)


def test_failed_rejects_without_failed_runs_is_named(tmp_path: Path) -> None:
    with pytest.raises(sql.SqlError, match="table failed_rejects has no data under .*_failed"):
        sql.run_sql(storage.open_store(str(tmp_path)), "SELECT * FROM failed_rejects")


def test_reason_lines() -> None:
    found = summarise_rejects(_rejects([("a", 1, ["x: bad"]), ("b", 2, ["x: bad"])]))
    assert reason_lines(found) == "x: bad (2: e.g. a at part-0.jsonl:1, b at part-0.jsonl:2)"
