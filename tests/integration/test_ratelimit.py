"""Rate-limit-aware calling (evaluation/calling/ratelimit.py, the judge client) against the embedded
OpenAI-compatible server enforcing a rate (its token buckets answer 429 with Retry-After and
OpenAI's x-ratelimit headers). Nothing is mocked: judge stages run through litellm over HTTP.

The rates are high (1,200 requests a minute, 20 a second) so that each case takes a few seconds.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from evaluation import stages, storage
from evaluation.calling.client import JudgeClient
from evaluation.calling.ratelimit import (
    DEFAULT_BURST_S,
    AdaptiveLimit,
    RateBudget,
    TokenBucket,
    estimate_tokens,
    is_callers_rate,
)
from evaluation.cli.day import run_day
from evaluation.judges import RenderedPrompt
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer, count_prompt_tokens
from evaluation.testing.ratelimit import EnforcedRate
from evaluation.testing.replies import FaultPlan
from tests.reliability.helpers import DAY, config, judge_reply

pytestmark = pytest.mark.timeout(120)

RPM = 1200.0  # 20 requests a second


def _prompt(i: int, words: int = 40) -> RenderedPrompt:
    return RenderedPrompt(judge="prompt", prompt_version="prompt@test", system="You are a judge. Reply in JSON.",
                          user=f"question {i}: " + "lorem ipsum " * words, key_fields=("score",))


def _post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


# --------------------------------------------------------------------------------------------
# The pieces


def test_token_bucket_reserves_into_debt_and_says_how_long_to_wait() -> None:
    bucket = TokenBucket(rate_per_s=10.0, capacity=5.0)
    now = bucket.updated
    assert [bucket.reserve(1.0, now) for _ in range(5)] == [0.0] * 5
    assert bucket.reserve(1.0, now) == pytest.approx(0.1)
    assert bucket.reserve(2.0, now) == pytest.approx(0.3)
    assert bucket.reserve(1.0, now + 0.3) == pytest.approx(0.1)  # refilled 3, owed 3 + 1
    bucket.adjust(-10.0)  # a reservation that used less gives back, never past the capacity
    assert bucket.level <= bucket.capacity


def test_budget_estimates_are_corrected_with_the_usage() -> None:
    budget = RateBudget(tpm=6000.0)  # 100 tokens a second, 50 of burst
    assert budget.tokens is not None and budget.tokens.capacity == 50.0
    assert budget.expected_tokens(100) == 100 + 256
    budget.settle(356, 130, output_tokens=30)
    assert budget.expected_tokens(100) == 130  # the output seen so far replaces the default
    assert estimate_tokens([{"role": "user", "content": "x" * 400}]) == 100 + 4 + 3
    halves = budget.share(2)
    assert halves.tpm == 3000.0 and halves.rpm is None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sequential_admissions(budget: RateBudget, clock: _Clock, calls: int, tokens: int = 0) -> list[float]:
    """The clock at which each of ``calls`` acquires, one after the other, is admitted."""
    admitted: list[float] = []

    async def run() -> None:
        for _ in range(calls):
            await budget.acquire(tokens)
            admitted.append(clock.now)

    asyncio.run(run())
    return admitted


def test_a_request_budget_admits_its_burst_then_exactly_its_rate() -> None:
    clock = _Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    budget = RateBudget(rpm=RPM, clock=clock, sleep=sleep)  # 20 a second
    burst = int(RPM / 60 * DEFAULT_BURST_S)
    admitted = _sequential_admissions(budget, clock, burst + 40)
    assert admitted[:burst] == [100.0] * burst  # the bucket starts full
    gaps = [b - a for a, b in zip(admitted[burst - 1:], admitted[burst:], strict=False)]
    assert gaps == pytest.approx([60 / RPM] * 40)
    assert (len(gaps)) / (admitted[-1] - admitted[burst - 1]) == pytest.approx(RPM / 60)


def test_a_tokens_budget_admits_exactly_its_rate_and_shares_split_it() -> None:
    clock = _Clock()

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    tpm = 60_000.0  # 1,000 tokens a second
    admitted = _sequential_admissions(RateBudget(tpm=tpm, clock=clock, sleep=sleep), clock, 30, tokens=250)
    steady = [t for t in admitted if t > 100.0]
    assert len(steady) == 30 - int(tpm / 60 * DEFAULT_BURST_S / 250)
    assert 250 * (len(steady) - 1) / (steady[-1] - steady[0]) == pytest.approx(tpm / 60)
    half = RateBudget(tpm=tpm, clock=clock, sleep=sleep).share(2)
    start = clock.now
    halved = _sequential_admissions(half, clock, 30, tokens=250)
    steady = [t for t in halved if t > start]
    assert 250 * (len(steady) - 1) / (steady[-1] - steady[0]) == pytest.approx(tpm / 60 / 2)


def test_callers_arriving_at_once_are_given_the_rates_schedule() -> None:
    """Concurrent acquires at one instant each reserve their turn: the k-th past the burst waits k/rate."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    budget = RateBudget(rpm=600.0, burst_s=0.5, clock=_Clock(), sleep=sleep)  # 10 a second, bursts of 5

    async def run() -> None:
        await asyncio.gather(*(budget.acquire(0) for _ in range(10)))

    asyncio.run(run())
    assert sorted(waits) == pytest.approx([0.1 * k for k in range(1, 6)])


