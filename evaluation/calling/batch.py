"""Batch mode: a judge chunk's calls sent as provider batches (the OpenAI batch API, through litellm).

A chunk uploads a JSONL file per batch (a line per request the ledger does not hold: ``custom_id``
is the ledger's request hash, ``body`` the chat-completions body an online call would send), split
within one batch's limits (:data:`PROVIDER_LIMITS`), keeps the batch ids with the chunk in the run's
output store as soon as each is created (a retried task resumes them instead of paying again), and
turns every result line into the :class:`~evaluation.calling.outcome.CallOutcome` an online call would
give. Lines not run or failed for a transient reason go again in follow-up batches until
``batch_deadline_h``; ``budget_usd`` is spent ahead, before the first batch. The rules, the prices and
the budget: docs/batch.md. litellm is reached through :func:`evaluation.calling.client.configure`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from evaluation import storage
from evaluation.calling import _compat
from evaluation.calling.client import configure, count_tokens, litellm_provider, price_per_token
from evaluation.calling.cost import reply_tokens, tokens_cost
from evaluation.calling.outcome import RETRYABLE, CallOutcome, failed, status_error_class
from evaluation.contract.config import RunConfig
from evaluation.contract.errors import ConfigurationError
from evaluation.judges import RenderedPrompt
from evaluation.judges.schema import response_format

logger = logging.getLogger(__name__)

#: litellm providers whose batch API takes OpenAI's JSONL of chat-completions bodies.
BATCH_PROVIDERS: tuple[str, ...] = ("openai", "azure")
#: Batch states after which nothing changes.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
#: Error codes of result lines that were never run (submitted again, not failures).
NOT_RUN = frozenset({"batch_expired", "batch_cancelled"})
COMPLETION_WINDOW = "24h"
ENDPOINT = "/v1/chat/completions"
MB = 1_000_000


@dataclass(frozen=True)
class BatchLimits:
    """What one provider batch may hold: requests, and bytes of its input file."""

    max_requests: int
    max_bytes: int


#: One batch's limits per litellm provider, from the providers' documentation (2026). They change:
#: the ``batch_max_requests`` / ``batch_max_bytes`` options override them.
PROVIDER_LIMITS: dict[str, BatchLimits] = {
    "openai": BatchLimits(50_000, 200 * MB),
    "azure": BatchLimits(50_000, 200 * MB),  # Azure OpenAI's global batch takes OpenAI's file format and limits
    "anthropic": BatchLimits(100_000, 256 * MB),  # Message Batches
}
#: Any other provider (vertex_ai, bedrock, ...): below what each documents today (Vertex AI and
#: Bedrock take more per job, Bedrock 50,000 records by default quota), conservative on purpose.
DEFAULT_LIMITS = BatchLimits(10_000, 100 * MB)


class BatchUnsupported(ConfigurationError, ValueError):
    """The judge model's provider has no batch API."""


def provider_of(model: str) -> str:
    """litellm's provider of a model string (``openai/gpt-4o-mini`` → ``openai``)."""
    if model.startswith("offline/"):
        return "offline"
    found = litellm_provider(model)
    if found is None:  # a model litellm cannot place: its prefix
        return model.split("/", 1)[0] if "/" in model else "unknown"
    return found


def require_batches(model: str) -> str:
    """The model's provider when it has a batch API; raises :class:`BatchUnsupported` otherwise."""
    provider = provider_of(model)
    if provider not in BATCH_PROVIDERS:
        raise BatchUnsupported(
            f"batch mode needs a provider with a batch API: judge model {model!r} is served by {provider!r}, "
            f"which has none here; batches are supported for {', '.join(BATCH_PROVIDERS)} "
            "(or turn batch off)")
    return provider


def batch_prices(model: str) -> tuple[float, float, bool]:
    """(input, output) USD per token of a batch request, and whether they are litellm's batch
    prices (True) or its online ones (False, when it has no batch price for the model)."""
    info = _compat.if_known(configure().get_model_info, model) or {}  # an unknown model: no price
    batch_in, batch_out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    if batch_in is not None and batch_out is not None:
        return float(batch_in), float(batch_out), True
    return *price_per_token(model), False


