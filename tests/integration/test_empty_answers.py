"""One rule for empty answers (CONTRACT §2.5): an answer blank after trimming is never sent to a
judge, and every judge lands it ``ok``, score 0, verdict ``fail``, its metrics 0 and
``empty_answer`` in ``clamps_applied`` — online, in batch mode and with the offline judge, and
the day's counts still reconcile (§4)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.calling.cost import TYPICAL_REPLY_TOKENS
from evaluation.cli.day import run_day
from evaluation.contract.config import InputRecord, JudgeName, Thresholds
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import RenderedPrompt, empty_answer_row, route, score_table
from evaluation.testing.openai_server import OpenAIServer
from tests.factories import jsonl, make_record, raw_record
from tests.reliability.helpers import config, judge_reply

DAY = dt.date(2026, 11, 25)  # raw_record's day
MODEL = "openai/gpt-4o-mini"  # priced in litellm's map, with batch prices
JUDGES: tuple[JudgeName, ...] = ("rag", "masis", "prompt")
RUBRICS = [{"id": "states-value", "description": "Names the capital", "weight": 2},
           {"id": "cites", "description": "Cites doc-1", "required": False}]

#: Records with a blank answer, each of another shape; the prompt judge does not apply to the last.
EMPTY = {
    "e-ref": {"answer": "", "reference": "Paris"},
    "e-rubric": {"answer": "   ", "rubrics": RUBRICS, "reference": None},
    "e-outcome": {"answer": "\n\t \u00a0", "expected_outcome": "Names Paris.", "reference": None},
    "e-none": {"answer": " \r\n", "reference": None},
}
#: The same shapes answered: every applicable judge is called for these.
ANSWERED = {
    "a-ref": {"answer": "Paris [doc-1].", "reference": "Paris"},
    "a-rubric": {"answer": "Paris is the capital [doc-1].", "rubrics": RUBRICS, "reference": None},
    "a-outcome": {"answer": "It is Paris.", "expected_outcome": "Names Paris.", "reference": None},
    "a-none": {"answer": "Paris, I believe [doc-1].", "reference": None},
}
#: (record, judge) pairs that are sent to a judge: every answered one but prompt on ``a-none``.
CALLED = {(r, j) for r in ANSWERED for j in JUDGES} - {("a-none", "prompt")}


def _write_day(tmp_path: Path) -> None:
    lines = [raw_record(record_id=rid, keep_none=True, timestamp=f"{DAY}T1{i}:00:00Z", **fields)
             for i, (rid, fields) in enumerate({**EMPTY, **ANSWERED}.items())]
    storage.LocalStore(tmp_path / "raw").write_bytes(f"dt={DAY}/day.jsonl", jsonl(*lines))


def _expected_empty_row(record_id: str, judge: JudgeName) -> dict[str, Any]:
    """What CONTRACT §2.5 says an empty answer lands as, column by column."""
    if record_id == "e-none" and judge == "prompt":  # not applicable stays skipped
        return {"judge_status": "skipped", "reason": "not_applicable", "score": None, "verdict": None,
                "clamps_applied": []}
    row: dict[str, Any] = {"judge_status": "ok", "score": 0.0, "verdict": "fail", "clamps_applied": ["empty_answer"],
                           "reason": "empty_answer"}
    if judge == "rag":
        row.update(faithfulness=0.0, context_relevance=0.0, answer_relevance=0.0,
                   semantic_similarity=0.0 if record_id == "e-ref" else None)
    elif judge == "masis":
        row.update(faithfulness=0.0, relevance=0.0, completeness=0.0, reasoning_quality=0.0, citations=[],
                   invalid_citations=[], uncited_claim_count=0, hallucination_detected=False)
    return row


def _spent_nothing(row: dict[str, Any]) -> bool:
    return (row["input_tokens"], row["output_tokens"], row["cost_usd"], row["attempts"], row["cached"],
            row["judged_at"]) == (0, 0, 0.0, 0, False, None)


def _check_landed_day(out: Path, result: stages.DayResult) -> None:
    """Every empty answer lands as :func:`_expected_empty_row` with nothing spent and no call; the
    day's counts reconcile."""
    evaluations = storage.read_day(storage.LocalStore(out), "evaluations", DAY)
    calls = storage.read_day(storage.LocalStore(out), "judge_calls", DAY)
    rows = {(r["record_id"], r["judge"]): r for r in evaluations.to_dicts()}
    for record_id in EMPTY:
        for judge in JUDGES:
            landed = rows[(record_id, judge)]
            expected = _expected_empty_row(record_id, judge)
            assert {k: landed[k] for k in expected} == expected, (record_id, judge)
            assert _spent_nothing(landed), (record_id, judge)
    # The same outcome in the three judges (prompt's not-applicable row aside).
    outcomes = {(r["judge_status"], r["score"], r["verdict"], tuple(r["clamps_applied"]))
                for (rid, judge), r in rows.items() if rid in EMPTY and (rid, judge) != ("e-none", "prompt")}
    assert outcomes == {("ok", 0.0, "fail", ("empty_answer",))}
    # No call for an empty answer; every other applicable pair was called once.
    assert set(zip(calls["record_id"], calls["judge"], strict=True)) == CALLED
    assert all(rows[pair]["clamps_applied"].count("empty_answer") == 0 for pair in CALLED)
    # CONTRACT §4: input = valid + rejected; rows = valid × judges; one status each.
    records = len(EMPTY) + len(ANSWERED)
    assert (result.input, result.valid, result.rejected) == (records, records, 0)
    assert result.rows == evaluations.height == records * len(JUDGES) == sum(result.statuses.values())
    assert result.statuses == {"ok": records * len(JUDGES) - 2, "parse_error": 0, "judge_failed": 0,
                               "call_error": 0, "skipped": 2}
    assert result.verdicts["fail"] >= (len(EMPTY) * len(JUDGES) - 1)
    assert result.calls_made == len(CALLED) and result.calls_reused == 0
    runs = pl.read_parquet(out / storage.run_key(DAY, "r1")).row(0, named=True)
    assert (runs["n_ok"], runs["n_skipped"], runs["rows"], runs["calls_made"]) == (
        result.statuses["ok"], 2, result.rows, len(CALLED))


