"""The judge client: the only module that imports litellm (its private parts: :mod:`evaluation.calling._compat`).

One :class:`JudgeClient` per run sends rendered prompts through ``litellm.acompletion`` with
bounded concurrency, a per-attempt timeout and its own retry policy (litellm's and the OpenAI
SDK's retries are switched off so that exactly one policy holds):

* retried: 429 rate limits, 5xx, timeouts and connection errors; never other 4xx, nor a 429 that
  says the quota is used up;
* exponential backoff (``backoff_base_s`` doubling up to ``backoff_max_s``) with equal jitter, or
  the server's ``Retry-After`` when it sends one;
* at most ``max_attempts`` attempts, and never past ``retry_budget_s`` for one call: a wait that
  would cross the budget is not started.

Calls in flight adapt to 429s (:class:`~evaluation.calling.ratelimit.AdaptiveLimit`), and an optional
budget of requests and tokens per minute (``rpm``, ``tpm``; :mod:`evaluation.calling.fleetrate`) spaces
them out; without one, a 429 that states the provider's limits sets the budget to them.

A failed call is an outcome, never an exception: a :class:`~evaluation.calling.outcome.CallOutcome` with
the class of its error (see :mod:`evaluation.calling.outcome`).

The built-in offline judge (model ``offline/lexical``) is registered here as a litellm custom
provider, so it runs through the very same code path with no network and no key.

Importing this module changes nothing in the process: litellm is imported and set up by
:func:`configure`, which the client and every function here that needs litellm call first.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import functools
import gc
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from evaluation.calling import _compat, offline
from evaluation.calling.fleetrate import SharedBudget, judge_budget, rate_settings
from evaluation.calling.outcome import (
    RETRYABLE,
    CallOutcome,
    classify_error,
    error_message,
    failed,
    rate_limit_headers,
    retry_after_seconds,
)
from evaluation.calling.ratelimit import AdaptiveLimit, RateBudget, estimate_tokens, is_callers_rate
from evaluation.contract.judge_settings import JudgeSettings, StructuredOutput, request_parameters
from evaluation.judges import PROBE_PROMPT, RenderedPrompt
from evaluation.judges.schema import response_format

logger = logging.getLogger(__name__)

#: litellm, once :func:`configure` has imported and set it up.
litellm: Any = None
#: litellm's context flag of its own nested calls, under which it skips its success logging.
_UNLOGGED: ContextVar[bool] | None = None


def configure() -> Any:
    """Import litellm and set it up for judge calls, once per process; returns the module.

    Keeps litellm from fetching its price map, quiets its loggers, registers the offline judge, and
    freezes the objects its import left (some 380,000: about 0.4 s of every full collection) out of
    the garbage collector's work. Fails with :class:`~evaluation.calling._compat.UnsupportedVersion`
    for a litellm whose private parts :mod:`evaluation.calling._compat` was not written for."""
    global litellm, _UNLOGGED
    if litellm is not None:
        return litellm
    _compat.check_litellm()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    # litellm: seconds to import, only once a judge client is set up
    import litellm as module

    module.suppress_debug_info = True
    module.telemetry = False
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)
    litellm = module
    _register_offline_provider()
    _UNLOGGED = _compat.internal_call_flag()
    gc.freeze()
    return module


@contextlib.contextmanager
def callbacks_restored() -> Iterator[Any]:
    """litellm, set up, with every callback list it keeps put back as it was on leaving: litellm
    copies a callback registered in ``litellm.callbacks`` into its other lists at the next call,
    so restoring that one list alone leaves the callback registered (and the quiet path off)."""
    module = configure()
    saved = {name: list(getattr(module, name)) for name in _compat.CALLBACK_LISTS}
    try:
        yield module
    finally:
        for name, callbacks in saved.items():
            setattr(module, name, callbacks)


def _unlogged() -> ContextVar[bool] | None:
    """litellm's flag that skips its success logging for a call, when nothing would read that
    logging (no callback of any kind registered); None otherwise. That logging costs about a tenth
    of a judge call's CPU (``bench/calling.py``) and changes nothing of the response, its usage, its
    cost or the error mapping (``tests/integration/test_calling.py``)."""
    return None if _compat.has_callbacks(litellm) else _UNLOGGED


# --------------------------------------------------------------------------------------------
# The offline judge as a litellm provider


_OFFLINE_PROVIDER = "offline"


def _register_offline_provider() -> None:
    """Make ``offline/<anything>`` a litellm model (a custom provider) that answers with
    :func:`evaluation.calling.offline.respond`."""
    # litellm: seconds to import, only once a judge client is set up
    from litellm.llms.custom_llm import CustomLLM

    class OfflineProvider(CustomLLM):  # type: ignore[misc]
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            messages = kwargs["messages"]
            text = offline.respond(messages)
            prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
            response = kwargs.get("model_response") or litellm.ModelResponse()
            response.choices = [litellm.Choices(index=0, finish_reason="stop",
                                                message=litellm.Message(content=text, role="assistant"))]
            response.model = kwargs.get("model", "lexical")
            response.usage = litellm.Usage(prompt_tokens=prompt_chars // 4 + 1, completion_tokens=len(text) // 4 + 1,
                                           total_tokens=prompt_chars // 4 + len(text) // 4 + 2)
            return response

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return self.completion(*args, **kwargs)

    entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != _OFFLINE_PROVIDER]
    entries.append({"provider": _OFFLINE_PROVIDER, "custom_handler": OfflineProvider()})
    litellm.custom_provider_map = entries
    if _OFFLINE_PROVIDER not in litellm.provider_list:
        litellm.provider_list.append(_OFFLINE_PROVIDER)  # type: ignore[arg-type]


def supports_json_mode(model: str) -> bool:
    """Whether the provider takes ``response_format={"type": "json_object"}``."""
    if model.startswith(f"{_OFFLINE_PROVIDER}/"):
        return True
    provider = litellm_provider(model)
    if provider is None:  # an unknown model: ask for JSON in the prompt only
        return False
    return "response_format" in (litellm.get_supported_openai_params(model=model, custom_llm_provider=provider) or [])


def supports_response_schema(model: str, structured_output: StructuredOutput = "auto") -> bool:
    """Whether calls of ``model`` send each judge's reply model as a JSON schema: ``on`` and ``off``
    decide; ``auto`` asks litellm whether the provider and model enforce one (an OpenAI-compatible
    server behind ``api_base`` under an unknown model name reads as not: set ``on`` for it). The
    offline judge answers in its exact contract whatever it is sent: never."""
    if structured_output == "off" or model.startswith(f"{_OFFLINE_PROVIDER}/"):
        return False
    if structured_output == "on":
        return True
    provider = litellm_provider(model)
    if provider is None:  # an unknown model: JSON mode at most
        return False
    return bool(litellm.supports_response_schema(model=model, custom_llm_provider=provider))


def litellm_provider(model: str) -> str | None:
    """litellm's provider of ``model``; None for a model it cannot place."""
    found = _compat.if_known(configure().get_llm_provider, model)
    return None if found is None else str(found[1])


