"""Judging one chunk at one judge model: :func:`prepare_chunk` renders its prompts and asks the
ledger what is already paid for, a caller sends the rest (online through the judge client,
:func:`call_online`, or as provider batches, :func:`chunk_batch`), and :func:`finish_chunk` turns
every outcome into a ledger entry, a ``judge_calls`` row and a parsed row. Online and batch mode
share everything but the calling. The judge stage (:mod:`evaluation.stages.judge`) and each level
of a cascade (:mod:`evaluation.stages.cascade.levels`) judge a chunk this way."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.calling.batch import ChunkBatch
from evaluation.calling.client import JudgeClient, judge_client, price_per_token
from evaluation.calling.outcome import CallOutcome
from evaluation.contract.config import RULES_VERSION, CallRecord, InputRecord, JudgeName, RunConfig, question_key
from evaluation.contract.redact import redact_record
from evaluation.contract.schemas import CALLS_SCHEMA, PARSED_SCHEMA, record_from_row
from evaluation.judges import (
    PROMPT_VERSIONS,
    RenderedPrompt,
    call_error_row,
    not_applicable_row,
    parse_reply,
    route,
)
from evaluation.judges.row import ParsedRow, Spent
from evaluation.judges.schema import reply_format_of
from evaluation.stages._run import ChunkResult, Stores, read_manifest, where
from evaluation.stages.plan import key_range
from evaluation.storage.ledger import Ledger, LedgerEntry, request_hash

logger = logging.getLogger(__name__)

#: One outcome per request sent; None for a request the budget stopped before it was sent.
Outcomes = list[CallOutcome | None]


@dataclass
class _Pending:
    record: InputRecord
    judged_record: InputRecord
    judge: JudgeName
    prompt: RenderedPrompt
    request_hash: str
    redactions: int


@dataclass
class PreparedChunk:
    """One chunk ready to be called: its rows that need no call, every (record, judge) that does,
    the replies the ledger already holds, and the distinct requests still to send."""

    cfg: RunConfig
    index: int
    frame: pl.DataFrame
    rows: list[ParsedRow]
    pending: list[_Pending]
    cached: dict[str, LedgerEntry]
    unique: dict[str, _Pending]
    parameters: dict[str, Any]
    ledger: Ledger
    client: JudgeClient | None  #: set up once there are calls to make
    started: float
    budget: float | None  #: this chunk's share of ``budget_usd``
    recorded: set[str] = field(default_factory=set)
    #: requests the ledger holds because this run paid for them in an earlier step of a cascade's
    #: chunk (:func:`evaluation.stages.cascade.levels.judge_cascade_batch_step`): their rows count the call, not a reuse
    paid: set[str] = field(default_factory=set)

    @property
    def to_call(self) -> list[_Pending]:
        """One request per distinct prompt the ledger does not hold."""
        return list(self.unique.values())


def prepare_chunk(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None,
                  ledger_store: storage.Store | None = None, parameters: dict[str, Any] | None = None,
                  pairs: set[tuple[str, JudgeName]] | None = None) -> PreparedChunk:
    """Render the chunk's prompts and look their replies up in the ledger (``ledger_store``'s,
    default the output store's: a plan stages its chunks elsewhere and asks the real ledger).
    ``parameters``: the call parameters of ``cfg.judge_model`` (default: the plan's); ``pairs``: the
    only (record id, judge) pairs to judge (a cascade's level after the first), default all.

    The ledger is asked first what is already paid for: the judge client (and litellm, a few
    seconds to import) is set up only when there are calls to make, so a re-run of a judged day
    costs the reading of its chunks and ledger."""

    started = time.monotonic()
    plan = read_manifest(cfg, stores).plan
    chunk_count = max(1, plan.chunks) if plan is not None else 1
    frame = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "records", index))
    client = None
    if parameters is None:
        parameters = plan.call_parameters if plan is not None else None
    if parameters is None:  # chunks staged outside the daily plan (a comparison's sample)
        client = judge_client(cfg, api_key)
        parameters = client.call_parameters()
    rows: list[ParsedRow] = []
    pending: list[_Pending] = []
    for row in frame.iter_rows(named=True):
        record = record_from_row(row)
        judged_record, redactions = redact_record(record) if cfg.redact_pii else (record, 0)
        for judge in cfg.judges:
            if pairs is not None and (record.record_id, judge) not in pairs:
                continue
            prompt = route(judge, judged_record) if row["sampled"] else not_applicable_row(judge, record, "sampled_out")
            if not isinstance(prompt, RenderedPrompt):  # sampled out, not applicable, or an empty answer: no call
                rows.append(_finish(prompt, cfg, PROMPT_VERSIONS[judge]))
                continue
            digest = request_hash(cfg.judge_model, prompt, parameters)
            pending.append(_Pending(record, judged_record, judge, prompt, digest, redactions))

    ledger = Ledger(ledger_store or stores.out, cfg.date, writer=f"{cfg.run_id}-chunk{index:05d}", key_range=key_range(frame))
    cached = ledger.lookup({p.request_hash for p in pending})
    if cfg.rejudge_parse_errors:
        unparsed = _unparsed_replies(pending, cached)
        if unparsed:
            logger.info("%s chunk %d: %d stored replies do not parse: judged again", where(cfg), index, len(unparsed))
        for digest in unparsed:
            del cached[digest]
    # Identical prompts (same model, template, text, parameters) are called once: a content-addressed
    # judgement is reused within the chunk as it is across runs.
    unique: dict[str, _Pending] = {}
    for item in pending:
        if item.request_hash not in cached:
            unique.setdefault(item.request_hash, item)
    logger.info("%s chunk %d: %d records, %d calls to make, %d reused from the ledger",
                where(cfg), index, frame.height, len(unique), len(pending) - len(unique))
    budget = None if cfg.budget_usd is None else cfg.budget_usd / chunk_count
    return PreparedChunk(cfg, index, frame, rows, pending, cached, unique, parameters, ledger, client, started, budget)


def _ledger_entry(cfg: RunConfig, item: _Pending, outcome: CallOutcome) -> LedgerEntry:
    """A successful reply as the ledger keeps it (``LEDGER_SCHEMA``)."""
    return {
        "request_hash": item.request_hash,
        "judge": item.judge,
        "judge_model": cfg.judge_model,
        "prompt_version": item.prompt.prompt_version,
        "raw_response": outcome.raw_text,
        "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens,
        "cost_usd": outcome.cost_usd,
        "latency_ms": outcome.latency_ms,
        "attempts": outcome.attempts,
        "judged_at": outcome.judged_at,
    }


def record_outcome(prepared: PreparedChunk, item: _Pending, outcome: CallOutcome) -> None:
    """Keep a successful reply in the ledger (once per request)."""
    if not outcome.ok or item.request_hash in prepared.recorded:
        return
    prepared.recorded.add(item.request_hash)
    prepared.ledger.record(_ledger_entry(prepared.cfg, item, outcome))


def call_online(prepared: PreparedChunk, *, api_key: str | None = None,
                progress: Callable[[int], None] | None = None) -> Outcomes:
    """Send the chunk's requests through the judge client, one call each (with its retries)."""

    cfg, to_call = prepared.cfg, prepared.to_call
    if not to_call:
        return []
    if prepared.client is None:
        prepared.client = judge_client(cfg, api_key)
    budget = prepared.budget
    if budget is not None and price_per_token(cfg.judge_model) == (0.0, 0.0):
        logger.warning("%s: budget_usd %s has no effect: litellm's price map has no price for %s",
                       where(cfg), cfg.budget_usd, cfg.judge_model)
    spent = 0.0

    def on_done(position: int, outcome: CallOutcome) -> None:
        nonlocal spent
        spent += outcome.cost_usd
        record_outcome(prepared, to_call[position], outcome)
        if progress is not None:
            progress(1)

    return asyncio.run(prepared.client.call_many([p.prompt for p in to_call], on_done=on_done,
                                                 should_stop=lambda: budget is not None and spent >= budget))


def chunk_batch(prepared: PreparedChunk, stores: Stores, api_key: str | None, *, level: int | None = None,
                on_status: Callable[[str], None] | None = None) -> tuple[Outcomes, list[str]]:
    """Send the chunk's requests still to send as provider batches (resumed when already submitted;
    ``level``: a cascade's level, whose batches are kept apart from the other levels'): waited for
    in this process with ``on_status`` (given each progress line), else advanced one step. Their
    outcomes, one per request to call, and no batch; or, while batches run, none and their ids."""

    job = ChunkBatch(prepared.cfg, stores, prepared.index, {p.request_hash: p.prompt for p in prepared.to_call},
                     api_key=api_key, parameters=prepared.parameters, level=level, budget=prepared.budget)
    if on_status is not None:
        asyncio.run(job.wait(on_status))
    elif waiting := asyncio.run(job.advance()):
        return [], waiting
    found = job.outcomes()
    return [found[p.request_hash] for p in prepared.to_call], []


def finish_chunk(stores: Stores, prepared: PreparedChunk, outcomes: Outcomes) -> ChunkResult:
    """Ledger entries for the replies, then the parsed rows and ``judge_calls`` rows staged."""
    rows, calls = judged_rows(prepared, outcomes)
    return stage_judged(stores, prepared.cfg, prepared.index, prepared.frame, rows, calls, started=prepared.started,
                        calls_made=sum(1 for o in outcomes if o is not None),
                        reused=len(prepared.pending) - len(prepared.to_call))


def judged_rows(prepared: PreparedChunk, outcomes: Outcomes) -> tuple[list[ParsedRow], list[dict[str, Any]]]:
    """Keep the replies in the ledger (flushed), then the chunk's parsed rows (those that needed no
    call included) and its ``judge_calls`` rows."""
    cfg = prepared.cfg
    to_call, unique, pending, cached = prepared.to_call, prepared.unique, prepared.pending, prepared.cached
    for item, outcome in zip(to_call, outcomes, strict=True):
        if outcome is not None:
            record_outcome(prepared, item, outcome)
    prepared.ledger.flush()
    by_hash = {p.request_hash: o for p, o in zip(to_call, outcomes, strict=True)}
    rows = list(prepared.rows)
    calls: list[dict[str, Any]] = []
    charged: set[str] = set()  # a call paid in an earlier step counts once, its repeats as reuses
    for item in pending:
        stored = cached.get(item.request_hash)
        paid = item.request_hash in prepared.paid and item.request_hash not in charged
        if paid:
            charged.add(item.request_hash)
        outcome = by_hash.get(item.request_hash)
        if stored is None and outcome is not None and outcome.ok and unique[item.request_hash] is not item:
            stored = _ledger_entry(cfg, item, outcome)  # a repeat of a prompt judged in this chunk: not paid twice
        elif stored is None and outcome is not None and unique[item.request_hash] is not item:
            outcome = replace(outcome, attempts=0, latency_ms=0.0, cost_usd=0.0)  # its failed call is counted once
        row_out, call = _judged_row(cfg, item, outcome, stored, prepared.parameters, paid)
        rows.append(row_out)
        if call is not None:
            calls.append(call)
    return rows, calls


def stage_judged(stores: Stores, cfg: RunConfig, index: int, frame: pl.DataFrame, rows: list[ParsedRow],
                 calls: list[dict[str, Any]], *, started: float, calls_made: int, reused: int,
                 decided: dict[str, int] | None = None) -> ChunkResult:
    """Stage a judged chunk's parsed rows (with their question keys) and ``judge_calls`` rows."""
    keys = {r: question_key(q) for r, q in zip(frame["record_id"], frame["question"], strict=True)}
    for row in rows:
        row["question_key"] = keys[row["record_id"]]
    parsed = pl.DataFrame(rows, schema=PARSED_SCHEMA)
    storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", index), parsed)
    storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "calls", index),
                          pl.DataFrame(calls, schema=CALLS_SCHEMA))
    result = ChunkResult(
        index=index,
        rows=parsed.height,
        calls_made=calls_made,
        reused=reused,  # from the ledger, or repeats within the chunk
        statuses=dict(parsed.group_by("judge_status").len().iter_rows()),
        seconds=round(time.monotonic() - started, 3),
        decided=decided or {},
    )
    logger.info("%s chunk %d judged: %s", where(cfg), index, result)
    return result


