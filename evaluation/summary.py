"""The ``daily_summary`` table: per (dt, model, judge) counts, quality aggregates and cost.

Quality aggregates (means, quantiles, verdict counts, pass rate) use ``ok`` rows only; every other
status is counted, never averaged in (CONTRACT §2.5).

The summary is built in one streaming pass over the day's scored chunks (:class:`SummaryBuilder`)
with memory that does not grow with the day: each chunk adds its counts and sums, and a histogram
of its metric values (value → how many rows have it). Judges' metrics take few distinct values
(rag's are rounded to 2 decimals, scores to 3, judges answer with few digits) and latencies are
kept to 0.1 ms, so the histograms stay small however many rows the day has. From the histograms:

- quantiles are exact and interpolate linearly, digit for digit as Polars' ``quantile(q,
  "linear")`` over the column's non-null values (DuckDB's ``quantile_cont`` agrees to float
  rounding);
- means and standard deviations (sample, ddof 1) are computed exactly in rational arithmetic and
  rounded once, so they do not depend on how the day was split into chunks.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
import polars as pl

from evaluation.contract import JUDGE_STATUSES, VERDICTS

METRICS = (
    "score",
    "faithfulness",
    "relevance",
    "completeness",
    "reasoning_quality",
    "context_relevance",
    "answer_relevance",
    "semantic_similarity",
)

_LATENCY = "latency_ms"
_QUANTILES = (10, 50, 90)
#: Histogram rows from chunks held before they are merged into the day's histogram.
_MERGE_ROWS = 250_000
_HISTOGRAM_SCHEMA = {"model": pl.String, "judge": pl.String, "measure": pl.String, "value": pl.Float64, "n": pl.Int64}


def _chunk_sums() -> list[pl.Expr]:
    """Per-chunk counts and sums of one group; the day's are their sums."""
    ok = pl.col("judge_status") == "ok"
    exprs: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("rows")]
    exprs += [(pl.col("judge_status") == s).sum().cast(pl.Int64).alias(f"n_{s}") for s in JUDGE_STATUSES]
    exprs += [(ok & (pl.col("verdict") == v)).sum().cast(pl.Int64).alias(f"n_{v}") for v in VERDICTS]
    exprs += [
        pl.col("input_tokens").sum().cast(pl.Int64).alias("input_tokens"),
        pl.col("output_tokens").sum().cast(pl.Int64).alias("output_tokens"),
        pl.col("cost_usd").sum().cast(pl.Float64).alias("cost_usd"),
        pl.col("cached").sum().cast(pl.Int64).alias("n_cached"),
    ]
    return exprs


class SummaryBuilder:
    """Accumulates ``daily_summary`` over scored chunks; :meth:`finish` builds the table."""

    def __init__(self) -> None:
        self._sums: list[pl.DataFrame] = []
        self._histogram = pl.DataFrame(schema=_HISTOGRAM_SCHEMA)
        self._pending: list[pl.DataFrame] = []
        self._pending_rows = 0

    def add(self, scored: pl.DataFrame | pl.LazyFrame) -> None:
        """Add one chunk of scored evaluation rows."""
        frame = scored.lazy()
        self._sums.append(frame.group_by("model", "judge").agg(_chunk_sums()).collect())
        values = (
            frame.filter(pl.col("judge_status") == "ok")
            .select("model", "judge", *[pl.col(m).cast(pl.Float64) for m in METRICS])
            .unpivot(index=["model", "judge"], on=list(METRICS), variable_name="measure", value_name="value")
        )
        latencies = frame.filter(pl.col("attempts") > 0).select(
            "model", "judge", pl.lit(_LATENCY).alias("measure"), pl.col(_LATENCY).cast(pl.Float64).round(1).alias("value")
        )
        histogram = (
            pl.concat([values, latencies])
            .drop_nulls("value")
            .group_by("model", "judge", "measure", "value")
            .agg(pl.len().cast(pl.Int64).alias("n"))
            .collect()
        )
        self._pending.append(histogram)
        self._pending_rows += histogram.height
        if self._pending_rows > max(_MERGE_ROWS, self._histogram.height):  # amortised: O(1) merges a row
            self._merge()

    def _merge(self) -> None:
        if self._pending:
            self._histogram = (
                pl.concat([self._histogram, *self._pending])
                .group_by("model", "judge", "measure", "value")
                .agg(pl.col("n").sum())
            )
            self._pending, self._pending_rows = [], 0

    @property
    def histogram_size(self) -> int:
        """Distinct (model, judge, measure, value) entries held: what the memory follows."""
        self._merge()
        return self._histogram.height

    def finish(self, run_id: str) -> pl.DataFrame:
        """One row per (model, judge), sorted, with the columns of ``daily_summary`` (no ``dt``)."""
        if not self._sums:
            return pl.DataFrame(schema=summary_schema())
        sums = pl.concat(self._sums).group_by("model", "judge").agg(pl.all().sum()).sort("model", "judge")
        histograms = self._histograms()
        rows: list[dict[str, Any]] = []
        for group in sums.iter_rows(named=True):
            key = (group["model"], group["judge"])
            row: dict[str, Any] = {"run_id": run_id, "model": group["model"], "judge": group["judge"]}
            row.update({c: group[c] for c in ("rows", *(f"n_{s}" for s in JUDGE_STATUSES), *(f"n_{v}" for v in VERDICTS))})
            row["pass_rate"] = group["n_pass"] / group["n_ok"] if group["n_ok"] else None
            for metric in METRICS:
                values, counts = histograms.get((*key, metric), _EMPTY)
                mean, std = _mean_std(values, counts)
                row[f"{metric}_mean"] = mean
                row[f"{metric}_std"] = std
                row[f"{metric}_n"] = int(counts.sum())
                for q in _QUANTILES:
                    row[f"{metric}_p{q}"] = _quantile(values, counts, q / 100)
            row.update({c: group[c] for c in ("input_tokens", "output_tokens", "cost_usd", "n_cached")})
            values, counts = histograms.get((*key, _LATENCY), _EMPTY)
            row["latency_p50_ms"] = _quantile(values, counts, 0.5)
            row["latency_p95_ms"] = _quantile(values, counts, 0.95)
            rows.append(row)
        return pl.DataFrame(rows, schema=summary_schema(), orient="row")

    def _histograms(self) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
        """(model, judge, measure) → (sorted distinct values, their counts)."""
        out: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._merge()
        ordered = self._histogram.sort("model", "judge", "measure", "value")
        for key, part in ordered.group_by("model", "judge", "measure", maintain_order=True):
            out[(str(key[0]), str(key[1]), str(key[2]))] = (part["value"].to_numpy(), part["n"].to_numpy())
        return out


