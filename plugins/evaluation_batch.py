"""Batch mode under Airflow: the judge task that waits for a provider batch without a worker slot.

:class:`JudgeChunkOperator` is the daily DAG's mapped judge task. With ``batch`` off it judges its
chunk online, as before. With ``batch`` on it submits the chunk's calls as provider batches, as
many parts as the provider's limits of one batch need (or finds the parts an earlier try of the
task already submitted: their ids are kept with the chunk, and only what no part holds is
submitted) and defers to :class:`BatchTrigger`, which polls every part on the triggerer; when all
have ended the task resumes in :meth:`JudgeChunkOperator.execute_complete`, collects the results
(submitting again, in a follow-up batch, what an expired or cancelled batch left undone and the
lines that failed for a transient reason, and deferring once more) and stages the chunk exactly as
an online run does.

The trigger holds no key: it reads the ``llm_judge`` Connection (or the environment) itself.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator
from typing import Any

import evaluation_airflow as glue
from airflow.sdk import BaseHook, BaseOperator, Context
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.triggers.base import BaseTrigger, TriggerEvent

logger = logging.getLogger(__name__)

#: Consecutive failed looks at the batches after which the trigger gives up (the task is retried).
MAX_POLL_FAILURES = 20


class BatchTrigger(BaseTrigger):
    """Fires once every batch in ``batch_ids`` has ended (completed, failed, expired or cancelled)."""

    def __init__(self, batch_ids: list[str], judge_model: str, api_base: str | None = None,
                 poll_s: float = 60.0) -> None:
        super().__init__()
        self.batch_ids = list(batch_ids)
        self.judge_model = judge_model
        self.api_base = api_base
        self.poll_s = float(poll_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and arguments (no secret among them)."""
        return ("evaluation_batch.BatchTrigger", {"batch_ids": self.batch_ids, "judge_model": self.judge_model,
                                                  "api_base": self.api_base, "poll_s": self.poll_s})

    async def _api_key(self) -> tuple[str | None, str | None]:
        try:
            conn = await BaseHook.aget_connection(glue.JUDGE_CONN_ID)
        except AirflowNotFoundException:  # no such Connection: the environment's key, as in the task
            conn = None
        return glue.credentials_of(conn, self.api_base)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll every ``poll_s`` until every batch has ended."""
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation.calling.batch import batches_ended

        api_key, api_base = await self._api_key()
        failures = 0
        while True:
            try:
                if await batches_ended(self.judge_model, self.batch_ids, api_base=api_base, api_key=api_key):
                    yield TriggerEvent({"status": "ended", "batch_ids": self.batch_ids})
                    return
                failures = 0
            except Exception as exc:  # a look that failed: look again, up to a limit
                failures += 1
                self.log.warning("looking at batches %s failed (%d in a row): %s", self.batch_ids, failures, exc)
                if failures >= MAX_POLL_FAILURES:
                    yield TriggerEvent({"status": "error", "batch_ids": self.batch_ids, "error": str(exc)[:500]})
                    return
            await asyncio.sleep(self.poll_s)


class JudgeChunkOperator(BaseOperator):
    """Judge one chunk (``chunk``: what ``plan`` returned for it), online or in batch mode."""

    def __init__(self, *, chunk: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.chunk = chunk

    def execute(self, context: Context) -> dict[str, Any]:
        """Judge online, or submit the chunk's batch (or find it) and defer until it has ended."""
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation import stages
        from evaluation.stages.judge import judge_batch_level_step

        cfg = glue.run_config(context)
        api_key, _ = glue.judge_credentials(cfg.api_base)
        if not cfg.batch:
            return stages.judge_chunk(cfg, glue.stores(cfg), self.chunk["index"], api_key=api_key).model_dump(mode="json")
        # a cascade's level waits for its own batches: they are looked at with that level's model
        result, waiting, level = judge_batch_level_step(cfg, glue.stores(cfg), self.chunk["index"], api_key=api_key)
        if result is not None:
            return result.model_dump(mode="json")
        self.log.info("chunk %s: deferring until batch %s of %s has ended", self.chunk["index"], ", ".join(waiting),
                      level.judge_model)
        self.defer(
            trigger=BatchTrigger(waiting, level.judge_model, level.api_base, cfg.batch_poll_s),
            method_name="execute_complete",
            timeout=dt.timedelta(hours=cfg.batch_deadline_h + 25),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """The batches have ended: collect them, or submit what is missing and defer again."""
        if event is not None and event.get("status") == "error":
            raise RuntimeError(f"batches {event.get('batch_ids')} could not be looked at: {event.get('error')}")
        return self.execute(context)