def call_parameters(settings: JudgeSettings) -> dict[str, Any]:
    """The parameters of a ledger request hash of the calls ``settings`` make
    (:meth:`~evaluation.contract.judge_settings.JudgeSettings.call_parameters`), with what litellm
    knows of the provider: whether it takes JSON mode, and whether a JSON schema is sent."""
    return settings.call_parameters(
        json_mode=supports_json_mode(settings.judge_model),
        response_schema=supports_response_schema(settings.judge_model, settings.structured_output))


def completion_cost(response: Any, model: str) -> float:
    """Cost from litellm's bundled price map (the price litellm already put on the response, if
    any); 0.0 when the model has no price, and then ``model`` (the name the call was made with) is
    registered at a zero price (see :func:`_price_at_zero`)."""
    hidden = _compat.hidden_params(response)
    known = hidden.get("response_cost") if isinstance(hidden, dict) else getattr(hidden, "response_cost", None)
    if isinstance(known, (int, float)) and not isinstance(known, bool):
        return float(known)
    key = _unpriced_key(response, hidden)
    if key is not None and key in _UNPRICED:
        return 0.0  # litellm could not price a response of this model: it would fail again
    cost = _compat.if_known(litellm.completion_cost, completion_response=response)
    if cost is None and key is not None:
        _UNPRICED.add(key)
        _price_at_zero(model)
    return float(cost or 0.0)


