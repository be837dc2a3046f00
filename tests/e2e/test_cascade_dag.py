"""End to end: daily_evaluation with a cascade in batch mode under Airflow (dag.test runs each
trigger inline). The local server answers as two judge models of known accuracy
(:class:`evaluation.testing.labelled.LabelledJudges`) after the offline judge, over labelled records
of the shipped HaluEval QA golden set: each judge task defers on one level's batches at a time, each
row records the level that decided it and its calls, and a re-run pays nothing. (That batch mode
lands what online judging lands is tested without Airflow, in tests/integration/test_cascade.py.)"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.testing.labelled import LabelledJudges
from evaluation.testing.openai_server import OpenAIServer
from scripts import airflow_local

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SET = REPO / "data" / "golden" / "halueval-qa" / "records.jsonl"
DAY = dt.date(2026, 1, 1)
RECORDS = 24
INPUT_URI = "s3://llm-logs/cascade-raw"
OUTPUT_URI = "s3://llm-evaluation/cascade"
CHEAP, STRONG = "openai/gpt-4o-mini", "openai/gpt-4o"
CASCADE = "offline/lexical@0.2:0.95,openai/gpt-4o-mini@0.45:0.75"
MODELS = ["offline/lexical", CHEAP, STRONG]
SAME = ["record_id", "judge", "decided_by", "cascade_calls", "score", "verdict"]


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines()[:RECORDS]]


def _batch_model(server: OpenAIServer, batch: dict[str, Any]) -> str:
    """The model of a batch's requests (with its provider), read from its input file as the server holds it."""
    return "openai/" + str(server.batches.lines(batch["input_file_id"])[0]["body"]["model"])


def test_a_cascade_in_batch_mode_defers_level_by_level_and_a_rerun_pays_nothing(airflow_db, local_s3) -> None:
    records = _records()
    raw = storage.open_store(INPUT_URI, local_s3.access())
    raw.write_bytes(f"dt={DAY}/records.jsonl", "".join(
        json.dumps({k: v for k, v in r.items() if k != "labels"}) + "\n" for r in records).encode())
    conf = {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judges": ["rag", "masis"], "judge_model": STRONG,
            "cascade": CASCADE, "chunk_size": RECORDS, "batch": True, "batch_poll_s": 0.2}
    with OpenAIServer(LabelledJudges.from_records(records, {"gpt-4o-mini": 0.8, "gpt-4o": 0.95}),
                      models=("gpt-4o", "gpt-4o-mini")) as server:
        server.batches.delay_s = 0.5  # each level's first look finds its batch in progress: the task defers
        dag_run = airflow_local.run_dag("daily_evaluation", DAY, {**conf, "api_base": server.base_url})
        states = airflow_local.task_states(dag_run)
        batches = list(server.batches.batches.values())
        models = [_batch_model(server, b) for b in batches]
        lines = list(server.batches.line_ids)
        online_before = server.request_count - len(lines)
        out = storage.open_store(OUTPUT_URI, local_s3.access())
        evaluations = storage.read_day(out, "evaluations", DAY)  # the first run's, before the re-run lands
        calls = storage.read_day(out, "judge_calls", DAY)

        # A re-run of the day under Airflow: every level's reply is in the ledger, no request at all.
        requests = server.request_count
        second = airflow_local.run_dag("daily_evaluation", DAY, {**conf, "api_base": server.base_url})
        rerun_requests = server.request_count - requests
        rerun_batches = len(server.batches.batches) - len(batches)

    assert str(dag_run.state) == "success", states
    assert sum(1 for task in states if task.startswith("judge[")) == 1
    assert evaluations.height == RECORDS * 2

    # The chunk sent one batch per paying level, the cheap model's before the strong one's (the
    # task deferred on each); the offline judge has no batch API and nothing went online.
    assert models == [CHEAP, STRONG] and online_before == 0
    assert all(b["status"] == "completed" for b in batches)
    # every level decided some rows, and each row's calls are the levels up to the one that decided
    decided = Counter(evaluations["decided_by"].to_list())
    assert all(decided[m] > 0 for m in MODELS), decided
    for model, level in zip(MODELS, range(1, 4), strict=True):
        assert evaluations.filter(pl.col("decided_by") == model)["cascade_calls"].eq(level).all()
    per_model = Counter(calls["judge_model"].to_list())
    assert per_model["offline/lexical"] == evaluations.height
    assert per_model[CHEAP] == evaluations.filter(pl.col("cascade_calls") >= 2).height
    assert per_model[STRONG] == evaluations.filter(pl.col("cascade_calls") == 3).height
    # the batch lines are the paid calls of the two models, each sent once
    paid = calls.filter(pl.col("judge_model") != "offline/lexical")
    assert sorted(lines) == sorted(set(lines)) and set(lines) == set(paid["request_hash"])

    # every paid row of the first run counts its calls' cost, the levels' waited for in earlier steps too
    assert not evaluations.filter(pl.col("cascade_calls") >= 2)["cached"].any()
    assert evaluations.filter(pl.col("cascade_calls") >= 2)["cost_usd"].gt(0.0).all()
    assert not paid["cached"].any() and paid["cost_usd"].gt(0.0).all()

    landed = evaluations.select(SAME).sort("record_id", "judge")

    runs = storage.scan_table(out, "runs").filter(pl.col("dt") == DAY).collect()  # type: ignore[union-attr]
    first = runs.filter(pl.col("run_id") == dag_run.run_id).row(0, named=True)
    # what the run paid: each call once, the levels the chunk waited for in earlier steps included
    assert first["cost_usd"] == pytest.approx(float(calls["cost_usd"].sum()), abs=1e-6)
    assert first["cost_usd"] == pytest.approx(float(evaluations["cost_usd"].sum()), abs=1e-6)
    levels = json.loads(first["cascade"])["levels"]
    assert [(level["judge_model"], level["decided"]) for level in levels] == [(m, decided[m]) for m in MODELS]

    assert str(second.state) == "success"
    assert rerun_requests == 0 and rerun_batches == 0
    again = storage.read_day(out, "evaluations", DAY)
    assert again.select(SAME).sort("record_id", "judge").equals(landed)
    assert again["cached"].all() and again["cost_usd"].eq(0.0).all()
