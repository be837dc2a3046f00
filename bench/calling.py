"""Calling benchmarks (children of :mod:`bench.run`, item 8).

``compare``: a bare ``litellm.acompletion`` loop (an ``asyncio.Semaphore`` of ``c``, the same
rendered rag prompts, ``openai/`` model, JSON mode, nothing else) beside the pipeline's judge stage
(:func:`evaluation.stages.judge_chunk` on a chunk of the same records: rendering, ledger, calls,
parsing and staging), alternately in one process against the same server, at each concurrency;
each measured ``repeats`` times, the median kept.

``rated``: the judge stage against a server that enforces a rate (requests per minute), with the
budget set to that rate or without one (adaptive concurrency alone): achieved rate, 429s, rows
lost (``call_error``).

``faulty``: a 400-record, 2-judge day at concurrency 32 against a 200 ms server whose first
attempts get random 429s (20%, Retry-After 1 s) and 500s (5%) that do not depend on the rate,
with the client's adaptive limit beside one that never shrinks (keeps its slots busy): seconds each
and their ratio.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from unittest import mock

from bench.common import Bench, LoadProbe, child_main, cpu_seconds, judge_server, timed, wait_for_quiet
from bench.judge import GOOD_REPLY, _prepare, _warm_up, chunk_prompts

if TYPE_CHECKING:
    from evaluation.judges import RenderedPrompt

MODEL = "openai/mock-judge"
KEY = "bench-key"


def _bare(prompts: list[RenderedPrompt], concurrency: int, api_base: str | None) -> list[str]:
    """The bare loop: litellm.acompletion under a semaphore, the reply's text kept."""
    import litellm

    async def run() -> list[str]:
        semaphore = asyncio.Semaphore(concurrency)

        async def one(prompt: RenderedPrompt) -> str:
            async with semaphore:
                response = await litellm.acompletion(
                    model=MODEL, messages=prompt.messages, api_base=api_base, api_key=KEY, temperature=0.0,
                    response_format={"type": "json_object"}, timeout=60.0, num_retries=0, max_retries=0)
                return str(response.choices[0].message.content)

        return await asyncio.gather(*(one(p) for p in prompts))

    return asyncio.run(run())


