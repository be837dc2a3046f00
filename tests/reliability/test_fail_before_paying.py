"""Fail before paying, never after destroying: an unusable judge model stops a run at its first
stage, before anything is ingested or judged, and leaves the landed day as it was; every such
failure says what to do and leaves the run's ``runs`` row."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer, Reply
from tests.reliability.helpers import DAY, config, landed_bytes, runs

LANDED = ("evaluations", "judge_calls", "daily_summary", "rejects")


@pytest.fixture()
def landed_day(tmp_path: Path) -> dict[str, bytes]:
    """A day evaluated by a good run (r0): its landed tables, byte for byte."""
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30, bad=False)
    good = config(tmp_path, run_id="r0", judge_model="offline/lexical")
    run_day(good, stages.Stores.open(good))
    return landed_bytes(tmp_path / "out", LANDED)


def _assert_nothing_ran(tmp_path: Path, landed: dict[str, bytes], run_id: str = "r1") -> None:
    out = tmp_path / "out"
    assert landed_bytes(out, LANDED) == landed
    assert not (out / storage.work_prefix(DAY, run_id)).exists(), "the failed run staged work"


def test_a_model_litellm_cannot_resolve_fails_the_run_first_and_keeps_the_day(tmp_path: Path, landed_day) -> None:
    cfg = config(tmp_path, judge_model="nope/not-a-model")
    with pytest.raises(stages.RunFailed) as failure:
        run_day(cfg, stages.Stores.open(cfg))
    message = str(failure.value)
    assert "run r1 of 2026-11-20" in message and "judge model 'nope/not-a-model' cannot be used" in message
    assert "bad_request (not retried)" in message and "nope/not-a-model" in message.split("failed with", 1)[1]
    assert "nothing was ingested or judged" in message
    _assert_nothing_ran(tmp_path, landed_day)
    run = {row["run_id"]: row for row in runs(tmp_path / "out").iter_rows(named=True)}["r1"]
    assert run["status"] == "failed" and run["message"] == message
    assert run["rows"] == 0 and run["calls_made"] == 0


@pytest.mark.parametrize(("reply", "fragment"), [  # a refused key: see the credentials cases below
    (Reply.error(404, "The model `gpt-nope` does not exist.", "invalid_request_error", "model_not_found"),
     "The model `gpt-nope` does not exist"),
])
def test_an_endpoint_that_refuses_the_probe_for_good_fails_without_retrying(
    tmp_path: Path, landed_day, reply: Reply, fragment: str
) -> None:
    with OpenAIServer(responder=lambda body: reply, answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/gpt-nope", api_base=server.base_url, max_attempts=4)
        with pytest.raises(stages.RunFailed) as failure:
            run_day(cfg, stages.Stores.open(cfg), api_key="sk-bad-key-0000")
        assert server.request_count == 1  # a refusal is final: the probe is not retried
    message = str(failure.value)
    assert "judge model 'openai/gpt-nope' cannot be used" in message and fragment in message
    assert "sk-bad-key-0000" not in message
    _assert_nothing_ran(tmp_path, landed_day)
    assert runs(tmp_path / "out").filter(run_id="r1")["status"].to_list() == ["failed"]


def _failed_row(tmp_path: Path, message: str, run_id: str = "r1") -> None:
    """The run's ``runs`` row, read back: failed, with the message raised."""
    rows = runs(tmp_path / "out").filter(run_id=run_id)
    assert rows["status"].to_list() == ["failed"] and rows["message"].to_list() == [message]
    assert rows["calls_made"].to_list() == [0] and rows["rows"].to_list() == [0]


def test_a_busy_endpoint_is_a_transient_failure_with_its_runs_row(tmp_path: Path, landed_day) -> None:
    with OpenAIServer(responder=lambda body: Reply.server_error(), answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url, max_attempts=2)
        with pytest.raises(stages.JudgeUnreachable, match="did not answer a probe call: server_error") as failure:
            run_day(cfg, stages.Stores.open(cfg), api_key="k")
        assert server.request_count == 2  # a busy endpoint's 5xx is tried again, within probe_timeout_s
    assert server.base_url in str(failure.value)
    _assert_nothing_ran(tmp_path, landed_day)
    _failed_row(tmp_path, str(failure.value))  # a scheduler's retry of the run replaces it


