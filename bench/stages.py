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

import time
from collections.abc import Callable
from typing import Any

from bench.common import child_main, peak_rss_mib


def _config(params: dict[str, Any]) -> Any:
    from bench import data
    from evaluation.contract import RunConfig

    return RunConfig(
        date=data.DAY, input_uri=params["input_uri"], output_uri=params["output_uri"], run_id="bench",
        judges=["rag", "masis", "prompt"], judge_model="openai/judge-model",
        chunk_size=int(params.get("chunk_size", 500)),
    )


def _timed(params: dict[str, Any], stage: Callable[[Any, Any], Any], *modules: str) -> tuple[Any, dict[str, Any]]:
    """``stage(cfg, stores)`` and its time, once `modules` are imported: Great Expectations takes
    seconds, and the targets are about the stage's work, not the interpreter's start. The timing
    holds the peak RSS after the imports."""
    import importlib

    from evaluation import stages

    for module in modules:
        importlib.import_module(module)
    rss_after_imports = peak_rss_mib()
    cfg = _config(params)
    stores = stages.Stores.open(cfg)
    started = time.monotonic()
    result = stage(cfg, stores)
    return result, {"seconds": round(time.monotonic() - started, 3), "rss_after_imports_mib": round(rss_after_imports, 1)}


def _repeated(params: dict[str, Any], run: Callable[[], Any]) -> tuple[list[float], int]:
    """The times of ``repeat`` (default 3) calls of `run`, and the height of the table it returns."""
    runs, height = [], 0
    for _ in range(int(params.get("repeat", 3))):
        started = time.monotonic()
        table = run()
        runs.append(round(time.monotonic() - started, 3))
        height = table.height
        del table  # not held while the next call builds its own
    return runs, height


def prepare_raw(params: dict[str, Any]) -> dict[str, Any]:
    """Generate (or find in the cache) a raw day; returns its input root."""
    from bench import data

    started = time.monotonic()
    root = data.raw_day(int(params["records"]), bad=True)
    size = sum(p.stat().st_size for p in root.rglob("part-*"))
    return {"input_uri": str(root), "bytes": size, "seconds": round(time.monotonic() - started, 2)}


def ingest_validate(params: dict[str, Any]) -> dict[str, Any]:
    from evaluation import stages

    counts, timing = _timed(params, stages.ingest_and_validate,
                            "great_expectations", "evaluation.validation", "evaluation.ingest")
    return {**timing, "counts": counts}


def plan(params: dict[str, Any]) -> dict[str, Any]:
    from evaluation import stages

    chunks, timing = _timed(params, stages.plan_chunks, "evaluation.client")
    return {**timing, "chunks": len(chunks), "records": sum(c["records"] for c in chunks)}


def stage_judged(params: dict[str, Any]) -> dict[str, Any]:
    """Stand-in for the judge stage: per planned chunk, three judged rows per record (PARSED_SCHEMA)
    and an empty judge-calls part, written where judge_chunk writes them."""
    import polars as pl

    from bench import data
    from evaluation import stages, storage

    cfg = _config(params)
    stores = stages.Stores.open(cfg)
    plan = stages.read_manifest(cfg, stores).plan
    assert plan is not None, "plan has not run"
    started = time.monotonic()
    rows = 0
    for index in range(plan.chunks):
        records = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "records", index))
        judged = data.parsed_rows(0, seed=index, record_ids=records)
        storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", index), judged)
        storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "calls", index),
                              pl.DataFrame(schema=stages.CALLS_SCHEMA))
        rows += judged.height
    return {"seconds": round(time.monotonic() - started, 3), "rows": rows}


def score_land(params: dict[str, Any]) -> dict[str, Any]:
    from evaluation import stages

    result, timing = _timed(params, stages.score_and_land, "evaluation.judges", "evaluation.summary",
                            "evaluation.versions")
    return {**timing, "rows": result["rows"], "reconciled": result["reconciled"]}


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
    from evaluation.summary import build_daily_summary

    path = data.scored_file(int(params["rows"]))
    rss_before = peak_rss_mib()
    runs, groups = _repeated(params, lambda: build_daily_summary(pl.scan_parquet(path), data.DAY, "bench"))
    return {"seconds": min(runs), "runs": runs, "groups": groups, "rss_before_mib": round(rss_before, 1)}


def prepare_tables(params: dict[str, Any]) -> dict[str, Any]:
    """Generate (or find in the cache) the judged and scored million-row files."""
    from bench import data

    started = time.monotonic()
    rows = int(params["rows"])
    parsed, scored = data.parsed_file(rows), data.scored_file(rows)
    return {"parsed": str(parsed), "scored": str(scored), "seconds": round(time.monotonic() - started, 2)}


if __name__ == "__main__":
    child_main({
        "prepare_raw": prepare_raw, "ingest_validate": ingest_validate, "plan": plan,
        "stage_judged": stage_judged, "score_land": score_land, "score_table": score_table,
        "summary": summary, "prepare_tables": prepare_tables,
    })
