"""Deterministic stages at scale (children of :mod:`bench.run`), one stage per process so that each
peak RSS (``ru_maxrss``, read inside the child) is that stage's own.

The day-scale stages call the pipeline's public stage functions on directory stores, one child per
stage, sharing a work folder: ``ingest_validate`` (:func:`evaluation.stages.ingest_and_validate`),
``plan`` (:func:`evaluation.stages.plan_chunks`), ``stage_judged`` (untimed: one judged chunk per
planned chunk, rows generated at PARSED_SCHEMA instead of judging) and ``score_land``
(:func:`evaluation.stages.score_and_land`: ``score_table`` chunk by chunk, reconciliation,
summary and landing). ``score_table`` and ``summary`` time the two table functions on a million rows.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from bench.common import child_main, peak_rss_mib, timed


def _config(params: dict[str, Any]) -> Any:
    from bench import data
    from evaluation.contract.config import RunConfig

    return RunConfig(
        date=data.DAY, input_uri=params["input_uri"], output_uri=params["output_uri"], run_id="bench",
        judges=["rag", "masis", "prompt"], judge_model="openai/judge-model",
    )


def _timed(params: dict[str, Any], stage: Callable[[Any, Any], Any],
           *modules: str) -> tuple[Any, dict[str, Any], int]:
    """``stage(cfg, stores)``, its time and the peak bytes of its local files (:func:`_local_disk`),
    once `modules` are imported: Great Expectations takes seconds, and the targets are about the
    stage's work, not the interpreter's start. The timing holds the peak RSS after the imports."""
    import importlib

    from evaluation import stages

    with _local_disk(params) as disk:
        for module in modules:
            importlib.import_module(module)
        rss_after_imports = peak_rss_mib()
        cfg = _config(params)
        stores = stages.Stores.open(cfg)
        result, seconds = timed(stage, cfg, stores)
    return result, {"seconds": round(seconds, 3), "rss_after_imports_mib": round(rss_after_imports, 1)}, disk[0]


@contextmanager
def _local_disk(params: dict[str, Any]) -> Iterator[list[int]]:
    """The stage's temporary files alone in a folder of the work folder, whose size is polled
    every 0.05 s: yields a list holding the peak bytes seen (the stage's local disk)."""
    folder = Path(params["work"]) / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    tempfile.tempdir = str(folder)
    peak, stop = [0], threading.Event()

    def poll() -> None:
        while not stop.wait(0.05):
            size = 0
            for base, _, files in os.walk(folder):
                for name in files:
                    with suppress(FileNotFoundError):  # removed meanwhile
                        size += os.stat(os.path.join(base, name)).st_size
            peak[0] = max(peak[0], size)

    sampler = threading.Thread(target=poll, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        stop.set()
        sampler.join()
        tempfile.tempdir = None
        shutil.rmtree(folder, ignore_errors=True)


def _repeated(params: dict[str, Any], run: Callable[[], Any]) -> tuple[list[float], int]:
    """The times of ``repeat`` (default 3) calls of `run`, and the height of the table it returns."""
    runs, height = [], 0
    for _ in range(int(params.get("repeat", 3))):
        table, seconds = timed(run)
        runs.append(round(seconds, 3))
        height = table.height
        del table  # not held while the next call builds its own
    return runs, height


def prepare_raw(params: dict[str, Any]) -> dict[str, Any]:
    """Generate (or find in the cache) a raw day; returns its input root."""
    from bench import data

    root, seconds = timed(data.raw_day, int(params["records"]), bad=True)
    size = sum(p.stat().st_size for p in root.rglob("part-*"))
    return {"input_uri": str(root), "bytes": size, "seconds": round(seconds, 2)}


def ingest_validate(params: dict[str, Any]) -> dict[str, Any]:
    """ingest_and_validate, with the peak bytes of its local files (the spilled record ids, the
    rejects' parts)."""
    from evaluation import stages

    counts, timing, disk = _timed(params, stages.ingest_and_validate,
                                  "great_expectations", "evaluation.storage.validation", "evaluation.storage.ingest")
    return {**timing, "counts": counts, "peak_temp_bytes": disk}


def plan(params: dict[str, Any]) -> dict[str, Any]:
    """plan_chunks, with the peak bytes of its local files (the shuffle's buckets)."""
    from evaluation import stages

    chunks, timing, disk = _timed(params, stages.plan_chunks, "evaluation.calling.client")
    return {**timing, "chunks": len(chunks), "records": sum(c["records"] for c in chunks), "peak_temp_bytes": disk}


#: Share of (record, judge) replies a re-run judges again (as ``rejudge_parse_errors`` would).
REJUDGED_SHARE = 0.04


def _reply(judge: str, rng: Any, ticket: str) -> str:
    """A judge's well-formed reply of realistic length, its figures and wording varying per record."""
    import json

    score = [round(float(x), 2) for x in rng.random(5)]
    if judge == "rag":
        return json.dumps({
            "evaluation_status": "success", "faithfulness": score[0],
            "faithfulness_explanation": f"The answer's figure for {ticket} is stated in ctx-{int(score[1] * 9) + 1}.",
            "context_relevance": score[1], "context_relevance_explanation": "The context covers the question.",
            "answer_relevance": score[2], "answer_relevance_explanation": "The answer addresses what was asked.",
            "semantic_similarity": score[3], "semantic_similarity_explanation": None, "reason": None, "error": None})
    if judge == "masis":
        return json.dumps({"faithfulness": score[0], "relevance": score[1], "completeness": score[2],
                           "reasoning_quality": score[3], "overall_score": score[4],
                           "improvement_suggestions": [f"cite the source of {ticket}'s figure"]})
    return json.dumps({"checks": [{"id": "states-value", "satisfied": score[0] > 0.3, "reasoning": f"{ticket}: states it"},
                                  {"id": "cites", "satisfied": score[1] > 0.3, "reasoning": "cites ctx-1"}],
                       "overall_reasoning": f"mostly right for {ticket}"})


def _ledger_summary(store: Any) -> dict[str, int]:
    from bench import data
    from evaluation import storage

    objects = [o for o in store.list(storage.ledger_prefix(data.DAY)) if o.key.endswith(".parquet")]
    return {"objects": len(objects), "bytes": sum(o.size for o in objects)}


def stage_judged(params: dict[str, Any]) -> dict[str, Any]:
    """Stand-in for the judge stage: per planned chunk, three judged rows per record (PARSED_SCHEMA),
    its ``judge_calls`` part with the prompts the judges render for its records (each record's
    question made distinct, so no two records share a prompt) and a generated reply, and its
    replies in the ledger (an object per 200 replies, as a judge task flushes), written where
    judge_chunk writes them. Keeps ``REJUDGED_SHARE`` of the replies' hashes for ``rerun_ledger``."""
    import json

    import numpy as np
    import polars as pl

    from bench import data
    from evaluation import stages, storage
    from evaluation.contract import schemas
    from evaluation.storage.ledger import Ledger

    cfg = _config(params)
    stores = stages.Stores.open(cfg)
    plan = stages.read_manifest(cfg, stores).plan
    assert plan is not None, "plan has not run"
    started = time.monotonic()
    rng = np.random.default_rng(7)
    rows = calls_rows = prompt_bytes = 0
    rejudged: list[dict[str, Any]] = []
    for index in range(plan.chunks):
        records = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "records", index))
        judged = data.parsed_rows(0, seed=index, record_ids=records)
        storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", index), judged)
        key_range = stages.key_range(records)
        ledger = Ledger(stores.out, cfg.date, f"{cfg.run_id}-chunk{index:05d}", key_range=key_range)
        calls, picked = _staged_calls(cfg, ledger, records, plan.call_parameters, rng)
        ledger.flush()
        low, high = key_range or (None, None)
        rejudged.extend({"chunk": index, "low": low, "high": high, **pick} for pick in picked)
        if index == plan.chunks // 2:
            lookup = {"key_range": key_range, "hashes": [c["request_hash"] for c in calls]}
            (Path(params["work"]) / "lookup.json").write_text(json.dumps(lookup))
        storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "calls", index),
                              pl.DataFrame(calls, schema=schemas.CALLS_SCHEMA))
        rows += judged.height
        calls_rows += len(calls)
        prompt_bytes += sum(len(c["system_prompt"].encode()) + len(c["user_prompt"].encode()) for c in calls)
    pl.DataFrame(rejudged).write_parquet(os.path.join(params["work"], "rejudged.parquet"))
    return {"seconds": round(time.monotonic() - started, 3), "rows": rows, "calls": calls_rows,
            "prompt_bytes": prompt_bytes, "ledger": _ledger_summary(stores.out)}


