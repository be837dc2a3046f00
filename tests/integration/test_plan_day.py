"""``plan`` sizes a day before paying: without a judge call, its calls are exactly a real run's
and its input tokens within the stated margin; it writes nothing under the output root."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.calling.client import price_per_token
from evaluation.calling.cost import TYPICAL_REPLY_TOKENS
from evaluation.cli import main as cli
from evaluation.cli.day import run_day
from evaluation.contract.options import build_config
from evaluation.stages.sizing import TOKEN_MARGIN, judging_time
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import judge_reply

DAY = dt.date(2026, 11, 20)


def _config(tmp_path: Path, run_id: str, **values: Any) -> Any:
    merged = {"input_uri": str(tmp_path / "raw"), "output_uri": str(tmp_path / "out"), "chunk_size": 120,
              "max_reject_ratio": 0.5, **values}
    return build_config(merged, date=DAY, run_id=run_id, trigger="test")


def _made(out: Path) -> pl.DataFrame:
    """The calls a run made (its reused replies excluded), per judge: how many, their prompt tokens."""
    calls = storage.read_day(storage.LocalStore(out), "judge_calls", DAY).filter(pl.col("attempts") > 0)
    return calls.group_by("judge").agg(pl.len().alias("calls"), pl.col("input_tokens").sum()).sort("judge")


@pytest.fixture()
def day(tmp_path: Path) -> Path:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 400, seed=11)
    return tmp_path


@pytest.mark.parametrize("options", [{}, {"sample": "0.5", "judges": "rag,prompt"}], ids=["all", "sampled"])
def test_the_plan_matches_a_real_run_of_the_same_day(day: Path, options: dict[str, Any]) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        cfg = _config(day, "plan", judge_model="openai/gpt-4o-mini", api_base=server.base_url, **options)
        size = stages.plan_day(cfg, stages.Stores.open(cfg), pool_slots=2, latency_s=1.0)
        assert server.request_count == 0 and server.probes == []  # no judge call, not even the probe
        assert not (day / "out").exists()  # nothing written under the output root (no claim, no work files)

        run = _config(day, "r1", judge_model="openai/gpt-4o-mini", api_base=server.base_url, **options)
        result = run_day(run, stages.Stores.open(run), api_key="k")

    assert (size.records, size.valid, size.rejected) == (result.input, result.valid, result.rejected)
    assert size.calls == result.calls_made > 0
    made = _made(day / "out")
    assert {j.judge: j.calls for j in size.judges if j.calls} == dict(zip(made["judge"], made["calls"], strict=True))
    for judge in size.judges:  # every pair is a call or says why it is none
        assert judge.calls + sum(judge.no_call.values()) == judge.pairs == result.valid
        assert judge.output_tokens == judge.calls * TYPICAL_REPLY_TOKENS[judge.judge]
    if "sample" in options:
        assert all(j.no_call["sampled_out"] == result.valid - size.sampled for j in size.judges)
    # The server's usage: a stand-in tokenizer of four characters a token (what many real ones come near).
    real_tokens = int(made["input_tokens"].sum())
    assert abs(size.input_tokens - real_tokens) <= TOKEN_MARGIN * real_tokens, (size.input_tokens, real_tokens)
    input_price, output_price = price_per_token("openai/gpt-4o-mini")
    assert size.priced and size.cost_usd == round(size.input_tokens * input_price + size.output_tokens * output_price, 6)
    assert size.batch_cost_usd is not None and 0 < size.batch_cost_usd < size.cost_usd


def test_a_second_plan_counts_the_ledgers_replies_as_no_calls(day: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        run = _config(day, "r1", judge_model="openai/mock-judge", api_base=server.base_url)
        first = run_day(run, stages.Stores.open(run), api_key="k")
        cfg = _config(day, "plan", judge_model="openai/mock-judge", api_base=server.base_url)
        size = stages.plan_day(cfg, stages.Stores.open(cfg))
    assert size.calls == 0 and size.input_tokens == 0 and size.seconds == 0
    landed = storage.read_day(storage.LocalStore(Path(first.output_uri)), "evaluations", run.date)
    empty = landed.filter(pl.col("reason") == "empty_answer").height
    assert empty > 0 and sum(j.no_call.get("empty_answer", 0) for j in size.judges) == empty
    # every pair the run sent or reused a reply for is a ledger hit now; the rest were never calls
    assert sum(j.no_call.get("cached", 0) for j in size.judges) == first.rows - first.statuses["skipped"] - empty
    assert sum(j.no_call.get("not_applicable", 0) for j in size.judges) == first.statuses["skipped"]
    assert not size.priced and size.cost_usd == 0.0  # the price map has no price for the test server's model


def test_a_budget_caps_the_calls_and_the_offline_judge_costs_nothing(day: Path) -> None:
    cfg = _config(day, "plan", judge_model="openai/gpt-4o-mini", budget_usd=0.01)
    size = stages.plan_day(cfg, stages.Stores.open(cfg))
    assert size.cost_usd > 0.01 and size.calls_within_budget is not None
    assert size.calls_within_budget == int(size.calls * 0.01 / size.cost_usd)
    # in batch mode the budget pays the batch price: it allows more calls
    batched = _config(day, "plan", judge_model="openai/gpt-4o-mini", budget_usd=0.01, batch=True)
    in_batches = stages.plan_day(batched, stages.Stores.open(batched))
    assert in_batches.batch_cost_usd is not None and in_batches.batch_cost_usd < size.cost_usd
    assert in_batches.calls_within_budget == int(size.calls * 0.01 / in_batches.batch_cost_usd) > size.calls_within_budget
    offline = stages.plan_day(_config(day, "plan"), stages.Stores.open(_config(day, "plan")))
    assert offline.calls == size.calls and offline.cost_usd == 0.0 and offline.batch_cost_usd is None


def test_a_day_that_breaks_a_table_rule_fails_its_plan_and_writes_nothing(day: Path) -> None:
    cfg = _config(day, "plan", max_reject_ratio=0.0)
    with pytest.raises(stages.RunFailed, match="failed validation.*a plan: nothing was written"):
        stages.plan_day(cfg, stages.Stores.open(cfg))
    assert not (day / "out").exists()


@pytest.mark.parametrize(
    ("values", "calls", "tokens", "parallel", "latency_s", "expected"),
    [
        ({}, 1000, 10**6, 1, 2.0, (250.0, "latency")),  # 1000 calls × 2 s / 8 in flight
        ({}, 1000, 10**6, 4, 2.0, (62.5, "latency")),  # four chunks at once
        ({"judge_rpm": 60}, 1000, 10**6, 1, 2.0, (1000.0, "judge_rpm")),
        ({"judge_rpm": 60}, 1000, 10**6, 2, 2.0, (1000.0, "judge_rpm")),  # the deployment's limit: chunks share it
        ({"judge_tpm": 100_000}, 1000, 10**6, 1, 2.0, (600.0, "judge_tpm")),
        ({"judge_rpm": 6000, "judge_tpm": 10**7}, 1000, 10**6, 1, 0.0, (10.0, "judge_rpm")),
        ({"batch": True}, 1000, 10**6, 1, 2.0, (86400.0, "batch window")),
    ],
)
def test_judging_time_is_its_slowest_bound(tmp_path: Path, values: dict[str, Any], calls: int, tokens: int,
                                           parallel: int, latency_s: float, expected: tuple[float, str]) -> None:
    cfg = _config(tmp_path, "plan", concurrency=8, **values)
    seconds, bound = judging_time(cfg, calls=calls, tokens=tokens, parallel=parallel, latency_s=latency_s)
    assert (seconds, bound) == (pytest.approx(expected[0]), expected[1])


def test_cli_plan_prints_lines_or_json_and_run_dry_run_plans(day: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--date", DAY.isoformat(), "--input", str(day / "raw"), "--output", str(day / "out"),
            "--max-reject-ratio", "0.5", "--judge-model", "openai/gpt-4o-mini", "--judge-rpm", "120"]
    assert cli.main(["plan", *args, "--json", "--pool-slots", "3"]) == 0
    size = json.loads(capsys.readouterr().out)
    assert size["calls"] > 0 and size["pool_slots"] == 3 and size["judge_rpm"] == 120
    assert cli.main(["plan", *args]) == 0
    text = capsys.readouterr().out
    assert f"judge calls: {size['calls']:,}" in text and "litellm token_counter" in text
    assert f"${size['cost_usd']:,.2f} online, ${size['batch_cost_usd']:,.2f} with the batch API" in text
    assert "bound by judge_rpm" in text
    assert cli.main(["run", *args, "--dry-run"]) == 0
    assert capsys.readouterr().out == text
    assert not (day / "out").exists()