def _measure(calls: int, run: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """Rate, CPU per call and others' load of ``run(*args, **kwargs)`` making `calls` calls; and what it returned."""
    probe = LoadProbe().start()
    cpu_before = cpu_seconds()
    value, wall = timed(run, *args, **kwargs)
    cpu = cpu_seconds() - cpu_before
    return {"seconds": round(wall, 3), "per_s": round(calls / wall, 1), "cpu_ms_per_call": round(cpu / calls * 1000, 2),
            "cores_others": probe.stop()["cores_others"]}, value


def compare(params: dict[str, Any]) -> dict[str, Any]:
    """Bare loop and judge stage, alternately, at each concurrency of ``concurrencies``."""
    from evaluation import stages
    from evaluation.calling.client import configure

    configure()  # both sides: the same litellm set-up (price map offline, loggers quiet, gc frozen)
    latency = float(params["latency"])
    out: dict[str, Any] = {"latency_s": latency, "runs": []}
    for concurrency, records in zip(params["concurrencies"], params["records"], strict=True):
        cfg, stores = _prepare(int(records), ["rag"], {**params, "concurrency": concurrency})
        prompts = chunk_prompts(cfg, stores)
        _warm_up(cfg)
        _bare(prompts[:8], 8, cfg.api_base)
        bare, stage = [], []
        for _ in range(int(params.get("repeats", 3))):
            bare.append(_measure(len(prompts), _bare, prompts, concurrency, cfg.api_base)[0])
            # the ledger emptied each time: every record a real call
            shutil.rmtree(os.path.join(cfg.output_uri, "_ledger"), ignore_errors=True)
            measured, result = _measure(len(prompts), stages.judge_chunk, cfg, stores, 0, api_key=KEY)
            stage.append({**measured, "statuses": result["statuses"], "calls_made": result["calls_made"]})
        limit = concurrency / latency
        bare_rate = statistics.median(b["per_s"] for b in bare)
        stage_rate = statistics.median(s["per_s"] for s in stage)
        out["runs"].append({
            "concurrency": concurrency, "calls": len(prompts), "limit_per_s": limit,
            "bare_per_s": bare_rate, "stage_per_s": stage_rate,
            "bare_share": round(bare_rate / limit, 3), "stage_share": round(stage_rate / limit, 3),
            "ratio": round(stage_rate / bare_rate, 3),
            "ratios": [round(s["per_s"] / b["per_s"], 3) for b, s in zip(bare, stage, strict=True)],
            "bare": bare, "stage": stage,
        })
        shutil.rmtree(cfg.output_uri, ignore_errors=True)
    return out


def rated(params: dict[str, Any]) -> dict[str, Any]:
    """A day's chunk against a server that enforces ``rpm`` (in this process, on its own thread),
    with the budget set to that rate (``budget``) or none (adaptive concurrency alone)."""
    from evaluation import stages
    from evaluation.testing.openai_server import OpenAIServer

    rpm = float(params["rpm"])
    with OpenAIServer(lambda body: GOOD_REPLY, latency_s=float(params["latency"]), rpm=rpm,
                      rate_burst_s=float(params.get("burst_s", 1.0))) as server:
        cfg, stores = _prepare(int(params["records"]), ["rag"], {**params, "api_base": server.base_url})
        cfg = cfg.model_copy(update={"judge_rpm": rpm if params.get("budget", True) else None})
        _warm_up(cfg)
        server.reset()
        probe = LoadProbe().start()
        result, wall = timed(stages.judge_chunk, cfg, stores, 0, api_key=KEY)
        load = probe.stop()
        arrivals = sorted(r.received_at for r in server.requests)
        throttled = server.throttled_count
    shutil.rmtree(cfg.output_uri, ignore_errors=True)
    achieved = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]) if len(arrivals) > 1 else 0.0
    return {"rpm": rpm, "rate_per_s": rpm / 60.0, "budget": cfg.judge_rpm, "concurrency": cfg.concurrency,
            "seconds": round(wall, 2), "calls_made": result["calls_made"], "admitted": len(arrivals),
            "achieved_per_s": round(achieved, 2), "achieved_share": round(achieved / (rpm / 60.0), 3),
            "throttled_429": throttled, "statuses": result["statuses"],
            "rows_lost": result["statuses"].get("call_error", 0), "cores_others": load["cores_others"]}


def faulty(params: dict[str, Any]) -> dict[str, Any]:
    """See the module: the same day judged with the adaptive limit and with one that never shrinks."""
    from evaluation import stages
    from evaluation.calling import client as client_module
    from evaluation.calling.ratelimit import AdaptiveLimit
    from evaluation.testing.openai_server import OpenAIServer
    from evaluation.testing.replies import FaultPlan

    class Busy(AdaptiveLimit):
        """Keeps every slot busy: no 429 shrinks it (the baseline)."""

        def throttled(self, epoch: int, caller_rate: bool = True) -> bool:
            return False

    faults = FaultPlan(rate_limit=0.2, server_error=0.05, hang=0.0, malformed=0.0, retry_after=1,
                       max_faults_per_body=3)  # every call lands within the default 4 attempts
    out: dict[str, Any] = {}
    for name, limit_class in (("busy", Busy), ("adaptive", AdaptiveLimit)):
        with OpenAIServer(lambda body: GOOD_REPLY, latency_s=float(params["latency"]), faults=faults,
                          seed=7) as server:
            cfg, stores = _prepare(int(params["records"]), ["rag", "prompt"],
                                   {**params, "api_base": server.base_url})
            _warm_up(cfg)
            server.reset()
            with mock.patch.object(client_module, "AdaptiveLimit", limit_class):  # this child process only
                result, wall = timed(stages.judge_chunk, cfg, stores, 0, api_key=KEY)
            out[name] = {"seconds": round(wall, 2), "calls_made": result["calls_made"],
                         "faults": server.fault_counts, "rows_lost": result["statuses"].get("call_error", 0)}
        shutil.rmtree(cfg.output_uri, ignore_errors=True)
    out["ratio"] = round(out["adaptive"]["seconds"] / out["busy"]["seconds"], 3)
    return out