def _staged_calls(cfg: Any, ledger: Any, records: Any, parameters: dict[str, Any],
                  rng: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A chunk's ``judge_calls`` rows, one per prompt a judge renders for its records, each reply
    recorded in ``ledger``, and the ``REJUDGED_SHARE`` of them a re-run judges again."""
    import datetime as dt

    from evaluation.contract.schemas import record_from_row
    from evaluation.judges import RenderedPrompt
    from evaluation.judges.dispatch import route
    from evaluation.storage.ledger import LedgerEntry, request_hash

    when = dt.datetime(2026, 11, 21, 3, tzinfo=dt.UTC)
    calls, picked = [], []
    for row in records.iter_rows(named=True):
        record = record_from_row(row)
        record = record.model_copy(update={"question": f"{record.question} (ticket {record.record_id})"})
        for judge in cfg.judges:
            prompt = route(judge, record)
            if not isinstance(prompt, RenderedPrompt):  # not applicable: no call
                continue
            digest = request_hash(cfg.judge_model, prompt, parameters)
            reply = _reply(judge, rng, record.record_id)
            entry: LedgerEntry = {
                "request_hash": digest, "judge": judge, "judge_model": cfg.judge_model,
                "prompt_version": prompt.prompt_version, "raw_response": reply,
                "input_tokens": (len(prompt.system) + len(prompt.user)) // 4, "output_tokens": len(reply) // 4,
                "cost_usd": 1e-4, "latency_ms": float(rng.integers(300, 3000)), "attempts": 1, "judged_at": when}
            ledger.record(entry)
            calls.append({**entry, "run_id": cfg.run_id, "record_id": record.record_id, "system_prompt": prompt.system,
                          "user_prompt": prompt.user, "error": None, "error_class": None, "cached": False,
                          "redactions": 0})
            if rng.random() < REJUDGED_SHARE:
                picked.append({"request_hash": digest, "judge": judge, "prompt_version": prompt.prompt_version})
    return calls, picked


def score_land(params: dict[str, Any]) -> dict[str, Any]:
    """score_and_land (which compacts the day's ledger once landed), with the peak bytes of its
    local staging and the landed judge_calls' size."""
    from bench import data
    from evaluation import stages, storage

    result, timing, disk = _timed(params, stages.score_and_land, "evaluation.judges", "evaluation.storage.summary",
                                  "evaluation.stages.versions")
    store = storage.LocalStore(params["output_uri"])
    calls_bytes = os.path.getsize(store.uri(storage.landed_key(store, "judge_calls", data.DAY) or "judge_calls"))
    return {**timing, "rows": result["rows"], "reconciled": result["reconciled"], "peak_temp_bytes": disk,
            "judge_calls_bytes": calls_bytes, "ledger": _ledger_summary(store)}


def judge_lookup(params: dict[str, Any]) -> dict[str, Any]:
    """The judge stage's bookkeeping that meets the day: the ledger lookup of one chunk (the middle
    one: its request hashes, in its key range, as ``prepare_chunk`` asks it), on the ledger as it
    is (before the landing: an object per 200 replies; after: compacted). Peak RSS after the
    imports, objects read, replies found."""
    import json

    from bench import data
    from evaluation import storage
    from evaluation.storage.ledger import Ledger

    chunk = json.loads((Path(params["work"]) / "lookup.json").read_text())
    store = storage.LocalStore(params["output_uri"])
    low, high = chunk["key_range"]
    ledger = Ledger(store, data.DAY, "bench-lookup", key_range=(low, high))
    told: list[tuple[Any, ...]] = []  # the lookup's own account: found, asked, objects read, skipped

    class Account(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith("ledger lookup:"):
                told.append(tuple(record.args or ()))

    logger = logging.getLogger("evaluation.storage.ledger")
    logger.addHandler(Account(logging.DEBUG))
    logger.setLevel(logging.DEBUG)
    rss_before = peak_rss_mib()
    found, seconds = timed(lambda: ledger.lookup(set(chunk["hashes"])))
    _, _, read, skipped = told[-1]
    return {"seconds": round(seconds, 3), "hashes": len(chunk["hashes"]), "found": len(found), "objects_read": read,
            "objects_skipped": skipped, "ledger": _ledger_summary(store), "rss_after_imports_mib": round(rss_before, 1)}


def rerun_ledger(params: dict[str, Any]) -> dict[str, Any]:
    """A re-run's ledger writes: the replies ``stage_judged`` kept (``REJUDGED_SHARE`` of the day's)
    judged again, an object per 200 replies per chunk as a judge task writes them; then the
    compaction a landing runs. The ledger's objects and bytes before and after it."""
    import datetime as dt

    import polars as pl

    from bench import data
    from evaluation import storage
    from evaluation.storage.ledger import Ledger, compact

    store = storage.LocalStore(params["output_uri"])
    again = pl.read_parquet(os.path.join(params["work"], "rejudged.parquet"))
    when = dt.datetime(2026, 11, 21, 9, tzinfo=dt.UTC)
    for (index, low, high), group in again.group_by("chunk", "low", "high", maintain_order=True):
        ledger = Ledger(store, data.DAY, f"rerun-chunk{index:05d}", key_range=(low, high) if low else None)
        for row in group.iter_rows(named=True):
            ledger.record({"request_hash": row["request_hash"], "judge": row["judge"], "judge_model": "openai/judge-model",
                           "prompt_version": row["prompt_version"], "raw_response": '{"faithfulness": 0.5}',
                           "input_tokens": 400, "output_tokens": 60, "cost_usd": 1e-4, "latency_ms": 900.0,
                           "attempts": 1, "judged_at": when})
        ledger.flush()
    before = _ledger_summary(store)
    _, seconds = timed(compact, store, data.DAY)
    return {"replies": again.height, "before": before, "after": _ledger_summary(store),
            "compact_seconds": round(seconds, 3)}


def score_table(params: dict[str, Any]) -> dict[str, Any]:
    """``score_table`` on ``rows`` judged rows held in memory (read before timing)."""
    import polars as pl

    from bench import data
    from evaluation.judges import score_table as score

    frame = pl.read_parquet(data.parsed_file(int(params["rows"])))
    rss_loaded = peak_rss_mib()
    score(frame.head(1000))  # first use of each expression kernel
    runs, rows = _repeated(params, lambda: score(frame))
    return {"seconds": min(runs), "runs": runs, "rows": rows, "rss_input_loaded_mib": round(rss_loaded, 1)}


def summary(params: dict[str, Any]) -> dict[str, Any]:
    """``build_daily_summary`` over ``rows`` scored rows, scanned lazily from Parquet as
    score_and_land does."""
    import polars as pl

    from bench import data
    from evaluation.storage.summary import build_daily_summary

    path = data.scored_file(int(params["rows"]))
    rss_before = peak_rss_mib()
    runs, groups = _repeated(params, lambda: build_daily_summary(pl.scan_parquet(path), "bench"))
    return {"seconds": min(runs), "runs": runs, "groups": groups, "rss_before_mib": round(rss_before, 1)}


def prepare_tables(params: dict[str, Any]) -> dict[str, Any]:
    """Generate (or find in the cache) the judged and scored million-row files."""
    from bench import data

    rows = int(params["rows"])
    (parsed, scored), seconds = timed(lambda: (data.parsed_file(rows), data.scored_file(rows)))
    return {"parsed": str(parsed), "scored": str(scored), "seconds": round(seconds, 2)}


if __name__ == "__main__":
    child_main({"prepare_raw": prepare_raw, "ingest_validate": ingest_validate, "plan": plan,
                "stage_judged": stage_judged, "score_land": score_land, "rerun_ledger": rerun_ledger,
                "judge_lookup": judge_lookup, "score_table": score_table, "summary": summary,
                "prepare_tables": prepare_tables})
