"""Rate-limit-aware calling, for one event loop (a chunk's calls), no threads, no polling.

* :class:`RateBudget` — token buckets for requests and tokens per minute: a call reserves one
  request and its estimated tokens (:func:`estimate_tokens`) before it is sent and sleeps until the
  buckets cover them (a bucket may go into debt, so reservations queue in arrival order); the
  reply's usage corrects the estimate. A bucket holds at most ``burst_s`` seconds of its rate, so
  calls go out evenly. :mod:`evaluation.calling.fleetrate` shares one over Redis.
* :class:`AdaptiveLimit` — calls in flight, shrunk gently by a 429 about the caller's rate
  (:func:`is_callers_rate`) and grown back by time.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

#: Seconds of its rate a bucket holds at most (a burst).
DEFAULT_BURST_S = 0.5
#: Output tokens a reservation assumes until replies have shown the real figure.
DEFAULT_OUTPUT_TOKENS = 256


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens of chat messages, estimated at four characters a token plus a few per
    message: cheap (no tokenizer on the event loop) and close enough for a budget whose
    estimates are corrected with the usage the provider returns."""
    chars = sum(len(str(message.get("content") or "")) for message in messages)
    return chars // 4 + 4 * len(messages) + 3


class TokenBucket:
    """A bucket of ``rate_per_s`` refilled continuously, holding at most ``capacity``; it starts full.

    :meth:`reserve` takes an amount at once, going into debt if need be, and returns how long the
    caller must wait until the debt is paid; :meth:`adjust` corrects an earlier reservation."""

    __slots__ = ("capacity", "clock", "level", "rate_per_s", "updated")

    def __init__(self, rate_per_s: float, capacity: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0:
            raise ValueError("a token bucket needs a positive rate")
        self.rate_per_s = float(rate_per_s)
        self.capacity = max(1.0, float(capacity))
        self.level = self.capacity
        self.clock = clock
        self.updated = clock()

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate_per_s)
        self.updated = now

    def reserve(self, amount: float, now: float) -> float:
        """Take ``amount``; the seconds to wait before using it (0 when the bucket covered it)."""
        self.refill(now)
        self.level -= amount
        return 0.0 if self.level >= 0 else -self.level / self.rate_per_s

    def adjust(self, delta: float) -> None:
        """Take ``delta`` more (or give ``-delta`` back) for a reservation already made."""
        self.refill(self.clock())
        self.level = min(self.capacity, self.level - delta)