def request_line(model: str, prompt: RenderedPrompt, custom_id: str, *, temperature: float,
                 json_mode: bool, response_schema: bool = False) -> dict[str, Any]:
    """One line of a batch's input file: the body an online call of ``prompt`` would send."""
    name = model.split("/", 1)[1] if "/" in model else model
    body: dict[str, Any] = {"model": name, "messages": prompt.messages, "temperature": temperature}
    reply_format = response_format(prompt, json_mode=json_mode, response_schema=response_schema)
    if reply_format is not None:
        body["response_format"] = reply_format
    return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}


def error_class(status: int | None, code: str | None = None, message: str | None = None) -> str:
    """The error class of a failed result line, as :func:`evaluation.calling.outcome.classify_error` names them."""
    text = f"{code or ''} {message or ''}"
    if status == 429 or code == "rate_limit_exceeded":
        return status_error_class(429, text) or "rate_limit"
    if "timeout" in text.lower():
        return "timeout"
    if status is not None and (by_status := status_error_class(status, text)) is not None:
        return by_status
    if code == "server_error":
        return "server_error"
    if code in ("invalid_request", "invalid_request_error", "model_not_found"):
        return "bad_request"
    return "other"


def limits_for(cfg: RunConfig, provider: str) -> BatchLimits:
    """One batch's limits for ``provider``: the known ones, each replaced by its option when set (> 0)."""
    known = PROVIDER_LIMITS.get(provider, DEFAULT_LIMITS)
    return BatchLimits(cfg.batch_max_requests or known.max_requests, cfg.batch_max_bytes or known.max_bytes)


def split_parts(sizes: list[int], limits: BatchLimits) -> tuple[list[list[int]], list[int]]:
    """Positions of lines (``sizes``: each line's bytes, newline included) packed in order into parts
    within ``limits``, and the positions of lines larger than a whole batch may be."""
    parts: list[list[int]] = []
    too_large: list[int] = []
    current: list[int] = []
    used = 0
    for position, size in enumerate(sizes):
        if size > limits.max_bytes:
            too_large.append(position)
            continue
        if current and (len(current) >= limits.max_requests or used + size > limits.max_bytes):
            parts.append(current)
            current, used = [], 0
        current.append(position)
        used += size
    if current:
        parts.append(current)
    return parts, too_large


def state_key(cfg: RunConfig, index: int, level: int | None = None) -> str:
    """Where a chunk's batches are kept, beside its staged parquet (a cascade's level's apart)."""
    suffix = "" if level is None else f"-level{level}"
    return storage.work_key(cfg.date, cfg.run_id, f"batch/chunk-{index:05d}{suffix}.json")


