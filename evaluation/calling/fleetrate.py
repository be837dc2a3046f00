"""One judge rate budget for a whole deployment: ``judge_rpm`` / ``judge_tpm`` are the provider's
limits, shared by every judge task of every worker.

* With Redis (``$EVALUATION_RATE_REDIS_URL``, else the Celery broker's URL under the Celery
  executor) every task draws from one pair of token buckets kept in Redis under
  ``evaluation:rate:<model>`` (:class:`SharedBudget`), with the rules of
  :class:`~evaluation.calling.ratelimit.RateBudget` in one atomic script on Redis's clock.
* Without Redis each task takes its share: the limits divided by the judge tasks that run at once
  (``$EVALUATION_RATE_SHARE``, else ``$LLM_JUDGE_POOL_SLOTS``, the ``llm_judge`` pool's slots the
  deployment creates; 1 without either, as for the CLI's single process).

If Redis stops answering during a run the task goes on with its share, and says so once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import redis
import redis.asyncio

from evaluation.calling.ratelimit import RateBudget

logger = logging.getLogger(__name__)

#: Prefix of the Redis keys holding the buckets (one hash per judge model).
DEFAULT_PREFIX = "evaluation:rate"
#: Values of ``$EVALUATION_RATE_REDIS_URL`` that switch the shared budget off.
_OFF = frozenset({"off", "none", "no", "false", "0"})

# KEYS[1]: the hash. ARGV: requests per second, tokens per second (0: that limit is off), burst
# seconds, requests to take, tokens to take, expiry (ms). Each bucket holds at most burst seconds
# of its rate, starts full and may go into debt; the reply is the seconds the caller must wait
# before sending (as a string: Redis turns Lua numbers into integers). A correction takes
# ARGV[4] = 0 requests and ARGV[5] = the tokens more (negative: given back).
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local burst = tonumber(ARGV[3])
local wait = 0
for i = 0, 1 do
  local rate = tonumber(ARGV[1 + i])
  local amount = tonumber(ARGV[4 + i])
  if rate > 0 then
    local capacity = math.max(1, rate * burst)
    local state = redis.call('HMGET', KEYS[1], 'level' .. i, 'at' .. i)
    local level = tonumber(state[1]) or capacity
    local at = tonumber(state[2]) or now
    level = math.min(capacity, level + math.max(0, now - at) * rate) - amount
    if level > capacity then level = capacity end
    redis.call('HSET', KEYS[1], 'level' .. i, tostring(level), 'at' .. i, tostring(now))
    if level < 0 and amount > 0 then wait = math.max(wait, -level / rate) end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return tostring(wait)
"""


def rate_settings(environ: Any = None) -> tuple[str | None, float]:
    """(Redis URL or None, share) for the judge budget, from the environment: see the module."""
    env = os.environ if environ is None else environ
    url = (env.get("EVALUATION_RATE_REDIS_URL") or "").strip()
    if url.lower() in _OFF:
        url = ""
    elif not url and "celery" in env.get("AIRFLOW__CORE__EXECUTOR", "").lower():
        broker = (env.get("AIRFLOW__CELERY__BROKER_URL") or "").strip()
        if broker.startswith(("redis://", "rediss://")):
            url = broker
    share = 1.0
    for name in ("EVALUATION_RATE_SHARE", "LLM_JUDGE_POOL_SLOTS"):
        value = (env.get(name) or "").strip()
        if value:
            try:
                share = float(value)
            except ValueError:
                raise ValueError(f"${name} must be a number of judge tasks, not {value!r}") from None
            if share < 1:
                raise ValueError(f"${name} must be at least 1, not {value!r}")
            break
    return url or None, share


