"""Stage 3: judge one chunk.

A chunk is judged in three parts: :func:`prepare_chunk` renders its prompts and asks the ledger
what is already paid for, a caller sends the rest (online through the judge client, or as provider
batches, see :mod:`evaluation.calling.batch`), and :func:`finish_chunk` turns every outcome into a
ledger entry, a ``judge_calls`` row and a parsed row. Online and batch mode share everything but
the calling."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.calling.batch import BATCH_PROVIDERS, ChunkBatch, provider_of
from evaluation.calling.client import call_parameters, judge_client, price_per_token
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
    score_table,
)
from evaluation.judges.row import ParsedRow, Spent
from evaluation.judges.schema import reply_format_of
from evaluation.stages._run import ChunkResult, Stores, read_manifest, where
from evaluation.stages.cascade import PairSpending, escalated
from evaluation.stages.plan import key_range
from evaluation.stages.thresholds import level_bands
from evaluation.storage.ledger import Ledger, request_hash

logger = logging.getLogger(__name__)


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
    cached: dict[str, dict[str, Any]]
    unique: dict[str, _Pending]
    parameters: dict[str, Any]
    ledger: Any
    client: Any
    started: float
    budget: float | None  #: this chunk's share of ``budget_usd``
    recorded: set[str] = field(default_factory=set)
    #: requests the ledger holds because this run paid for them in an earlier step of a cascade's
    #: chunk (:func:`judge_cascade_batch_step`): their rows count the call, not a reuse
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
            if not row["sampled"]:
                rows.append(_finish(not_applicable_row(judge, record, "sampled_out"), cfg, PROMPT_VERSIONS[judge]))
                continue
            prompt = route(judge, judged_record)
            if not isinstance(prompt, RenderedPrompt):  # not applicable, or an empty answer: no call
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


def _ledger_entry(cfg: RunConfig, item: _Pending, outcome: Any) -> dict[str, Any]:
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


def record_outcome(prepared: PreparedChunk, item: _Pending, outcome: Any) -> None:
    """Keep a successful reply in the ledger (once per request)."""
    if not outcome.ok or item.request_hash in prepared.recorded:
        return
    prepared.recorded.add(item.request_hash)
    prepared.ledger.record(_ledger_entry(prepared.cfg, item, outcome))


def call_online(prepared: PreparedChunk, *, api_key: str | None = None,
                progress: Callable[[int], None] | None = None) -> list[Any]:
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

    def on_done(position: int, outcome: Any) -> None:
        nonlocal spent
        spent += outcome.cost_usd
        record_outcome(prepared, to_call[position], outcome)
        if progress is not None:
            progress(1)

    def budget_spent() -> bool:
        return budget is not None and spent >= budget

    return asyncio.run(prepared.client.call_many([p.prompt for p in to_call], on_done=on_done, should_stop=budget_spent))


def judge_chunk(
    cfg: RunConfig,
    stores: Stores,
    index: int,
    *,
    api_key: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ChunkResult:
    """Run the selected judges on one staged chunk; stage its parsed rows and judge calls.

    With ``cfg.batch`` the requests go to the provider as batches, waited for in this process
    (the CLI; the DAG's judge task defers instead, see :func:`judge_batch_step`). With a
    ``cascade``, level by level (:func:`judge_cascade_chunk`)."""
    if cfg.cascade:
        return judge_cascade_chunk(cfg, stores, index, api_key=api_key, progress=progress)
    prepared = prepare_chunk(cfg, stores, index, api_key=api_key)
    if progress is not None:
        progress(len(prepared.rows) + len(prepared.pending) - len(prepared.to_call))  # skipped, reused, repeated
    if cfg.batch and prepared.to_call:
        job = _chunk_batch(prepared, stores, api_key)

        def status(line: str) -> None:
            if progress is not None:
                print(f"{cfg.date} chunk {index}: {line}", file=sys.stderr, flush=True)
            logger.info("%s chunk %d: %s", where(cfg), index, line)

        found = asyncio.run(job.wait(on_status=status))
        outcomes = [found[p.request_hash] for p in prepared.to_call]
        if progress is not None:
            progress(len(outcomes))
    else:
        outcomes = call_online(prepared, api_key=api_key, progress=progress)
    return finish_chunk(stores, prepared, outcomes)


def judge_batch_step(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None
                     ) -> tuple[ChunkResult | None, list[str]]:
    """One step of a chunk judged in batch mode, for a task that waits by deferring: collects the
    batches that ended, submits what is still missing (each batch id is kept with the chunk before
    any wait), and returns the chunk's result once every request has an outcome, else the ids of
    the batches to wait for."""
    result, waiting, _ = judge_batch_level_step(cfg, stores, index, api_key=api_key)
    return result, waiting


def judge_batch_level_step(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None
                           ) -> tuple[ChunkResult | None, list[str], RunConfig]:
    """:func:`judge_batch_step`, with the config of the level whose batches are waited for (its
    judge model and API base, what to look at them with): the run's own, or with a cascade the
    level's (:func:`judge_cascade_batch_step`)."""
    if cfg.cascade:
        return judge_cascade_batch_step(cfg, stores, index, api_key=api_key)
    prepared = prepare_chunk(cfg, stores, index, api_key=api_key)
    if not prepared.to_call:
        return finish_chunk(stores, prepared, []), [], cfg
    job = _chunk_batch(prepared, stores, api_key)
    waiting = asyncio.run(job.advance())
    if waiting:
        logger.info("%s chunk %d: waiting for batch %s", where(cfg), index, ", ".join(waiting))
        return None, waiting, cfg
    found = job.outcomes()
    return finish_chunk(stores, prepared, [found[p.request_hash] for p in prepared.to_call]), [], cfg


def _chunk_batch(prepared: PreparedChunk, stores: Stores, api_key: str | None, *, level: int | None = None) -> Any:
    """The provider batches of the chunk's requests still to send (resumed when already submitted);
    ``level``: a cascade's level, whose batches are kept apart from the other levels'."""

    return ChunkBatch(prepared.cfg, stores, prepared.index, {p.request_hash: p.prompt for p in prepared.to_call},
                      api_key=api_key, parameters=prepared.parameters, level=level, budget=prepared.budget)


def finish_chunk(stores: Stores, prepared: PreparedChunk, outcomes: list[Any]) -> ChunkResult:
    """Ledger entries for the replies, then the parsed rows and ``judge_calls`` rows staged."""
    rows, calls = judged_rows(prepared, outcomes)
    return stage_judged(stores, prepared.cfg, prepared.index, prepared.frame, rows, calls, started=prepared.started,
                        calls_made=sum(1 for o in outcomes if o is not None),
                        reused=len(prepared.pending) - len(prepared.to_call))


def judged_rows(prepared: PreparedChunk, outcomes: list[Any]) -> tuple[list[ParsedRow], list[dict[str, Any]]]:
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
    counts = parsed.group_by("judge_status").len().to_dict(as_series=False)
    result = ChunkResult(
        index=index,
        rows=parsed.height,
        calls_made=calls_made,
        reused=reused,  # from the ledger, or repeats within the chunk
        statuses=dict(zip(counts["judge_status"], counts["len"], strict=True)),
        seconds=round(time.monotonic() - started, 3),
        decided=decided or {},
    )
    logger.info("%s chunk %d judged: %s", where(cfg), index, result)
    return result


def _unparsed_replies(pending: list[_Pending], cached: dict[str, dict[str, Any]]) -> set[str]:
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
    cfg: RunConfig, item: _Pending, outcome: Any, stored: dict[str, Any] | None, parameters: dict[str, Any],
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
        row = call_error_row(item.judge, item.record, outcome.error)
    else:
        row = parse_reply(item.judge, item.judged_record, outcome.raw_text, item.prompt)
    spent = {"input_tokens": outcome.input_tokens, "output_tokens": outcome.output_tokens,
             "cost_usd": outcome.cost_usd, "latency_ms": outcome.latency_ms, "attempts": outcome.attempts,
             "cached": False, "judged_at": outcome.judged_at}
    record = CallRecord(**call, **spent, raw_response=outcome.raw_text, error=outcome.error,
                        error_class=outcome.error_class)
    return _finish(row, cfg, item.prompt.prompt_version, spent), record.model_dump()


#: How a cascade's level is called: its outcomes (one per request to call), or the provider batches
#: still to wait for.
LevelCaller = Callable[[int, PreparedChunk], "tuple[list[Any] | None, list[str]]"]


def judge_cascade_chunk(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None,
                        progress: Callable[[int], None] | None = None) -> ChunkResult:
    """Judge one staged chunk through the run's cascade (:mod:`evaluation.stages.cascade`) and stage
    its parsed rows and every level's ``judge_calls`` rows: online, or with ``batch`` each level
    whose provider has a batch API as provider batches waited for in this process (the CLI), one
    level after the other."""

    def call(level: int, prepared: PreparedChunk) -> tuple[list[Any] | None, list[str]]:
        if cfg.batch and prepared.to_call and provider_of(prepared.cfg.judge_model) in BATCH_PROVIDERS:
            job = _chunk_batch(prepared, stores, api_key, level=level)
            found = asyncio.run(job.wait(on_status=lambda line: logger.info(
                "%s chunk %d level %d: %s", where(cfg), index, level, line)))
            return [found[p.request_hash] for p in prepared.to_call], []
        return call_online(prepared, api_key=api_key), []

    result, _, _ = _cascade(cfg, stores, index, api_key=api_key, progress=progress, call=call)
    assert result is not None
    return result


def judge_cascade_batch_step(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None
                             ) -> tuple[ChunkResult | None, list[str], RunConfig]:
    """One step of a cascade's chunk in batch mode, for a task that waits by deferring: the levels
    are taken in order, each level's batches submitted only once the level before has every outcome
    (a level whose provider has no batch API, such as the offline judge, is called online); returns
    the chunk's result once the last level is done, else the batches to wait for and the level's
    config (its judge model and API base: what to look at them with). Each step starts again from
    level 0: the levels done find their replies in the ledger and their batches with the chunk, and
    the calls this run paid for there in an earlier step (:func:`_paid_key`) count as its calls, at
    what the ledger kept of them (and as spent of the chunk's budget)."""

    def call(level: int, prepared: PreparedChunk) -> tuple[list[Any] | None, list[str]]:
        key = _paid_key(prepared.cfg, index, level)
        if stores.out.exists(key):
            prepared.paid = set(storage.read_json(stores.out, key)["request_hashes"]) & set(prepared.cached)
        if not prepared.to_call or provider_of(prepared.cfg.judge_model) not in BATCH_PROVIDERS:
            outcomes = call_online(prepared, api_key=api_key)
        else:
            job = _chunk_batch(prepared, stores, api_key, level=level)
            waiting = asyncio.run(job.advance())
            if waiting:
                return None, waiting
            found = job.outcomes()
            outcomes = [found[p.request_hash] for p in prepared.to_call]
        made = {p.request_hash for p, o in zip(prepared.to_call, outcomes, strict=True) if o is not None and o.ok}
        if made:  # kept before the ledger has them: a later step counts them as this run's calls
            storage.write_json(stores.out, key, {"request_hashes": sorted(prepared.paid | made)})
        return outcomes, []

    return _cascade(cfg, stores, index, api_key=api_key, progress=None, call=call)


def _paid_key(cfg: RunConfig, index: int, level: int) -> str:
    """Where a cascade's chunk judged in steps keeps the requests of ``level`` this run paid for
    (beside its batches): the ledger holds their replies, and a later step must not count them as
    reused."""
    return storage.work_key(cfg.date, cfg.run_id, f"batch/chunk-{index:05d}-level{level}-paid.json")


def _cascade(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None,
             progress: Callable[[int], None] | None, call: LevelCaller
             ) -> tuple[ChunkResult | None, list[str], RunConfig]:
    """The cascade's levels over one chunk, each called by ``call`` with the chunk's share of the
    budget less what the levels before spent; stops at a level that has batches to wait for
    (returning them with the level's config)."""
    started = time.monotonic()
    bands = level_bands(cfg, stores.out)
    plan = read_manifest(cfg, stores).plan
    level_parameters = plan.cascade_parameters if plan is not None else []
    rows: list[ParsedRow] = []
    calls: list[dict[str, Any]] = []
    totals: dict[tuple[str, str], PairSpending] = {}
    decided: Counter[str] = Counter()
    made = reused = 0
    spent = 0.0  # by the levels before, their rows' cost (a call paid in an earlier step's included)
    open_pairs: set[tuple[str, JudgeName]] | None = None  # every pair at level 0
    frame = None
    for level in range(len(cfg.cascade) + 1):
        level_cfg = cfg.level_config(level)
        landed_before = len(rows)
        parameters = None  # the judge model's: the plan's call parameters
        if level < len(cfg.cascade):
            parameters = level_parameters[level] if level < len(level_parameters) else call_parameters(level_cfg)
        prepared = prepare_chunk(level_cfg, stores, index, api_key=api_key, parameters=parameters, pairs=open_pairs)
        frame = prepared.frame
        if level == 0:  # settled without a call: the judge model's rows, as in a run without a cascade
            for row in prepared.rows:
                row["judge_model"], row["decided_by"], row["cascade_calls"] = cfg.judge_model, None, 0
            rows.extend(prepared.rows)
            prepared.rows = []
        if prepared.budget is not None:
            prepared.budget = max(0.0, prepared.budget - spent)
        outcomes, waiting = call(level, prepared)
        if outcomes is None:
            logger.info("%s chunk %d: cascade level %d (%s) waits for batch %s", where(cfg), index, level,
                        level_cfg.judge_model, ", ".join(waiting))
            return None, waiting, level_cfg
        made += sum(1 for o in outcomes if o is not None) + len(prepared.paid)
        reused += len(prepared.pending) - len(prepared.to_call) - len(prepared.paid)
        level_rows, level_calls = judged_rows(prepared, outcomes)
        spent += sum(row.get("cost_usd", 0.0) for row in level_rows)
        calls.extend(level_calls)
        last = level == len(cfg.cascade)
        if last:
            onward = [False] * len(level_rows)
        else:
            scored = score_table(pl.DataFrame(level_rows, schema=PARSED_SCHEMA), cfg.thresholds)
            # a row stopped by the budget is not sent on: nothing more may be spent
            onward = [go and row["reason"] != "budget_exhausted"
                      for go, row in zip(escalated(scored, bands[level]).to_list(), level_rows, strict=True)]
        next_pairs: set[tuple[str, JudgeName]] = set()
        for row, go in zip(level_rows, onward, strict=True):
            pair = (row["record_id"], row["judge"])
            total = totals.setdefault(pair, PairSpending())
            called = total.add(row)
            if go:
                next_pairs.add(pair)
                continue
            total.onto(row, level_cfg.judge_model if called else None)
            if called:
                decided[level_cfg.judge_model] += 1
            rows.append(row)
        logger.info("%s chunk %d: cascade level %d (%s): %d rows judged, %d decided, %d sent on", where(cfg), index,
                    level, level_cfg.judge_model, len(level_rows), len(level_rows) - len(next_pairs), len(next_pairs))
        if progress is not None:
            progress(len(rows) - landed_before)
        if not next_pairs:
            break
        open_pairs = next_pairs
    assert frame is not None
    result = stage_judged(stores, cfg, index, frame, rows, calls, started=started, calls_made=made, reused=reused,
                          decided=dict(decided))
    return result, [], cfg