# --------------------------------------------------------------------------------------------
# Item 8 of ``make bench`` (runs in bench.run's process; each measurement in a child)


def calling_items(bench: Bench) -> None:
    """The bare-litellm loop beside the judge stage at 8, 32 and 128 calls in flight, and a
    rate-limited day with and without a budget."""
    latency, quick = 0.2, bench.args.quick
    wait_for_quiet()
    with judge_server(latency, GOOD_REPLY) as server:
        result = bench.child("calling", "compare", {
            "latency": latency, "api_base": server.base_url, "concurrencies": [8, 32, 128],
            "records": [200, 400, 400] if quick else [800, 2000, 2000], "repeats": 1 if quick else 3,
        }, watched=[server.process.pid], timeout_s=2400)
    bench.details["calling"] = result
    for run in result["runs"]:
        c, repeats = run["concurrency"], len(run["ratios"])
        others = statistics.median(m["cores_others"] for m in run["bare"] + run["stage"])
        bench.row(8, f"bare litellm.acompletion loop and judge stage, {run['calls']:,} calls, c={c}: "
                     f"share of the limit c / 200 ms ({run['limit_per_s']:.0f}/s), median of {repeats}",
                  f"bare {run['bare_share']:.2f} ({run['bare_per_s']:.0f}/s), stage {run['stage_share']:.2f} "
                  f"({run['stage_per_s']:.0f}/s)", "none set (reported)", None, cores_others=others)
        target = 0.95 if c == 32 else None
        bench.row(8, f"judge stage ÷ bare loop, c={c}, same run (each repeat: "
                     f"{', '.join(f'{r:.2f}' for r in run['ratios'])})",
                  f"{run['ratio']:.2f}", f"≥ {target}" if target else "none set (reported)",
                  None if target is None else run["ratio"] >= target, cores_others=others)
    rpm = 3000.0
    for budget in (True, False):
        wait_for_quiet(20)
        rated_run = bench.child("calling", "rated", {
            "rpm": rpm, "latency": latency, "records": 300 if quick else 1000, "concurrency": 32, "budget": budget,
        }, keep=f"rated_{'budget' if budget else 'adaptive'}", timeout_s=900)
        how = f"judge_rpm {rpm:.0f}" if budget else "no budget (adaptive concurrency)"
        holds = rated_run["rows_lost"] == 0 and (not budget or rated_run["achieved_share"] >= 0.9)
        bench.row(8, f"rate-limited day: {rated_run['calls_made']:,} calls, c=32, server enforcing {rpm:.0f} rpm, "
                     f"{how}: achieved rate, 429s, rows lost",
                  f"{rated_run['achieved_share']:.2f} of the rate ({rated_run['achieved_per_s']:.1f}/s), "
                  f"{rated_run['throttled_429']} × 429, {rated_run['rows_lost']} rows lost",
                  "≥ 0.9 of the rate, 0 lost" if budget else "0 rows lost", holds,
                  cores_others=rated_run["cores_others"])
    wait_for_quiet(20)
    run = bench.child("calling", "faulty", {"latency": latency, "records": 400, "concurrency": 32}, keep="faulty",
                      timeout_s=900)
    bench.row(8, "400 records × 2 judges, c=32, 200 ms server, random 429s (20%, Retry-After 1 s) and 500s (5%): "
                 "adaptive client ÷ one that keeps its slots busy",
              f"{run['ratio']:.2f} ({run['adaptive']['seconds']:.1f} s against {run['busy']['seconds']:.1f} s, "
              f"{run['adaptive']['rows_lost']} rows lost)", "≤ 1.5", run["ratio"] <= 1.5 and run["adaptive"]["rows_lost"] == 0)


if __name__ == "__main__":
    child_main({"compare": compare, "rated": rated, "faulty": faulty})
