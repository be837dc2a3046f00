"""JudgeClient (evaluation/calling/client.py) against a real OpenAI-compatible server on loopback.

Nothing is mocked: every call goes through ``litellm.acompletion`` over HTTP to
:class:`~evaluation.testing.openai_server.OpenAIServer`, whose scripted replies express the faults
(429 with and without ``Retry-After``, 5xx, 4xx, quota, hangs). The client's contract: retry 429s,
5xx, timeouts and connection errors only; honour ``Retry-After``; stop at ``max_attempts`` and
inside ``retry_budget_s``; never raise for a provider failure but return a ``CallOutcome`` whose
``error_class`` says what went wrong; never leak the API key.
"""

from __future__ import annotations

import os

# litellm must not try to download its model cost map (no network here): set before any import of it.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
import json
import socket
from datetime import UTC, datetime
from typing import Any

import litellm
import pytest

from evaluation.calling.client import JudgeClient
from evaluation.calling.outcome import ERROR_CLASSES, CallOutcome
from evaluation.contract.config import InputRecord
from evaluation.judges import RenderedPrompt, render
from evaluation.testing.openai_server import (
    OpenAIServer,
    Reply,
    ScriptedResponder,
    count_prompt_tokens,
    count_tokens,
)

pytestmark = pytest.mark.timeout(60)

MODEL = "openai/mock-judge"
API_KEY = "test-key"
OK_CONTENT = '{"score": 0.75, "hits": ["grounded"], "misses": [], "reasoning": "fine"}'


def make_prompt(user: str = "Judge this answer, please.", json_mode: bool = True) -> RenderedPrompt:
    """A small rendered prompt (the client only needs its messages and flags)."""
    return RenderedPrompt(
        judge="prompt",
        prompt_version="prompt@test",
        system="You are a strict evaluation judge. Reply in JSON.",
        user=user,
        key_fields=("score",),
        json_mode=json_mode,
    )


def make_client(api_base: str, **overrides: Any) -> JudgeClient:
    """A client with fast backoff; the cases override the retry knobs."""
    options: dict[str, Any] = {
        "api_base": api_base,
        "api_key": API_KEY,
        "concurrency": 4,
        "timeout_s": 5.0,
        "max_attempts": 4,
        "retry_budget_s": 30.0,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
    }
    options.update(overrides)
    return JudgeClient(MODEL, **options)


def call(client: JudgeClient, prompt: RenderedPrompt | None = None) -> CallOutcome:
    """One ``client.call`` on a fresh event loop."""
    return asyncio.run(client.call(prompt or make_prompt()))


class Sleeps:
    """The client's sleep: records each wait, and waits it (``real``) or not."""

    def __init__(self, real: bool = True) -> None:
        self.waits: list[float] = []
        self.real = real

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(seconds if self.real else 0)


def gaps(srv: OpenAIServer) -> list[float]:
    """Seconds between consecutive requests' arrivals."""
    times = [r.received_at for r in srv.requests]
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def assert_failed(outcome: CallOutcome, error_class: str, attempts: int) -> None:
    assert error_class in ERROR_CLASSES
    assert outcome.error_class == error_class, outcome.error
    assert not outcome.ok
    assert outcome.raw_text is None
    assert outcome.attempts == attempts
    assert isinstance(outcome.error, str) and outcome.error.startswith(f"{error_class} ")
    assert outcome.input_tokens == 0 and outcome.output_tokens == 0 and outcome.cost_usd == 0.0
    assert outcome.judged_at is not None and outcome.latency_ms > 0


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------------------------
# Success, usage, cost, request shape