_EMPTY = (np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64))


def summary_schema() -> dict[str, Any]:
    """The columns of ``daily_summary`` without ``dt``, in order."""
    schema: dict[str, Any] = {"run_id": pl.String, "model": pl.String, "judge": pl.String, "rows": pl.Int64}
    schema.update({f"n_{s}": pl.Int64 for s in JUDGE_STATUSES})
    schema.update({f"n_{v}": pl.Int64 for v in VERDICTS})
    schema["pass_rate"] = pl.Float64
    for metric in METRICS:
        schema.update({f"{metric}_mean": pl.Float64, f"{metric}_std": pl.Float64, f"{metric}_n": pl.Int64})
        schema.update({f"{metric}_p{q}": pl.Float64 for q in _QUANTILES})
    schema.update(input_tokens=pl.Int64, output_tokens=pl.Int64, cost_usd=pl.Float64, n_cached=pl.Int64)
    schema.update(latency_p50_ms=pl.Float64, latency_p95_ms=pl.Float64)
    return schema


def _quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float | None:
    """The linear-interpolation quantile of the multiset (values repeated counts times), by
    Polars' formula: position (n - 1)·q, the values at its floor and ceiling ranks, and
    ``proportion · (upper - lower) + lower`` between them when they differ."""
    n = int(counts.sum())
    if n == 0:
        return None
    position = (n - 1) * q
    low_rank = min(int(position), n - 1)
    high_rank = min(math.ceil(position), n - 1)
    ends = np.cumsum(counts)  # the rank after the last copy of each value
    lower = float(values[np.searchsorted(ends, low_rank, side="right")])
    upper = float(values[np.searchsorted(ends, high_rank, side="right")])
    if lower == upper:
        return lower
    return (position - low_rank) * (upper - lower) + lower


def _mean_std(values: np.ndarray, counts: np.ndarray) -> tuple[float | None, float | None]:
    """Exact mean and sample standard deviation (ddof 1) of the multiset, each rounded once.

    Every float is ``numerator / 2**k``; scaled to the largest ``k`` the sums are exact integers,
    and Python's int / int division rounds correctly."""
    n = int(counts.sum())
    if n == 0:
        return None, None
    ratios = [float(v).as_integer_ratio() for v in values]
    scale_bits = max(den.bit_length() - 1 for _, den in ratios)
    total = squares = 0
    for (num, den), count in zip(ratios, counts.tolist(), strict=True):
        scaled = num << (scale_bits - (den.bit_length() - 1))  # value · 2**scale_bits, exact
        total += count * scaled
        squares += count * scaled * scaled
    mean = total / (n << scale_bits)
    if n < 2:
        return mean, None
    variance = (n * squares - total * total) / ((n * (n - 1)) << (2 * scale_bits))
    return mean, math.sqrt(variance)


def build_daily_summary(evaluations: pl.DataFrame | pl.LazyFrame, day: dt.date, run_id: str) -> pl.DataFrame:
    """One row per (model, judge) of the day's ``evaluations`` (without the ``dt`` column)."""
    builder = SummaryBuilder()
    builder.add(evaluations)
    return builder.finish(run_id)