def test_adaptive_limit_shrinks_gently_once_per_round_and_recovers_with_time() -> None:
    async def scenario() -> None:
        clock = _Clock()
        limit = AdaptiveLimit(32, decrease=0.75, round_s=1.0, recover_s=8.0, clock=clock)
        epochs = [await limit.acquire() for _ in range(8)]
        assert [limit.throttled(e) for e in epochs[:3]] == [True, False, False]  # one shrink a round
        assert limit.limit == 24 and limit.decreases == 1
        clock.now += 0.5
        epoch = await limit.acquire()
        assert not limit.throttled(epoch)  # sent after the shrink, but within the round
        clock.now += 0.5
        assert limit.limit == 24 + 4  # 32 every 8 s grows back
        assert limit.throttled(epoch) and limit.limit == 21  # 28 * 0.75
        for _ in range(12):  # 429s persisting every round hold it down (where shrinking meets growing)
            clock.now += 1.0
            assert limit.throttled(limit.epoch)
        assert limit.limit <= 13 and limit.decreases == 14
        clock.now += 4.0  # the 429s stopped: back to the configured concurrency within recover_s
        assert 13 < limit.limit < 32
        clock.now += 4.0
        assert limit.limit == 32

    asyncio.run(scenario())


def test_a_429_with_room_left_and_other_failures_never_shrink_the_limit() -> None:
    async def scenario() -> None:
        clock = _Clock()
        limit = AdaptiveLimit(8, clock=clock)
        epoch = await limit.acquire()
        assert not limit.throttled(epoch, caller_rate=False)
        limit.release()  # a 5xx, a timeout or a malformed reply: released, nothing else
        assert limit.limit == 8 and limit.decreases == 0

    asyncio.run(scenario())
    assert is_callers_rate({}, 100)  # nothing stated: it may be the caller's rate
    assert is_callers_rate({"requests": 0.0, "tokens": 5000.0}, 100)
    assert is_callers_rate({"requests": 40.0, "tokens": 50.0}, 100)
    assert not is_callers_rate({"requests": 40.0, "tokens": 5000.0}, 100)  # room left: the provider's trouble


def test_500s_through_the_client_never_shrink_concurrency() -> None:
    prompts = [_prompt(i, 5) for i in range(60)]
    faults = FaultPlan(rate_limit=0.0, server_error=0.3, hang=0.0, malformed=0.0, seed=3)
    with OpenAIServer(latency_s=0.01, faults=faults) as server:
        client = JudgeClient("openai/mock-judge", api_base=server.base_url, api_key="k", concurrency=8,
                             max_attempts=8, timeout_s=5, backoff_base_s=0.01, backoff_max_s=0.05)
        outcomes = asyncio.run(client.call_many(prompts))
        server_errors = server.fault_counts["server_error"]
    assert server_errors > 10
    assert all(o is not None and o.ok for o in outcomes)
    assert client.limit.decreases == 0 and client.limit.limit == 8


