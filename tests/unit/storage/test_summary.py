"""``daily_summary`` built batch by batch: the same figures as whole-column aggregation, however many
distinct values the metrics take, with the batches kept on disk, not in memory."""

from __future__ import annotations

import datetime as dt
import math
import random
import tempfile
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.storage.summary import METRICS, SummaryBuilder, build_daily_summary, summary_schema

DAY = dt.date(2026, 11, 1)
STATUSES = [*JUDGE_STATUSES, "ok", "ok", "ok", "ok"]  # 5 in 9 ok


def scored_rows(n: int, seed: int, digits: tuple[int, ...] = (2, 3), models: tuple[str, ...] = ("a", "b")) -> pl.DataFrame:
    """``n`` scored evaluation rows with the columns the summary reads; about 20% null metrics."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        row = {
            "model": rng.choice(models),
            "judge": rng.choice(["rag", "masis", "prompt"]),
            "judge_status": rng.choice(STATUSES),
            "verdict": rng.choice([*VERDICTS, None]),
            "input_tokens": rng.randint(0, 900),
            "output_tokens": rng.randint(0, 200),
            "cost_usd": rng.random() / 1000,
            "cached": rng.random() < 0.3,
            "latency_ms": round(rng.uniform(100, 400), 1),
            "attempts": rng.choice([0, 1, 2]),
        }
        for metric in METRICS:
            row[metric] = None if rng.random() < 0.2 else round(rng.random(), rng.choice(digits))
        rows.append(row)
    return pl.DataFrame(rows)


def whole_column_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """The oracle: every aggregate over the whole day at once, with Polars' own expressions."""
    ok = pl.col("judge_status") == "ok"
    exprs: list[pl.Expr] = [pl.len().alias("rows")]
    exprs += [(pl.col("judge_status") == s).sum().alias(f"n_{s}") for s in JUDGE_STATUSES]
    exprs += [(ok & (pl.col("verdict") == v)).sum().alias(f"n_{v}") for v in VERDICTS]
    exprs.append(((ok & (pl.col("verdict") == "pass")).sum() / ok.sum()).alias("pass_rate"))
    for metric in METRICS:
        value = pl.col(metric).filter(ok).drop_nulls()
        exprs += [value.mean().alias(f"{metric}_mean"), value.std().alias(f"{metric}_std"), value.count().alias(f"{metric}_n")]
        exprs += [value.quantile(q / 100, interpolation="linear").alias(f"{metric}_p{q}") for q in (10, 50, 90)]
    latency = pl.col("latency_ms").filter(pl.col("attempts") > 0)
    exprs += [
        pl.col("input_tokens").sum(), pl.col("output_tokens").sum(), pl.col("cost_usd").sum(),
        pl.col("cached").sum().alias("n_cached"),
        latency.quantile(0.5, interpolation="linear").alias("latency_p50_ms"),
        latency.quantile(0.95, interpolation="linear").alias("latency_p95_ms"),
    ]
    return frame.group_by("model", "judge").agg(exprs).sort("model", "judge")


def pico_dollar_sum(costs: list[float]) -> float:
    """The exact sum of ``costs``, each rounded to 12 decimal places (half to even), as the nearest float."""
    return float(sum(round(Decimal(cost), 12) for cost in costs))


def _chunked(frame: pl.DataFrame, size: int) -> pl.DataFrame:
    builder = SummaryBuilder()
    for offset in range(0, frame.height, size):
        builder.add(frame.slice(offset, size))
    return builder.finish("run-1")


QUANTILE_COLUMNS = [f"{m}_p{q}" for m in METRICS for q in (10, 50, 90)] + ["latency_p50_ms", "latency_p95_ms"]
COUNT_COLUMNS = [c for c, t in summary_schema().items() if t == pl.Int64]


@pytest.mark.parametrize("chunk", [97, 1_000, 10_000])
def test_chunked_summary_agrees_with_whole_column_aggregates(chunk: int) -> None:
    frame = scored_rows(6_000, seed=chunk)
    got, oracle = _chunked(frame, chunk), whole_column_summary(frame)
    assert got.schema == pl.Schema(summary_schema())
    assert got.select("model", "judge").rows() == oracle.select("model", "judge").rows()
    assert got["run_id"].unique().to_list() == ["run-1"]
    for column in COUNT_COLUMNS:
        assert got[column].to_list() == oracle[column].cast(pl.Int64).to_list(), column
    for column in QUANTILE_COLUMNS:  # digit for digit
        assert got[column].to_list() == oracle[column].to_list(), column
    for column in ["pass_rate", *[f"{m}_{a}" for m in METRICS for a in ("mean", "std")]]:
        assert got[column].to_list() == pytest.approx(oracle[column].to_list(), rel=1e-12, abs=1e-15), column
    costs = frame.group_by("model", "judge").agg(pl.col("cost_usd").drop_nulls()).sort("model", "judge")
    assert got["cost_usd"].to_list() == [pico_dollar_sum(c) for c in costs["cost_usd"].to_list()]
    for total, rows in zip(got["cost_usd"].to_list(), costs["cost_usd"].to_list(), strict=True):
        assert total == pytest.approx(math.fsum(rows), rel=0, abs=0.5e-12 * len(rows))  # a half pico-dollar a row


