"""One judge rate budget for the deployment (evaluation/calling/fleetrate.py), against the real Redis on
127.0.0.1:6379 (each test its own key prefix, deleted after) and the test OpenAI server's enforced
rate. The fleet test runs two OS processes, each with two chunks' clients, through litellm."""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import asyncio
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from evaluation.calling.fleetrate import SharedBudget, judge_budget, rate_settings
from evaluation.calling.ratelimit import RateBudget
from evaluation.testing.openai_server import OpenAIServer

pytestmark = pytest.mark.timeout(180)

REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own; its keys are deleted afterwards."""
    name = f"test:evaluation:rate:{uuid.uuid4().hex}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {REDIS_URL} is needed by these tests: {exc}")
    yield name
    for key in client.scan_iter(match=f"{name}:*"):
        client.delete(key)
    client.close()


def test_two_budgets_on_one_key_draw_from_one_bucket(prefix: str) -> None:
    async def scenario() -> list[float]:
        one = SharedBudget(REDIS_URL, "m", rpm=600.0, prefix=prefix)  # 10 a second, bursts of 5
        two = SharedBudget(REDIS_URL, "m", rpm=600.0, prefix=prefix, fallback_share=4)  # another task's
        waits = [await (one if i % 2 else two)._take(1.0, 0.0) for i in range(8)]
        await one.aclose()
        await two.aclose()
        return waits

    waits = asyncio.run(scenario())
    assert waits[:5] == [0.0] * 5  # the shared burst
    # then one request every 0.1 s for the two together (less the few ms the calls took)
    assert [round(w, 1) for w in waits[5:]] == [0.1, 0.2, 0.3]


def test_a_correction_gives_tokens_back_to_the_fleet(prefix: str) -> None:
    async def scenario() -> tuple[float, float]:
        budget = SharedBudget(REDIS_URL, "m", tpm=60_000.0, prefix=prefix)  # 1,000 a second, 500 of burst
        first = await budget._take(1.0, 900.0)  # 400 into debt: 0.4 s to wait
        await budget._correct(-800.0)  # it used 100: 800 back
        second = await budget._take(1.0, 300.0)
        await budget.aclose()
        return first, second

    first, second = asyncio.run(scenario())
    assert first == pytest.approx(0.4, abs=0.02)
    assert second == 0.0  # 400 - 800 capped at the capacity (500), less 300: no wait


def test_settings_come_from_the_environment() -> None:
    celery = {"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor", "AIRFLOW__CELERY__BROKER_URL": "redis://:@redis:6379/0"}
    assert rate_settings(celery) == ("redis://:@redis:6379/0", 1.0)
    assert rate_settings({**celery, "EVALUATION_RATE_REDIS_URL": "redis://other:6379/2"})[0] == "redis://other:6379/2"
    assert rate_settings({**celery, "EVALUATION_RATE_REDIS_URL": "off", "LLM_JUDGE_POOL_SLOTS": "4"}) == (None, 4.0)
    assert rate_settings({"AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "EVALUATION_RATE_SHARE": "3"}) == (None, 3.0)
    assert rate_settings({}) == (None, 1.0)
    with pytest.raises(ValueError, match=r"\$LLM_JUDGE_POOL_SLOTS must be a number"):
        rate_settings({"LLM_JUDGE_POOL_SLOTS": "many"})


def test_without_redis_each_task_takes_its_share_and_a_failing_redis_falls_back_to_it(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="evaluation.calling.fleetrate")
    local = judge_budget("m", 1200.0, 60_000.0, share=4)
    assert type(local) is RateBudget and (local.rpm, local.tpm) == (300.0, 15_000.0)
    assert "divided by 4 judge tasks" in caplog.text
    assert judge_budget("m", None, None, url=REDIS_URL) is None

    async def scenario() -> RateBudget | None:
        budget = SharedBudget("redis://127.0.0.1:1/0", "m", rpm=1200.0, fallback_share=4)  # nothing listens
        await budget.acquire(10)
        return budget.fallback

    fallback = asyncio.run(scenario())
    assert fallback is not None and fallback.rpm == 300.0
    assert "shared rate budget in Redis failed" in caplog.text


_CHILD = """
import asyncio, json, sys
from evaluation.calling.client import JudgeClient
from evaluation.judges import RenderedPrompt

base, prefix, rpm, worker, CALLS = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5])

def prompts(chunk):
    return [RenderedPrompt(judge="prompt", prompt_version="prompt@test", system="Reply in JSON.",
                           user=f"worker {worker} chunk {chunk} question {i}", key_fields=("score",))
            for i in range(CALLS)]

def client():
    c = JudgeClient("openai/mock-judge", api_base=base, api_key="k", concurrency=16, max_attempts=8,
                    timeout_s=5, rpm=rpm, rate_url="redis://127.0.0.1:6379/0")
    c.budget.prefix = prefix
    c.budget.key = prefix + ":openai/mock-judge"
    return c

async def main():
    clients = [client() for _ in range(2)]  # two chunks at once in this worker
    print("ready", flush=True)
    sys.stdin.readline()  # both workers set up: they start together
    results = await asyncio.gather(*(c.call_many(prompts(i)) for i, c in enumerate(clients)))
    return [o.ok for outcomes in results for o in outcomes]

print(json.dumps(asyncio.run(main())))
"""


#: Calls of each of the four clients: 100 in all, some 10 s at the rate, the four clients at
#: work together throughout (the two processes start their calls at once, once both are set up).
CALLS = 25


def test_two_worker_processes_share_one_budget_and_use_the_rate(prefix: str) -> None:
    """Two OS processes, two chunks each (four judge tasks), all set to the provider's 600 rpm:
    together they keep to it (at least 0.9 of it used) and every call lands."""
    rpm = 600.0
    with OpenAIServer(latency_s=0.05, rpm=rpm, rate_burst_s=1.0) as server:
        env = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}"}
        children = [subprocess.Popen([sys.executable, "-c", _CHILD, server.base_url, prefix, str(rpm), str(w),
                                      str(CALLS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
                    for w in range(2)]
        for child in children:  # each has its clients (litellm imported): then both go
            assert child.stdout is not None and child.stdout.readline().strip() == "ready", child.communicate()[1][-2000:]
        outputs = [child.communicate("go\n", timeout=150) for child in children]
        times = sorted(r.received_at for r in server.requests)
        throttled = server.throttled_count
    for child, (_out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err[-2000:]
    oks = [ok for out, _ in outputs for ok in json.loads(out.strip().splitlines()[-1])]
    assert len(oks) == 4 * CALLS and all(oks)  # no 429 lost
    rate = (len(times) - 1) / (times[-1] - times[0])
    assert rate >= 0.9 * rpm / 60, f"{rate:.2f}/s against {rpm / 60:.0f}/s"
    # Four clients with the whole rate each would send 4x it: the server would refuse about three
    # attempts in four. Shared, refusals are the odd call that CPU contention delayed into the next.
    assert throttled <= 0.25 * len(times), (throttled, len(times))