def test_a_retry_after_delays_only_its_own_request() -> None:
    """Every first attempt of one body gets a 429 with Retry-After 1 s; the other calls go on."""
    prompts = [_prompt(i, 5) for i in range(30)]
    faults = FaultPlan(rate_limit=1.0, server_error=0.0, hang=0.0, malformed=0.0, retry_after=1,
                       max_faults_per_body=1)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)  # the retry waits its own Retry-After (recorded, not slept)

    with OpenAIServer(latency_s=0.0, faults=faults) as server:
        client = JudgeClient("openai/mock-judge", api_base=server.base_url, api_key="k", concurrency=8,
                             max_attempts=3, timeout_s=5, sleep=sleep)
        outcomes = asyncio.run(client.call_many(prompts))
    assert all(o is not None and o.ok and o.attempts == 2 for o in outcomes)
    assert len(slept) == 30 and all(1.0 <= s <= 1.1 for s in slept)


def test_adaptive_limit_never_lets_more_than_its_limit_in_flight() -> None:
    async def scenario() -> int:
        limit = AdaptiveLimit(4)
        state = {"now": 0, "most": 0}

        async def one(i: int) -> None:
            epoch = await limit.acquire()
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            await asyncio.sleep(0.001 * (i % 3))
            state["now"] -= 1
            if i == 5:
                limit.throttled(epoch)
            limit.release()

        await asyncio.gather(*(one(i) for i in range(60)))
        assert limit.in_flight == 0
        return state["most"]

    assert asyncio.run(scenario()) == 4


# --------------------------------------------------------------------------------------------
# The server's enforced rate (on a clock that moves only when the test moves it)


def test_server_enforces_requests_per_minute_with_openai_headers() -> None:
    body = {"model": "mock-judge", "messages": [{"role": "user", "content": "hello"}]}
    clock = _Clock()
    with OpenAIServer() as server:
        server.rate_limits = EnforcedRate(600, burst_s=0.5, clock=clock)  # 10 a second, bursts of 5
        answers = [_post(server.base_url, body) for _ in range(7)]  # at one instant: the burst, then refusals
        clock.now += 0.25  # 2.5 requests' worth refilled
        later = _post(server.base_url, body)
        assert server.request_count == 6 and server.throttled_count == 2
        refused_at, admitted_at = server.throttled_times, [r.received_at for r in server.requests]
    # every attempt has its time: the two refused ones between the burst and the later one
    assert len(refused_at) == 2 and admitted_at[4] <= refused_at[0] <= refused_at[1] <= admitted_at[5]
    assert [status for status, _, _ in answers] == [200] * 5 + [429, 429]
    status, headers, payload = answers[5]
    assert payload["error"]["code"] == "rate_limit_exceeded" and payload["error"]["type"] == "requests"
    assert headers["Retry-After"] == "1" and 1 <= int(headers["retry-after-ms"]) <= 100
    assert headers["x-ratelimit-limit-requests"] == "600" and headers["x-ratelimit-remaining-requests"] == "0"
    assert later[0] == 200


def test_server_enforces_tokens_per_minute() -> None:
    body = {"model": "mock-judge", "messages": [{"role": "user", "content": "x" * 396}]}  # 100 tokens
    assert count_prompt_tokens(body) == 100
    with OpenAIServer() as server:
        server.rate_limits = EnforcedRate(tpm=60_000, burst_s=0.25, clock=_Clock())  # 1,000 tokens a second, 250 of burst
        statuses = [_post(server.base_url, body)[0] for _ in range(3)]
    assert statuses == [200, 200, 429]  # two prompts and their completions use the burst


# --------------------------------------------------------------------------------------------
# A chunk against an enforced rate