def _unparsed_replies(pending: list[_Pending], cached: dict[str, LedgerEntry]) -> set[str]:
    """Request hashes whose stored reply parses to ``parse_error`` (for ``rejudge_parse_errors``)."""
    unparsed = set()
    for item in pending:
        stored = cached.get(item.request_hash)
        if stored is not None and item.request_hash not in unparsed:
            row = parse_reply(item.judge, item.judged_record, stored["raw_response"], item.prompt)
            if row["judge_status"] == "parse_error":
                unparsed.add(item.request_hash)
    return unparsed


#: What a row whose call was never made spent.
_NOTHING_SPENT: Spent = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "latency_ms": 0.0, "attempts": 0,
                         "cached": False, "judged_at": None}


def _finish(row: ParsedRow, cfg: RunConfig, prompt_version: str, spent: Spent = _NOTHING_SPENT) -> ParsedRow:
    row.update({"judge_model": cfg.judge_model, "prompt_version": prompt_version, "rules_version": RULES_VERSION,
                **spent})
    return row


def _judged_row(
    cfg: RunConfig, item: _Pending, outcome: CallOutcome | None, stored: LedgerEntry | None, parameters: dict[str, Any],
    paid: bool = False,
) -> tuple[ParsedRow, dict[str, Any] | None]:
    """The parsed row of one (record, judge) and its ``judge_calls`` row (none when the budget
    stopped the call before it was made). A reply reused from the ledger was asked for the same
    way (the call parameters are part of its request hash); ``paid``: the ledger holds it because
    this run made the call, in an earlier step, and the row counts that call as the ledger kept it."""
    call: dict[str, Any] = {
        "run_id": cfg.run_id,
        "record_id": item.record.record_id,
        "judge": item.judge,
        "judge_model": cfg.judge_model,
        "prompt_version": item.prompt.prompt_version,
        "request_hash": item.request_hash,
        "system_prompt": item.prompt.system,
        "user_prompt": item.prompt.user,
        "redactions": item.redactions,
        "response_format": reply_format_of(item.prompt, parameters),
    }
    if stored is not None:
        row = parse_reply(item.judge, item.judged_record, stored["raw_response"], item.prompt)
        spent: Spent = {"input_tokens": stored["input_tokens"], "output_tokens": stored["output_tokens"],
                        "cost_usd": 0.0, "latency_ms": 0.0, "attempts": 0, "cached": True,
                        "judged_at": stored["judged_at"]}
        if paid:
            spent.update({"cost_usd": stored["cost_usd"], "latency_ms": stored["latency_ms"],
                          "attempts": stored["attempts"], "cached": False})
        record = CallRecord(**call, **spent, raw_response=stored["raw_response"])
        return _finish(row, cfg, item.prompt.prompt_version, spent), record.model_dump()
    if outcome is None:
        row = not_applicable_row(item.judge, item.record, "budget_exhausted")
        return _finish(row, cfg, item.prompt.prompt_version), None
    if not outcome.ok:
        row = call_error_row(item.judge, item.record, outcome.error or f"{outcome.error_class} error")
    else:
        row = parse_reply(item.judge, item.judged_record, outcome.raw_text, item.prompt)
    spent = {"input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens,
             "cost_usd": outcome.cost_usd, "latency_ms": outcome.latency_ms, "attempts": outcome.attempts,
             "cached": False, "judged_at": outcome.judged_at}
    record = CallRecord(**call, **spent, raw_response=outcome.raw_text, error=outcome.error,
                        error_class=outcome.error_class)
    return _finish(row, cfg, item.prompt.prompt_version, spent), record.model_dump()


