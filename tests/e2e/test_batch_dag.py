"""End to end: daily_evaluation in batch mode under Airflow (dag.test runs the trigger inline)."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

import polars as pl
import pytest

from evaluation import storage
from evaluation.calling.batch import batch_prices
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from scripts import airflow_local
from tests.reliability.helpers import judge_reply

pytestmark = pytest.mark.e2e

DAY = dt.date(2026, 11, 21)
RECORDS = 90
INPUT_URI = "s3://llm-logs/batch-raw"
OUTPUT_URI = "s3://llm-evaluation/batch"
MODEL = "openai/gpt-4o-mini"
LIMIT = 40  #: requests per provider batch, below a chunk's (30 records × 3 judges)


def test_batch_mode_defers_each_chunk_and_lands_the_day_at_the_batch_price(airflow_db, local_s3) -> None:
    synthetic.write_day(storage.open_store(INPUT_URI, local_s3.access()), DAY, RECORDS, bad=False)
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.delay_s = 0.5  # the first look finds every batch in progress: each task defers
        server.batches.max_requests = LIMIT  # a larger batch fails validation, as a provider's does
        conf = {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judge_model": MODEL, "api_base": server.base_url,
                "chunk_size": 30, "batch": True, "batch_poll_s": 0.2, "batch_max_requests": LIMIT}
        dag_run = airflow_local.run_dag("daily_evaluation", DAY, conf)
        states = airflow_local.task_states(dag_run)
        counts = dict(server.batches.counts)
        lines = list(server.batches.line_ids)
        online = server.request_count - len(lines)
        batches = list(server.batches.batches.values())
    assert str(dag_run.state) == "success", states
    assert sum(1 for task in states if task.startswith("judge[")) == 3
    out = storage.open_store(OUTPUT_URI, local_s3.access())
    evaluations = storage.read_day(out, "evaluations", DAY)
    calls = storage.read_day(out, "judge_calls", DAY)
    judged = evaluations.filter(pl.col("judge_status") != "skipped")
    assert evaluations.height == RECORDS * 3 and judged["judge_status"].eq("ok").all()
    # Each chunk split into the batches its size needs, each within the limit and completed (its
    # task waited for all of its parts); every line run once, nothing sent online.
    assert all(b["status"] == "completed" and b["request_counts"]["total"] <= LIMIT for b in batches)
    per_chunk = Counter[str]()
    for batch in batches:
        per_chunk[batch["metadata"]["chunk"]] += batch["request_counts"]["total"]
    parts = Counter(b["metadata"]["chunk"] for b in batches)
    assert len(per_chunk) == 3 and all(parts[c] == math.ceil(n / LIMIT) >= 2 for c, n in per_chunk.items())
    assert counts["batches_created"] == counts["files_created"] == len(batches) and online == 0
    assert counts["batch_reads"] >= 3 * 3, "each task looked, deferred, its trigger looked, and it looked again"
    assert len(lines) == len(set(lines)) == calls.filter(~pl.col("cached"))["request_hash"].n_unique()
    price_in, price_out, known = batch_prices(MODEL)
    paid = judged.filter(~pl.col("cached"))
    assert known and paid.height > 0
    expected = paid["input_tokens"] * price_in + paid["output_tokens"] * price_out
    assert (paid["cost_usd"] - expected).abs().max() < 1e-12  # type: ignore[operator]
