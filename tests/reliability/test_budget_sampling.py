"""Sampling and budget: what a run judges when told to judge less.

``sample`` picks a deterministic sample stratified by model (a fraction of every model, or at most
N per model); the rest are ``skipped``/``sampled_out``. ``budget_usd`` stops new calls once a
chunk has spent its share (litellm prices ``openai/gpt-4o-mini`` from its bundled map, served here
by the local server); the calls never made are ``skipped``/``budget_exhausted``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer, count_prompt_tokens
from tests.reliability.helpers import DAY, config, judge_reply, runs, table

# Unequal strata: 30, 20 and 7 records.
SIZES = {"assistant-v1": 30, "assistant-v2": 20, "assistant-lite": 7}


def _write_unequal_day(tmp_path: Path) -> dict[str, str]:
    lines, kept, models = [], Counter(), {}
    for line in synthetic.generate_day(DAY, 90, bad=False):
        record = json.loads(line)
        if kept[record["model"]] < SIZES[record["model"]]:
            kept[record["model"]] += 1
            lines.append(line)
            models[record["record_id"]] = record["model"]
    storage.LocalStore(tmp_path / "raw").write_bytes(f"dt={DAY}/day.jsonl", ("\n".join(lines) + "\n").encode())
    return models


def _sampled(tmp_path: Path, run_id: str, sample: str, chunk_size: int = 500) -> tuple[dict, pl.DataFrame]:
    cfg = config(tmp_path, run_id=run_id, sample=sample, chunk_size=chunk_size, judge_model="offline/lexical")
    result = run_day(cfg, stages.Stores.open(cfg))
    return result, table(tmp_path / "out", "evaluations")


@pytest.mark.parametrize(("sample", "quota"), [
    ("0.25", {m: math.ceil(n * 0.25) for m, n in SIZES.items()}),  # 8, 5, 2: the same share of every model
    ("0.1", {"assistant-v1": 3, "assistant-v2": 2, "assistant-lite": 1}),
    ("6", {"assistant-v1": 6, "assistant-v2": 6, "assistant-lite": 6}),
    ("10", {"assistant-v1": 10, "assistant-v2": 10, "assistant-lite": 7}),  # a model with fewer: all of it
])
def test_sample_is_deterministic_and_stratified_by_model(tmp_path: Path, sample: str, quota: dict[str, int]) -> None:
    models = _write_unequal_day(tmp_path)
    valid = len(models)
    first, evaluations = _sampled(tmp_path, "r1", sample)
    judged = evaluations.filter(pl.col("reason").is_null() | (pl.col("reason") != "sampled_out"))
    chosen = set(judged["record_id"])
    assert Counter(models[r] for r in chosen) == quota

    # The rest: every judge's row is skipped / sampled_out, with no score; counts reconcile.
    out = evaluations.filter(pl.col("reason") == "sampled_out")
    assert out["judge_status"].eq("skipped").all() and out["score"].is_null().all()
    assert set(out["record_id"]) == set(models) - chosen
    assert out.height == (valid - len(chosen)) * 3
    assert evaluations.height == first["rows"] == valid * 3 and first["input"] == first["valid"] == valid
    assert evaluations.group_by("record_id", "judge").len()["len"].eq(1).all()
    assert judged.filter(pl.col("judge") != "prompt")["judge_status"].eq("ok").all()
    assert first["statuses"]["skipped"] == out.height + judged.filter(pl.col("judge_status") == "skipped").height

    # The same records on a re-run, whatever the chunking.
    _, again = _sampled(tmp_path, "r2", sample, chunk_size=7)
    assert set(again.filter(pl.col("reason").is_null() | (pl.col("reason") != "sampled_out"))["record_id"]) == chosen
    assert again["run_id"].unique().to_list() == ["r2"]


def _per_call_cost_reaches(costs: list[float], budget: float) -> int:
    """How many calls, in completion order, it takes to spend ``budget`` (all of them if never)."""
    spent = 0.0
    for index, cost in enumerate(costs, start=1):
        spent += cost
        if spent >= budget:
            return index
    return len(costs)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_budget_stops_calls_per_chunk_and_the_rest_is_budget_exhausted(tmp_path: Path, concurrency: int) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    budget = 0.0012
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, judge_model="openai/gpt-4o-mini", api_base=server.base_url, chunk_size=15,
                     concurrency=concurrency, budget_usd=budget)
        stores = stages.Stores.open(cfg)
        stages.ingest_and_validate(cfg, stores)
        chunks = stages.plan_chunks(cfg, stores)
        assert len(chunks) == 2
        made_total, cost_total = 0, 0.0
        for chunk in chunks:
            seen = server.request_count
            result = stages.judge_chunk(cfg, stores, chunk["index"], api_key="k")
            calls = storage.read_parquet(stores.out, storage.chunk_key(DAY, "r1", "calls", chunk["index"]))
            judged = storage.read_parquet(stores.out, storage.chunk_key(DAY, "r1", "judged", chunk["index"]))
            made = calls.filter(pl.col("attempts") > 0).sort("judged_at")
            costs = made["cost_usd"].to_list()
            assert all(c > 0 for c in costs), "litellm prices gpt-4o-mini from its bundled map"
            assert made.height == result["calls_made"] == server.request_count - seen
            # Calls stop once the chunk's share is spent; calls already in flight may finish.
            needed = _per_call_cost_reaches(costs, budget / 2)
            assert sum(costs) >= budget / 2
            assert needed <= made.height <= needed + concurrency - 1
            exhausted = judged.filter(pl.col("reason") == "budget_exhausted")
            assert exhausted.height > 0 and exhausted["judge_status"].eq("skipped").all()
            assert exhausted["score"].is_null().all()
            # Every row is judged (or reused) from a call that was made, or says the budget ran out.
            statuses = Counter(judged["judge_status"])
            not_applicable = judged.filter(pl.col("reason") == "not_applicable").height
            assert statuses["ok"] + exhausted.height + not_applicable == judged.height == 15 * 3
            made_total += made.height
            cost_total += sum(costs)
            requests = server.requests[seen:]
            assert sum(count_prompt_tokens(r) for r in requests) == made["input_tokens"].sum()
        landed = stages.score_and_land(cfg, stores)
    assert landed["rows"] == 90 and landed["calls_made"] == made_total
    assert landed["cost_usd"] == pytest.approx(cost_total, abs=1e-6)
    run = runs(tmp_path / "out").row(0, named=True)
    assert run["estimated_prompt_tokens"] > 0 and run["estimated_cost_usd"] > 0
    assert run["cost_usd"] == pytest.approx(cost_total, abs=1e-6) and run["input_tokens"] > 0
    assert json.loads(run["config"])["budget_usd"] == budget
    # The estimate is the day's; per call it is within a factor of two of what the server counted.
    evaluations = table(tmp_path / "out", "evaluations")
    paid = evaluations.filter(pl.col("attempts") > 0)
    per_call = run["estimated_prompt_tokens"] / max(1, evaluations.filter(pl.col("reason") != "not_applicable").height)
    assert 0.5 <= per_call / paid["input_tokens"].mean() <= 2.0  # type: ignore[operator]


def test_a_rerun_with_the_same_budget_reuses_the_paid_replies_and_judges_more(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 20, bad=False)
    with OpenAIServer(responder=judge_reply) as server:
        first_cfg = config(tmp_path, judge_model="openai/gpt-4o-mini", api_base=server.base_url, concurrency=1,
                           budget_usd=0.001)
        first = run_day(first_cfg, stages.Stores.open(first_cfg), api_key="k")
        before = table(tmp_path / "out", "evaluations")
        seen = len(server.requests)
        second_cfg = first_cfg.model_copy(update={"run_id": "r2"})
        second = run_day(second_cfg, stages.Stores.open(second_cfg), api_key="k")
        asked_again = {json.dumps(r["messages"]) for r in server.requests[seen:]} & {
            json.dumps(r["messages"]) for r in server.requests[:seen]}
    after = table(tmp_path / "out", "evaluations")
    assert not asked_again
    assert second["statuses"]["ok"] > first["statuses"]["ok"] > 0
    ok_before = before.filter(pl.col("judge_status") == "ok").select("record_id", "judge")
    reused = after.join(ok_before, on=["record_id", "judge"])
    assert reused["judge_status"].eq("ok").all() and reused["cached"].all() and reused["cost_usd"].eq(0.0).all()
