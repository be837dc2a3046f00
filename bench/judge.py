"""Judge benchmarks (children of :mod:`bench.run`).

``stage``: one judge chunk of N unique records through :func:`evaluation.stages.judge_chunk`
against the local OpenAI-compatible server (a separate process with a fixed latency), timed from
the call of the stage to its return (rendering, ledger, calls, parsing and staging included).

``per_record``: every judge on N unique records; LLM calls and prompt tokens per judged record.
"""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
import tempfile
import time
from typing import TYPE_CHECKING, Any

from bench.common import LoadProbe, child_main, cpu_seconds, timed

if TYPE_CHECKING:
    from evaluation.contract.config import JudgeName, RunConfig
    from evaluation.judges import RenderedPrompt
    from evaluation.stages import Stores

#: A reply every judge parses as a success: rag's status and metrics, masis's dimensions, the
#: prompt judge's freeform score and its rubric checks (the ids of the synthetic rubrics).
GOOD_REPLY = json.dumps({
    "evaluation_status": "success",
    "faithfulness": 0.9, "faithfulness_explanation": "Supported by ctx-1.",
    "context_relevance": 0.8, "context_relevance_explanation": "The context covers the question.",
    "answer_relevance": 0.85, "answer_relevance_explanation": "The answer addresses the question.",
    "semantic_similarity": 0.7, "semantic_similarity_explanation": "Close to the reference.",
    "relevance": 0.8, "completeness": 0.75, "reasoning_quality": 0.8,
    "improvement_suggestions": ["Cite every sentence."],
    "score": 0.8, "hits": ["States the value."], "misses": [], "reasoning": "Matches the expected outcome.",
    "checks": [{"id": "states-value", "satisfied": True, "reasoning": "It states the value."},
               {"id": "cites", "satisfied": True, "reasoning": "It cites ctx-1."}],
    "overall_reasoning": "Both checks hold.",
})


class CallTimer:
    """Wraps ``JudgeClient.call_many``: wall time inside it and the calls it made."""

    def __init__(self) -> None:
        from evaluation.calling.client import JudgeClient

        self.seconds = 0.0
        self.calls = 0
        original = JudgeClient.call_many

        async def call_many(client: Any, prompts: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                outcomes = await original(client, prompts, *args, **kwargs)
            finally:
                self.seconds += time.monotonic() - started
            self.calls += sum(1 for o in outcomes if o is not None)
            return outcomes

        JudgeClient.call_many = call_many  # type: ignore[method-assign,assignment]  # a timing wrapper, same call


def _prepare(records: int, judges: list[JudgeName], params: dict[str, Any]) -> tuple[RunConfig, Stores]:
    from bench import data
    from evaluation import stages
    from evaluation.contract.config import RunConfig

    raw = data.raw_day(records, unique=True, bad=False)
    cfg = RunConfig(
        date=data.DAY, input_uri=str(raw), output_uri=tempfile.mkdtemp(prefix="bench-judge-"), run_id="bench",
        judges=judges, judge_model=params.get("model", "openai/mock-judge"), api_base=params["api_base"],
        concurrency=params.get("concurrency", 8), chunk_size=records, timeout_s=60.0,
    )
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    chunks = stages.plan_chunks(cfg, stores)
    assert len(chunks) == 1, chunks
    return cfg, stores


def chunk_prompts(cfg: RunConfig, stores: Stores, judge: JudgeName = "rag") -> list[RenderedPrompt]:
    """A judge's prompts of the staged chunk, rendered as the stage renders them."""
    from evaluation import storage
    from evaluation.contract.schemas import record_from_row
    from evaluation.judges import render

    frame = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "records", 0))
    rendered = [render(judge, record_from_row(row)) for row in frame.iter_rows(named=True)]
    return [p for p in rendered if p is not None]


def _warm_up(cfg: RunConfig) -> float:
    """One call outside the measured stage: litellm sets up its provider and HTTP client lazily."""
    from evaluation.calling.client import JudgeClient
    from evaluation.judges import RenderedPrompt

    started = time.monotonic()
    client = JudgeClient(cfg.judge_model, api_base=cfg.api_base, api_key="bench-key")
    prompt = RenderedPrompt(judge="rag", prompt_version="warm-up", system="warm up", user="warm up", key_fields=())
    outcome = asyncio.run(client.call(prompt))
    assert outcome.ok, outcome
    return time.monotonic() - started


def stage(params: dict[str, Any]) -> dict[str, Any]:
    """Item 1: records/s of the judge stage against concurrency / latency."""
    import polars as pl

    from evaluation import stages, storage

    records = int(params["records"])
    cfg, stores = _prepare(records, [params.get("judge", "rag")], params)
    warm_up_s = _warm_up(cfg)
    timer = CallTimer()
    cpu_before = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN)
    probe = LoadProbe(watched=[int(params["server_pid"])] if params.get("server_pid") else []).start()
    result, wall = timed(stages.judge_chunk, cfg, stores, 0, api_key="bench-key")
    load = probe.stop()
    cpu = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu_before
    judged = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", 0))
    statuses = dict(judged.group_by("judge_status").len().iter_rows())
    limit = cfg.concurrency / float(params["latency"])
    shutil.rmtree(cfg.output_uri, ignore_errors=True)
    return {
        "records": records,
        "concurrency": cfg.concurrency,
        "load": load,
        "seconds": round(wall, 3),
        "records_per_s": round(records / wall, 1),
        "limit_per_s": limit,
        "ratio": round(records / wall / limit, 3),
        "calls": timer.calls,
        "calls_made": result["calls_made"],
        "calls_phase_s": round(timer.seconds, 3),
        "calls_phase_ratio": round(timer.calls / timer.seconds / limit, 3) if timer.seconds else None,
        "outside_calls_s": round(wall - timer.seconds, 3),
        "cpu_ms_per_call": round(cpu / max(timer.calls, 1) * 1000, 2),
        "statuses": statuses,
        "ok": int(judged.filter(pl.col("judge_status") == "ok").height),
        "warm_up_s": round(warm_up_s, 3),
    }


