"""Fault injection: a judge server that rate-limits, errors, hangs and babbles, and a day that still lands.

The server (OpenAIServer + FaultPlan) injects faults per request, deterministically by seed: an
identical retry gets a fresh draw. The run must complete, reconcile, classify what failed, and a
re-run must pay only for the calls that never returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.testing import synthetic
from evaluation.testing.openai_server import MALFORMED_CONTENT, FaultPlan, OpenAIServer, Reply
from tests.reliability.helpers import DAY, config, judge_kind, judge_reply, landed_bytes, prompt_pair, runs, table

RECORDS = 120
JUDGES = ("rag", "masis", "prompt")
RETRYABLE_CLASSES = {"rate_limit", "server_error", "timeout"}


def _babbling_judge(body: dict[str, Any]) -> str:
    """The realistic judge, except that its prompt judge babbles about the Hubble Space Telescope, so
    malformed prompt-judge replies are there whatever the fault draws."""
    if judge_kind(body).startswith("prompt/") and "the Hubble Space Telescope" in prompt_pair(body)[1]:
        return MALFORMED_CONTENT
    return judge_reply(body)


def _write_day(tmp_path: Path, records: int) -> set[str]:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, records, bad=False)
    return {f"{DAY:%Y%m%d}-{i:06d}" for i in range(records)}


def _joined(out: Path) -> pl.DataFrame:
    """evaluations with the judge call behind each row (raw reply, error class, request hash)."""
    calls = table(out, "judge_calls").select("record_id", "judge", "raw_response", "error_class", "request_hash",
                                             "system_prompt", "user_prompt", pl.col("attempts").alias("call_attempts"))
    return table(out, "evaluations").join(calls, on=["record_id", "judge"], how="left")


def test_faulty_judge_day_lands_reconciles_and_a_rerun_pays_only_for_call_errors(tmp_path: Path) -> None:
    record_ids = _write_day(tmp_path, RECORDS)
    plan = FaultPlan(rate_limit=0.3, server_error=0.1, hang=0.05, malformed=0.05, retry_after=0, seed=11)
    out = tmp_path / "out"
    with OpenAIServer(responder=_babbling_judge, faults=plan) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url,
                     concurrency=32, chunk_size=200)
        result = run_day(cfg, stages.Stores.open(cfg), api_key="k")
        first_requests = server.requests
        faults = server.fault_counts
        assert all(faults[kind] > 0 for kind in ("rate_limit", "server_error", "hang", "malformed")), faults

        # CONTRACT §4: input = valid + rejected; rows = valid × judges; one status per row.
        assert (result["input"], result["valid"], result["rejected"]) == (RECORDS, RECORDS, 0)
        assert result["rows"] == RECORDS * len(JUDGES)
        assert sum(result["statuses"].values()) == result["rows"]
        joined = _joined(out)
        assert joined.height == RECORDS * len(JUDGES)
        assert set(joined["record_id"]) == record_ids
        pairs = joined.group_by("record_id", "judge").len()
        assert pairs.height == RECORDS * len(JUDGES) and pairs["len"].eq(1).all()
        landed = dict(joined.group_by("judge_status").len().iter_rows())
        assert {s: landed.get(s, 0) for s in result["statuses"]} == result["statuses"]

        # Every HTTP attempt is a request the server saw, except that on a loaded machine a client may
        # time out an attempt before the server has read it: the audit trail accounts for every request.
        attempts = table(out, "judge_calls")["attempts"].sum()
        assert len(first_requests) <= attempts <= len(first_requests) + faults["hang"]
        assert runs(out)["calls_made"].item() == len({tuple(prompt_pair(r)) for r in first_requests})

        # A malformed reply is a parse_error (the prompt judge's fallback: score 0, fail), and the
        # judge never answers anything else unparseable, so every parse_error is a malformed reply.
        malformed = joined.filter(pl.col("raw_response") == MALFORMED_CONTENT)
        assert malformed.height > 0
        assert malformed["judge_status"].eq("parse_error").all()
        assert joined.filter(pl.col("judge_status") == "parse_error").height == malformed.height
        prompt_malformed = malformed.filter(pl.col("judge") == "prompt")
        assert prompt_malformed.height >= 5 and malformed.filter(pl.col("judge") != "prompt").height > 0
        assert prompt_malformed["score"].eq(0.0).all() and prompt_malformed["verdict"].eq("fail").all()
        assert malformed.filter(pl.col("judge") != "prompt")["score"].is_null().all()

        # A call whose retries ran out is a call_error whose error names the class of the last failure.
        errors = joined.filter(pl.col("judge_status") == "call_error")
        assert errors.height > 0
        assert set(errors["error_class"]) <= RETRYABLE_CLASSES
        for row in errors.iter_rows(named=True):
            assert row["error"].startswith(f"{row['error_class']} (retries exhausted after 4 attempts)"), row["error"]
            assert row["score"] is None and row["verdict"] is None
        assert table(out, "judge_calls").filter(pl.col("error_class").is_not_null()).height == errors.height
        ok = joined.filter(pl.col("judge_status") == "ok")
        empty = ok.filter(pl.col("clamps_applied").list.contains("empty_answer"))  # never sent (CONTRACT §2.5)
        assert ok["score"].is_not_null().all() and empty["raw_response"].is_null().all()
        assert ok.height - empty.height == ok["raw_response"].is_not_null().sum()
        skipped = joined.filter(pl.col("judge_status") == "skipped")
        assert skipped["judge"].eq("prompt").all() and skipped["reason"].eq("not_applicable").all()
        assert ok.height + malformed.height + errors.height + skipped.height == joined.height

        # The re-run asks only for the prompts whose calls never returned; every reply is reused.
        failed_prompts = {(r["system_prompt"], r["user_prompt"]) for r in errors.iter_rows(named=True)}
        seen = len(server.requests)
        rerun = config(tmp_path, run_id="r2", judge_model="openai/mock-judge", api_base=server.base_url,
                       concurrency=32, chunk_size=200)
        second = run_day(rerun, stages.Stores.open(rerun), api_key="k")
        new_requests = server.requests[seen:]
    assert {prompt_pair(r) for r in new_requests} == failed_prompts
    assert second["rows"] == RECORDS * len(JUDGES) and second["calls_made"] == len(failed_prompts)
    again = _joined(out)
    assert again["run_id"].unique().to_list() == ["r2"]
    answered_before = joined.filter(pl.col("judge_status").is_in(["ok", "parse_error"]) & pl.col("raw_response").is_not_null())
    reused = again.join(answered_before.select("record_id", "judge", pl.col("score").alias("score_before"),
                                               pl.col("judge_status").alias("status_before")),
                        on=["record_id", "judge"])
    assert reused.height == answered_before.height
    assert reused["cached"].all() and reused["attempts"].eq(0).all()
    assert (reused["judge_status"] == reused["status_before"]).all()
    assert (reused["score"] == reused["score_before"]).all()
    assert runs(out).height == 2


def test_a_rerun_after_recovered_faults_makes_zero_requests(tmp_path: Path) -> None:
    _write_day(tmp_path, 40)
    # At most three faults per body and four attempts per call: every call is eventually answered.
    plan = FaultPlan(rate_limit=0.3, server_error=0.1, hang=0.05, malformed=0.0, retry_after=0, seed=5,
                     max_faults_per_body=3)
    with OpenAIServer(responder=judge_reply, faults=plan) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url, concurrency=8)
        first = run_day(cfg, stages.Stores.open(cfg), api_key="k")
        assert sum(server.fault_counts.values()) > 0
        assert first["statuses"]["call_error"] == 0 and first["statuses"]["ok"] > 0
        seen = server.request_count
        rerun = config(tmp_path, run_id="r2", judge_model="openai/mock-judge", api_base=server.base_url)
        second = run_day(rerun, stages.Stores.open(rerun), api_key="k")
        assert server.request_count == seen
    assert second["calls_made"] == 0 and second["statuses"] == first["statuses"]
    judged = table(tmp_path / "out", "evaluations").filter(pl.col("judge_status") != "skipped")
    assert judged["cached"].all() and judged["attempts"].eq(0).all()


def test_every_call_failing_fails_on_the_call_error_ceiling_and_keeps_the_landed_day(tmp_path: Path) -> None:
    record_ids = _write_day(tmp_path, 20)
    out = tmp_path / "out"
    good = config(tmp_path, run_id="r0", judge_model="offline/lexical")
    run_day(good, stages.Stores.open(good))
    landed = landed_bytes(out, ("evaluations", "judge_calls", "daily_summary", "rejects"))
    with OpenAIServer(responder=lambda body: Reply.server_error()) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url,
                     max_attempts=2, max_call_error_ratio=0.2, concurrency=16)
        with pytest.raises(stages.RunFailed) as failure:
            run_day(cfg, stages.Stores.open(cfg), api_key="k")
        requests = server.requests
        assert len(server.probes) == 1  # the model answered its probe: the run went ahead
    message = str(failure.value)
    assert "run r1 of 2026-11-20" in message
    assert "max_call_error_ratio 20.0%" in message and "(100.0%)" in message
    # The failed run replaced nothing that analysts read: the day is the good run's, byte for byte.
    assert landed_bytes(out, tuple(landed)) == landed
    evidence = out / storage.failed_prefix(DAY, "r1")
    assert f"this run's rows are at {evidence}" in message
    evaluations = pl.read_parquet(evidence / "evaluations.parquet")
    assert evaluations.height == 20 * len(JUDGES) and set(evaluations["record_id"]) == record_ids
    assert evaluations.group_by("record_id", "judge").len()["len"].eq(1).all()
    attempted = evaluations.filter(pl.col("judge_status") != "skipped")
    assert attempted["judge_status"].eq("call_error").all()
    assert attempted["error"].str.starts_with("server_error (retries exhausted after 2 attempts)").all()
    assert attempted["score"].is_null().all() and attempted["verdict"].is_null().all()
    assert evaluations.filter(pl.col("judge_status") == "skipped")["reason"].eq("not_applicable").all()
    assert f"{attempted.height} of {attempted.height} judge calls failed" in message
    # Records that render the same prompt share one call: its failure is counted once, not per row.
    distinct = len({prompt_pair(r) for r in requests})
    assert distinct < attempted.height
    assert len(requests) == 2 * distinct
    assert pl.read_parquet(evidence / "judge_calls.parquet")["attempts"].sum() == len(requests)
    assert pl.read_parquet(evidence / "rejects.parquet").height == 0
    assert (evidence / "validation.json").is_file() and (evidence / "daily_summary.parquet").is_file()
    by_run = {row["run_id"]: row for row in runs(out).iter_rows(named=True)}
    assert by_run["r0"]["status"] == "success" and by_run["r0"]["evidence_uri"] is None
    run = by_run["r1"]
    assert run["status"] == "failed" and run["message"] == message and run["evidence_uri"] == str(evidence)
    assert run["n_call_error"] == attempted.height and run["calls_made"] == distinct