class RateBudget:
    """Requests and tokens per minute shared by the calls of one event loop (either may be None).
    ``clock`` and ``sleep`` are injectable for tests."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None, *, burst_s: float = DEFAULT_BURST_S,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.rpm = float(rpm) if rpm else None
        self.tpm = float(tpm) if tpm else None
        self.burst_s = burst_s
        self._clock, self._sleep = clock, sleep
        self.requests = TokenBucket(self.rpm / 60.0, self.rpm / 60.0 * burst_s, clock=clock) if self.rpm else None
        self.tokens = TokenBucket(self.tpm / 60.0, self.tpm / 60.0 * burst_s, clock=clock) if self.tpm else None
        self._output_mean = float(DEFAULT_OUTPUT_TOKENS)
        self._observed = 0

    def __repr__(self) -> str:
        return f"RateBudget(rpm={self.rpm}, tpm={self.tpm})"

    def share(self, parts: float) -> RateBudget:
        """This budget split evenly over ``parts`` judge tasks."""
        return RateBudget(self.rpm / parts if self.rpm else None, self.tpm / parts if self.tpm else None,
                          burst_s=self.burst_s, clock=self._clock, sleep=self._sleep)

    def expected_tokens(self, prompt_tokens: int, max_tokens: int | None = None) -> int:
        """Tokens a call is expected to use: its prompt and the mean output so far (or ``max_tokens``)."""
        output = self._output_mean if max_tokens is None else min(float(max_tokens), self._output_mean)
        return int(prompt_tokens + output)

    async def acquire(self, tokens: int) -> None:
        """Reserve one request and ``tokens``; return once the budget covers them."""
        now = self._clock()
        wait = 0.0
        if self.requests is not None:
            wait = self.requests.reserve(1.0, now)
        if self.tokens is not None:
            wait = max(wait, self.tokens.reserve(float(tokens), now))
        if wait > 0:
            await self._sleep(wait)

    def settle(self, reserved: int, used: int, output_tokens: int) -> None:
        """Correct a reservation of ``reserved`` tokens with the ``used`` ones the provider counted."""
        if output_tokens > 0:
            self._observed += 1
            weight = 1.0 / min(self._observed, 20)
            self._output_mean += (output_tokens - self._output_mean) * weight
        if self.tokens is not None and used > 0 and used != reserved:
            self.tokens.adjust(float(used - reserved))


def is_callers_rate(remaining: Mapping[str, float], tokens: int) -> bool:
    """Whether a 429 is about the caller's own rate, from the ``x-ratelimit-remaining-*`` headers
    it carries (``remaining``: requests and/or tokens): yes when a stated remainder cannot cover
    one more request of ``tokens``, or when the 429 states none (it may be, nothing says it is not).
    A 429 stating room left is the provider's overload or a fault, not something fewer calls in
    flight would cure."""
    if not remaining:
        return True
    return remaining.get("requests", 1.0) < 1.0 or remaining.get("tokens", float(tokens)) < tokens


class AdaptiveLimit:
    """Calls in flight, at most ``limit``, which adapts between 1 and ``maximum``.

    Only a 429 about the caller's rate shrinks it (:meth:`throttled`; 5xx, timeouts and malformed
    replies never do), gently (times ``decrease``) and at most once a round: not again within
    ``round_s`` of the last shrink, nor for a call sent before it. From each shrink the limit grows
    back with time, ``maximum`` every ``recover_s`` seconds, so once 429s stop it is back at
    ``maximum`` within ``recover_s``; while they persist, shrinking wins. A 429's Retry-After is the
    calling request's own wait: nothing here pauses the other slots. ``clock`` is injectable for tests."""

    def __init__(self, maximum: int, *, decrease: float = 0.75, round_s: float = 1.0, recover_s: float = 4.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0.0 < decrease < 1.0:
            raise ValueError("AdaptiveLimit: decrease must be between 0 and 1")
        if recover_s <= 0:
            raise ValueError("AdaptiveLimit: recover_s must be positive")
        self.maximum = max(1, int(maximum))
        self.decrease = decrease
        self.round_s = round_s
        self.recover_s = recover_s
        self._clock = clock
        self._floor = float(self.maximum)  #: the limit at the last shrink
        self._shrunk_at = float("-inf")
        self.in_flight = 0
        self.epoch = 0
        self.decreases = 0  #: times the limit was shrunk
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def _level(self, now: float) -> float:
        """The limit, unrounded: the last shrink's value plus what time has grown back since."""
        if self._floor >= self.maximum:
            return float(self.maximum)
        grown = self._floor + self.maximum * (now - self._shrunk_at) / self.recover_s
        if grown >= self.maximum:
            self._floor = float(self.maximum)
            return float(self.maximum)
        return grown

    @property
    def limit(self) -> int:
        """Calls allowed in flight now."""
        return max(1, int(self._level(self._clock())))

    async def acquire(self, retry: bool = False) -> int:
        """Wait for a slot; returns the epoch to hand back on :meth:`throttled`. A ``retry`` (a
        call's later attempt) goes before the calls not started yet, so that its wait counts
        against its own retry budget only as long as the calls in flight take."""
        woken = retry
        while True:
            if self.in_flight < self.limit and (woken or not self._waiters):
                self.in_flight += 1
                if woken:
                    self._wake()  # room for the next one too, perhaps
                return self.epoch
            waiter = asyncio.get_running_loop().create_future()
            if retry:
                self._waiters.appendleft(waiter)
            else:
                self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                else:
                    self._wake()  # the turn handed to this waiter goes to the next one
                raise
            woken = True

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def release(self) -> None:
        """Give the slot back (the limit grows with time, not with successes)."""
        self.in_flight -= 1
        self._wake()

    def throttled(self, epoch: int, caller_rate: bool = True) -> bool:
        """A call sent in ``epoch`` got a 429: shrink the limit when the 429 is about the caller's
        rate and this round has not shrunk it yet; returns whether it did. The caller still
        releases its slot and waits the 429's Retry-After itself."""
        if not caller_rate or epoch != self.epoch:
            return False
        now = self._clock()
        if now - self._shrunk_at < self.round_s:
            return False
        self._floor = max(1.0, self._level(now) * self.decrease)
        self._shrunk_at = now
        self.epoch += 1
        self.decreases += 1
        return True
