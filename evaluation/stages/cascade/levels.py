"""The level loop of a cascade over one chunk (:func:`run_levels`): each level judged as a run
with its judge model judges a chunk (:mod:`evaluation.stages.chunk`), then the escalation step
(:func:`evaluation.stages.cascade.escalation.escalate`) decides which pairs go on. Online, or in
batch mode: in this process (:func:`judge_cascade_chunk`, the CLI), or a step at a time by a task
that defers (:func:`judge_cascade_batch_step`, the DAG)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluation import storage
from evaluation.calling.batch import BATCH_PROVIDERS, provider_of
from evaluation.calling.client import call_parameters
from evaluation.contract.config import RunConfig
from evaluation.judges.row import ParsedRow
from evaluation.stages._run import ChunkResult, Stores, read_manifest, where
from evaluation.stages.cascade.bands import level_bands
from evaluation.stages.cascade.escalation import Decisions, Pair, escalate
from evaluation.stages.chunk import (
    Outcomes,
    PreparedChunk,
    call_online,
    chunk_batch,
    judged_rows,
    prepare_chunk,
    stage_judged,
)

logger = logging.getLogger(__name__)

#: How a cascade's level is called: its outcomes (one per request to call), or the provider batches
#: still to wait for.
LevelCaller = Callable[[int, PreparedChunk], "tuple[Outcomes | None, list[str]]"]


def judge_cascade_chunk(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None,
                        progress: Callable[[int], None] | None = None) -> ChunkResult:
    """Judge one staged chunk through the run's cascade and stage its parsed rows and every level's
    ``judge_calls`` rows: online, or with ``batch`` each level whose provider has a batch API as
    provider batches waited for in this process (the CLI), one level after the other."""

    def call(level: int, prepared: PreparedChunk) -> tuple[Outcomes | None, list[str]]:
        if cfg.batch and prepared.to_call and provider_of(prepared.cfg.judge_model) in BATCH_PROVIDERS:
            return chunk_batch(prepared, stores, api_key, level=level, on_status=lambda line: logger.info(
                "%s chunk %d level %d: %s", where(cfg), index, level, line))
        return call_online(prepared, api_key=api_key), []

    result, _, _ = run_levels(cfg, stores, index, api_key=api_key, progress=progress, call=call)
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

    def call(level: int, prepared: PreparedChunk) -> tuple[Outcomes | None, list[str]]:
        key = _paid_key(prepared.cfg, index, level)
        if stores.out.exists(key):
            prepared.paid = set(storage.read_json(stores.out, key)["request_hashes"]) & set(prepared.cached)
        if not prepared.to_call or provider_of(prepared.cfg.judge_model) not in BATCH_PROVIDERS:
            outcomes = call_online(prepared, api_key=api_key)
        else:
            outcomes, waiting = chunk_batch(prepared, stores, api_key, level=level)
            if waiting:
                return None, waiting
        made = {p.request_hash for p, o in zip(prepared.to_call, outcomes, strict=True) if o is not None and o.ok}
        if made:  # kept before the ledger has them: a later step counts them as this run's calls
            storage.write_json(stores.out, key, {"request_hashes": sorted(prepared.paid | made)})
        return outcomes, []

    return run_levels(cfg, stores, index, api_key=api_key, progress=None, call=call)


def _paid_key(cfg: RunConfig, index: int, level: int) -> str:
    """Where a cascade's chunk judged in steps keeps the requests of ``level`` this run paid for
    (beside its batches): the ledger holds their replies, and a later step must not count them as
    reused."""
    return storage.work_key(cfg.date, cfg.run_id, f"batch/chunk-{index:05d}-level{level}-paid.json")


@dataclass
class _Tally:
    """What a chunk's levels so far called and decided."""

    decisions: Decisions = field(default_factory=Decisions)
    calls: list[dict[str, Any]] = field(default_factory=list)
    made: int = 0
    reused: int = 0
    spent: float = 0.0  #: by the levels before, their rows' cost (a call paid in an earlier step's included)

    def add(self, prepared: PreparedChunk, outcomes: Outcomes) -> list[ParsedRow]:
        """Count a called level's calls and reuses, keep its ``judge_calls`` rows; its parsed rows."""
        self.made += sum(1 for o in outcomes if o is not None) + len(prepared.paid)
        self.reused += len(prepared.pending) - len(prepared.to_call) - len(prepared.paid)
        rows, calls = judged_rows(prepared, outcomes)
        self.spent += sum(row.get("cost_usd", 0.0) for row in rows)
        self.calls.extend(calls)
        return rows


