"""Tests for the local OpenAI-compatible server used to drive LLM judges in tests and benchmarks."""

from __future__ import annotations

import os

# litellm must not try to download its model cost map (no network here): set before any import of it.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from evaluation.testing.openai_server import (
    DEFAULT_REPLY_CONTENT,
    FAULT_KINDS,
    MALFORMED_CONTENT,
    FaultPlan,
    KeyedResponder,
    OpenAIServer,
    RecordedRequest,
    Reply,
    ScriptedResponder,
    count_prompt_tokens,
    count_tokens,
)

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]


def chat_body(text: str = "Is the answer grounded?", model: str = "judge") -> dict[str, Any]:
    """A small judge-like chat request body."""
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": "You are a strict evaluation judge. Reply in JSON."},
            {"role": "user", "content": text},
        ],
        "temperature": 0,
    }


Posted = tuple[int, dict[str, str], bytes]


def post_sync(url: str, body: dict[str, Any], timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """POST JSON with urllib; returns status, headers and raw body, also for HTTP errors."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


async def post_async(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout: float = 5.0
) -> tuple[int, dict[str, str], bytes]:
    """POST JSON with aiohttp; returns status, headers and raw body."""
    async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout)) as response:
        return response.status, dict(response.headers), await response.read()


def run_posts(url: str, bodies: list[dict[str, Any]], timeout: float = 5.0) -> list[Posted]:
    """POST the bodies one after the other on one aiohttp session."""

    async def go() -> list[Posted]:
        async with aiohttp.ClientSession() as session:
            return [await post_async(session, url, body, timeout) for body in bodies]

    return asyncio.run(go())


# ------------------------------------------------------------------------------------ replies & shape


def test_scripted_replies_come_back_in_order_in_openai_shape() -> None:
    script: list[Reply | str] = ['{"score": 1.0}', Reply(content='{"score": 0.5}'), "third"]
    with OpenAIServer(responder=ScriptedResponder(script)) as srv:
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        url = f"{srv.base_url}/chat/completions"
        bodies = [chat_body(f"question {i}") for i in range(3)]
        results = [post_sync(url, body) for body in bodies]

    contents = []
    for (status, headers, raw), body in zip(results, bodies, strict=True):
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        payload = json.loads(raw)
        assert set(payload) == {"id", "object", "created", "model", "choices", "usage"}
        assert payload["object"] == "chat.completion"
        assert payload["model"] == "judge"
        assert isinstance(payload["created"], int) and payload["id"].startswith("chatcmpl-")
        (choice,) = payload["choices"]
        assert choice["index"] == 0 and choice["finish_reason"] == "stop"
        assert choice["message"]["role"] == "assistant"
        contents.append(choice["message"]["content"])
        usage = payload["usage"]
        all_text = "".join(m["content"] for m in body["messages"])
        assert usage["prompt_tokens"] == len(all_text) // 4 + 1 == count_prompt_tokens(body)
        assert usage["completion_tokens"] == count_tokens(contents[-1])
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert contents == ['{"score": 1.0}', '{"score": 0.5}', "third"]
    assert len({json.loads(raw)["id"] for _, _, raw in results}) == 3


def test_plain_chat_completions_path_and_default_reply() -> None:
    with OpenAIServer() as srv:
        status, _, raw = post_sync(f"{srv.url}/chat/completions", chat_body())
    assert status == 200
    assert json.loads(raw)["choices"][0]["message"]["content"] == DEFAULT_REPLY_CONTENT
    assert json.loads(DEFAULT_REPLY_CONTENT) == {"score": 1.0, "hits": [], "misses": [], "reasoning": "ok"}


def test_requests_are_recorded_with_timestamps_and_reset_clears_them() -> None:
    with OpenAIServer() as srv:
        url = f"{srv.base_url}/chat/completions"
        before = time.time()
        for i in range(3):
            post_sync(url, chat_body(f"q{i}"))
        after = time.time()
        recorded = srv.requests
        assert srv.request_count == 3
        assert [r["messages"][1]["content"] for r in recorded] == ["q0", "q1", "q2"]
        assert all(isinstance(r, RecordedRequest) and isinstance(r, dict) for r in recorded)
        assert recorded[0] == chat_body("q0") and recorded[0].body == chat_body("q0")
        stamps = [r.received_at for r in recorded]
        assert before <= stamps[0] <= stamps[1] <= stamps[2] <= after
        assert {r.path for r in recorded} == {"/v1/chat/completions"}

        srv.reset()
        assert srv.requests == [] and srv.request_count == 0
        post_sync(url, chat_body("after reset"))
        assert srv.request_count == 1
        assert srv.requests[0].messages[1]["content"] == "after reset"


def test_exhausted_script_answers_500_and_says_so() -> None:
    with OpenAIServer(responder=ScriptedResponder(["only one"])) as srv:
        url = f"{srv.base_url}/chat/completions"
        first = post_sync(url, chat_body())
        second = post_sync(url, chat_body())
        errors = srv.errors
    assert first[0] == 200
    assert second[0] == 500
    error = json.loads(second[2])["error"]
    assert error["type"] == "server_error"
    assert "exhausted" in error["message"]
    assert len(errors) == 1 and "ScriptExhaustedError" in errors[0]


def test_rate_limited_reply_carries_retry_after() -> None:
    with OpenAIServer(responder=ScriptedResponder([Reply.rate_limited(retry_after=7), "fine"])) as srv:
        (s1, h1, b1), (s2, h2, _) = run_posts(f"{srv.base_url}/chat/completions", [chat_body(), chat_body()])
    assert s1 == 429
    assert h1["Retry-After"] == "7"
    assert json.loads(b1)["error"]["type"] == "rate_limit_error"
    assert json.loads(b1)["error"]["code"] == "rate_limit_exceeded"
    assert s2 == 200 and "Retry-After" not in h2


@pytest.mark.parametrize(
    ("reply", "status", "error_type", "code"),
    [
        (Reply.server_error(), 500, "server_error", None),
        (Reply.bad_request(), 400, "invalid_request_error", None),
        (Reply.quota(), 429, "insufficient_quota", "insufficient_quota"),
    ],
    ids=["server_error", "bad_request", "quota"],
)
def test_error_replies_have_openai_error_bodies(reply: Reply, status: int, error_type: str, code: str | None) -> None:
    with OpenAIServer(responder=ScriptedResponder([reply])) as srv:
        ((got_status, headers, raw),) = run_posts(f"{srv.base_url}/chat/completions", [chat_body()])
    assert got_status == status
    error = json.loads(raw)["error"]
    assert error["type"] == error_type and error["code"] == code and error["message"]
    assert "Retry-After" not in headers


def test_custom_status_headers_and_raw_body() -> None:
    script = [
        Reply(status=503, headers={"X-Why": "maintenance"}),
        Reply(status=200, body="<html>gateway</html>", headers={"Content-Type": "text/html"}),
    ]
    with OpenAIServer(responder=ScriptedResponder(script)) as srv:
        (s1, h1, b1), (s2, h2, b2) = run_posts(f"{srv.base_url}/chat/completions", [chat_body()] * 2)
    assert s1 == 503 and h1["X-Why"] == "maintenance" and json.loads(b1)["error"]["type"] == "server_error"
    assert s2 == 200 and h2["Content-Type"].startswith("text/html") and b2 == b"<html>gateway</html>"


def test_malformed_reply_is_a_200_whose_content_is_not_json() -> None:
    with OpenAIServer(responder=ScriptedResponder([Reply.malformed()])) as srv:
        ((status, _, raw),) = run_posts(f"{srv.base_url}/chat/completions", [chat_body()])
    assert status == 200
    content = json.loads(raw)["choices"][0]["message"]["content"]
    assert content == MALFORMED_CONTENT
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)


def test_hang_is_cut_by_client_timeout_and_server_keeps_serving() -> None:
    assert Reply.hang().hang is True and Reply().hang is False
    with OpenAIServer(responder=ScriptedResponder([Reply.hang(), "after the hang"])) as srv:
        url = f"{srv.base_url}/chat/completions"

        async def go() -> tuple[float, Posted]:
            async with aiohttp.ClientSession() as session:
                started = time.perf_counter()
                with pytest.raises(TimeoutError):
                    await post_async(session, url, chat_body(), timeout=0.3)
                elapsed = time.perf_counter() - started
                return elapsed, await post_async(session, url, chat_body())

        elapsed, (status, _, raw) = asyncio.run(go())
        assert 0.25 <= elapsed
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == "after the hang"
        deadline = time.monotonic() + 60  # a hang guard, not a timing bound
        while srv.hanging_requests and time.monotonic() < deadline:  # the disconnect cancels the hang
            time.sleep(0.01)
        assert srv.hanging_requests == 0


def test_stop_drops_a_hanging_request_promptly() -> None:
    srv = OpenAIServer(responder=lambda body: Reply.hang()).start()
    outcome: dict[str, Any] = {}

    def client() -> None:
        try:
            outcome["result"] = post_sync(f"{srv.base_url}/chat/completions", chat_body(), timeout=30)
        except Exception as exc:  # noqa: BLE001 - the disconnect is what we want to observe
            outcome["error"] = exc

    thread = threading.Thread(target=client)
    thread.start()
    assert srv.wait_for_requests(1, timeout=5)
    deadline = time.monotonic() + 60  # a hang guard, not a timing bound
    while srv.hanging_requests == 0 and time.monotonic() < deadline:  # the request reaches its hang
        time.sleep(0.01)
    assert srv.hanging_requests == 1
    srv.stop()
    thread.join(5)
    assert not thread.is_alive()  # the client's timeout is 30 s: the stop dropped the connection
    assert "result" not in outcome and "error" in outcome  # connection dropped, never a reply


# ------------------------------------------------------------------------------------------- faults


def test_fault_plan_is_deterministic_for_a_seed() -> None:
    plan = FaultPlan(seed=1)
    keys = [FaultPlan.body_key(chat_body(f"q{i}")) for i in range(200)]
    first = [plan.decide(k, attempt) for k in keys for attempt in range(3)]
    assert first == [FaultPlan(seed=1).decide(k, attempt) for k in keys for attempt in range(3)]
    assert first != [FaultPlan(seed=2).decide(k, attempt) for k in keys for attempt in range(3)]
    # The body key ignores dict ordering but not content.
    assert FaultPlan.body_key({"a": 1, "b": 2}) == FaultPlan.body_key({"b": 2, "a": 1})
    assert FaultPlan.body_key(chat_body("x")) != FaultPlan.body_key(chat_body("y"))

    # Two servers with the same plan answer the same request sequence with the same statuses.
    no_hang = FaultPlan(rate_limit=0.3, server_error=0.2, hang=0.0, malformed=0.1, seed=5)
    bodies = [chat_body(f"q{i % 10}") for i in range(40)]  # repeats: attempts 0..3 per body
    runs = []
    for _ in range(2):
        with OpenAIServer(faults=no_hang) as srv:
            results = run_posts(f"{srv.base_url}/chat/completions", bodies)
            runs.append(([r[0] for r in results], srv.fault_counts, [r.fault for r in srv.requests]))
    assert runs[0] == runs[1]
    statuses, counts, faults = runs[0]
    assert set(counts) == set(FAULT_KINDS)
    assert counts["rate_limit"] == statuses.count(429) > 0
    assert counts["server_error"] == statuses.count(500) > 0
    assert counts["hang"] == 0
    assert sum(counts.values()) == sum(f is not None for f in faults)


def test_fault_plan_rates_follow_the_probabilities() -> None:
    plan = FaultPlan(rate_limit=0.3, server_error=0.1, hang=0.05, malformed=0.05, seed=0)
    assert plan == FaultPlan()  # those are the defaults
    n = 8000
    decisions = [plan.decide(FaultPlan.body_key({"i": i}), 0) for i in range(n)]
    for kind, p in zip(FAULT_KINDS, (0.3, 0.1, 0.05, 0.05, 0.0), strict=True):
        assert abs(decisions.count(kind) / n - p) < 0.02, kind
    assert abs(decisions.count(None) / n - 0.5) < 0.02
    with pytest.raises(ValueError):
        FaultPlan(rate_limit=0.8, server_error=0.3)
    with pytest.raises(ValueError):
        FaultPlan(hang=-0.1)


def test_retried_identical_request_eventually_passes() -> None:
    plan = FaultPlan(seed=3)  # defaults: 30% 429, 10% 500, 5% hang, 5% malformed
    # Pick a body whose first two attempts both draw a fault, so the retries really are exercised.
    body = next(
        b
        for b in (chat_body(f"retry me {i}") for i in range(1000))
        if plan.decide(FaultPlan.body_key(b), 0) and plan.decide(FaultPlan.body_key(b), 1)
    )
    reply = '{"score": 0.75}'
    with OpenAIServer(responder=lambda _: reply, faults=plan) as srv:
        url = f"{srv.base_url}/chat/completions"

        async def retry_until_ok() -> tuple[int, list[str]]:
            seen: list[str] = []
            async with aiohttp.ClientSession() as session:
                for attempt in range(1, 30):
                    try:
                        status, _, raw = await post_async(session, url, body, timeout=0.3)
                    except TimeoutError:
                        seen.append("timeout")
                        continue
                    content = json.loads(raw)["choices"][0]["message"]["content"] if status == 200 else None
                    if status == 200 and content == reply:
                        return attempt, seen
                    seen.append(str(status) if status != 200 else "malformed")
            raise AssertionError(f"never succeeded: {seen}")

        attempts, seen = asyncio.run(retry_until_ok())
        recorded = srv.requests
        counts = srv.fault_counts

    assert attempts >= 3
    assert len(seen) == attempts - 1
    assert [r.attempt for r in recorded] == list(range(attempts))
    assert all(r.fault is not None for r in recorded[:-1]) and recorded[-1].fault is None
    assert sum(counts.values()) == attempts - 1
    expected = {"rate_limit": "429", "server_error": "500", "hang": "timeout", "malformed": "malformed"}
    assert seen == [expected[str(r.fault)] for r in recorded[:-1]]


def test_max_faults_per_body_caps_the_faults_and_retry_after_is_sent() -> None:
    plan = FaultPlan(rate_limit=1.0, server_error=0, hang=0, malformed=0, retry_after=2, max_faults_per_body=2)
    with OpenAIServer(faults=plan) as srv:
        results = run_posts(f"{srv.base_url}/chat/completions", [chat_body("a")] * 3 + [chat_body("b")])
        counts = srv.fault_counts
    assert [r[0] for r in results] == [429, 429, 200, 429]
    assert results[0][1]["Retry-After"] == "2"
    assert counts == {"rate_limit": 3, "server_error": 0, "hang": 0, "malformed": 0, "prose": 0}


# -------------------------------------------------------------------------------- responders & misc


def test_keyed_and_async_responders() -> None:
    keyed = KeyedResponder({"capital of France": "Paris", "rate me": Reply.rate_limited()}, default="?")
    with OpenAIServer(responder=keyed) as srv:
        results = run_posts(
            f"{srv.base_url}/chat/completions",
            [chat_body("What is the capital of France?"), chat_body("rate me"), chat_body("other")],
        )
    assert [r[0] for r in results] == [200, 429, 200]
    assert json.loads(results[0][2])["choices"][0]["message"]["content"] == "Paris"
    assert json.loads(results[2][2])["choices"][0]["message"]["content"] == "?"

    async def slow_echo(body: dict[str, Any]) -> str:
        await asyncio.sleep(0.01)
        return str(body["messages"][-1]["content"]).upper()

    with OpenAIServer(responder=slow_echo) as srv:
        ((status, _, raw),) = run_posts(f"{srv.base_url}/chat/completions", [chat_body("shout")])
    assert status == 200 and json.loads(raw)["choices"][0]["message"]["content"] == "SHOUT"


def test_invalid_json_is_400_and_models_are_listed() -> None:
    with OpenAIServer(models=("judge-a", "judge-b")) as srv:
        request = urllib.request.Request(f"{srv.base_url}/chat/completions", data=b"{not json", method="POST")
        with pytest.raises(urllib.error.HTTPError) as excinfo:
            urllib.request.urlopen(request, timeout=5)
        assert excinfo.value.code == 400
        assert json.loads(excinfo.value.read())["error"]["type"] == "invalid_request_error"
        assert srv.request_count == 0
        with urllib.request.urlopen(f"{srv.base_url}/models", timeout=5) as response:
            models = json.loads(response.read())
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["judge-a", "judge-b"]


def test_streaming_request_gets_server_sent_events() -> None:
    body = {**chat_body(), "stream": True, "stream_options": {"include_usage": True}}
    with OpenAIServer(responder=ScriptedResponder(['{"score": 0.2}'])) as srv:

        async def go() -> tuple[str, bytes]:
            async with (
                aiohttp.ClientSession() as session,
                session.post(f"{srv.base_url}/chat/completions", json=body) as response,
            ):
                return response.headers["Content-Type"], await response.read()

        content_type, raw = asyncio.run(go())
    assert content_type.startswith("text/event-stream")
    events = [line.removeprefix("data: ") for line in raw.decode().split("\n\n") if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == '{"score": 0.2}'
    assert chunks[-1]["usage"]["prompt_tokens"] == count_prompt_tokens(body)


def test_concurrent_requests_are_served_concurrently() -> None:
    n, latency = 64, 0.2
    arrived = 0
    everyone = asyncio.Event()

    async def barrier(body: dict[str, Any]) -> str:
        # no reply until all n requests are in: served one at a time, none would ever be answered
        nonlocal arrived
        arrived += 1
        if arrived == n:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), timeout=30)
        return "ok"

    with OpenAIServer(responder=barrier, latency_s=latency) as srv:
        url = f"{srv.base_url}/chat/completions"

        async def go() -> list[int]:
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=n)) as session:
                results = await asyncio.gather(*(post_async(session, url, chat_body(f"q{i}")) for i in range(n)))
                return [status for status, _, _ in results]

        started = time.perf_counter()
        statuses = asyncio.run(go())
        elapsed = time.perf_counter() - started
        assert srv.request_count == n
    assert statuses == [200] * n
    assert latency <= elapsed, elapsed


def test_reply_delay_adds_to_latency() -> None:
    with OpenAIServer(responder=ScriptedResponder([Reply("slow", delay_s=0.3)]), latency_s=0.1) as srv:
        started = time.perf_counter()
        status, _, _ = post_sync(f"{srv.base_url}/chat/completions", chat_body())
        elapsed = time.perf_counter() - started
    assert status == 200 and 0.4 <= elapsed


def test_port_in_use_fails_to_start() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            OpenAIServer(port=taken.getsockname()[1]).start()


# ---------------------------------------------------------------------------------------------- CLI


def test_cli_serves_reply_file_and_reports_request_count_on_sigterm(tmp_path: Path) -> None:
    reply_file = tmp_path / "reply.json"
    reply_file.write_text('{"score": 0.25, "hits": ["a"], "misses": [], "reasoning": "file"}', encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "evaluation.testing.openai_server", "--port", "0", "--latency", "0.05"]
        + ["--reply-file", str(reply_file)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().strip()
        assert ready.startswith("READY http://127.0.0.1:") and ready.endswith("/v1"), ready
        base_url = ready.split()[1]
        results = run_posts(f"{base_url}/chat/completions", [chat_body("x"), chat_body("y")])
        assert [r[0] for r in results] == [200, 200]
        content = json.loads(results[0][2])["choices"][0]["message"]["content"]
        assert content == reply_file.read_text(encoding="utf-8")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.strip().splitlines() == ["REQUESTS 2"]


# ------------------------------------------------------------------------------------------ litellm


def test_litellm_acompletion_gets_scripted_content_and_usage() -> None:
    import litellm

    content = '{"score": 0.5, "hits": ["h"], "misses": [], "reasoning": "partial"}'
    messages = [
        {"role": "system", "content": "You are a judge."},
        {"role": "user", "content": "Grade this answer against the reference."},
    ]
    with OpenAIServer(responder=ScriptedResponder([content])) as srv:
        response = asyncio.run(
            litellm.acompletion(
                model="openai/judge-model",
                api_base=srv.base_url,
                api_key="x",
                messages=messages,
                temperature=0,
                timeout=10,
            )
        )
        (recorded,) = srv.requests
    assert response.choices[0].message.content == content
    assert response.choices[0].finish_reason == "stop"
    expected_prompt = len("".join(m["content"] for m in messages)) // 4 + 1
    assert response.usage.prompt_tokens == expected_prompt
    assert response.usage.completion_tokens == len(content) // 4 + 1
    assert response.usage.total_tokens == expected_prompt + len(content) // 4 + 1
    assert recorded["model"] == "judge-model"
    assert recorded["messages"] == messages
