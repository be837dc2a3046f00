"""The report's worst records on a day run through the real stages (offline judge): the question
and the answer each was judged on, the judge's reasons and clamps, and empty answers counted once."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.report import build_daily_report
from evaluation.report.evidence import QUESTION_LIMIT, TEXT_LIMIT
from evaluation.report.records import EMPTY_IDS_SHOWN
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 17)
RECORDS = 90
#: Every third record is assistant-v1's (synthetic.MODELS order): these get an empty answer.
EMPTY_EVERY = 3


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


@pytest.fixture(scope="module")
def day_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[storage.Store, dict[str, dict[str, Any]], set[str]]:
    """A day of generated records with many empty answers (more than a judge's worst list holds),
    run through every stage; returns the output store, the records by id and the empty ones' ids."""
    root = tmp_path_factory.mktemp("worst")
    records = [json.loads(line) for line in synthetic.generate_day(DAY, RECORDS, bad=False)]
    for i, record in enumerate(records):
        if i % EMPTY_EVERY == 0:
            record["answer"] = "  " if i % 2 else ""
    emptied = {r["record_id"] for r in records if not r["answer"].strip()}  # the generator's own too
    raw = storage.open_store(str(root / "raw"))
    raw.write_bytes(f"dt={DAY.isoformat()}/part-000.jsonl", ("\n".join(json.dumps(r) for r in records) + "\n").encode())
    cfg = RunConfig(date=DAY, input_uri=str(root / "raw"), output_uri=str(root / "out"), run_id="t-worst")
    run_day(cfg, stages.Stores.open(cfg))
    return storage.open_store(str(root / "out")), {r["record_id"]: r for r in records}, emptied


def test_worst_records_show_the_question_and_answer_they_were_judged_on(day_run) -> None:
    out, records, emptied = day_run
    page, summary = build_daily_report(out, DAY)
    worst = summary["worst_records"]
    assert worst
    for judge in summary["judges"]:
        assert len([r for r in worst if r["judge"] == judge]) == 10, judge
    for r in worst:
        source = records[r["record_id"]]
        assert r["record_id"] not in emptied and r["answer"].strip()
        assert r["question"] == _cut(source["question"], QUESTION_LIMIT)
        assert r["answer"] == _cut(source["answer"], TEXT_LIMIT)
        assert isinstance(r["clamps_applied"], list)
    # the page shows them, escaped, with the record id next to them
    first = worst[0]
    assert first["record_id"] in page and f"<q>{first['question'][:40]}" in page.replace("&#x27;", "'")


def test_empty_answers_are_counted_once_and_the_worst_non_empty_ones_listed(day_run) -> None:
    out, _, emptied = day_run
    page, summary = build_daily_report(out, DAY)
    evaluations = storage.read_day(out, "evaluations", DAY)
    ok_empty = (evaluations.filter(pl.col("record_id").is_in(sorted(emptied)) & (pl.col("judge_status") == "ok"))
                .group_by("judge").agg(pl.col("record_id").sort()))
    expected = {judge: ids for judge, ids in ok_empty.iter_rows()}
    assert expected, "some judge lands empty answers as ok rows"
    found = {e["judge"]: e for e in summary["empty_answers"]}
    assert set(found) == set(expected)
    for judge, ids in expected.items():
        # more empty answers than the list holds: all counted, none listed, the worst non-empty shown
        assert len(ids) > 10 and found[judge]["count"] == len(ids)
        assert found[judge]["record_ids"] == ids[:EMPTY_IDS_SHOWN]
        assert f"{len(ids)} empty answer(s) (score 0, verdict fail), not listed below" in page
    scores = evaluations.filter((pl.col("judge_status") == "ok") & ~pl.col("record_id").is_in(sorted(emptied)))
    for judge in summary["judges"]:
        lowest = sorted(scores.filter(pl.col("judge") == judge)["score"].to_list())[:10]
        assert [r["score"] for r in summary["worst_records"] if r["judge"] == judge] == lowest


def test_a_record_without_a_kept_prompt_says_so(day_run, tmp_path: Path) -> None:
    out, _, _ = day_run
    copy = storage.open_store(str(tmp_path / "copy"))
    for table in ("evaluations", "daily_summary", "runs"):
        for info in out.list(f"{table}/"):
            copy.write_bytes(info.key, out.read_bytes(info.key))
    commit = storage.read_landed(out, [DAY]).commits[DAY]
    storage.commit_day(copy, DAY, commit.run_id or "", {t: commit.objects[t] for t in ("evaluations", "daily_summary")})
    page, summary = build_daily_report(copy, DAY)  # no judge_calls landed
    assert all(r["question"] is None and r["answer"] is None for r in summary["worst_records"])
    assert "no judge call kept this record&#x27;s prompt" in page or "no judge call kept this record's prompt" in page


def test_empty_answers_landed_with_the_clamp_and_no_judge_call_are_counted(day_run, tmp_path: Path) -> None:
    """The empty-answer rule of CONTRACT §2.5: every judge lands them ok, score 0, with the
    ``empty_answer`` clamp, and no judge call (so no prompt) exists for them."""
    out, _, emptied = day_run
    copy = storage.open_store(str(tmp_path / "copy"))
    for table in ("daily_summary", "rejects", "runs", "_landed"):  # the day's commit names the same objects
        for info in out.list(f"{table}/"):
            copy.write_bytes(info.key, out.read_bytes(info.key))
    evaluations = storage.read_day(out, "evaluations", DAY)
    is_empty = pl.col("record_id").is_in(sorted(emptied))
    evaluations = evaluations.with_columns(
        judge_status=pl.when(is_empty).then(pl.lit("ok")).otherwise("judge_status"),
        score=pl.when(is_empty).then(0.0).otherwise("score"),
        clamps_applied=pl.when(is_empty).then(pl.lit(["empty_answer"])).otherwise("clamps_applied"))
    storage.write_parquet(copy, storage.landed_key(out, "evaluations", DAY) or "", evaluations)
    calls = storage.read_day(out, "judge_calls", DAY).filter(~is_empty)
    storage.write_parquet(copy, storage.landed_key(out, "judge_calls", DAY) or "", calls)

    _, summary = build_daily_report(copy, DAY)
    assert {e["judge"]: e["count"] for e in summary["empty_answers"]} == {j: len(emptied) for j in summary["judges"]}
    assert all(r["record_id"] not in emptied and r["answer"].strip() for r in summary["worst_records"])
