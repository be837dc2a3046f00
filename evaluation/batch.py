"""Batch mode: a judge chunk's calls sent as one provider batch (the OpenAI batch API, through litellm).

A chunk in batch mode uploads one JSONL file (a line per request the ledger does not hold:
``custom_id`` is the ledger's request hash, ``body`` the chat-completions body an online call would
send), creates a batch on ``/v1/chat/completions`` with a 24 h completion window, waits for it, and
downloads its output and error files. Every result line becomes the same
:class:`~evaluation.outcome.CallOutcome` an online call would: a reply, or a failure with its error
class. A batch that expires or is cancelled keeps the lines it finished; the missing ones are
submitted again until ``batch_deadline_h`` after the chunk's first batch, then end as ``timeout``.

The batch ids are kept with the chunk in the run's output store (``_work/.../batch/chunk-N.json``)
as soon as a batch is created, before any wait: a task that is retried, or a process that died,
finds them and waits for the batches already paid for instead of submitting them again.

Costs are litellm's batch prices (``input_cost_per_token_batches`` / ``output_cost_per_token_batches``
in its price map) where it has them, else its online prices (and a log line says so).

litellm is reached through :func:`evaluation.client.configure` (the one place that imports it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from evaluation import storage
from evaluation.contract import RunConfig
from evaluation.judges import RenderedPrompt
from evaluation.judges.schema import response_format
from evaluation.outcome import CallOutcome, status_error_class

logger = logging.getLogger(__name__)

#: litellm providers whose batch API takes OpenAI's JSONL of chat-completions bodies.
BATCH_PROVIDERS: tuple[str, ...] = ("openai", "azure")
#: Batch states after which nothing changes.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
#: Error codes of result lines that were never run (submitted again, not failures).
NOT_RUN = frozenset({"batch_expired", "batch_cancelled"})
COMPLETION_WINDOW = "24h"
ENDPOINT = "/v1/chat/completions"


class BatchUnsupported(ValueError):
    """The judge model's provider has no batch API."""


def _litellm() -> Any:
    from evaluation.client import configure

    return configure()


def provider_of(model: str) -> str:
    """litellm's provider of a model string (``openai/gpt-4o-mini`` → ``openai``)."""
    if model.startswith("offline/"):
        return "offline"
    try:
        _, provider, _, _ = _litellm().get_llm_provider(model)
    except Exception:
        return model.split("/", 1)[0] if "/" in model else "unknown"
    return str(provider)


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
    litellm = _litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return 0.0, 0.0, False
    batch_in, batch_out = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
    if batch_in is not None and batch_out is not None:
        return float(batch_in), float(batch_out), True
    return float(info.get("input_cost_per_token") or 0.0), float(info.get("output_cost_per_token") or 0.0), False


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
    """The error class of a failed result line, as :func:`evaluation.outcome.classify_error` names them."""
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


