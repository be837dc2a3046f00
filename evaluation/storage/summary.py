"""The ``daily_summary`` table: per (dt, model, judge) counts, quality aggregates and cost, and,
for a run with ``segments``, the same per (dt, model, judge, segment key, segment value); the
whole-model rows have a null ``segment_key``.

Quality aggregates (means, quantiles, verdict counts, pass rate) use ``ok`` rows only; every other
status is counted, never averaged in (CONTRACT §2.5).

The summary is a query over the day's scored rows as a lazy table, never the day in memory:
:class:`SummaryBuilder` takes the scored batches as they come (a lazy scan of a batch's own file
is kept as it is; a DataFrame has the columns the summary reads written to a temporary Parquet
file) and :meth:`SummaryBuilder.finish` reads them back with Polars' streaming engine:

- counts, token and cost sums in one pass, whose memory is the groups; the cost is summed exactly
  as a decimal (:data:`MONEY`, to the pico-dollar), so its digits do not depend on the order of the
  rows either;
- then one measure at a time (each metric over ``ok`` rows, and the latency of calls that reached
  the judge), that measure's values with their (model, judge) as category codes — 16 bytes a
  value, never whole rows nor two measures at once — and a sorted copy of one group's values:

  - quantiles by Polars' own ``quantile(q, "linear")`` over the group's values: exact whatever
    the values (no binning, no assumption of few distinct values), digit for digit as Polars over
    the whole column; DuckDB's ``quantile_cont`` agrees to float rounding;
  - means from the correctly rounded sum of the values (:func:`math.fsum`) over n, and sample
    standard deviations (ddof 1) from the correctly rounded sum of squared deviations from that
    mean: the digits do not depend on the order of the rows nor on how the day was split.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.contract.schemas import LATENCY_QUANTILES as _LATENCY_QUANTILES
from evaluation.contract.schemas import SUMMARY_METRICS as METRICS
from evaluation.contract.schemas import SUMMARY_QUANTILES as _QUANTILES
from evaluation.contract.schemas import summary_schema

_LATENCY = "latency_ms"
#: The columns the summary reads, as it reads them.
_COLUMNS: dict[str, Any] = {
    "record_id": pl.String, "model": pl.String, "judge": pl.String, "judge_status": pl.String, "verdict": pl.String,
    **dict.fromkeys(METRICS, pl.Float64),
    "input_tokens": pl.Int64, "output_tokens": pl.Int64, "cost_usd": pl.Float64, "cached": pl.Boolean,
    "attempts": pl.Int64, _LATENCY: pl.Float64,
}


#: Costs are summed as decimals of 12 places: exact whatever the order, each cost rounded to the pico-dollar.
MONEY = pl.Decimal(38, 12)


def _typed(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The columns the summary reads, typed (``record_id``, which only segments need, null when absent)."""
    present = frame.collect_schema()
    return frame.select(pl.col(name).cast(dtype) if name in present or name != "record_id" else pl.lit(None, dtype).alias(name)
                        for name, dtype in _COLUMNS.items())


def _sums() -> list[pl.Expr]:
    """Counts and sums of one (model, judge) group."""
    ok = pl.col("judge_status") == "ok"
    exprs: list[pl.Expr] = [pl.len().cast(pl.Int64).alias("rows")]
    exprs += [(pl.col("judge_status") == s).sum().cast(pl.Int64).alias(f"n_{s}") for s in JUDGE_STATUSES]
    exprs += [(ok & (pl.col("verdict") == v)).sum().cast(pl.Int64).alias(f"n_{v}") for v in VERDICTS]
    exprs += [
        pl.col("input_tokens").sum().cast(pl.Int64).alias("input_tokens"),
        pl.col("output_tokens").sum().cast(pl.Int64).alias("output_tokens"),
        pl.col("cost_usd").cast(MONEY).sum().alias("cost_usd"),
        pl.col("cached").sum().cast(pl.Int64).alias("n_cached"),
    ]
    return exprs


class SummaryBuilder:
    """Collects a day's scored batches; :meth:`finish` builds ``daily_summary`` from them.

    Hand it lazy scans of the batches' own files to keep nothing in memory and write nothing
    twice; a DataFrame is written to a temporary file that lives until :meth:`close` (or until
    the builder is garbage collected)."""

    def __init__(self) -> None:
        self._parts: list[pl.LazyFrame] = []
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    def add(self, scored: pl.DataFrame | pl.LazyFrame) -> None:
        """Add one batch of scored evaluation rows."""
        if isinstance(scored, pl.LazyFrame):
            self._parts.append(_typed(scored))
            return
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="evaluation-summary-")
        path = Path(self._folder.name) / f"batch-{len(self._parts):05d}.parquet"
        _typed(scored.lazy()).collect().write_parquet(path, compression="lz4", statistics=False)
        self._parts.append(pl.scan_parquet(path))

    def rows(self) -> pl.LazyFrame:
        """Every row added so far (the columns the summary reads), lazily."""
        if not self._parts:
            return pl.LazyFrame(schema=_COLUMNS)
        return pl.concat(self._parts, how="vertical")

    def finish(self, run_id: str, segments: pl.DataFrame | None = None) -> pl.DataFrame:
        """:func:`build_daily_summary` of the rows added (``segments``: :func:`segment_values` of the day's records)."""
        return build_daily_summary(self.rows(), run_id, segments)

    def close(self) -> None:
        """Remove the temporary files of added DataFrames."""
        self._parts = []
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


