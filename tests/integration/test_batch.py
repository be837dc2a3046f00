"""Batch mode: the test server's batch API over HTTP, and chunks judged as provider batches through
litellm against it (submit, collect, failed and expired lines, resume after a kill, pricing)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.calling.batch import DEFAULT_LIMITS, MB, BatchLimits, batch_prices, limits_for, split_parts, state_key
from evaluation.calling.client import count_tokens
from evaluation.calling.cost import TYPICAL_REPLY_TOKENS
from evaluation.cli import main as cli
from evaluation.cli.day import run_day
from evaluation.judges import RenderedPrompt
from evaluation.stages.judge import judge_batch_level_step
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import DAY, PYTHON, REPO, cli_env, config, judge_reply, table

MODEL = "openai/gpt-4o-mini"  # in litellm's price map with batch prices


def _upload(client: httpx.Client, lines: list[dict]) -> str:
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    response = client.post("/files", files={"file": ("in.jsonl", data, "application/jsonl")}, data={"purpose": "batch"})
    assert response.status_code == 200, response.text
    assert response.json()["purpose"] == "batch" and response.json()["bytes"] == len(data)
    return str(response.json()["id"])


def _line(custom_id: str, text: str) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "system", "content": "judge: x"},
                                                {"role": "user", "content": text}], "temperature": 0}}


def _wait(client: httpx.Client, batch_id: str) -> dict:
    deadline = time.monotonic() + 120  # a hang guard, not a timing bound
    while True:
        batch = client.get(f"/batches/{batch_id}").json()
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return dict(batch)
        assert time.monotonic() < deadline, batch
        time.sleep(0.02)


def _file_lines(client: httpx.Client, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    response = client.get(f"/files/{file_id}/content")
    assert response.status_code == 200
    return [json.loads(raw) for raw in response.text.splitlines() if raw.strip()]


def test_server_batch_endpoints_answer_lines_like_online_calls() -> None:
    with OpenAIServer(responder=lambda body: json.dumps({"echo": body["messages"][1]["content"]})) as server, \
            httpx.Client(base_url=server.base_url) as client:
        server.batches.fail_ids = {"c"}
        file_id = _upload(client, [_line("a", "one"), _line("b", "two"), _line("c", "three")])
        created = client.post("/batches", json={"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                                "completion_window": "24h"})
        assert created.status_code == 200 and created.json()["status"] == "in_progress"
        batch = _wait(client, created.json()["id"])
        assert batch["status"] == "completed"
        assert batch["request_counts"] == {"total": 3, "completed": 2, "failed": 1}
        output = {line["custom_id"]: line for line in _file_lines(client, batch["output_file_id"])}
        errors = {line["custom_id"]: line for line in _file_lines(client, batch["error_file_id"])}
        assert set(output) == {"a", "b"} and set(errors) == {"c"}
        assert errors["c"]["response"]["status_code"] == 500
        body = output["b"]["response"]["body"]
        online = client.post("/chat/completions", json=_line("b", "two")["body"]).json()
        assert body["choices"] == online["choices"] and body["usage"] == online["usage"]
        assert json.loads(body["choices"][0]["message"]["content"]) == {"echo": "two"}
        # Every line and the online call are counted as chat requests; nothing else is.
        assert server.request_count == 4 and server.batches.line_ids == ["a", "b", "c"]
        assert server.batches.counts["files_created"] == 1 and server.batches.counts["batches_created"] == 1
        assert client.get("/batches/batch_nope").status_code == 404


def test_server_batches_expire_part_done_and_cancel() -> None:
    with OpenAIServer() as server, httpx.Client(base_url=server.base_url) as client:
        server.batches.expire_batches, server.batches.expire_after = 1, 2
        file_id = _upload(client, [_line(str(i), f"q{i}") for i in range(5)])
        expired = _wait(client, client.post("/batches", json={"input_file_id": file_id}).json()["id"])
        assert expired["status"] == "expired" and expired["request_counts"]["completed"] == 2
        assert [line["custom_id"] for line in _file_lines(client, expired["output_file_id"])] == ["0", "1"]
        not_run = _file_lines(client, expired["error_file_id"])
        assert [line["error"]["code"] for line in not_run] == ["batch_expired"] * 3

        server.batches.delay_s = 30
        pending = client.post("/batches", json={"input_file_id": file_id}).json()["id"]
        assert client.post(f"/batches/{pending}/cancel").json()["status"] == "cancelling"
        cancelled = _wait(client, pending)
        assert cancelled["status"] == "cancelled" and cancelled["output_file_id"] is None
        assert server.batches.line_ids == ["0", "1"], "a cancelled batch runs none of its lines"


def _judge_day(tmp_path: Path, server: OpenAIServer, records: int, **values: object) -> stages.DayResult:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, records, bad=False)
    cfg = config(tmp_path, judge_model=MODEL, api_base=server.base_url, batch=True, batch_poll_s=0.05, **values)
    return run_day(cfg, stages.Stores.open(cfg), api_key="test-key")


def test_a_batch_day_lands_like_an_online_day_at_the_batch_price(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OpenAIServer(responder=judge_reply) as server:
        result = _judge_day(tmp_path, server, 60, chunk_size=25)
        batches = dict(server.batches.counts)
        lines = list(server.batches.line_ids)
        online = server.request_count - len(lines)
        evaluations, calls = table(out, "evaluations"), table(out, "judge_calls")
        # The same day again, online: every batch reply is reused from the ledger.
        cfg = config(tmp_path, run_id="r2", judge_model=MODEL, api_base=server.base_url)
        before = server.request_count
        rerun = run_day(cfg, stages.Stores.open(cfg), api_key="test-key")
        assert server.request_count == before and rerun["calls_made"] == 0
    judged = evaluations.filter(pl.col("judge_status") != "skipped")
    assert evaluations.height == 60 * 3 and judged["judge_status"].eq("ok").all()
    assert online == 0, "batch mode sends no online chat request"
    assert batches["batches_created"] == batches["files_created"] == 3  # one batch per chunk
    assert len(lines) == len(set(lines)) == calls["request_hash"].n_unique() == result["calls_made"]
    assert set(lines) == set(calls["request_hash"])
    # Priced at litellm's batch price of the model, which is not its online price.
    price_in, price_out, known = batch_prices(MODEL)
    assert known and price_in > 0
    paid = calls.filter(~pl.col("cached"))
    expected = paid["input_tokens"] * price_in + paid["output_tokens"] * price_out
    assert (paid["cost_usd"] - expected).abs().max() < 1e-12  # type: ignore[operator]
    assert paid["attempts"].eq(1).all() and result["cost_usd"] > 0


def test_a_batch_chunk_submits_only_what_its_share_of_the_budget_is_expected_to_pay_for(tmp_path: Path) -> None:
    """``budget_usd`` in batch mode: each of the two chunks takes its requests in order while their
    expected cost (prompt tokens counted, a typical reply) fits half the budget, submits those and
    never the rest, which land ``skipped``/``budget_exhausted``; what was paid is within the budget.
    The choice is kept with the chunk's batches, before any: a later step submits nothing more."""
    budget = 0.0004
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, judge_model=MODEL, api_base=server.base_url, batch=True, batch_poll_s=0.05,
                     chunk_size=15, budget_usd=budget)
        stores = stages.Stores.open(cfg)
        stages.ingest_and_validate(cfg, stores)
        assert len(stages.plan_chunks(cfg, stores)) == 2
        kept = []
        for index in (0, 1):
            while judge_batch_level_step(cfg, stores, index, api_key="k")[0] is None:
                time.sleep(0.05)
            kept.append(storage.read_json(stores.out, state_key(cfg, index)))
        lines = list(server.batches.line_ids)
        assert server.request_count == len(lines), "nothing went online"
        landed = stages.score_and_land(cfg, stores)
    evaluations, calls = table(tmp_path / "out", "evaluations"), table(tmp_path / "out", "judge_calls")
    exhausted = evaluations.filter(pl.col("reason") == "budget_exhausted")
    assert exhausted.height > 0 and exhausted["judge_status"].eq("skipped").all()
    assert evaluations.filter(pl.col("judge_status") == "ok").height == len(lines) == landed["calls_made"] > 0
    assert set(lines) == set(calls["request_hash"])
    price_in, price_out, _ = batch_prices(MODEL)
    for state in kept:  # each chunk: what it submitted and what it kept back, apart, and each within its share
        submitted = {h for b in state["batches"] for h in b["hashes"]}
        assert submitted and state["over_budget"] and not submitted & set(state["over_budget"])
        paid = calls.filter(pl.col("request_hash").is_in(list(submitted)))
        expected = sum(count_tokens(MODEL, RenderedPrompt(judge=row["judge"], prompt_version="", key_fields=(),
                                                          system=row["system_prompt"], user=row["user_prompt"]))
                       * price_in + TYPICAL_REPLY_TOKENS[row["judge"]] * price_out for row in paid.iter_rows(named=True))
        assert paid.height == len(submitted) and expected <= budget / 2
        assert float(paid["cost_usd"].sum()) <= budget / 2