@functools.cache
def _price_at_zero(model: str) -> None:
    """Register ``model`` in litellm's price map at zero cost per token, unless the map knows it
    (once per model).

    litellm prices every response while building it, and for a model missing from the map (most
    self-hosted ones) that search walks every fallback name, about 1.2 ms of CPU a call. With the
    zero entry it stamps 0.0 at once, the cost the failed search gave: costs stay the same."""
    provider = litellm_provider(model)
    if provider is None or _compat.if_known(litellm.get_model_info, model) is not None:
        return  # only a model litellm places but whose price it does not know is registered
    entry = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider, "mode": "chat"}
    litellm.register_model({model: entry}, custom_llm_provider=provider, add_to_provider_model_sets=False)


#: Fingerprints of responses litellm's price map could not price (see :func:`_unpriced_key`).
_UNPRICED: set[tuple[Any, ...]] = set()


def _unpriced_key(response: Any, hidden: Any) -> tuple[Any, ...] | None:
    """What decides whether litellm can price a response (the model names and provider it looks up,
    the price map itself); None without litellm's params on it, or when its usage states its cost."""
    if not isinstance(hidden, dict):
        return None
    usage = getattr(response, "usage", None)
    if getattr(usage, "cost", None) is not None:
        return None
    names = ("custom_llm_provider", "model", "litellm_model_name", "model_id", "api_base", "base_model", "region_name")
    fingerprint = tuple(str(hidden.get(name)) for name in names)
    return (str(getattr(response, "model", None)), fingerprint, id(litellm.model_cost), len(litellm.model_cost))


def count_tokens(model: str, prompt: RenderedPrompt) -> int:
    """Prompt tokens of one rendered prompt by litellm's counter (a default tokenizer if unknown)."""
    return int(configure().token_counter(model=model, messages=prompt.messages))


def price_per_token(model: str) -> tuple[float, float]:
    """(input, output) USD per token from litellm's bundled price map; zeros when unknown."""
    info = _compat.if_known(configure().get_model_info, model) or {}  # an unknown model: no price
    return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0)


def endpoint(model: str, api_base: str | None) -> str:
    """The URL calls of ``model`` go to: ``api_base``, else the provider's default as litellm
    knows it, else a description of it."""
    if api_base:
        return api_base
    provider = litellm_provider(model)
    if provider is None:  # a model litellm cannot place: named as it was given
        return f"the default endpoint of {model}"
    found = litellm.get_api_base(model, {})
    return str(found) if found else f"the {provider} provider's default endpoint"


def credential_variables(model: str) -> list[str]:
    """The environment variables litellm reads the credentials of ``model``'s provider from, as
    its ``validate_environment`` names them when they are not set ([] when all are set, or the
    provider needs none; litellm finds none missing for a model it cannot place)."""
    return [str(name) for name in configure().validate_environment(model).get("missing_keys") or []]


# --------------------------------------------------------------------------------------------
# The client

#: Error classes the probe tries again: the endpoint answered, but is busy.
PROBE_RETRYABLE = frozenset({"rate_limit", "server_error"})


