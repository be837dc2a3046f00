"""Every stage of a day in one process, then its report (``python -m evaluation run``): above both
the stages and the report."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from evaluation.contract.config import RunConfig
from evaluation.report import AlertPolicy, write_daily_report
from evaluation.stages import DayResult, Stores, read_manifest
from evaluation.stages.check import check_run
from evaluation.stages.ingest import ingest_and_validate
from evaluation.stages.judge import judge_chunk
from evaluation.stages.land import score_and_land
from evaluation.stages.plan import plan_chunks


def run_day(
    cfg: RunConfig,
    stores: Stores,
    *,
    api_key: str | None = None,
    key_hint: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    progress: Callable[[int], None] | None = None,
    on_planned: Callable[[int], None] | None = None,
    on_stage: Callable[[str, dict[str, Any]], None] | None = None,
    waited_s: float | None = None,
) -> DayResult:
    """Every stage of the day in one process, chunk after chunk. ``on_planned`` receives the
    number of (record, judge) rows to come, for a progress bar fed by ``progress``; ``on_stage``
    receives each finished stage's name (check, ingest, plan, land, report) with its figures and
    ``seconds``. ``waited_s`` (how long the caller waited for a complete day) goes to ``runs``.
    ``key_hint`` and ``on_wait`` are :func:`~evaluation.stages.check.check_run`'s."""
    started_at = dt.datetime.now(dt.UTC)
    started = time.monotonic()

    def stage(name: str, figures: dict[str, Any]) -> None:
        nonlocal started
        if on_stage is not None:
            on_stage(name, {**figures, "seconds": round(time.monotonic() - started, 1)})
        started = time.monotonic()

    stage("check", check_run(cfg, stores, api_key=api_key, key_hint=key_hint, on_wait=on_wait).model_dump())
    stage("ingest", ingest_and_validate(cfg, stores).model_dump())
    chunks = plan_chunks(cfg, stores)
    plan = read_manifest(cfg, stores).plan
    records = sum(c.records for c in chunks)
    stage("plan", {"chunks": len(chunks), "records": records, "sampled": plan.sampled if plan else 0,
                   "estimate": plan.estimate.model_dump() if plan else {}})
    if on_planned is not None:
        on_planned(records * len(cfg.judges))
    for chunk in chunks:
        judge_chunk(cfg, stores, chunk.index, api_key=api_key, progress=progress)
    started = time.monotonic()
    result = score_and_land(cfg, stores, started_at=started_at, waited_s=waited_s)
    stage("land", result.model_dump())
    result.report = write_daily_report(stores.out, cfg.date, policy=AlertPolicy(accept_baseline=cfg.accept_baseline))["html"]
    stage("report", {"html": result.report})
    return result
