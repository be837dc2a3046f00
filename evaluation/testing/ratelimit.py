"""A provider's side of a rate limit, for the test server (:mod:`evaluation.testing.openai_server`):
the client's side is :mod:`evaluation.calling.ratelimit`."""

from __future__ import annotations

import time
from collections.abc import Callable


class _Window:
    """One limit's allowance, written here rather than taken from the client's ``TokenBucket``, so
    that a mistake in the client's arithmetic is not mirrored by the provider it is tested against:
    ``rate_per_s`` accrues continuously up to ``capacity``, starting full."""

    def __init__(self, rate_per_s: float, capacity: float, now: float) -> None:
        self.rate_per_s, self.capacity = rate_per_s, max(1.0, capacity)
        self.level, self.updated = self.capacity, now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate_per_s)
        self.updated = now


class EnforcedRate:
    """A provider's side of a rate limit (the test server's): requests and tokens per minute as
    token buckets of ``burst_s`` seconds each, which admit a request only when both hold enough
    (no debt), and the OpenAI headers that say so, on ``clock`` (a test's, to decide without
    waiting). Not thread-safe: the caller holds its lock."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, *, burst_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rpm = float(rpm) if rpm else None
        self.tpm = float(tpm) if tpm else None
        self.clock = clock
        self.requests = _Window(self.rpm / 60.0, self.rpm / 60.0 * burst_s, clock()) if self.rpm else None
        self.tokens = _Window(self.tpm / 60.0, self.tpm / 60.0 * burst_s, clock()) if self.tpm else None
        self.refused = 0

    def admit(self, prompt_tokens: int) -> tuple[float, str]:
        """Admit a request of ``prompt_tokens`` (taking one request and those tokens): returns
        (0.0, "") when admitted, else the seconds until it would be and which limit refused it
        (``requests`` or ``tokens``), taking nothing."""
        now = self.clock()
        wait, which = 0.0, ""
        for kind, bucket, amount in (("requests", self.requests, 1.0), ("tokens", self.tokens, float(prompt_tokens))):
            if bucket is None:
                continue
            bucket.refill(now)
            # a request larger than the bucket is admitted when the bucket is full (else never)
            needed = min(amount, bucket.capacity)
            if bucket.level < needed and (needed - bucket.level) / bucket.rate_per_s > wait:
                wait, which = (needed - bucket.level) / bucket.rate_per_s, kind
        if wait > 0:
            self.refused += 1
            return wait, which
        if self.requests is not None:
            self.requests.level -= 1.0
        if self.tokens is not None:
            self.tokens.level -= float(prompt_tokens)
        return 0.0, ""

    def charge(self, tokens: int) -> None:
        """Take ``tokens`` more for an admitted request (its completion), into debt if need be."""
        if self.tokens is not None and tokens:
            self.tokens.refill(self.clock())
            self.tokens.level -= float(tokens)

    def headers(self) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers: limit, remaining and reset of each limit."""
        out: dict[str, str] = {}
        now = self.clock()
        for kind, bucket, limit in (("requests", self.requests, self.rpm), ("tokens", self.tokens, self.tpm)):
            if bucket is None or limit is None:
                continue
            bucket.refill(now)
            level = max(0.0, bucket.level)
            out[f"x-ratelimit-limit-{kind}"] = str(int(limit))
            out[f"x-ratelimit-remaining-{kind}"] = str(int(level))
            out[f"x-ratelimit-reset-{kind}"] = f"{(bucket.capacity - level) / bucket.rate_per_s:.3f}s"
        return out