def state_key(cfg: RunConfig, index: int) -> str:
    """Where a chunk's batches are kept, beside its staged parquet."""
    return storage.work_key(cfg.date, cfg.run_id, f"batch/chunk-{index:05d}.json")


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
        created = await _litellm().acreate_file(file=(name, data, "application/jsonl"), purpose="batch",
                                                **self._kwargs)
        return str(created.id)

    async def create(self, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        """Create a batch of the uploaded file."""
        batch = await _litellm().acreate_batch(completion_window=COMPLETION_WINDOW, endpoint=ENDPOINT,
                                               input_file_id=input_file_id, metadata=metadata, **self._kwargs)
        return _as_dict(batch)

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch's current state."""
        return _as_dict(await _litellm().aretrieve_batch(batch_id=batch_id, **self._kwargs))

    async def content(self, file_id: str) -> bytes:
        """A file's bytes (a batch's output or error file)."""
        response = await _litellm().afile_content(file_id=file_id, **self._kwargs)
        data = getattr(response, "content", response)
        return data if isinstance(data, bytes) else str(data).encode()


def _as_dict(batch: Any) -> dict[str, Any]:
    if isinstance(batch, dict):
        return batch
    if hasattr(batch, "model_dump"):
        return dict(batch.model_dump())
    return dict(vars(batch))


class ChunkBatch:
    """The batches of one judge chunk: submitted once, kept with the chunk, collected when they end.

    ``requests`` maps request hashes to the prompts still to be judged (what the ledger does not
    hold). :meth:`advance` does one round (look at the live batches, collect the ended ones, submit
    what is missing) and returns the ids still to wait for; :meth:`wait` repeats it every
    ``batch_poll_s`` until none is left; :meth:`outcomes` then gives one outcome per request."""

    def __init__(self, cfg: RunConfig, stores: Any, index: int, requests: dict[str, RenderedPrompt], *,
                 api_key: str | None, parameters: dict[str, Any]) -> None:
        self.cfg = cfg
        self.store = stores.out
        self.index = index
        self.requests = requests
        self.parameters = parameters
        self.api = BatchApi(cfg.judge_model, api_base=cfg.api_base, api_key=api_key, timeout_s=max(cfg.timeout_s, 60.0))
        self.key = state_key(cfg, index)
        self.state: dict[str, Any] = self._load()
        self._results: dict[str, Any] = {}
        self._collected: set[str] = set()
        self.prices = batch_prices(cfg.judge_model)
        if cfg.budget_usd is not None:
            logger.warning("%s: budget_usd %s does not stop a batch: a chunk's batch is submitted whole",
                           cfg.run_id, cfg.budget_usd)
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

    @property
    def batch_ids(self) -> list[str]:
        """Every batch this chunk submitted, in order."""
        return [b["id"] for b in self.state["batches"]]

    def _deadline_passed(self) -> bool:
        first = self.state.get("first_submitted_at")
        return first is not None and time.time() > float(first) + self.cfg.batch_deadline_h * 3600.0

    async def advance(self) -> list[str]:
        """One round; returns the ids of the batches still running (empty: every request has an outcome)."""
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
        covered = set(self._results)
        for entry in self.state["batches"]:
            if entry["id"] in live:
                covered.update(entry["hashes"])
        missing = [h for h in self.requests if h not in covered]
        if missing:
            if self.state["batches"] and self._deadline_passed():
                for digest in missing:
                    self._results[digest] = _failure(
                        "timeout", f"timeout (not retried): no batch result within batch_deadline_h="
                        f"{self.cfg.batch_deadline_h:g} of the chunk's first batch", 0.0)
            else:
                live.append(await self._submit(missing))
        return live

    async def wait(self, on_status: Callable[[str], None] | None = None) -> dict[str, Any]:
        """:meth:`advance` every ``batch_poll_s`` until nothing is left to wait for (the CLI's way)."""
        while True:
            live = await self.advance()
            if not live:
                return self.outcomes()
            if on_status is not None:
                on_status(self.describe())
            await asyncio.sleep(self.cfg.batch_poll_s)

    def describe(self) -> str:
        """A progress line: each live batch's state and its finished lines."""
        parts = []
        for entry in self.state["batches"]:
            counts = entry.get("counts") or {}
            parts.append(f"batch {entry['id']} {entry['status']}: {counts.get('completed', 0)} done, "
                         f"{counts.get('failed', 0)} failed of {len(entry['hashes'])}")
        return "; ".join(parts)

    def outcomes(self) -> dict[str, Any]:
        """One outcome per request (call once :meth:`advance` returned no live batch)."""
        missing = [h for h in self.requests if h not in self._results]
        if missing:
            raise RuntimeError(f"chunk {self.index}: {len(missing)} requests have no batch result yet")
        return {h: self._results[h] for h in self.requests}

    async def _submit(self, hashes: list[str]) -> str:
        json_mode = bool(self.parameters.get("json_mode"))
        temperature = float(self.parameters.get("temperature", self.cfg.temperature))
        schema = self.parameters.get("response_format") == "json_schema"
        lines = [request_line(self.cfg.judge_model, self.requests[h], h, temperature=temperature, json_mode=json_mode,
                              response_schema=schema) for h in hashes]
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
        name = f"{storage.safe_id(self.cfg.run_id)}-chunk{self.index:05d}-{len(self.state['batches'])}.jsonl"
        file_id = await self.api.upload(name, data)
        created = await self.api.create(file_id, {"run_id": self.cfg.run_id[:500], "chunk": str(self.index)})
        now = time.time()
        batch_id = str(created["id"])
        entry = {"id": batch_id, "input_file_id": file_id, "status": str(created.get("status") or "validating"),
                 "submitted_at": now, "hashes": hashes, "counts": _counts(created)}
        self.state["batches"].append(entry)
        if self.state.get("first_submitted_at") is None:
            self.state["first_submitted_at"] = now
        self._save()  # before any wait: a retry or a restart resumes this batch instead of paying again
        logger.info("%s chunk %d: submitted batch %s of %d requests (%s)", self.cfg.judge_model, self.index,
                    batch_id, len(hashes), name)
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
                if outcome is not None and (digest not in self._results or outcome.ok):
                    self._results[digest] = outcome
        if entry["status"] == "failed":  # the whole batch was refused (e.g. its file did not validate)
            for digest in ours - set(self._results):
                self._results[digest] = _failure("bad_request", f"bad_request (not retried): batch {entry['id']} "
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
                return _failure("other", "other (not retried): the provider returned no choices", latency_ms)
            usage = body.get("usage") or {}
            tokens_in, tokens_out = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            price_in, price_out, _ = self.prices
            return CallOutcome(raw_text=text if isinstance(text, str) else "", input_tokens=tokens_in,
                               output_tokens=tokens_out, cost_usd=tokens_in * price_in + tokens_out * price_out,
                               latency_ms=latency_ms, attempts=1, judged_at=dt.datetime.now(dt.UTC))
        detail = error or (body.get("error") if isinstance(body, dict) else None) or {}
        code, message = detail.get("code"), detail.get("message") or detail.get("type") or f"HTTP {status}"
        kind = error_class(status, code, message)
        return _failure(kind, f"{kind} (batch line): {' '.join(str(message).split())[:300]}", latency_ms)


def _failure(kind: str, message: str, latency_ms: float) -> CallOutcome:
    return CallOutcome(raw_text=None, error=message, error_class=kind, latency_ms=latency_ms, attempts=1,
                       judged_at=dt.datetime.now(dt.UTC))


def _counts(info: dict[str, Any]) -> dict[str, int]:
    counts = _as_dict(info.get("request_counts") or {})
    return {k: int(counts.get(k) or 0) for k in ("total", "completed", "failed")}


def _batch_errors(info: dict[str, Any]) -> str | None:
    errors = info.get("errors")
    if not errors:
        return None
    data = errors.get("data") if isinstance(errors, dict) else getattr(errors, "data", None)
    messages = [str(e.get("message") if isinstance(e, dict) else getattr(e, "message", e)) for e in (data or [])]
    return "; ".join(messages) or str(errors)


async def batches_ended(model: str, batch_ids: list[str], *, api_base: str | None, api_key: str | None) -> bool:
    """Whether every batch has ended (what the Airflow trigger polls)."""
    api = BatchApi(model, api_base=api_base, api_key=api_key)
    for batch_id in batch_ids:
        if (await api.retrieve(batch_id)).get("status") not in TERMINAL:
            return False
    return True