def judge_budget(model: str, rpm: float | None, tpm: float | None, *, url: str | None = None,
                 share: float = 1.0) -> RateBudget | None:
    """The budget of a judge client: shared through Redis at ``url``, else ``1/share`` of the
    limits; None without limits. Logs which mode is in force."""
    if not (rpm or tpm):
        return None
    if url:
        shared = SharedBudget(url, model, rpm, tpm, fallback_share=share)
        logger.info("judge model %s: rate limits %s shared by the deployment through Redis (key %s)",
                    model, _limits(rpm, tpm), shared.key)
        return shared
    logger.info("judge model %s: rate limits %s divided by %g judge tasks (no Redis configured)",
                model, _limits(rpm, tpm), share)
    return RateBudget(rpm, tpm).share(share)


def _limits(rpm: float | None, tpm: float | None) -> str:
    return ", ".join(f"{value:g} {name}" for name, value in (("rpm", rpm), ("tpm", tpm)) if value)


class SharedBudget(RateBudget):
    """A :class:`~evaluation.calling.ratelimit.RateBudget` whose buckets are kept in Redis, shared by
    every process that uses the same key (the output-token estimate stays per process), with a Redis
    client per event loop; ``fallback_share`` divides the limits for the local budget used if Redis fails."""

    def __init__(self, url: str, model: str, rpm: float | None = None, tpm: float | None = None, *,
                 prefix: str = DEFAULT_PREFIX, fallback_share: float = 1.0) -> None:
        super().__init__(rpm, tpm)
        self.requests = self.tokens = None  # the buckets are Redis's
        self.url = url
        self.model = model
        self.key = f"{prefix}:{model}"
        self.fallback_share = fallback_share
        self.fallback: RateBudget | None = None  #: the local share in use once Redis failed
        self._redis: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._script: Any = None
        self._pending: set[asyncio.Task[Any]] = set()

    def __repr__(self) -> str:
        return f"SharedBudget(rpm={self.rpm}, tpm={self.tpm}, key={self.key!r})"

    def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._redis is None or self._loop is not loop:
            self._redis = redis.asyncio.Redis.from_url(self.url, socket_timeout=5.0, socket_connect_timeout=5.0)
            self._script = self._redis.register_script(_RESERVE)
            self._loop = loop
        return self._script

    async def _take(self, requests: float, tokens: float) -> float:
        rps = self.rpm / 60.0 if self.rpm else 0.0
        tps = self.tpm / 60.0 if self.tpm else 0.0
        expiry_ms = int(max(60.0, 4 * self.burst_s) * 1000)
        return float(await self._client()(keys=[self.key], args=[rps, tps, self.burst_s, requests, tokens, expiry_ms]))

    def _degrade(self, exc: BaseException) -> RateBudget:
        if self.fallback is None:
            self.fallback = self.share(self.fallback_share)
            logger.warning("judge model %s: the shared rate budget in Redis failed (%s: %s); going on with this "
                           "task's share (%s)", self.model, type(exc).__name__, exc, self.fallback)
        return self.fallback

    async def acquire(self, tokens: int) -> None:
        """Reserve one request and ``tokens`` from the fleet's buckets; return once they cover them."""
        if self.fallback is not None:
            return await self.fallback.acquire(tokens)
        try:
            wait = await self._take(1.0, float(tokens) if self.tpm else 0.0)
        except (redis.RedisError, OSError) as exc:
            return await self._degrade(exc).acquire(tokens)
        if wait > 0:
            await asyncio.sleep(wait)

    def settle(self, reserved: int, used: int, output_tokens: int) -> None:
        """Correct a reservation with the usage (in the background: the call does not wait)."""
        super().settle(reserved, used, output_tokens)  # the output estimate (no local bucket)
        if self.fallback is not None:
            self.fallback.settle(reserved, used, output_tokens)
            return
        if self.tpm is None or used <= 0 or used == reserved:
            return
        task = asyncio.get_running_loop().create_task(self._correct(float(used - reserved)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _correct(self, delta: float) -> None:
        try:
            await self._take(0.0, delta)
        except (redis.RedisError, OSError) as exc:
            self._degrade(exc)

    async def aclose(self) -> None:
        """Wait for pending corrections and close this loop's connections."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        if self._redis is not None and self._loop is asyncio.get_running_loop():
            await self._redis.aclose()
        self._redis = None