class JudgeClient:
    """Sends judge prompts through litellm with bounded concurrency and bounded retries."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_attempts: int = 4,
        retry_budget_s: float = 120.0,
        temperature: float = 0.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rpm: float | None = None,
        tpm: float | None = None,
        rate_url: str | None = None,
        rate_share: float = 1.0,
        structured_output: StructuredOutput = "auto",
    ) -> None:
        self.model = model
        self.api_base = api_base
        self._api_key = api_key
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.retry_budget_s = retry_budget_s
        self.temperature = temperature
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._sleep = sleep
        # seeded from the OS, not a constant: clients on every worker that meet the same 429 or 5xx
        # burst must not retry in lockstep
        self._rng = random.Random()
        configure()
        self.json_mode = supports_json_mode(model)
        #: whether calls send the judge's reply model as a JSON schema (:func:`supports_response_schema`)
        self.response_schema = supports_response_schema(model, structured_output)
        #: the deployment's requests and tokens per minute: shared through Redis at ``rate_url``,
        #: else divided by ``rate_share`` (the judge tasks that run at once); None: no budget
        self._rate_url = rate_url
        self._rate_share = max(1.0, float(rate_share))
        self.budget: RateBudget | None = judge_budget(model, rpm, tpm, url=rate_url, share=self._rate_share)
        self.limit = AdaptiveLimit(concurrency)
        #: error classes tried again (see :mod:`evaluation.calling.outcome`)
        self.retryable: frozenset[str] = RETRYABLE

    def __repr__(self) -> str:  # never show the key
        return f"JudgeClient(model={self.model!r}, api_base={self.api_base!r}, concurrency={self.concurrency})"

    def call_parameters(self) -> dict[str, Any]:
        """The parameters of a ledger request hash of this client's calls (as :func:`call_parameters`)."""
        return request_parameters(temperature=self.temperature, api_base=self.api_base, json_mode=self.json_mode,
                                  response_schema=self.response_schema)

    def backoff(self, attempt: int) -> float:
        """Wait before attempt ``attempt + 1``: exponential with equal jitter."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2 ** (attempt - 1)))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    async def _attempt(self, prompt: RenderedPrompt, max_tokens: int | None = None) -> Any:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": prompt.messages,
            "temperature": self.temperature,
            "timeout": self.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        reply_format = response_format(prompt, json_mode=self.json_mode, response_schema=self.response_schema)
        if reply_format is not None:
            kwargs["response_format"] = reply_format
        # litellm's timeout covers the HTTP exchange; this one also covers a server that hangs
        # after the headers (a deadline on this task: no extra task per call, as wait_for makes).
        unlogged = _unlogged()
        token = unlogged.set(True) if unlogged is not None else None
        try:
            async with asyncio.timeout(self.timeout_s + 1.0):
                return await litellm.acompletion(**kwargs)
        finally:
            if unlogged is not None and token is not None:
                unlogged.reset(token)

    async def probe(self, *, timeout_s: float, on_wait: Callable[[float], None], every_s: float) -> CallOutcome:
        """One call of a few tokens that tells a usable judge model from one that is not.

        A check, not a judge call: missing or refused credentials, an unknown model, a refused
        connection and silence end it at once (whoever runs the check may try it again later);
        only a reply saying the endpoint is busy (429, 5xx) is tried again. Every attempt and wait
        fits in ``timeout_s``: past it the probe ends as a ``timeout``.
        While no answer has come, ``on_wait`` receives the seconds waited, every ``every_s``."""
        checker = copy.copy(self)
        checker.timeout_s = timeout_s
        checker.retry_budget_s = timeout_s
        checker.retryable = PROBE_RETRYABLE
        checker.limit = AdaptiveLimit(1)
        checker.budget = None
        started = time.monotonic()
        call = asyncio.ensure_future(checker.call(PROBE_PROMPT, max_tokens=8))
        while True:
            waited = time.monotonic() - started
            done, _ = await asyncio.wait({call}, timeout=max(0.0, min(every_s, timeout_s + 1.0 - waited)))
            if done:
                return call.result()
            waited = time.monotonic() - started
            if waited >= timeout_s + 1.0:  # a hang past the attempt's own deadline: end it here
                call.cancel()
                return self._failure("timeout", f"timeout (no answer within {timeout_s:g}s)", 1, started)
            on_wait(waited)

    async def call(self, prompt: RenderedPrompt, *, max_tokens: int | None = None) -> CallOutcome:
        """One judge call with retries; never raises for a provider or network failure."""
        outcome = await self._call(prompt, max_tokens, None)
        assert outcome is not None  # nothing stops a call without should_stop
        return outcome

    async def _call(self, prompt: RenderedPrompt, max_tokens: int | None,
                    should_stop: Callable[[], bool] | None) -> CallOutcome | None:
        """:meth:`call`, each attempt holding a slot of the adaptive limit and, with a budget, its
        reservation; None when ``should_stop`` said so before the first attempt."""
        limit = self.limit
        started = 0.0
        attempts = 0
        prompt_tokens = estimate_tokens(prompt.messages)
        while True:
            epoch = await limit.acquire(retry=attempts > 0)
            if attempts == 0 and should_stop is not None and should_stop():
                limit.release()
                return None
            attempts += 1
            budget = self.budget
            reserved = 0
            if budget is not None:
                reserved = budget.expected_tokens(prompt_tokens, max_tokens)
                await budget.acquire(reserved)
            if attempts == 1:
                started = time.monotonic()  # the call's time (and its retry budget) from its first send
            try:
                response = await self._attempt(prompt, max_tokens)
            except Exception as exc:  # classified below; nothing escapes a call
                error_class = classify_error(exc)
                delay = retry_after_seconds(exc)
                if error_class == "rate_limit":
                    limit.throttled(epoch, is_callers_rate(rate_limit_headers(exc, "remaining"), prompt_tokens))
                    if self.budget is None:
                        self._learn_budget(exc)
                limit.release()
                elapsed = time.monotonic() - started
                if error_class not in self.retryable:
                    why = "not retried"
                elif attempts >= self.max_attempts:
                    why = f"retries exhausted after {attempts} attempts"
                else:
                    delay = self.backoff(attempts) if delay is None else delay + self._rng.uniform(0, 0.1)
                    if error_class == "rate_limit" and attempts > 1:  # this request's 429s again: it backs off
                        delay = max(delay, self.backoff(attempts))
                    if elapsed + delay <= self.retry_budget_s:
                        logger.debug("retrying %s after %s in %.2fs (attempt %d)", prompt.judge, error_class, delay, attempts)
                        await self._sleep(delay)
                        continue
                    why = f"retry budget of {self.retry_budget_s:g}s exhausted after {attempts} attempts"
                error = f"{error_class} ({why}): {error_message(exc, self._api_key)}"
                return self._failure(error_class, error, attempts, started)
            limit.release()
            outcome = self._success(response, attempts, started)
            if budget is not None:
                budget.settle(reserved, outcome.input_tokens + outcome.output_tokens, outcome.output_tokens)
            return outcome

    def _learn_budget(self, exc: BaseException) -> None:
        """Take the provider's limits from a 429's ``x-ratelimit-limit-*`` headers as this client's
        budget, when it has none."""
        limits = {kind: value for kind, value in rate_limit_headers(exc).items() if value > 0}
        rpm, tpm = limits.get("requests"), limits.get("tokens")
        if rpm or tpm:
            logger.info("judge model %s: rate limits learned from a 429", self.model)
            self.budget = judge_budget(self.model, rpm, tpm, url=self._rate_url, share=self._rate_share)

    def _success(self, response: Any, attempts: int, started: float) -> CallOutcome:
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            return self._failure("other", "other (not retried): the provider returned no choices", attempts, started)
        usage = getattr(response, "usage", None)
        try:
            cost = completion_cost(response, self.model)
        except Exception as exc:  # the reply is paid for and kept; the failure is logged, its cost counted 0
            logger.warning("judge model %s: litellm could not price a reply (counted at 0 USD): %s", self.model, exc)
            cost = 0.0
        return CallOutcome(
            raw_text=text if isinstance(text, str) else "",
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
            latency_ms=round((time.monotonic() - started) * 1000.0, 1),
            attempts=attempts,
            judged_at=dt.datetime.now(dt.UTC),
        )

    @staticmethod
    def _failure(error_class: str, error: str, attempts: int, started: float) -> CallOutcome:
        return failed(error_class, error, round((time.monotonic() - started) * 1000.0, 1), attempts)

    async def call_many(
        self,
        prompts: Sequence[RenderedPrompt],
        on_done: Callable[[int, CallOutcome], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[CallOutcome | None]:
        """All prompts, at most ``concurrency`` in flight. ``should_stop`` (checked before each
        call starts, e.g. a spent budget) leaves the remaining entries as None."""
        results: list[CallOutcome | None] = [None] * len(prompts)

        async def one(index: int, prompt: RenderedPrompt) -> None:
            outcome = await self._call(prompt, None, should_stop)
            if outcome is not None:
                results[index] = outcome
                if on_done is not None:
                    on_done(index, outcome)

        try:
            await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
        finally:
            if isinstance(self.budget, SharedBudget):  # its connections belong to this event loop
                await self.budget.aclose()
        return results


def judge_client(settings: JudgeSettings, api_key: str | None) -> JudgeClient:
    """The client of a judge's settings (a run's, a comparison's, a calibration's, a cascade level's:
    :meth:`~evaluation.contract.judge_settings.JudgeSettings.client_kwargs`). Its rate budget is the
    deployment's: shared through Redis, or divided by the judge tasks that run at once
    (:func:`evaluation.calling.fleetrate.rate_settings`)."""
    rate_url, rate_share = rate_settings()
    return JudgeClient(**settings.client_kwargs(), api_key=api_key, rate_url=rate_url, rate_share=rate_share)
