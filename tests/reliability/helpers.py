"""Shared pieces of the reliability tests: a realistic judge, configs, landed tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.contract.config import RunConfig
from evaluation.contract.options import build_config

DAY = dt.date(2026, 11, 20)
REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def judge_kind(body: dict[str, Any]) -> str:
    """``rag``, ``masis``, ``prompt/rubric`` or ``prompt/freeform``: the system prompt's first line."""
    system = body["messages"][0]["content"]
    return system.split("\n", 1)[0].removeprefix("judge: ")


def judge_reply(body: dict[str, Any]) -> str:
    """A well-formed, in-range reply of the judge the request is for (every row parses ``ok``)."""
    kind = judge_kind(body)
    if kind == "rag":
        return json.dumps({
            "faithfulness": 0.9, "faithfulness_explanation": "supported", "context_relevance": 0.8,
            "context_relevance_explanation": None, "answer_relevance": 0.85, "answer_relevance_explanation": None,
            "semantic_similarity": 0.7, "semantic_similarity_explanation": None,
            "evaluation_status": "success", "reason": None, "error": None,
        })
    if kind == "masis":
        return json.dumps({"faithfulness": 0.8, "relevance": 0.9, "completeness": 0.7, "reasoning_quality": 0.6,
                           "overall_score": 0.75, "improvement_suggestions": ["cite more"]})
    if kind == "prompt/rubric":
        return json.dumps({"checks": [{"id": "states-value", "satisfied": True, "reasoning": "states it"},
                                      {"id": "cites", "satisfied": True, "reasoning": "cites"}],
                           "overall_reasoning": "fine"})
    if kind == "prompt/freeform":
        return json.dumps({"score": 0.9, "hits": ["right value"], "misses": [], "reasoning": "ok"})
    raise AssertionError(f"unexpected system prompt {kind!r}")


def config(tmp_path: Path, run_id: str = "r1", day: dt.date = DAY, **values: Any) -> RunConfig:
    """A run over ``tmp_path/raw`` into ``tmp_path/out`` (fast timeouts unless overridden)."""
    merged = {"input_uri": str(tmp_path / "raw"), "output_uri": str(tmp_path / "out"),
              "timeout_s": 1, "max_attempts": 4, "retry_budget_s": 20, **values}
    return build_config(merged, date=day, run_id=run_id, trigger="test")


def table(out: Path | str, name: str, day: dt.date = DAY) -> pl.DataFrame:
    """One landed table-day."""
    return storage.read_day(storage.LocalStore(out), name, day)


def landed_bytes(out: Path | str, names: tuple[str, ...], day: dt.date = DAY) -> dict[str, bytes]:
    """The landed objects of a day, byte for byte, as the day's commit names them."""
    store = storage.LocalStore(out)
    return {name: store.read_bytes(storage.landed_key(store, name, day) or f"(no {name} landed)") for name in names}


def runs(out: Path | str, day: dt.date = DAY) -> pl.DataFrame:
    """Every landed ``runs`` row of a day."""
    return pl.concat([pl.read_parquet(p) for p in sorted((Path(out) / "runs" / f"dt={day}").glob("*.parquet"))],
                     how="diagonal_relaxed")


def prompt_pair(body: dict[str, Any]) -> tuple[str, str]:
    """(system, user) of a chat request body."""
    messages = body["messages"]
    return messages[0]["content"], messages[1]["content"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a ``python -m evaluation`` subprocess (no inherited judge keys)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("EVALUATION_JUDGE_API_KEY", "LLM_API_KEY", "OPENAI_API_KEY")}
    env.update(PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1", **extra)
    return env