def test_success_reports_server_usage_latency_and_zero_cost_for_an_unknown_model() -> None:
    with OpenAIServer(ScriptedResponder([OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url))
        (request,) = srv.requests
    assert outcome.ok and outcome.error is None and outcome.error_class is None
    assert outcome.raw_text == OK_CONTENT
    assert outcome.attempts == 1
    # The tokens are the server's usage figures, not a client-side estimate.
    assert outcome.input_tokens == count_prompt_tokens(request.body) > 0
    assert outcome.output_tokens == count_tokens(OK_CONTENT)
    assert outcome.latency_ms > 0
    assert outcome.cost_usd == 0.0  # "mock-judge" has no price in litellm's map
    assert outcome.judged_at is not None and outcome.judged_at.tzinfo is not None


def test_request_carries_the_rendered_messages_and_json_mode_for_openai_models() -> None:
    prompt = make_prompt("Rate: the sky is blue.")
    with OpenAIServer(ScriptedResponder([OK_CONTENT, OK_CONTENT])) as srv:
        client = make_client(srv.base_url)
        assert client.json_mode is True
        call(client, prompt)
        call(client, make_prompt(json_mode=False))
        first, second = srv.requests
    assert first.path == "/v1/chat/completions"
    assert first["model"] == "mock-judge"
    assert first.messages == prompt.messages
    assert first["temperature"] == 0
    assert first["response_format"] == {"type": "json_object"}
    # A prompt that does not ask for JSON mode does not send response_format.
    assert "response_format" not in second


# --------------------------------------------------------------------------------------------
# Retries


def test_429_with_retry_after_is_honoured_then_succeeds() -> None:
    sleeps = Sleeps()
    with OpenAIServer(ScriptedResponder([Reply.rate_limited(retry_after=1), OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, sleep=sleeps))
        waits = gaps(srv)
    assert outcome.ok and outcome.raw_text == OK_CONTENT
    assert outcome.attempts == 2
    assert len(waits) == 1
    assert waits[0] >= 0.95, f"Retry-After: 1 not honoured, second request came after {waits[0]:.3f}s"
    assert len(sleeps.waits) == 1 and 1.0 <= sleeps.waits[0] <= 1.1  # Retry-After and a jitter of at most 0.1 s
    assert outcome.latency_ms >= 950  # latency covers the whole call, retries included


def test_429_without_retry_after_backs_off_briefly() -> None:
    no_header = Reply.error(429, "Rate limit reached for requests.", "rate_limit_error", "rate_limit_exceeded")
    assert not no_header.headers
    sleeps = Sleeps(real=False)
    with OpenAIServer(ScriptedResponder([no_header, OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, sleep=sleeps))
    assert outcome.ok and outcome.attempts == 2
    assert len(sleeps.waits) == 1 and 0 < sleeps.waits[0] <= 0.05, sleeps.waits  # backoff_max_s is 0.05


@pytest.mark.parametrize("status", [500, 503])
def test_5xx_twice_then_success(status: int) -> None:
    fault = Reply.error(status, "The server had an error.", "server_error")
    sleeps = Sleeps(real=False)
    with OpenAIServer(ScriptedResponder([fault, fault, OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, sleep=sleeps))
        count = srv.request_count
    assert outcome.ok and outcome.raw_text == OK_CONTENT
    assert outcome.attempts == 3 and count == 3
    assert len(sleeps.waits) == 2 and all(0 < w <= 0.05 for w in sleeps.waits), sleeps.waits  # capped at 0.05 s


def test_always_500_exhausts_max_attempts() -> None:
    sleeps = Sleeps(real=False)
    with OpenAIServer(ScriptedResponder([Reply.server_error()] * 5)) as srv:
        outcome = call(make_client(srv.base_url, max_attempts=3, sleep=sleeps))
        count = srv.request_count
    assert_failed(outcome, "server_error", attempts=3)
    assert count == 3
    assert "retries exhausted" in outcome.error
    assert len(sleeps.waits) == 2  # between the attempts, none after the last


@pytest.mark.parametrize(
    ("reply", "error_class"),
    [
        pytest.param(Reply.bad_request("Invalid value for 'messages'."), "bad_request", id="400"),
        pytest.param(Reply.error(404, "The model does not exist.", "invalid_request_error", "model_not_found"),
                     "bad_request", id="404"),
        pytest.param(Reply.error(422, "Unprocessable.", "invalid_request_error"), "bad_request",
                     id="422-unprocessable"),
        pytest.param(Reply.quota(), "quota", id="429-insufficient-quota"),
        pytest.param(Reply.error(401, "Incorrect API key provided: sk-x.", "invalid_request_error", "invalid_api_key"),
                     "auth", id="401-refused-key"),
        pytest.param(Reply.error(403, "Project does not have access to model.", "invalid_request_error"),
                     "auth", id="403-permission"),
    ],
)
def test_non_retryable_errors_make_exactly_one_request(reply: Reply, error_class: str) -> None:
    # The fault repeats, so a hidden retry could neither succeed nor go unnoticed.
    with OpenAIServer(ScriptedResponder([reply, reply, OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url))
        count = srv.request_count
    assert_failed(outcome, error_class, attempts=1)
    assert count == 1
    assert "not retried" in outcome.error


def test_hanging_reply_times_out_on_every_attempt_within_bounded_time() -> None:
    with OpenAIServer(ScriptedResponder([Reply.hang(), Reply.hang(), OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, timeout_s=0.5, max_attempts=2))
        count = srv.request_count
    assert_failed(outcome, "timeout", attempts=2)
    assert count == 2
    assert "retries exhausted" in outcome.error
    assert outcome.latency_ms >= 900  # each attempt waited out its 0.5 s timeout


def test_retry_budget_smaller_than_retry_after_stops_early() -> None:
    sleeps = Sleeps()
    with OpenAIServer(ScriptedResponder([Reply.rate_limited(retry_after=3), OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, retry_budget_s=1.0, sleep=sleeps))
        count = srv.request_count
    assert_failed(outcome, "rate_limit", attempts=1)
    assert count == 1
    assert "retry budget of 1s" in outcome.error
    assert sleeps.waits == [], "the wait that would cross the budget must not be started"


def test_connection_refused_is_a_connection_error() -> None:
    sleeps = Sleeps(real=False)
    client = make_client(f"http://127.0.0.1:{closed_port()}/v1", max_attempts=2, sleep=sleeps)
    outcome = call(client)
    assert outcome.attempts == 2 and len(sleeps.waits) == 1  # a connection error is retried after a backoff
    assert_failed(outcome, "connection", attempts=2)


# --------------------------------------------------------------------------------------------
# The API key never leaks


SECRET = "sk-test-DO-NOT-LEAK-0123456789"


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply.error(401, f"Incorrect API key provided: {SECRET}.", "invalid_request_error",
                                 "invalid_api_key"), id="401-echoes-key"),
        pytest.param(Reply.bad_request(f"Bad request for key {SECRET}"), id="400-echoes-key"),
        pytest.param(Reply(status=400, body=f'{{"error": {{"message": "key={SECRET}"}}, "key": "{SECRET}"}}'),
                     id="400-raw-body-echoes-key"),
        pytest.param(Reply.server_error(f"upstream rejected {SECRET}"), id="500-echoes-key"),
    ],
)
def test_the_api_key_never_appears_in_an_error(reply: Reply) -> None:
    with OpenAIServer(ScriptedResponder([reply] * 2)) as srv:
        client = make_client(srv.base_url, api_key=SECRET, max_attempts=2)
        outcome = call(client)
    assert not outcome.ok
    assert outcome.error_class in ("auth", "bad_request", "server_error")
    assert SECRET not in (outcome.error or "")
    assert SECRET not in repr(outcome)
    assert SECRET not in repr(client)


# --------------------------------------------------------------------------------------------
# Concurrency and call_many


def test_concurrency_bound_holds_over_many_calls() -> None:
    state = {"arrived": 0, "in_flight": 0, "max_in_flight": 0}
    arrivals = asyncio.Condition()

    async def responder(body: dict[str, Any]) -> str:
        # Runs on the server's single event loop. Each request is held until the group of four it
        # belongs to has arrived: a fifth request in flight would be counted, and a bound below
        # four would never complete a group (the hang guard fails the test).
        async with arrivals:
            state["arrived"] += 1
            group_end = -(-state["arrived"] // 4) * 4
            state["in_flight"] += 1
            state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            arrivals.notify_all()
            await asyncio.wait_for(arrivals.wait_for(lambda: state["arrived"] >= group_end), 60)  # a hang guard
            state["in_flight"] -= 1
        return OK_CONTENT

    prompts = [make_prompt(f"question {i}") for i in range(12)]
    with OpenAIServer(responder) as srv:
        client = make_client(srv.base_url, concurrency=4)
        outcomes = asyncio.run(client.call_many(prompts))
        assert srv.request_count == 12
    assert all(o is not None and o.ok and o.raw_text == OK_CONTENT for o in outcomes)
    # Four at a time, never more: the (i+4)-th request only starts once one of the four before it got its reply.
    assert state["max_in_flight"] == 4


def test_call_many_keeps_prompt_order() -> None:
    prompts = [make_prompt(f"question {i}") for i in range(6)]

    def responder(body: dict[str, Any]) -> str:
        return json.dumps({"score": 1.0, "echo": body["messages"][1]["content"]})

    with OpenAIServer(responder, latency_s=0.02) as srv:
        outcomes = asyncio.run(make_client(srv.base_url, concurrency=3).call_many(prompts))
    assert [json.loads(o.raw_text)["echo"] for o in outcomes if o and o.raw_text] == [p.user for p in prompts]


def test_call_many_should_stop_leaves_the_rest_as_none() -> None:
    prompts = [make_prompt(f"question {i}") for i in range(8)]
    done: list[int] = []
    with OpenAIServer(ScriptedResponder([OK_CONTENT] * 8)) as srv:
        client = make_client(srv.base_url, concurrency=1)
        outcomes = asyncio.run(
            client.call_many(prompts, on_done=lambda i, o: done.append(i), should_stop=lambda: len(done) >= 3)
        )
        count = srv.request_count
    assert len(outcomes) == 8
    assert [o is not None for o in outcomes] == [True] * 3 + [False] * 5
    assert all(o is not None and o.ok for o in outcomes[:3])
    assert done == [0, 1, 2]
    assert count == 3


def test_call_many_never_raises_for_failed_calls() -> None:
    script = [OK_CONTENT, Reply.bad_request(), Reply.quota()]
    with OpenAIServer(ScriptedResponder(script)) as srv:
        outcomes = asyncio.run(make_client(srv.base_url, concurrency=1).call_many([make_prompt()] * 3))
    assert [o.error_class if o else "missing" for o in outcomes] == [None, "bad_request", "quota"]


# --------------------------------------------------------------------------------------------
# The offline judge goes through litellm too


def test_offline_lexical_goes_through_litellm_and_returns_json(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    original = litellm.acompletion

    async def spy(*args: Any, **kwargs: Any) -> Any:  # passes through to the real litellm
        seen.append(kwargs["model"])
        return await original(*args, **kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    record = InputRecord(
        record_id="rec-1",
        timestamp=datetime(2026, 3, 1, 12, tzinfo=UTC),
        model="model-a",
        question="At what temperature does water boil at sea level?",
        answer="Water boils at 100 degrees Celsius at sea level [ctx-1].",
        contexts=[{"id": "ctx-1", "text": "At sea level, water boils at 100 degrees Celsius."}],
        reference="100 degrees Celsius.",
    )
    client = JudgeClient("offline/lexical")
    for judge, key in (("rag", "evaluation_status"), ("masis", "faithfulness"), ("prompt", "score")):
        prompt = render(judge, record)
        assert prompt is not None
        outcome = call(client, prompt)
        assert outcome.ok and outcome.attempts == 1, outcome.error
        reply = json.loads(outcome.raw_text or "")
        assert isinstance(reply, dict) and key in reply
        assert outcome.input_tokens > 0 and outcome.output_tokens > 0
        assert outcome.cost_usd == 0.0
    assert seen == ["offline/lexical"] * 3


@pytest.mark.parametrize("retry_after", ["soon", "Sat, 28 Nov 2026 09:00:00"])
def test_429_with_an_unreadable_retry_after_backs_off_as_without_one(retry_after: str) -> None:
    """A ``Retry-After`` that is neither seconds nor a zoned HTTP date states no wait: the call
    backs off as after a 429 without one, and never raises."""
    garbled = Reply.error(429, "Rate limit reached for requests.", "rate_limit_error", "rate_limit_exceeded",
                          headers={"Retry-After": retry_after})
    sleeps = Sleeps(real=False)
    with OpenAIServer(ScriptedResponder([garbled, OK_CONTENT])) as srv:
        outcome = call(make_client(srv.base_url, sleep=sleeps))
    assert outcome.ok and outcome.attempts == 2
    assert len(sleeps.waits) == 1 and 0 < sleeps.waits[0] <= 0.05, sleeps.waits  # backoff_max_s is 0.05