def _measure(
    rows: pl.LazyFrame, measure: str, quantiles: tuple[int, ...], keys: list[str], groups: list[tuple[str, ...]]
) -> dict[tuple[str, ...], dict[str, Any]]:
    """Group (its ``keys`` values, e.g. (model, judge)) → n, mean, std and quantiles of one
    measure's non-null values, for each of ``groups`` that has one: a metric over ``ok`` rows, or
    the latency of calls that reached the judge.

    The measure's values are read in one streaming pass with their group as category codes
    (8 bytes a key and a value), then taken one group at a time, sorted once (the group's copy)."""
    keep = pl.col("attempts") > 0 if measure == _LATENCY else pl.col("judge_status") == "ok"
    values = (
        rows.filter(keep & pl.col(measure).is_not_null())
        .select(*[pl.col(k).cast(pl.Categorical) for k in keys], pl.col(measure))
        .collect(engine="streaming")
    )
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for key in groups:
        group = values.filter(pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, key, strict=True)))[measure].sort()
        if group.len() == 0:
            continue
        quantile_values = {f"p{q}": group.quantile(q / 100, interpolation="linear") for q in quantiles}
        array = group.to_numpy()
        mean = math.fsum(array) / array.size
        deviations = array - mean
        std = math.sqrt(math.fsum(deviations * deviations) / (array.size - 1)) if array.size > 1 else None
        out[key] = {**quantile_values, "n": array.size, "mean": mean, "std": std}
    return out


def build_daily_summary(evaluations: pl.DataFrame | pl.LazyFrame, run_id: str,
                        segments: pl.DataFrame | None = None) -> pl.DataFrame:
    """``daily_summary`` (without ``dt``) of the day's scored ``evaluations``: one row per
    (model, judge), sorted, then, with ``segments`` (:func:`segment_values`), one per (model,
    judge, segment value) of each segment key. See the module docstring for the passes and their memory."""
    rows = _typed(evaluations.lazy())
    whole = _summarise_by(rows, run_id, ["model", "judge"])
    if segments is None or segments.is_empty() or whole.is_empty():
        return whole
    parts = [whole]
    for (key,), values in segments.partition_by("segment_key", as_dict=True, maintain_order=True).items():
        tagged = rows.join(values.lazy().select("record_id", "segment_value"), on="record_id", how="left")
        tagged = tagged.with_columns(pl.col("segment_value").fill_null(MISSING_SEGMENT))
        parts.append(_summarise_by(tagged, run_id, ["model", "judge", "segment_value"], str(key)))
    return pl.concat(parts, how="vertical")


def _summarise_by(rows: pl.LazyFrame, run_id: str, keys: list[str], segment_key: str | None = None) -> pl.DataFrame:
    """The summary rows of ``rows`` grouped by ``keys`` (model, judge, and the segment value)."""
    sums = rows.group_by(*keys).agg(_sums()).sort(*keys).collect(engine="streaming")
    if sums.height == 0:
        return pl.DataFrame(schema=summary_schema())
    groups = sums.select(keys).rows()
    metrics = {metric: _measure(rows, metric, _QUANTILES, keys, groups) for metric in METRICS}
    latency = _measure(rows, _LATENCY, _LATENCY_QUANTILES, keys, groups)
    out: list[dict[str, Any]] = []
    for group in sums.iter_rows(named=True):
        key = tuple(group[k] for k in keys)
        row: dict[str, Any] = {"run_id": run_id, **group, "cost_usd": float(group["cost_usd"]),
                               "segment_key": segment_key, "segment_value": group.get("segment_value")}
        row["pass_rate"] = group["n_pass"] / group["n_ok"] if group["n_ok"] else None
        for metric in METRICS:
            figures = metrics[metric].get(key, {})
            row.update({f"{metric}_mean": figures.get("mean"), f"{metric}_std": figures.get("std"),
                        f"{metric}_n": figures.get("n", 0)})
            row.update({f"{metric}_p{q}": figures.get(f"p{q}") for q in _QUANTILES})
        row.update({f"latency_p{q}_ms": latency.get(key, {}).get(f"p{q}") for q in _LATENCY_QUANTILES})
        out.append(row)
    return pl.DataFrame(out, schema=summary_schema(), orient="row")


#: Values of a segment key kept per day (by records, all models): the rest are :data:`OTHER_SEGMENT`.
SEGMENT_TOP_VALUES = 8
OTHER_SEGMENT = "other"
#: The value of a record whose metadata lacks the path (or holds null there).
MISSING_SEGMENT = "(none)"


def segment_values(records: pl.LazyFrame, paths: list[str], top: int = SEGMENT_TOP_VALUES) -> pl.DataFrame:
    """``record_id``, ``segment_key`` (the path) and ``segment_value`` of each record (``records``:
    ``record_id`` and ``metadata``, a JSON string) for each metadata path (``metadata.locale``): the
    ``top`` most frequent values of the day as they are (ties by value), every other value as
    ``other``, a missing one as ``(none)``."""
    parts = []
    for path in paths:
        json_path = "$." + path.removeprefix("metadata.")
        values = records.select(
            "record_id", pl.col("metadata").str.json_path_match(json_path).fill_null(MISSING_SEGMENT).alias("segment_value")
        ).collect(engine="streaming")
        kept = (values.group_by("segment_value").len().sort(["len", "segment_value"], descending=[True, False])
                .head(top)["segment_value"])
        parts.append(values.select(
            "record_id", pl.lit(path).alias("segment_key"),
            pl.when(pl.col("segment_value").is_in(kept.implode())).then(pl.col("segment_value"))
            .otherwise(pl.lit(OTHER_SEGMENT)).alias("segment_value")))
    schema = {"record_id": pl.String, "segment_key": pl.String, "segment_value": pl.String}
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)

