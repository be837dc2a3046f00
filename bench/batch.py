"""Batch mode (child of :mod:`bench.run`, item 4): a generated day judged as provider batches, and
the same day judged online, each through the pipeline's own stages in this process (what
``python -m evaluation run`` does), against the embedded OpenAI-compatible server with its batch
delay at zero and no latency, with a judge model that litellm prices (``openai/gpt-4o-mini``).

Reported: HTTP requests per record (uploads, batch creations, looks at them and file downloads;
online: the chat calls), batch lines per record, wall time of each day, and each day's cost.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from bench.common import Bench, child_main, timed

MODEL = "openai/gpt-4o-mini"


def _day(raw: Path, api_base: str, run_id: str, **values: Any) -> tuple[Any, float]:
    from bench import data
    from evaluation import stages
    from evaluation.cli.day import run_day
    from evaluation.contract.options import build_config

    out = Path(tempfile.mkdtemp(prefix=f"bench-batch-{run_id}-"))
    cfg = build_config({"input_uri": str(raw), "output_uri": str(out), "judge_model": MODEL, "api_base": api_base,
                        **values}, date=data.DAY, run_id=run_id, trigger="bench")
    return timed(lambda: run_day(cfg, stages.Stores.open(cfg), api_key="bench-key"))


def day(params: dict[str, Any]) -> dict[str, Any]:
    """A batch-mode day and the same day online."""
    from bench import data
    from bench.judge import GOOD_REPLY
    from evaluation.calling.batch import batch_prices
    from evaluation.calling.client import price_per_token
    from evaluation.testing.openai_server import OpenAIServer

    records = int(params["records"])
    raw = data.raw_day(records, unique=True, bad=False)
    with OpenAIServer(responder=lambda body: GOOD_REPLY, record_requests=False) as server:
        server.batches.delay_s = 0.0
        batch, batch_s = _day(raw, server.base_url, "batch", batch=True, batch_poll_s=0.05, chunk_size=500)
        batch_requests = dict(server.batches.counts)
        lines = len(server.batches.line_ids)
        chat_before = server.request_count
        online, online_s = _day(raw, server.base_url, "online", chunk_size=500)
        online_requests = server.request_count - chat_before
    http = sum(n for name, n in batch_requests.items() if name != "lines")  # lines run inside the batches
    price_in, price_out, from_batch_map = batch_prices(MODEL)
    online_in, online_out = price_per_token(MODEL)
    return {
        "records": records,
        "batch": {"seconds": round(batch_s, 2), "cost_usd": batch["cost_usd"], "calls_made": batch["calls_made"],
                  "statuses": batch["statuses"], "http_requests": http, "requests": batch_requests,
                  "lines": lines, "requests_per_record": round(http / records, 3),
                  "lines_per_record": round(lines / records, 3)},
        "online": {"seconds": round(online_s, 2), "cost_usd": online["cost_usd"], "calls_made": online["calls_made"],
                   "statuses": online["statuses"], "http_requests": online_requests,
                   "requests_per_record": round(online_requests / records, 3)},
        "cost_ratio": round(batch["cost_usd"] / online["cost_usd"], 4) if online["cost_usd"] else None,
        "prices": {"batch": [price_in, price_out], "online": [online_in, online_out],
                   "batch_price_from_litellm": from_batch_map},
    }


def batch_items(bench: Bench) -> None:
    """Item 4's batch row in ``make bench`` (called by :mod:`bench.run`)."""
    records, result = bench.day("batch", "day", 1500)
    batch, online = result["batch"], result["online"]
    ok = batch["statuses"] == online["statuses"] and batch["calls_made"] == online["calls_made"]
    bench.row(4, f"batch-mode day, {records:,} records ({batch['lines']:,} batch lines, server batch delay 0): "
                 "HTTP requests per record, wall, cost vs online",
              f"{batch['requests_per_record']:.2f} req/record ({batch['lines_per_record']:.2f} lines; online "
              f"{online['requests_per_record']:.2f}); {batch['seconds']:.1f} s (online {online['seconds']:.1f} s); "
              f"${batch['cost_usd']:.4f} vs ${online['cost_usd']:.4f} ({result['cost_ratio']:.0%})",
              "same rows as online, cost at litellm's batch price", ok,
              cores_others=result["load"]["cores_others"])


if __name__ == "__main__":
    child_main({"day": day})