def _day(tmp_path: Path, records: int) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, records, bad=False)


def _run(tmp_path: Path, server: OpenAIServer, **values: Any) -> tuple[dict[str, Any], float]:
    cfg = config(tmp_path, judge_model="openai/mock-judge", api_base=server.base_url, judges=["rag"],
                 timeout_s=5, chunk_size=1000, **values)
    started = time.monotonic()
    result = run_day(cfg, stages.Stores.open(cfg), api_key="k")
    return result, time.monotonic() - started


def test_a_budget_at_the_servers_rate_runs_near_it_without_call_errors(tmp_path: Path) -> None:
    _day(tmp_path, 120)
    with OpenAIServer(judge_reply, latency_s=0.05, rpm=RPM) as server:
        result, _ = _run(tmp_path, server, concurrency=16, judge_rpm=RPM)
        throttled, requests = server.throttled_count, server.request_count
    assert result["statuses"].get("call_error", 0) == 0 and result["statuses"]["ok"] > 0
    assert requests >= 80, requests
    assert throttled <= requests // 4, (throttled, requests)
    # How near the server's rate it runs, and its 429s, depend on this machine's load: bench/calling.py
    # (``rated``) measures them; the budget's schedule is checked with a test clock above.


def test_a_tokens_budget_holds_too(tmp_path: Path) -> None:
    _day(tmp_path, 60)
    tpm = 1_200_000.0  # 20,000 tokens a second: the binding limit (a rag call is ~1,000 tokens here)
    with OpenAIServer(judge_reply, latency_s=0.05, tpm=tpm) as server:
        result, _ = _run(tmp_path, server, concurrency=32, judge_tpm=tpm)
        throttled, requests = server.throttled_count, server.request_count
    assert result["statuses"].get("call_error", 0) == 0 and result["statuses"]["ok"] > 0
    assert throttled <= requests // 4, (throttled, requests)  # its rate and 429s: bench/calling.py


def test_without_a_budget_adaptive_concurrency_ends_without_call_errors(tmp_path: Path) -> None:
    _day(tmp_path, 120)
    with OpenAIServer(judge_reply, latency_s=0.05, rpm=RPM) as server:
        result, _ = _run(tmp_path, server, concurrency=32)
        throttled, requests = server.throttled_count, server.request_count
    assert result["statuses"].get("call_error", 0) == 0 and result["statuses"]["ok"] > 0
    assert throttled > 0  # it did hit the limit, and recovered
    assert requests >= 80


def test_adaptive_concurrency_alone_recovers_from_429s_without_limit_headers() -> None:
    """A server whose 429s state only Retry-After (no limits to learn): halving and pausing alone."""
    prompts = [_prompt(i, 5) for i in range(80)]
    with OpenAIServer(latency_s=0.05, rpm=RPM) as server:
        server.rate_limits.headers = dict  # type: ignore[union-attr, method-assign]  # no x-ratelimit headers
        client = JudgeClient("openai/mock-judge", api_base=server.base_url, api_key="k", concurrency=32,
                             max_attempts=6, timeout_s=5)
        outcomes = asyncio.run(client.call_many(prompts))
        throttled = server.throttled_count
    assert all(o is not None and o.ok for o in outcomes), [o.error for o in outcomes if o and not o.ok][:3]
    assert client.budget is None and client.limit.decreases >= 1 and throttled > 0


def test_server_cli_enforces_a_rate_and_reports_the_429s() -> None:
    import signal
    import subprocess
    import sys

    command = [sys.executable, "-m", "evaluation.testing.openai_server", "--port", "0", "--rpm", "60",
               "--rate-burst", "2", "--no-uvloop"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().split()
        assert ready[0] == "READY", ready
        body = {"model": "mock-judge", "messages": [{"role": "user", "content": "hello"}]}
        statuses = [_post(ready[1], body)[0] for _ in range(3)]  # one a second, bursts of two
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    assert statuses == [200, 200, 429]
    assert "REQUESTS 2" in output and "THROTTLED 1" in output