def run_levels(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None,
               progress: Callable[[int], None] | None, call: LevelCaller
               ) -> tuple[ChunkResult | None, list[str], RunConfig]:
    """The cascade's levels over one chunk, each called by ``call`` with the chunk's share of the
    budget less what the levels before spent, then its escalation step; stops at a level that has
    batches to wait for (returning them with the level's config)."""
    started = time.monotonic()
    bands = level_bands(cfg, stores.out)
    plan = read_manifest(cfg, stores).plan
    level_parameters = plan.cascade_parameters if plan is not None else []
    tally = _Tally()
    open_pairs: set[Pair] | None = None  # every pair at level 0
    frame = None
    for level in range(len(cfg.cascade) + 1):
        level_cfg = cfg.level_config(level)
        landed_before = len(tally.decisions.rows)
        prepared = _prepare_level(cfg, stores, index, level, level_parameters, open_pairs, tally, api_key=api_key)
        frame = prepared.frame
        outcomes, waiting = call(level, prepared)
        if outcomes is None:
            logger.info("%s chunk %d: cascade level %d (%s) waits for batch %s", where(cfg), index, level,
                        level_cfg.judge_model, ", ".join(waiting))
            return None, waiting, level_cfg
        level_rows = tally.add(prepared, outcomes)
        next_pairs = escalate(level_rows, bands[level] if level < len(cfg.cascade) else None, cfg.thresholds,
                              level_cfg.judge_model, tally.decisions)
        logger.info("%s chunk %d: cascade level %d (%s): %d rows judged, %d decided, %d sent on", where(cfg), index,
                    level, level_cfg.judge_model, len(level_rows), len(level_rows) - len(next_pairs), len(next_pairs))
        if progress is not None:
            progress(len(tally.decisions.rows) - landed_before)
        if not next_pairs:
            break
        open_pairs = next_pairs
    assert frame is not None
    result = stage_judged(stores, cfg, index, frame, tally.decisions.rows, tally.calls, started=started,
                          calls_made=tally.made, reused=tally.reused, decided=dict(tally.decisions.decided))
    return result, [], cfg


def _prepare_level(cfg: RunConfig, stores: Stores, index: int, level: int, level_parameters: list[dict[str, Any]],
                   open_pairs: set[Pair] | None, tally: _Tally, *, api_key: str | None) -> PreparedChunk:
    """The chunk at ``level`` (its open pairs only), its budget the chunk's share less what the
    levels before spent (``level_parameters``: the plan's call parameters of the levels)."""
    level_cfg = cfg.level_config(level)
    parameters = None  # the judge model's: the plan's call parameters
    if level < len(cfg.cascade):
        parameters = level_parameters[level] if level < len(level_parameters) else call_parameters(level_cfg)
    prepared = prepare_chunk(level_cfg, stores, index, api_key=api_key, parameters=parameters, pairs=open_pairs)
    if level == 0:  # settled without a call: the judge model's rows, as in a run without a cascade
        for row in prepared.rows:
            row["judge_model"], row["decided_by"], row["cascade_calls"] = cfg.judge_model, None, 0
        tally.decisions.rows.extend(prepared.rows)
        prepared.rows = []
    if prepared.budget is not None:
        prepared.budget = max(0.0, prepared.budget - tally.spent)
    return prepared