@pytest.fixture()
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No judge key anywhere in the environment."""
    for name in ("OPENAI_API_KEY", "EVALUATION_JUDGE_API_KEY", "LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_missing_credentials_fail_at_once_naming_the_variable_to_set(tmp_path: Path, landed_day, no_keys) -> None:
    with OpenAIServer(answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/gpt-4o-mini", api_base=server.base_url, max_attempts=4)
        with pytest.raises(stages.RunFailed) as failure:
            run_day(cfg, stages.Stores.open(cfg), api_key=None, key_hint="EVALUATION_JUDGE_API_KEY / LLM_API_KEY")
        assert server.request_count == 0  # the client found no key: nothing was sent, nothing retried
    message = str(failure.value)
    assert "has no usable credentials (missing or refused): set OPENAI_API_KEY or EVALUATION_JUDGE_API_KEY / " \
           "LLM_API_KEY" in message
    assert "auth (not retried)" in message and "Missing credentials" in message
    _assert_nothing_ran(tmp_path, landed_day)
    _failed_row(tmp_path, message)


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_fail_at_once_naming_the_variable_and_connection(
    tmp_path: Path, landed_day, no_keys, status: int
) -> None:
    refusal = Reply.error(status, "Incorrect API key provided: sk-bad.", "invalid_request_error", "invalid_api_key")
    with OpenAIServer(responder=lambda body: refusal, answer_probes=False) as server:
        cfg = config(tmp_path, judge_model="openai/gpt-4o-mini", api_base=server.base_url, max_attempts=4)
        with pytest.raises(stages.RunFailed) as failure:
            run_day(cfg, stages.Stores.open(cfg), api_key="sk-bad-key-0000",
                           key_hint="the password of the llm_judge connection")
        assert server.request_count == 1  # one attempt: a refused key is not tried again
    message = str(failure.value)
    assert "set OPENAI_API_KEY or the password of the llm_judge connection" in message
    assert "auth (not retried)" in message and "sk-bad-key-0000" not in message
    _failed_row(tmp_path, message)


def test_a_refused_connection_names_the_url_it_tried(tmp_path: Path, landed_day) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=url, max_attempts=4)
    with pytest.raises(stages.JudgeUnreachable) as failure:
        run_day(cfg, stages.Stores.open(cfg), api_key="k")
    message = str(failure.value)
    assert f"judge model 'openai/mock-judge': could not connect to {url}: connection (not retried)" in message
    _assert_nothing_ran(tmp_path, landed_day)
    _failed_row(tmp_path, message)


@pytest.fixture()
def silent_endpoint() -> Iterator[str]:
    """An endpoint that accepts connections and never answers (the kernel queues them)."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as server:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def test_an_endpoint_that_never_answers_says_what_it_waits_for_and_gives_up(
    tmp_path: Path, landed_day, silent_endpoint: str
) -> None:
    cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=silent_endpoint, probe_timeout_s=0.6,
                 timeout_s=30, max_attempts=4)
    lines: list[str] = []
    with pytest.raises(stages.JudgeUnreachable) as failure:
        stages.check_run(cfg, stages.Stores.open(cfg), api_key="k", on_wait=lines.append, every_s=0.1)
    message = str(failure.value)
    assert (f"judge model 'openai/mock-judge' at {silent_endpoint} did not answer a probe call within 0.6 s "
            "(probe_timeout_s): timeout") in message
    assert "retries exhausted" not in message  # silence is not tried again: the probe timeout holds
    assert lines and all(f"waiting for judge model openai/mock-judge at {silent_endpoint} to answer the probe "
                         "call (" in line and line.endswith("of 0.6 s)") for line in lines)
    _assert_nothing_ran(tmp_path, landed_day)
    _failed_row(tmp_path, message)


def test_an_offline_judge_model_that_does_not_exist_is_refused_listing_those_that_do(
    tmp_path: Path, landed_day
) -> None:
    cfg = config(tmp_path, judge_model="offline/lexcal")
    with pytest.raises(stages.RunFailed) as failure:
        run_day(cfg, stages.Stores.open(cfg))
    message = str(failure.value)
    assert ("judge model 'offline/lexcal' cannot be used: there is no offline judge model 'offline/lexcal'; "
            "the offline judge models are: offline/lexical") in message
    _assert_nothing_ran(tmp_path, landed_day)
    _failed_row(tmp_path, message)