def test_the_split_into_chunks_does_not_change_a_digit() -> None:
    frame = scored_rows(5_000, seed=11)
    one, many = _chunked(frame, frame.height), _chunked(frame.sample(fraction=1.0, shuffle=True, seed=3), 333)
    assert one.equals(many)
    assert many["cost_usd"].to_list() == one["cost_usd"].to_list()  # the cost too, to the last digit


def test_means_are_exact_where_float_summation_drifts() -> None:
    # 0.1 ten thousand times: a float running sum drifts, the exact mean is the nearest double to 0.1
    frame = scored_rows(10_000, seed=5, models=("a",)).with_columns(judge_status=pl.lit("ok"), score=pl.lit(0.1))
    summary = _chunked(frame, 1_000)
    assert summary["score_mean"].to_list() == [0.1, 0.1, 0.1]
    assert summary["score_std"].to_list() == [0.0, 0.0, 0.0]


def test_quantiles_agree_with_duckdb_quantile_cont_to_float_rounding() -> None:
    frame = scored_rows(3_000, seed=21)
    got = _chunked(frame, 500)
    ok = frame.filter(pl.col("judge_status") == "ok")  # noqa: F841 (read by DuckDB)
    columns = ", ".join(f"quantile_cont({m}, {q / 100}) AS {m}_p{q}" for m in METRICS for q in (10, 50, 90))
    duck = duckdb.sql(f"SELECT model, judge, {columns} FROM ok GROUP BY model, judge ORDER BY model, judge").pl()
    for column in (f"{m}_p{q}" for m in METRICS for q in (10, 50, 90)):
        assert got[column].to_list() == pytest.approx(duck[column].to_list(), rel=1e-12), column


def test_groups_without_ok_rows_and_single_values() -> None:
    frame = pl.concat([
        scored_rows(50, seed=1, models=("no-ok",)).with_columns(judge_status=pl.lit("call_error"), attempts=pl.lit(3, pl.Int64)),
        scored_rows(3, seed=2, models=("one",)).with_columns(judge_status=pl.lit("ok"), judge=pl.lit("rag"), score=pl.lit(0.25)),
    ])
    summary = _chunked(frame, 7)
    no_ok = summary.filter(pl.col("model") == "no-ok")
    assert no_ok["n_call_error"].sum() == 50 and no_ok["n_ok"].sum() == 0
    assert no_ok["pass_rate"].null_count() == no_ok.height
    assert no_ok["score_mean"].null_count() == no_ok.height and no_ok["score_p50"].null_count() == no_ok.height
    assert no_ok["score_n"].to_list() == [0] * no_ok.height
    assert no_ok["latency_p50_ms"].null_count() == 0  # calls were made, they failed
    one = summary.filter(pl.col("model") == "one").row(0, named=True)
    assert (one["score_mean"], one["score_std"], one["score_p10"], one["score_p90"]) == (0.25, 0.0, 0.25, 0.25)


def test_an_empty_day_has_an_empty_summary_with_the_schema() -> None:
    summary = build_daily_summary(scored_rows(10, seed=1).clear(), "run-0")
    assert summary.height == 0 and summary.schema == pl.Schema(summary_schema())


def test_unrounded_values_many_distinct_agree_digit_for_digit() -> None:
    # MASIS dimensions, prompt scores and latencies are not rounded: nearly every value is distinct.
    rng = np.random.default_rng(8)
    frame = scored_rows(20_000, seed=8).with_columns(
        *[pl.when(pl.col(m).is_not_null()).then(pl.Series(rng.random(20_000))).alias(m) for m in METRICS],
        latency_ms=pl.Series(rng.gamma(2.0, 150.0, 20_000)),
    )
    assert frame["score"].drop_nulls().n_unique() > 0.99 * frame["score"].drop_nulls().len()
    got, oracle = _chunked(frame, 1_777), whole_column_summary(frame)
    for column in QUANTILE_COLUMNS:
        assert got[column].to_list() == oracle[column].to_list(), column
    for column in [f"{m}_{a}" for m in METRICS for a in ("mean", "std")]:
        assert got[column].to_list() == pytest.approx(oracle[column].to_list(), rel=1e-12), column


def test_the_builder_keeps_batches_on_disk_not_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    builder = SummaryBuilder()
    frames = [scored_rows(2_000, seed=seed) for seed in range(3)]
    for frame in frames[:2]:
        builder.add(frame)  # a DataFrame: the columns the summary reads go to a temporary file
    frames[2].write_parquet(tmp_path / "scored.parquet")
    builder.add(pl.scan_parquet(tmp_path / "scored.parquet"))  # a scan of a batch's file: kept as it is
    assert "DF [" not in builder.rows().explain()  # no batch held in memory
    assert len(list(spill.glob("*/*.parquet"))) == 2
    summary = builder.finish("r")
    assert summary.equals(_chunked(pl.concat(frames), 6_000).with_columns(run_id=pl.lit("r")))
    builder.close()
    assert not list(spill.iterdir()) and (tmp_path / "scored.parquet").is_file()
