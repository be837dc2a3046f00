"""Stage 3: judge one chunk.

A chunk is judged at the run's judge model (:mod:`evaluation.stages.chunk`: prompts, the ledger,
the calls, the rows), or with a ``cascade`` level by level (:mod:`evaluation.stages.cascade`);
online through the judge client, or as provider batches (:mod:`evaluation.calling.batch`): waited
for in this process (:func:`judge_chunk`, the CLI) or one step at a time by a task that defers
(:func:`judge_batch_level_step`, the DAG)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from evaluation.contract.config import RunConfig
from evaluation.stages._run import ChunkResult, Stores, where
from evaluation.stages.cascade.levels import judge_cascade_batch_step, judge_cascade_chunk
from evaluation.stages.chunk import call_online, chunk_batch, finish_chunk, prepare_chunk

logger = logging.getLogger(__name__)


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
    (the CLI; the DAG's judge task defers instead, see :func:`judge_batch_level_step`). With a
    ``cascade``, level by level (:func:`~evaluation.stages.cascade.levels.judge_cascade_chunk`)."""
    if cfg.cascade:
        return judge_cascade_chunk(cfg, stores, index, api_key=api_key, progress=progress)
    prepared = prepare_chunk(cfg, stores, index, api_key=api_key)
    if progress is not None:
        progress(len(prepared.rows) + len(prepared.pending) - len(prepared.to_call))  # skipped, reused, repeated
    if cfg.batch and prepared.to_call:
        def status(line: str) -> None:
            if progress is not None:
                print(f"{cfg.date} chunk {index}: {line}", file=sys.stderr, flush=True)
            logger.info("%s chunk %d: %s", where(cfg), index, line)

        outcomes, _ = chunk_batch(prepared, stores, api_key, on_status=status)
        if progress is not None:
            progress(len(outcomes))
    else:
        outcomes = call_online(prepared, api_key=api_key, progress=progress)
    return finish_chunk(stores, prepared, outcomes)


def judge_batch_level_step(cfg: RunConfig, stores: Stores, index: int, *, api_key: str | None = None
                           ) -> tuple[ChunkResult | None, list[str], RunConfig]:
    """One step of a chunk judged in batch mode, for a task that waits by deferring: collects the
    batches that ended, submits what is still missing (each batch id is kept with the chunk before
    any wait), and returns the chunk's result once every request has an outcome, else the ids of
    the batches to wait for; with the config of the level whose batches are waited for (its judge
    model and API base, what to look at them with): the run's own, or with a cascade the level's
    (:func:`~evaluation.stages.cascade.levels.judge_cascade_batch_step`)."""
    if cfg.cascade:
        return judge_cascade_batch_step(cfg, stores, index, api_key=api_key)
    prepared = prepare_chunk(cfg, stores, index, api_key=api_key)
    if not prepared.to_call:
        return finish_chunk(stores, prepared, []), [], cfg
    outcomes, waiting = chunk_batch(prepared, stores, api_key)
    if waiting:
        logger.info("%s chunk %d: waiting for batch %s", where(cfg), index, ", ".join(waiting))
        return None, waiting, cfg
    return finish_chunk(stores, prepared, outcomes), [], cfg