@pytest.mark.parametrize("batch", [False, True], ids=["online", "batch"])
def test_empty_answers_land_alike_in_every_judge_with_no_call(tmp_path: Path, batch: bool) -> None:
    _write_day(tmp_path)
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, day=DAY, judge_model=MODEL, api_base=server.base_url, batch=batch, batch_poll_s=0.05)
        result = run_day(cfg, stages.Stores.open(cfg), api_key="test-key")
        sent = [request.body for request in server.requests]
        requests = server.request_count
        lines = list(server.batches.line_ids)
    # The server saw exactly the answered pairs (as online calls, or as the lines of a batch).
    assert requests == len(sent) == len(CALLED)
    assert len(lines) == (len(CALLED) if batch else 0)
    users = [body["messages"][1]["content"] for body in sent]
    for fields in ANSWERED.values():
        assert any(fields["answer"] in user for user in users)
    _check_landed_day(tmp_path / "out", result)


def test_the_plan_estimates_no_call_for_an_empty_answer(tmp_path: Path) -> None:
    _write_day(tmp_path)
    cfg = config(tmp_path, day=DAY, judge_model=MODEL, api_base="http://127.0.0.1:9/v1")
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    stages.plan_chunks(cfg, stores)
    plan = stages.read_manifest(cfg, stores).plan
    assert plan is not None and plan.estimate.records == len(EMPTY) + len(ANSWERED)
    replies = sum(TYPICAL_REPLY_TOKENS[judge] for _, judge in CALLED)  # each judge's typical reply, as the plan's
    assert plan.estimate.calls == len(CALLED) and plan.estimate.output_tokens == replies


def test_empty_answers_land_alike_with_the_offline_judge(tmp_path: Path) -> None:
    _write_day(tmp_path)
    cfg = config(tmp_path, day=DAY, judge_model="offline/lexical")
    result = run_day(cfg, stages.Stores.open(cfg))
    _check_landed_day(tmp_path / "out", result)


@pytest.mark.parametrize("answer", ["", " ", "\n\t", "\u00a0\u2003", " \r\n "])
@pytest.mark.parametrize("judge", JUDGES)
def test_a_blank_answer_is_routed_to_no_call(judge: JudgeName, answer: str) -> None:
    record = make_record(answer=answer, expected_outcome="States the temperature.")
    row = route(judge, record)
    assert not isinstance(row, RenderedPrompt)
    assert row["judge_status"] == "ok" and row["empty_answer"] is True
    assert isinstance(route(judge, make_record(answer=" 0 ", expected_outcome="x")), RenderedPrompt)


def test_a_judge_that_does_not_apply_stays_skipped_for_an_empty_answer() -> None:
    row = route("prompt", make_record(answer="", reference=None))
    assert not isinstance(row, RenderedPrompt)
    assert (row["judge_status"], row["reason"], row["empty_answer"]) == ("skipped", "not_applicable", False)


def _scored(records: list[InputRecord], thresholds: Thresholds | None = None,
            per_judge: dict[str, Thresholds] | None = None) -> list[dict[str, Any]]:
    rows = [empty_answer_row(judge, record) for record in records for judge in JUDGES]
    frame = pl.DataFrame([{c: row.get(c) for c in PARSED_SCHEMA} for row in rows], schema=PARSED_SCHEMA)
    return score_table(frame, thresholds, per_judge=per_judge).to_dicts()


@pytest.mark.parametrize("thresholds", [None, Thresholds(**{"pass": 0.0, "borderline": 0.0}),
                                        Thresholds(**{"pass": 0.5, "borderline": 0.0})],
                         ids=["default", "zero-pass", "zero-borderline"])
def test_an_empty_answer_fails_whatever_the_thresholds(thresholds: Thresholds | None) -> None:
    records = [make_record(answer="", reference=None), make_record(answer=" ", rubrics=RUBRICS)]
    per_judge = {"masis": Thresholds(**{"pass": 0.0, "borderline": 0.0})}
    for row in _scored(records, thresholds, per_judge):
        assert (row["score"], row["verdict"], row["clamps_applied"]) == (0.0, "fail", ["empty_answer"]), row


def test_an_empty_answers_metrics_are_zero_and_rag_similarity_needs_a_reference() -> None:
    with_reference, without = _scored([make_record(answer=""), make_record(answer="", reference=" none ")])[::3]
    assert with_reference["judge"] == without["judge"] == "rag"
    assert with_reference["semantic_similarity"] == 0.0 and without["semantic_similarity"] is None
    for row in (with_reference, without):
        assert (row["faithfulness"], row["context_relevance"], row["answer_relevance"]) == (0.0, 0.0, 0.0)
        assert row["clamps_applied"] == ["empty_answer"]