def test_a_budget_of_nothing_submits_no_batch(tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        result = _judge_day(tmp_path, server, 10, budget_usd=0.0)
        assert server.batches.counts.get("batches_created", 0) == 0 and server.request_count == 0
    evaluations = table(tmp_path / "out", "evaluations")
    judged = evaluations.filter(pl.col("reason") != "not_applicable")
    assert result["calls_made"] == 0 and judged["reason"].eq("budget_exhausted").all() and judged.height > 0


def test_failed_and_expired_lines_land_every_record_once_per_judge(tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.fail_fraction = 0.1  # these lines fail with a 500 every time they run
        server.batches.expire_batches, server.batches.expire_after = 1, 0.5
        _judge_day(tmp_path, server, 40, chunk_size=100, max_call_error_ratio=0.5, max_attempts=3)
        runs = Counter(server.batches.line_ids)
        batches = list(server.batches.batches.values())
    out = tmp_path / "out"
    evaluations, calls = table(out, "evaluations"), table(out, "judge_calls")
    assert evaluations.height == 40 * 3
    assert evaluations.group_by("record_id", "judge").len()["len"].eq(1).all()
    assert batches[0]["status"] == "expired" and all(b["status"] == "completed" for b in batches[1:])
    # The expired batch's missing half runs once; a line failing with a 500 runs max_attempts times.
    failed = calls.filter(pl.col("error_class").is_not_null())
    assert failed.height > 0 and failed["error_class"].eq("server_error").all()
    # Run max_attempts times (a repeat of the same prompt within the chunk is counted once: 0).
    assert failed.group_by("request_hash").agg(pl.col("attempts").max())["attempts"].eq(3).all()
    assert {h for h, n in runs.items() if n == 3} == set(failed["request_hash"])
    assert set(runs.values()) == {1, 3} and set(runs) == set(calls["request_hash"])
    assert 3 <= len(batches) <= 4, "follow-up batches end once the failing lines ran max_attempts times"
    errors = evaluations.filter(pl.col("judge_status") == "call_error")
    assert errors.height == failed.height
    statuses = set(evaluations["judge_status"])
    assert statuses <= {"ok", "call_error", "skipped"} and "ok" in statuses


def test_batch_limits_are_the_providers_unless_the_options_set_them(tmp_path: Path) -> None:
    cfg = config(tmp_path, judge_model=MODEL)
    assert limits_for(cfg, "openai") == limits_for(cfg, "azure") == BatchLimits(50_000, 200 * MB)
    assert limits_for(cfg, "anthropic") == BatchLimits(100_000, 256 * MB)
    assert limits_for(cfg, "bedrock") == limits_for(cfg, "vertex_ai") == DEFAULT_LIMITS
    assert DEFAULT_LIMITS.max_requests < 50_000 and DEFAULT_LIMITS.max_bytes < 200 * MB
    assert limits_for(config(tmp_path, batch_max_requests=7), "openai") == BatchLimits(7, 200 * MB)
    assert limits_for(config(tmp_path, batch_max_bytes=1000), "anthropic") == BatchLimits(100_000, 1000)
    assert limits_for(config(tmp_path, batch_max_requests=0, batch_max_bytes=0), "openai") == BatchLimits(50_000, 200 * MB)


def test_lines_are_packed_in_order_within_both_limits() -> None:
    assert split_parts([10] * 5, BatchLimits(2, 1000)) == ([[0, 1], [2, 3], [4]], [])
    assert split_parts([10, 10, 10, 10, 10], BatchLimits(100, 25)) == ([[0, 1], [2, 3], [4]], [])
    assert split_parts([5, 30, 20, 5, 25], BatchLimits(100, 25)) == ([[0, 2], [3], [4]], [1])
    assert split_parts([], BatchLimits(1, 1)) == ([], [])


def _parts_within(server: OpenAIServer, *, max_requests: int | None = None, max_bytes: int | None = None) -> list[dict]:
    """The server's batches, each checked against the limits (the server refuses larger ones too)."""
    batches = list(server.batches.batches.values())
    for batch in batches:
        assert batch["status"] == "completed", batch
        assert max_requests is None or batch["request_counts"]["total"] <= max_requests
        assert max_bytes is None or server.batches.files[batch["input_file_id"]]["bytes"] <= max_bytes
    return batches


def test_a_chunk_larger_than_the_batch_request_limit_is_split_and_lands_whole(tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.max_requests = 7  # the provider's limit: a larger batch fails validation
        result = _judge_day(tmp_path, server, 40, chunk_size=100, batch_max_requests=7)
        batches = _parts_within(server, max_requests=7)
        runs = Counter(server.batches.line_ids)
    evaluations = table(tmp_path / "out", "evaluations")
    assert evaluations.height == 40 * 3
    assert evaluations.filter(pl.col("judge_status") != "skipped")["judge_status"].eq("ok").all()
    assert result["calls_made"] == len(runs) > 7 and set(runs.values()) == {1}
    assert len(batches) == math.ceil(len(runs) / 7), "one chunk, as many provider batches as the limit needs"
    assert {b["metadata"]["chunk"] for b in batches} == {"0"}


def test_a_chunk_larger_than_the_batch_byte_limit_is_split_and_lands_whole(tmp_path: Path) -> None:
    limit = 40_000
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.max_bytes = limit
        _judge_day(tmp_path, server, 40, chunk_size=100, batch_max_bytes=limit)
        batches = _parts_within(server, max_bytes=limit)
        sent = sum(server.batches.files[b["input_file_id"]]["bytes"] for b in batches)
        runs = Counter(server.batches.line_ids)
    evaluations = table(tmp_path / "out", "evaluations")
    assert evaluations.filter(pl.col("judge_status") != "skipped")["judge_status"].eq("ok").all()
    assert set(runs.values()) == {1} and len(batches) >= math.ceil(sent / limit) >= 2


def test_a_chunk_interrupted_between_its_parts_resumes_them_without_submitting_any_twice(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 40, bad=False)
    with OpenAIServer(responder=judge_reply) as server:
        cfg = config(tmp_path, judge_model=MODEL, api_base=server.base_url, batch=True, batch_poll_s=0.05,
                     chunk_size=100, batch_max_requests=7)
        stores = stages.Stores.open(cfg)
        stages.ingest_and_validate(cfg, stores)
        stages.plan_chunks(cfg, stores)
        server.batches.delay_s = 3600
        server.batches.max_batches = 2  # the provider fails on the third part: the task dies there
        with pytest.raises(Exception, match="creating the batch"):
            judge_batch_level_step(cfg, stores, 0, api_key="k")
        kept = storage.read_json(stores.out, state_key(cfg, 0))["batches"]
        assert [b["id"] for b in kept] == list(server.batches.batches), "each part is kept as soon as it is created"
        assert len(kept) == 2

        server.batches.max_batches = None  # a retry of the task: the two parts are waited for, the rest submitted
        result, waiting, _ = judge_batch_level_step(cfg, stores, 0, api_key="k")
        assert result is None and waiting[:2] == [b["id"] for b in kept] and waiting == list(server.batches.batches)
        requests = {h for b in storage.read_json(stores.out, state_key(cfg, 0))["batches"] for h in b["hashes"]}
        assert len(waiting) == math.ceil(len(requests) / 7) > 2

        server.batches.delay_s = 0.0
        summary = run_day(cfg, stages.Stores.open(cfg), api_key="k")  # the same run, started again
        runs = Counter(server.batches.line_ids)
        created = list(server.batches.batches)
    assert created == waiting, "no part was submitted twice"
    assert set(runs) == requests and set(runs.values()) == {1} and summary["calls_made"] == len(requests)
    evaluations = table(tmp_path / "out", "evaluations")
    assert evaluations.height == 40 * 3
    assert evaluations.filter(pl.col("judge_status") != "skipped")["judge_status"].eq("ok").all()


def test_lines_that_failed_for_a_transient_reason_are_submitted_again_and_the_day_lands_complete(
        tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        # a share of the lines by their hash (the API base, a free port, is in it): 0.15 of the 93
        # lines leaves none failing with odds of 3e-7 (0.05 did with odds of about 1 in 120)
        server.batches.fail_fraction, server.batches.fail_times = 0.15, 1  # a 500 the first time they run
        _judge_day(tmp_path, server, 40, chunk_size=100)
        batches = list(server.batches.batches.values())
        runs = Counter(server.batches.line_ids)
    evaluations, calls = table(tmp_path / "out", "evaluations"), table(tmp_path / "out", "judge_calls")
    retried = {h for h, n in runs.items() if n == 2}
    assert retried and set(runs.values()) == {1, 2}
    assert evaluations.filter(pl.col("judge_status") == "call_error").height == 0
    assert evaluations.filter(pl.col("judge_status") != "skipped")["judge_status"].eq("ok").all()
    assert calls["error_class"].is_null().all()
    # The follow-up batch, in the server's list, holds exactly the lines that failed.
    assert len(batches) == 2 and batches[0]["request_counts"]["failed"] == len(retried)
    assert batches[1]["request_counts"] == {"total": len(retried), "completed": len(retried), "failed": 0}
    assert set(calls.filter(pl.col("attempts") == 2)["request_hash"]) == retried


def test_a_line_refused_with_a_400_is_a_call_error_and_not_submitted_again(tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        # a share of the lines by their hash: 0.15 of about 100 leaves none refused with odds of 1e-7
        server.batches.bad_fraction = 0.15
        _judge_day(tmp_path, server, 40, chunk_size=100, max_call_error_ratio=0.5)
        batches = list(server.batches.batches.values())
        runs = Counter(server.batches.line_ids)
    evaluations, calls = table(tmp_path / "out", "evaluations"), table(tmp_path / "out", "judge_calls")
    failed = calls.filter(pl.col("error_class").is_not_null())
    assert len(batches) == 1 and set(runs.values()) == {1}
    assert failed["request_hash"].n_unique() == batches[0]["request_counts"]["failed"] > 0
    assert failed["error_class"].eq("bad_request").all() and failed["attempts"].max() == 1
    errors = evaluations.filter(pl.col("judge_status") == "call_error")
    assert errors.height == failed.height


@pytest.mark.parametrize("model", ["offline/lexical", "ollama/llama3.1"])
def test_a_provider_without_batches_is_refused_before_paying(tmp_path: Path, model: str) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 5, bad=False)
    cfg = config(tmp_path, judge_model=model, batch=True)
    with pytest.raises(stages.RunFailed) as failure:
        stages.check_run(cfg, stages.Stores.open(cfg))
    message = str(failure.value)
    assert model in message and "openai" in message and "azure" in message and "batch" in message


def test_the_plan_estimates_the_online_and_the_batch_price(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 20, bad=False)
    cfg = config(tmp_path, judge_model=MODEL, api_base="http://127.0.0.1:9/v1")
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    stages.plan_chunks(cfg, stores)
    estimate = stages.read_manifest(cfg, stores).plan.estimate  # type: ignore[union-attr]
    assert estimate.batch_cost_usd is not None and 0 < estimate.batch_cost_usd < estimate.cost_usd


def _run_args(tmp_path: Path, api_base: str) -> list[str]:
    return ["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "out"),
            "--judge-model", MODEL, "--api-base", api_base, "--batch", "--batch-poll-s", "0.1",
            "--run-id", "r1", "--batch-max-requests", "20"]


def test_a_killed_batch_run_resumes_its_batches_without_submitting_them_again(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    out = storage.LocalStore(tmp_path / "out")
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.delay_s = 3600  # the batches stay in progress until the test lets them finish
        server.batches.max_requests = 20
        stderr = tmp_path / "stderr.txt"
        with stderr.open("wb") as sink:
            process = subprocess.Popen([PYTHON, "-m", "evaluation", *_run_args(tmp_path, server.base_url)],
                                       cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=sink)
        key = state_key(config(tmp_path), 0)
        try:
            deadline = time.monotonic() + 120
            # Killed once the batches are kept with the chunk and the CLI shows them waiting.
            while not (out.exists(key) and "in_progress" in stderr.read_text(errors="replace")):
                assert process.poll() is None, stderr.read_text(errors="replace")[-2000:]
                assert time.monotonic() < deadline, "the batch was never submitted"
                time.sleep(0.05)
            process.kill()  # SIGKILL while it waits for its batches
            process.wait(30)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        assert process.returncode == -9
        kept = storage.read_json(out, key)["batches"]
        requests = sum(len(b["hashes"]) for b in kept)
        parts = math.ceil(requests / 20)
        progress = [line for line in stderr.read_text().splitlines() if "in_progress" in line]
        assert progress[0].endswith(f"{parts} batches {parts} in_progress: 0 done, 0 failed of {requests}")
        assert server.batches.counts["batches_created"] == parts > 1 and server.batches.line_ids == []
        assert [b["id"] for b in kept] == list(server.batches.batches)

        server.batches.delay_s = 0.0  # the provider gets to it: the restarted run collects it
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            assert cli.main([*_run_args(tmp_path, server.base_url), "--no-progress"]) == 0
        counts = dict(server.batches.counts)
        lines = list(server.batches.line_ids)
    summary = json.loads(stdout.getvalue())
    assert counts["batches_created"] == counts["files_created"] == parts, "a batch was paid for twice"
    assert len(lines) == len(set(lines)) == summary["calls_made"] > 0
    assert summary["status"] == "success" and summary["rows"] == 30 * 3
    assert table(tmp_path / "out", "evaluations").filter(pl.col("judge_status") != "skipped")["judge_status"] \
        .eq("ok").all()


def test_past_the_deadline_what_no_batch_answered_is_a_timeout(tmp_path: Path) -> None:
    with OpenAIServer(responder=judge_reply) as server:
        server.batches.delay_s = 0.5
        server.batches.expire_batches, server.batches.expire_after = 100, 0  # every batch expires, nothing run
        _judge_day(tmp_path, server, 10, batch_deadline_h=1.2 / 3600, max_call_error_ratio=1.0)
        counts = dict(server.batches.counts)
    calls = table(tmp_path / "out", "judge_calls")
    assert counts["lines"] == 0 and 2 <= counts["batches_created"] <= 4, counts  # re-submitted until the deadline
    assert calls.height > 0 and calls["error_class"].eq("timeout").all()
    assert calls["error"].str.contains("batch_deadline_h").all()


def test_the_trigger_fires_once_every_batch_has_ended() -> None:
    import asyncio

    from evaluation_batch import BatchTrigger

    from evaluation.calling.batch import BatchApi

    with OpenAIServer() as server:

        async def submit_then_wait() -> tuple[list[str], str, dict, object, list[str]]:  # one loop, as a triggerer's
            api = BatchApi(MODEL, api_base=server.base_url, api_key="k")
            file_id = await api.upload("in.jsonl", (json.dumps(_line("a", "x")) + "\n").encode())
            first = str((await api.create(file_id, {}))["id"])
            while (await api.retrieve(first))["status"] != "completed":  # a part that has ended...
                await asyncio.sleep(0.01)
            server.batches.delay_s = 0.6
            second = str((await api.create(file_id, {}))["id"])  # ...beside one still running
            classpath, kwargs = BatchTrigger([first, second], MODEL, server.base_url, poll_s=0.1).serialize()
            event = await anext(BatchTrigger(**kwargs).run())
            at_event = [str((await api.retrieve(b))["status"]) for b in (first, second)]
            return [first, second], classpath, kwargs, event, at_event

        batch_ids, classpath, kwargs, event, at_event = asyncio.run(submit_then_wait())
        assert classpath == "evaluation_batch.BatchTrigger" and "api_key" not in kwargs
        assert event.payload == {"status": "ended", "batch_ids": batch_ids}  # type: ignore[attr-defined]
        assert at_event == ["completed", "completed"], "the trigger waits for every part, not the first that ended"
        assert server.batches.counts["batch_reads"] >= 3
        assert all(server.batches.batches[b]["status"] == "completed" for b in batch_ids)