class BatchApi:
    """The provider's batch API through litellm (files, batches, file contents)."""

    def __init__(self, model: str, *, api_base: str | None, api_key: str | None, timeout_s: float = 600.0) -> None:
        self.model = model
        self.provider = require_batches(model)
        self._kwargs: dict[str, Any] = {"custom_llm_provider": self.provider, "timeout": timeout_s}
        if api_base:
            self._kwargs["api_base"] = api_base
        if api_key:
            self._kwargs["api_key"] = api_key

    def __repr__(self) -> str:  # never show the key
        return f"BatchApi(model={self.model!r}, provider={self.provider!r})"

    async def upload(self, name: str, data: bytes) -> str:
        """Upload a batch input file; returns its id."""
        created = await configure().acreate_file(file=(name, data, "application/jsonl"), purpose="batch",
                                                 **self._kwargs)
        return str(created.id)

    async def create(self, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        batch = await configure().acreate_batch(completion_window=COMPLETION_WINDOW, endpoint=ENDPOINT,
                                                input_file_id=input_file_id, metadata=metadata, **self._kwargs)
        return dict(batch.model_dump())

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch's current state."""
        return dict((await configure().aretrieve_batch(batch_id=batch_id, **self._kwargs)).model_dump())

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        response = await configure().afile_content(file_id=file_id, **self._kwargs)
        data = getattr(response, "content", response)
        return data if isinstance(data, bytes) else str(data).encode()


class ChunkBatch:
    """The batches of one judge chunk: submitted once, kept with the chunk, collected when they end.

    ``requests`` maps request hashes to the prompts still to be judged (what the ledger does not
    hold); ``budget`` is the chunk's share of ``budget_usd``. :meth:`advance` (or :meth:`wait`, until
    nothing is left), then :meth:`outcomes`."""

    def __init__(self, cfg: RunConfig, stores: Any, index: int, requests: dict[str, RenderedPrompt], *,
                 api_key: str | None, parameters: dict[str, Any], level: int | None = None,
                 budget: float | None = None) -> None:
        self.cfg = cfg
        self.store = stores.out
        self.index = index
        self.requests = requests
        self.parameters = parameters
        self.api = BatchApi(cfg.judge_model, api_base=cfg.api_base, api_key=api_key, timeout_s=max(cfg.timeout_s, 60.0))
        self.key = state_key(cfg, index, level)
        self.limits = limits_for(cfg, self.api.provider)
        self.state: dict[str, Any] = self._load()
        self._results: dict[str, CallOutcome] = {}
        #: The last transient failure of a request no batch has answered yet (submitted again).
        self._transient: dict[str, CallOutcome] = {}
        #: How many times each request was run (result lines other than "not run").
        self._runs: Counter[str] = Counter()
        self._collected: set[str] = set()
        self.prices = batch_prices(cfg.judge_model)
        self.budget = budget
        if not self.prices[2]:
            logger.info("%s: litellm has no batch price for %s: batch calls are costed at its online price "
                        "(%g / %g USD per token)", cfg.judge_model, cfg.judge_model, self.prices[0], self.prices[1])

    def _load(self) -> dict[str, Any]:
        if self.store.exists(self.key):
            state = storage.read_json(self.store, self.key)
            logger.info("chunk %d: resuming %d batch(es) already submitted: %s", self.index, len(state["batches"]),
                        ", ".join(b["id"] for b in state["batches"]))
            return dict(state)
        return {"chunk": self.index, "judge_model": self.cfg.judge_model, "first_submitted_at": None, "batches": []}

    def _save(self) -> None:
        storage.write_json(self.store, self.key, self.state)

    def _over_budget(self) -> list[str]:
        """The requests the chunk's budget is not expected to pay for: those after the first whose
        expected cost would take the total past it (in order, as an online run stops)."""
        prices = self.prices[:2]
        if self.budget is None:
            return []
        if prices == (0.0, 0.0):
            logger.warning("%s: budget_usd %s has no effect: litellm's price map has no price for %s",
                           self.cfg.run_id, self.cfg.budget_usd, self.cfg.judge_model)
            return []
        expected, hashes = 0.0, list(self.requests)
        for position, digest in enumerate(hashes):
            prompt = self.requests[digest]
            expected += tokens_cost(count_tokens(self.cfg.judge_model, prompt), reply_tokens(prompt.judge), prices)
            if expected > self.budget:
                logger.warning("%s chunk %d: budget %.4f USD (its share of budget_usd) is expected to pay for %d of "
                               "%d requests: the other %d are not submitted (skipped, budget_exhausted)",
                               self.cfg.judge_model, self.index, self.budget, position, len(hashes),
                               len(hashes) - position)
                return hashes[position:]
        return []

    @property
    def over_budget(self) -> set[str]:
        """The requests not submitted for the budget (decided before the first batch, kept)."""
        return set(self.state.get("over_budget") or ())

    async def advance(self) -> list[str]:
        """One round; returns the ids of the batches still running (empty: every request has an outcome)."""
        if "over_budget" not in self.state and not self.state["batches"]:
            self.state["over_budget"] = self._over_budget()
            self._save()  # before any batch: a resumed chunk submits the same requests
        live: list[str] = []
        changed = False
        for entry in self.state["batches"]:
            if entry["status"] not in TERMINAL:
                info = await self.api.retrieve(entry["id"])
                if info.get("status") != entry["status"]:
                    entry["status"] = str(info.get("status"))
                    changed = True
                entry["counts"] = _counts(info)
                if entry["status"] not in TERMINAL:
                    live.append(entry["id"])
                    continue
                entry["output_file_id"] = info.get("output_file_id")
                entry["error_file_id"] = info.get("error_file_id")
                entry["errors"] = _batch_errors(info)
                entry["ended_at"] = time.time()
            if entry["id"] not in self._collected:
                await self._collect(entry)
        if changed:
            self._save()
        covered = set(self._results) | self.over_budget
        for entry in self.state["batches"]:
            if entry["id"] in live:
                covered.update(entry["hashes"])
        missing = []
        for digest in (h for h in self.requests if h not in covered):
            if self._runs[digest] >= self.cfg.max_attempts and digest in self._transient:
                self._results[digest] = self._transient[digest]  # ran max_attempts times: its last failure
            else:
                missing.append(digest)
        if missing:
            first = self.state.get("first_submitted_at")  # set with the first batch
            if first is not None and time.time() > float(first) + self.cfg.batch_deadline_h * 3600.0:
                for digest in missing:
                    self._results[digest] = self._transient.get(digest) or failed(
                        "timeout", f"timeout (not retried): no batch result within batch_deadline_h="
                        f"{self.cfg.batch_deadline_h:g} of the chunk's first batch", 0.0)
            else:
                live.extend(await self._submit(missing))
        return live

    async def wait(self, on_status: Callable[[str], None]) -> dict[str, CallOutcome | None]:
        """:meth:`advance` every ``batch_poll_s`` until nothing is left to wait for (the CLI's way)."""
        while True:
            live = await self.advance()
            if not live:
                return self.outcomes()
            on_status(self.describe())
            await asyncio.sleep(self.cfg.batch_poll_s)

    def describe(self) -> str:
        """A progress line: the batch's state (or the parts' states) and the finished lines."""
        entries = self.state["batches"]
        done = sum(int((e.get("counts") or {}).get("completed", 0)) for e in entries)
        failed = sum(int((e.get("counts") or {}).get("failed", 0)) for e in entries)
        total = sum(len(e["hashes"]) for e in entries)
        if len(entries) == 1:
            head = f"batch {entries[0]['id']} {entries[0]['status']}"
        else:
            states = Counter(str(e["status"]) for e in entries)
            head = f"{len(entries)} batches " + ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        return f"{head}: {done} done, {failed} failed of {total}"

    def outcomes(self) -> dict[str, CallOutcome | None]:
        """One outcome per request (call once :meth:`advance` returned no live batch); ``attempts``
        is how many times the request was run; None for a request not submitted for the budget."""
        skipped = self.over_budget
        missing = [h for h in self.requests if h not in self._results and h not in skipped]
        if missing:
            raise RuntimeError(f"chunk {self.index}: {len(missing)} requests have no batch result yet")
        return {h: None if h in skipped else replace(self._results[h], attempts=self._runs[h] or self._results[h].attempts)
                for h in self.requests}

    async def _submit(self, hashes: list[str]) -> list[str]:
        """Submit ``hashes`` as one or more provider batches within :attr:`limits`; returns their ids."""
        json_mode = bool(self.parameters.get("json_mode"))
        temperature = float(self.parameters.get("temperature", self.cfg.temperature))
        schema = self.parameters.get("response_format") == "json_schema"
        encoded = [(json.dumps(request_line(self.cfg.judge_model, self.requests[h], h, temperature=temperature,
                                            json_mode=json_mode, response_schema=schema), ensure_ascii=False)
                    + "\n").encode("utf-8")
                   for h in hashes]
        parts, too_large = split_parts([len(line) for line in encoded], self.limits)
        for position in too_large:
            self._results[hashes[position]] = failed(
                "bad_request", f"bad_request (not retried): the request is {len(encoded[position])} bytes, more than "
                f"one batch may hold (batch_max_bytes={self.limits.max_bytes})", 0.0)
        round_number = 1 + max((int(e.get("round", 1)) for e in self.state["batches"]), default=0)
        if len(parts) > 1:
            logger.info("%s chunk %d: %d requests split into %d batches (at most %d requests and %d bytes each)",
                        self.cfg.judge_model, self.index, len(hashes), len(parts), self.limits.max_requests,
                        self.limits.max_bytes)
        return [await self._submit_part([hashes[p] for p in part], b"".join(encoded[p] for p in part), round_number)
                for part in parts]

    async def _submit_part(self, hashes: list[str], data: bytes, round_number: int) -> str:
        name = f"{storage.safe_id(self.cfg.run_id)}-chunk{self.index:05d}-{len(self.state['batches'])}.jsonl"
        file_id = await self.api.upload(name, data)
        created = await self.api.create(file_id, {"run_id": self.cfg.run_id[:500], "chunk": str(self.index)})
        now = time.time()
        batch_id = str(created["id"])
        entry = {"id": batch_id, "input_file_id": file_id, "status": str(created.get("status") or "validating"),
                 "submitted_at": now, "round": round_number, "bytes": len(data), "hashes": hashes,
                 "counts": _counts(created)}
        self.state["batches"].append(entry)
        if self.state.get("first_submitted_at") is None:
            self.state["first_submitted_at"] = now
        self._save()  # before the next part and any wait: a retry or a restart resumes it instead of paying again
        logger.info("%s chunk %d: submitted batch %s of %d requests, %d bytes (%s)", self.cfg.judge_model,
                    self.index, batch_id, len(hashes), len(data), name)
        return batch_id

    async def _collect(self, entry: dict[str, Any]) -> None:
        """Turn an ended batch's output and error lines into outcomes (lines never run are left out)."""
        latency_ms = round((float(entry.get("ended_at") or time.time()) - float(entry["submitted_at"])) * 1000.0, 1)
        ours = set(entry["hashes"])
        for key in ("output_file_id", "error_file_id"):
            file_id = entry.get(key)
            if not file_id:
                continue
            text = (await self.api.content(file_id)).decode("utf-8")
            for raw in text.splitlines():
                if not raw.strip():
                    continue
                line = json.loads(raw)
                digest = line.get("custom_id")
                if digest not in ours:
                    continue
                outcome = self._outcome(line, latency_ms)
                if outcome is None:  # never run: submitted again
                    continue
                self._runs[digest] += 1
                if outcome.error_class in RETRYABLE:
                    self._transient[digest] = outcome  # submitted again, up to max_attempts runs
                elif digest not in self._results or outcome.ok:
                    self._results[digest] = outcome
        if entry["status"] == "failed":  # the whole batch was refused (e.g. its file did not validate)
            for digest in ours - set(self._results):
                self._results[digest] = failed("bad_request", f"bad_request (not retried): batch {entry['id']} "
                                                 f"failed: {entry.get('errors') or 'no reason given'}", latency_ms)
        self._collected.add(entry["id"])

    def _outcome(self, line: dict[str, Any], latency_ms: float) -> CallOutcome | None:
        response = line.get("response") or {}
        error = line.get("error") or {}
        status = response.get("status_code")
        body = response.get("body") or {}
        if error and error.get("code") in NOT_RUN:
            return None
        if status == 200 and not error:
            try:
                text = body["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                return failed("other", "other (not retried): the provider returned no choices", latency_ms)
            usage = body.get("usage") or {}
            tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            return CallOutcome(raw_text=text if isinstance(text, str) else "", input_tokens=tokens_in,
                               output_tokens=tokens_out, cost_usd=tokens_cost(tokens_in, tokens_out, self.prices[:2]),
                               latency_ms=latency_ms, attempts=1, judged_at=dt.datetime.now(dt.UTC))
        detail = error or (body.get("error") if isinstance(body, dict) else None) or {}
        code, message = detail.get("code"), detail.get("message") or detail.get("type") or f"HTTP {status}"
        kind = error_class(status, code, message)
        return failed(kind, f"{kind} (batch line): {' '.join(str(message).split())[:300]}", latency_ms)


def _counts(info: dict[str, Any]) -> dict[str, int]:
    counts = info.get("request_counts") or {}
    return {k: int(counts.get(k) or 0) for k in ("total", "completed", "failed")}


def _batch_errors(info: dict[str, Any]) -> str | None:
    errors = info.get("errors")
    if not errors:
        return None
    messages = [str(e.get("message")) for e in (errors.get("data") or [])]
    return "; ".join(messages) or str(errors)


async def batches_ended(model: str, batch_ids: list[str], *, api_base: str | None, api_key: str | None) -> bool:
    """Whether every batch has ended (what the Airflow trigger polls)."""
    api = BatchApi(model, api_base=api_base, api_key=api_key)
    for batch_id in batch_ids:
        if (await api.retrieve(batch_id)).get("status") not in TERMINAL:
            return False
    return True
