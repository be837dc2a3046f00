"""Resume: a run killed with SIGKILL mid-judging, restarted, pays for no stored reply twice.

The killed run is ``python -m evaluation run`` in a subprocess; the judge is an OpenAIServer in
the test process, so the test sees every request either run sent. The ledger holds request
hashes only: a request body's hash is recomputed exactly as :func:`evaluation.storage.ledger.request_hash`
computes it from the rendered prompt, and checked against the ledger written before the kill.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import polars as pl

from evaluation import stages, storage
from evaluation.calling.client import JudgeClient
from evaluation.cli import main as cli
from evaluation.contract.config import JUDGES, InputRecord
from evaluation.judges import PROMPT_VERSIONS, RenderedPrompt, route
from evaluation.storage.ledger import request_hash
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import DAY, PYTHON, REPO, cli_env, config, judge_kind, judge_reply, table

RECORDS = 150
MODEL = "openai/mock-judge"


def _hash_of(body: dict[str, Any], api_base: str) -> str:
    """The ledger's request hash of a request body (judge, template version, messages, parameters)."""
    system, user = (m["content"] for m in body["messages"])
    judge = judge_kind(body).split("/", 1)[0]
    prompt = RenderedPrompt(judge, PROMPT_VERSIONS[judge], system, user, ())  # type: ignore[arg-type]
    parameters = JudgeClient(MODEL, api_base=api_base).call_parameters()
    assert (body["temperature"], "response_format" in body) == (parameters["temperature"], parameters["json_mode"])
    return request_hash(MODEL, prompt, parameters)


def _ledger_hashes(out: Path) -> set[str]:
    store = storage.LocalStore(out)
    keys = [o.key for o in store.list(storage.ledger_prefix(DAY)) if o.key.endswith(".parquet")]
    return {h for key in keys for h in storage.read_parquet(store, key)["request_hash"]}


def _distinct_prompts() -> int:
    records = [InputRecord.model_validate({k: v for k, v in json.loads(line).items() if k != "metadata"})
               for line in synthetic.generate_day(DAY, RECORDS, bad=False)]
    return len({json.dumps(p.messages) for r in records for j in JUDGES if isinstance(p := route(j, r), RenderedPrompt)})


def _run_args(tmp_path: Path, api_base: str, run_id: str) -> list[str]:
    return ["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "out"),
            "--judge-model", MODEL, "--api-base", api_base, "--chunk-size", "400", "--concurrency", "4",
            "--run-id", run_id, "--no-progress"]


def test_a_run_killed_mid_judging_and_restarted_makes_no_call_twice(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    out = tmp_path / "out"
    expected_calls = _distinct_prompts()  # 150 records × 3 judges, less not-applicable and repeated prompts
    with OpenAIServer(responder=judge_reply, latency_s=0.05) as server:
        process = subprocess.Popen([PYTHON, "-m", "evaluation", *_run_args(tmp_path, server.base_url, "r1")],
                                   cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while not (server.request_count >= 0.4 * expected_calls and _ledger_hashes(out)):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, f"only {server.request_count} requests"
                time.sleep(0.05)
            process.kill()  # SIGKILL: no cleanup, no final flush
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        assert process.returncode == -9
        assert server.wait_idle(60), "the killed run's connections never closed"  # the count is final
        before = server.requests
        stored = _ledger_hashes(out)
        assert "judge_calls" not in {p.name for p in out.iterdir()}, "the killed run must not have landed"

        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):  # the same command, restarted (in this process)
            assert cli.main(_run_args(tmp_path, server.base_url, "r2")) == 0
        after = server.requests[len(before):]
        base_url = server.base_url

    summary = json.loads(stdout.getvalue())
    before_hashes = {_hash_of(b, base_url) for b in before}
    after_hashes = [_hash_of(b, base_url) for b in after]
    assert 0 < len(stored) < len(before_hashes)
    assert stored <= before_hashes, "the recomputed request hash must be the ledger's"
    assert not set(after_hashes) & stored, "a reply stored before the kill was asked for again"
    assert len(after_hashes) == len(set(after_hashes)), "a prompt was called twice after the restart"
    calls = table(out, "judge_calls")
    every_prompt = set(calls["request_hash"])
    assert len(every_prompt) == expected_calls
    assert set(after_hashes) == every_prompt - stored
    assert before_hashes | set(after_hashes) == every_prompt

    # The restarted run lands a complete, reconciled day.
    assert summary["status"] == "success" and summary["run_id"] == "r2"
    assert summary["input"] == summary["valid"] + summary["rejected"] == RECORDS
    assert summary["rows"] == RECORDS * 3 and sum(summary["statuses"].values()) == summary["rows"]
    assert summary["calls_made"] == len(after)
    evaluations = table(out, "evaluations").join(calls.select("record_id", "judge", "request_hash"),
                                                 on=["record_id", "judge"], how="left")
    assert evaluations.height == RECORDS * 3 and evaluations["run_id"].unique().to_list() == ["r2"]
    reused = evaluations.filter(pl.col("request_hash").is_in(list(stored)))
    assert reused.height >= len(stored)
    assert reused["cached"].all() and reused["attempts"].eq(0).all() and reused["judge_status"].eq("ok").all()
    fresh = evaluations.filter(pl.col("request_hash").is_in(after_hashes))
    per_hash = fresh.group_by("request_hash").agg((~pl.col("cached")).sum().alias("paid"))
    assert per_hash["paid"].eq(1).all(), "each prompt judged after the restart is paid for exactly once"
    assert summary["calls_reused"] == evaluations.filter(pl.col("cached")).height


def test_a_retried_chunk_rewrites_the_same_keys_and_makes_no_request(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, judge_model=MODEL, api_base=server.base_url, chunk_size=10)
        stores = stages.Stores.open(cfg)
        stages.ingest_and_validate(cfg, stores)
        chunks = stages.plan_chunks(cfg, stores)
        assert len(chunks) == 3
        work = storage.work_prefix(DAY, "r1")
        first = stages.judge_chunk(cfg, stores, 1, api_key="k")
        keys = {o.key for o in stores.out.list(work)}
        judged_key = storage.chunk_key(DAY, "r1", "judged", 1)
        judged = storage.read_parquet(stores.out, judged_key)
        requests = server.request_count
        assert first["calls_made"] == requests > 0

        retried = stages.judge_chunk(cfg, stores, 1, api_key="k")
        assert server.request_count == requests
        assert retried["calls_made"] == 0 and retried["rows"] == first["rows"] == 30
        assert {o.key for o in stores.out.list(work)} == keys
        again = storage.read_parquet(stores.out, judged_key)
        columns = ["record_id", "judge", "judge_status", "score", "faithfulness", "relevance", "hits", "misses"]
        assert again.select(columns).equals(judged.select(columns))
        assert again.filter(pl.col("judge_status") != "skipped")["cached"].all()

        for chunk in (0, 2):
            stages.judge_chunk(cfg, stores, chunk, api_key="k")
        result = stages.score_and_land(cfg, stores)
    assert result["rows"] == 90 and result["reconciled"]["expected_rows"] == 90
    assert table(tmp_path / "out", "evaluations").group_by("record_id", "judge").len()["len"].eq(1).all()
