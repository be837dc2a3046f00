"""The judge client's retry waits: exponential with equal jitter, and the jitter differs between
clients, so workers that meet one provider's burst of 429s or 5xx do not retry in lockstep."""

from __future__ import annotations

from evaluation.calling.client import JudgeClient


def _waits(client: JudgeClient, attempt: int = 4, n: int = 8) -> list[float]:
    return [client.backoff(attempt) for _ in range(n)]


def test_each_wait_lies_between_half_the_ceiling_and_the_ceiling() -> None:
    client = JudgeClient("offline/lexical", backoff_base_s=0.5, backoff_max_s=8.0)
    for attempt, ceiling in ((1, 0.5), (3, 2.0), (5, 8.0), (9, 8.0)):
        assert all(ceiling / 2 <= wait <= ceiling for wait in _waits(client, attempt))


def test_two_clients_draw_different_jitter() -> None:
    first, second = JudgeClient("offline/lexical"), JudgeClient("offline/lexical")
    assert _waits(first) != _waits(second)
