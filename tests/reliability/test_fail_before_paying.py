"""Fail before paying, never after destroying: an unusable judge model stops a run at its first
stage, before anything is ingested or judged, and leaves the landed day as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation import stages, storage, synthetic
from evaluation.testing.openai_server import OpenAIServer, Reply
from tests.reliability.helpers import DAY, config, runs

LANDED = ("evaluations", "judge_calls", "daily_summary", "rejects")


@pytest.fixture()
def landed_day(tmp_path: Path) -> dict[str, bytes]:
    """A day evaluated by a good run (r0): its landed tables, byte for byte."""
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    good = config(tmp_path, run_id="r0", judge_model="offline/lexical")
    stages.run_day(good, stages.Stores.open(good))
    return {name: (tmp_path / "out" / storage.table_key(name, DAY)).read_bytes() for name in LANDED}


def _assert_nothing_ran(tmp_path: Path, landed: dict[str, bytes], run_id: str = "r1") -> None:
    out = tmp_path / "out"
    assert {name: (out / storage.table_key(name, DAY)).read_bytes() for name in LANDED} == landed
    assert not (out / storage.work_prefix(DAY, run_id)).exists(), "the failed run staged work"


def test_a_model_litellm_cannot_resolve_fails_the_run_first_and_keeps_the_day(tmp_path: Path, landed_day) -> None:
    cfg = config(tmp_path, judge_model="nope/not-a-model")
    with pytest.raises(stages.RunFailed) as failure:
        stages.run_day(cfg, stages.Stores.open(cfg))
    message = str(failure.value)
    assert "run r1 of 2026-11-20" in message and "judge model 'nope/not-a-model' cannot be used" in message
    assert "bad_request (not retried)" in message and "nope/not-a-model" in message.split("failed with", 1)[1]
    assert "nothing was ingested or judged" in message
    _assert_nothing_ran(tmp_path, landed_day)
    run = {row["run_id"]: row for row in runs(tmp_path / "out").iter_rows(named=True)}["r1"]
    assert run["status"] == "failed" and run["message"] == message
    assert run["rows"] == 0 and run["calls_made"] == 0


@pytest.mark.parametrize(("reply", "fragment"), [
    (Reply.error(401, "Incorrect API key provided: sk-bad.", "invalid_request_error", "invalid_api_key"),
     "Incorrect API key provided"),
    (Reply.error(404, "The model `gpt-nope` does not exist.", "invalid_request_error", "model_not_found"),
     "The model `gpt-nope` does not exist"),
])
def test_an_endpoint_that_refuses_the_probe_for_good_fails_without_retrying(
    tmp_path: Path, landed_day, reply: Reply, fragment: str
) -> None:
    with OpenAIServer(responder=lambda body: reply, answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/gpt-nope", api_base=server.base_url, max_attempts=4)
        with pytest.raises(stages.RunFailed) as failure:
            stages.run_day(cfg, stages.Stores.open(cfg), api_key="sk-bad-key-0000")
        assert server.request_count == 1  # a refusal is final: the probe is not retried
    message = str(failure.value)
    assert "judge model 'openai/gpt-nope' cannot be used" in message and fragment in message
    assert "sk-bad-key-0000" not in message
    _assert_nothing_ran(tmp_path, landed_day)
    assert runs(tmp_path / "out").filter(run_id="r1")["status"].to_list() == ["failed"]


def test_an_endpoint_that_does_not_answer_is_a_transient_failure(tmp_path: Path, landed_day) -> None:
    with OpenAIServer(responder=lambda body: Reply.server_error(), answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url, max_attempts=2)
        with pytest.raises(stages.JudgeUnreachable, match="did not answer a probe call: server_error"):
            stages.run_day(cfg, stages.Stores.open(cfg), api_key="k")
        assert server.request_count == 2  # retried like any call, then left to the scheduler's retry
    _assert_nothing_ran(tmp_path, landed_day)
    assert "r1" not in runs(tmp_path / "out")["run_id"].to_list()  # not a failed run: it will be retried
