"""Generated inputs of the benchmarks, cached between runs under the system's temp folder.

* :func:`raw_day`: a day of raw logs as ``dt=YYYY-MM-DD/part-*.jsonl[.gz]`` under a directory (the
  layout of the input store), from :mod:`evaluation.testing.synthetic`; days over 100,000 records repeat a
  100,000-record block with the record ids made unique per block.
* ``unique=True`` makes every record's question unique: the synthetic generator draws from 24 facts,
  so its days repeat the same prompts (2,000 records give only 1,275 distinct rag prompts), which a
  chunk calls once. Throughput against the limit must count real calls, so judge benchmarks use
  unique records.
* :func:`parsed_rows`: judged rows in :data:`evaluation.contract.schemas.PARSED_SCHEMA`, generated with
  vectorised Polars (every judge and status, out-of-range metrics that trigger each clamp).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import polars as pl

DAY = dt.date(2026, 11, 20)
_BLOCK = 100_000
CACHE = Path(os.environ.get("BENCH_CACHE", Path(tempfile.gettempdir()) / "llm-evaluation-bench"))


def _unique(lines: list[str]) -> list[str]:
    out = []
    for index, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:  # a planted bad line stays as it is
            out.append(line)
            continue
        if isinstance(record.get("question"), str) and record["question"].endswith("?"):
            record["question"] = f"{record['question'][:-1]} (ticket {index})?"
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def raw_day(records: int, *, unique: bool = False, bad: bool = True) -> Path:
    """The input root of the generated :data:`DAY` (cached): ``<root>/dt=<day>/part-NNNNN.jsonl[.gz]``.
    Parts alternate plain and gzipped JSONL."""
    from evaluation.testing import synthetic

    root = CACHE / f"raw-{DAY:%Y%m%d}-{records}-{'u' if unique else 's'}{'b' if bad else ''}"
    done = root / ".complete"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    folder = root / f"dt={DAY.isoformat()}"
    folder.mkdir(parents=True)
    block = min(records, _BLOCK)
    base = synthetic.generate_day(DAY, block, bad=bad)
    base = _unique(base) if unique else base
    lines = list(base)
    prefix = f'"record_id": "{DAY:%Y%m%d}-'
    for copy in range(1, (records + block - 1) // block):
        # The same records again, ids unique per block (the planted bad ones stay bad).
        lines.extend(line.replace(prefix, f'{prefix}b{copy}-', 1) for line in base)
    count = 2 if records <= _BLOCK else (records + _BLOCK - 1) // _BLOCK
    size = (len(lines) + count - 1) // count
    for part in range(count):
        text = ("\n".join(lines[part * size:(part + 1) * size]) + "\n").encode()
        if part % 2:
            (folder / f"part-{part:05d}.jsonl.gz").write_bytes(gzip.compress(text, compresslevel=1, mtime=0))
        else:
            (folder / f"part-{part:05d}.jsonl").write_bytes(text)
    done.write_text("ok")
    return root


_REASONS = ("The answer states the figure given in the context and cites it.",
            "The answer contradicts the context on the key figure.",
            "The answer declines for lack of evidence, which the context supports.")


def parsed_rows(rows: int, *, seed: int = 0, record_ids: pl.DataFrame | None = None) -> pl.DataFrame:
    """Judged rows (PARSED_SCHEMA). With ``record_ids`` (columns record_id, conversation_id,
    model), three rows per record (rag, masis, prompt) as a chunk of the pipeline would hold."""
    from evaluation.contract.schemas import PARSED_SCHEMA

    rng = np.random.default_rng(seed)
    judges = np.array(["rag", "masis", "prompt"])
    if record_ids is not None:
        base = record_ids.select("record_id", "conversation_id", "model")
        frame = pl.concat([base.with_columns(judge=pl.lit(j)) for j in judges])
        rows = frame.height
    else:
        index = np.arange(rows)
        frame = pl.DataFrame({
            "record_id": "r" + pl.Series(index // 3).cast(pl.String).str.zfill(7),
            "conversation_id": pl.Series(rng.integers(0, 10**6, rows)).cast(pl.String),
            "model": pl.Series(np.array(["assistant-v1", "assistant-v2", "assistant-lite"])[index // 3 % 3]),
            "judge": pl.Series(judges[index % 3]),
        })
    roll = rng.random(rows)
    # ok 86%, parse_error 4%, call_error 3%, judge_failed 2%, skipped 5%
    status = np.array(["ok", "parse_error", "call_error", "judge_failed", "skipped"])[
        np.searchsorted([0.86, 0.90, 0.93, 0.95], roll, side="right")]

    def metric(scale: float = 1.1) -> pl.Series:
        return pl.Series(np.round(rng.random(rows) * scale, 3))

    masis_scale = pl.Series(rng.random(rows) < 0.05)  # some replies on a 0-100 scale
    frame = frame.with_columns(
        _roll=pl.Series(roll), judge_status=pl.Series(status, dtype=pl.String), _m100=masis_scale,
        _f=metric(), _r=metric(), _c=metric(), _q=metric(), _cr=metric(), _ar=metric(), _ss=metric(), _s=metric(1.2),
        uncited_claim_count=pl.Series(rng.integers(0, 12, rows)),
        hallucination_detected=pl.Series(rng.random(rows) < 0.1),
        _inv=pl.Series(rng.random(rows) < 0.1),
        reference_missing=pl.Series(rng.random(rows) < 0.4),
        empty_answer=pl.lit(False),
        required_unsatisfied=pl.Series(rng.random(rows) < 0.1),
        rubric_mode=pl.Series(rng.random(rows) < 0.3),
        input_tokens=pl.Series(rng.integers(300, 1200, rows)),
        output_tokens=pl.Series(rng.integers(40, 250, rows)),
        latency_ms=pl.Series(rng.random(rows) * 400 + 150),
        _reason=pl.Series(np.array(_REASONS)[rng.integers(0, 3, rows)]),
    )
    return _judged_columns(frame).select([pl.col(c).cast(t) for c, t in PARSED_SCHEMA.items()])


def _judged_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """The judged rows' columns from their draws (the ``_``-prefixed columns): each judge's metrics
    only where it reports them."""
    from evaluation.contract.config import RULES_VERSION
    from evaluation.judges import PROMPT_VERSIONS

    judge, status = pl.col("judge"), pl.col("judge_status")
    ok = status == "ok"
    scored_prompt = (judge == "prompt") & status.is_in(["ok", "parse_error"])
    rubric_ok = (judge == "prompt") & ok & pl.col("rubric_mode")  # the parser keeps weights, not a score
    rag_ok, masis_ok = ok & (judge == "rag"), ok & (judge == "masis")

    def when(cond: pl.Expr, value: pl.Expr) -> pl.Expr:
        return pl.when(cond).then(value).otherwise(pl.lit(None, dtype=pl.Float64))

    def as_100(name: str) -> pl.Expr:
        return pl.when(pl.col("_m100")).then(pl.col(name) * 90).otherwise(pl.col(name))

    empty = pl.lit([], dtype=pl.List(pl.String))
    return frame.with_columns(
        question_key=pl.col("record_id").str.slice(0, 16),
        judge_model=pl.lit("openai/judge-model"),
        prompt_version=judge.replace_strict(PROMPT_VERSIONS, default=None),
        rules_version=pl.lit(RULES_VERSION),
        score=when(scored_prompt & ~rubric_ok, pl.col("_s")),
        rubric_weight_satisfied=when(rubric_ok, (pl.col("_s").clip(0.0, 1.0) * 4).floor()),
        rubric_weight_total=when(rubric_ok, pl.lit(4.0)),
        faithfulness=when(ok & (judge != "prompt"), pl.when(judge == "masis").then(as_100("_f")).otherwise(pl.col("_f"))),
        relevance=when(masis_ok, as_100("_r")),
        completeness=when(masis_ok, as_100("_c")),
        reasoning_quality=when(masis_ok, as_100("_q")),
        context_relevance=when(rag_ok, pl.col("_cr")),
        answer_relevance=when(rag_ok, pl.col("_ar")),
        semantic_similarity=when(rag_ok & (pl.col("_roll") < 0.6), pl.col("_ss")),
        evaluation_goal=pl.lit("balanced"),
        hits=pl.when(scored_prompt).then(pl.concat_list(pl.lit("[states-value] States the value: yes"))).otherwise(empty),
        misses=empty,
        reasoning=pl.when(ok).then(pl.col("_reason")),
        explanations=pl.when(rag_ok).then(pl.lit('{"faithfulness": "supported by ctx-1"}')),
        improvement_suggestions=empty,
        citations=pl.when(judge == "masis").then(pl.concat_list(pl.lit("ctx-1"))).otherwise(empty),
        invalid_citations=pl.when((judge == "masis") & pl.col("_inv")).then(pl.concat_list(pl.lit("ctx-7"))).otherwise(empty),
        reason=pl.when(~ok).then(pl.lit("a metric is not a number or null")),
        error=pl.when(status == "call_error").then(pl.lit("server_error (retries exhausted)")),
        cost_usd=pl.col("input_tokens") * 1.5e-7 + pl.col("output_tokens") * 6e-7,
        attempts=pl.when(status == "skipped").then(0).otherwise(1),
        cached=pl.lit(False),
        judged_at=pl.lit(dt.datetime(2026, 11, 21, 2, 30, tzinfo=dt.UTC)),
        decided_by=pl.lit(None, pl.String),  # no cascade: the judge model decided, no level's calls
        cascade_calls=pl.lit(None, pl.Int64),
    )


def _cached_parquet(name: str, columns: Iterable[str], make: Callable[[], pl.DataFrame]) -> Path:
    """``<CACHE>/<name>-<hash of columns>.parquet``, written by `make` when missing: a cached file
    of another schema is never reused."""
    import hashlib

    tag = hashlib.sha256("\x1f".join(columns).encode()).hexdigest()[:8]
    path = CACHE / f"{name}-{tag}.parquet"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        make().write_parquet(tmp)
        tmp.rename(path)
    return path


def parsed_file(rows: int) -> Path:
    """``rows`` judged rows as one cached Parquet file."""
    from evaluation.contract.schemas import PARSED_SCHEMA

    return _cached_parquet(f"parsed-{rows}", PARSED_SCHEMA, lambda: parsed_rows(rows))


def scored_file(rows: int) -> Path:
    """``rows`` scored rows (the evaluations table without ``dt``) as one cached Parquet file."""
    from evaluation.contract.config import EVALUATION_COLUMNS
    from evaluation.judges import score_table

    def scored() -> pl.DataFrame:
        table = score_table(pl.read_parquet(parsed_file(rows))).with_columns(run_id=pl.lit("bench"))
        return table.select([c for c in EVALUATION_COLUMNS if c != "dt"])

    return _cached_parquet(f"scored-{rows}", EVALUATION_COLUMNS, scored)