def per_record(params: dict[str, Any]) -> dict[str, Any]:
    """Item 2: LLM calls and prompt tokens per judged record, per judge."""
    import polars as pl

    from evaluation import stages, storage
    from evaluation.calling.client import count_tokens

    records = int(params["records"])
    cfg, stores = _prepare(records, ["rag", "masis", "prompt"], params)
    result = stages.judge_chunk(cfg, stores, 0, api_key="bench-key")
    judged = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", 0))
    calls = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "calls", 0))
    # Prompt tokens by litellm's counter for a widely used judge model's tokenizer.
    tokenizer_model = params.get("tokenizer_model", "gpt-4o-mini")
    tokens = {j: [count_tokens(tokenizer_model, p) for p in chunk_prompts(cfg, stores, j)] for j in cfg.judges}
    judges = {}
    for judge in cfg.judges:
        rows = judged.filter(pl.col("judge") == judge)
        judged_rows = rows.filter(pl.col("judge_status") != "skipped")
        made = calls.filter((pl.col("judge") == judge) & ~pl.col("cached"))
        attempts = int(made["attempts"].sum() or 0)
        n = judged_rows.height
        judges[judge] = {
            "records": rows.height,
            "judged": n,
            "ok": int(rows.filter(pl.col("judge_status") == "ok").height),
            "statuses": dict(rows.group_by("judge_status").len().iter_rows()),
            "http_attempts": attempts,
            "calls_per_record": round(attempts / n, 4) if n else None,
            "prompt_tokens_per_record": round(sum(tokens[judge]) / len(tokens[judge]), 1) if tokens[judge] else None,
            "server_prompt_tokens_per_record": round(float(made.select(pl.mean("input_tokens")).item() or 0.0), 1),
            "output_tokens_per_record": round(float(made.select(pl.mean("output_tokens")).item() or 0.0), 1),
        }
    return {"records": records, "tokenizer_model": tokenizer_model, "calls_made": result["calls_made"],
            "judges": judges}


def cpu_per_call(params: dict[str, Any]) -> dict[str, Any]:
    """CPU of one judge call through litellm, one call at a time (nothing else on the loop): the
    client's own cost per call, which bounds the calls/s one core can drive."""
    import statistics

    from bench import data
    from evaluation.calling.client import JudgeClient
    from evaluation.contract.config import InputRecord
    from evaluation.judges import render
    from evaluation.testing import synthetic

    client = JudgeClient(params.get("model", "openai/mock-judge"), api_base=params["api_base"], api_key="bench-key",
                         concurrency=1)
    prompts: list[RenderedPrompt] = []
    for line in synthetic.generate_day(data.DAY, 60, bad=False):
        record = json.loads(line)
        record["metadata"] = json.dumps(record.get("metadata"))
        prompt = render("rag", InputRecord.model_validate(record))
        assert prompt is not None
        prompts.append(prompt)

    async def measure() -> tuple[list[float], list[float]]:
        await client.call_many(prompts[:5])
        cpu, wall = [], []
        for prompt in prompts[5:]:
            cpu_started, started = time.process_time(), time.monotonic()
            outcome = await client.call(prompt)
            await asyncio.sleep(0)  # let litellm's logging tasks of this call run
            cpu.append(time.process_time() - cpu_started)
            wall.append(time.monotonic() - started)
            assert outcome.ok, outcome
        return cpu, wall

    cpu, wall = asyncio.run(measure())
    return {"calls": len(cpu), "cpu_ms": round(statistics.median(cpu) * 1000, 2),
            "cpu_ms_mean": round(statistics.mean(cpu) * 1000, 2),
            "overhead_ms": round((statistics.median(wall) - float(params["latency"])) * 1000, 2)}


def all_runs(params: dict[str, Any]) -> dict[str, Any]:
    """Items 1 and 2 in one process (one set of imports): ``per_record``, then ``stage`` for each
    entry of ``runs``, repeated (up to ``repeats`` times, while ``deadline_s`` allows) when other
    processes held more than ``busy_cores`` cores during a run; the best run is kept."""
    started = time.monotonic()
    common = {k: v for k, v in params.items() if k not in ("runs", "per_record")}
    out: dict[str, Any] = {"per_record": per_record({**common, **params["per_record"]}), "stages": [],
                           "cpu_per_call": cpu_per_call(common)}
    for run in params["runs"]:
        attempts = []
        for attempt in range(1 + int(params.get("repeats", 1))):
            if attempt and time.monotonic() - started > float(params.get("deadline_s", 600)):
                break
            attempts.append(stage({**common, **run}))
            if attempts[-1]["load"]["cores_others"] <= float(params.get("busy_cores", 0.5)):
                break
        best = max(attempts, key=lambda a: a["ratio"])
        best["attempts"] = [{"ratio": a["ratio"], "cores_others": a["load"]["cores_others"]} for a in attempts]
        out["stages"].append(best)
    return out


if __name__ == "__main__":
    child_main({"stage": stage, "per_record": per_record, "all": all_runs})
