"""Model comparisons: is one assistant version better than another, and by how much?

A comparison takes the ``ok`` judgements of two or more models over a date range and, per judge
and metric, estimates each model's mean with a 95% bootstrap interval and its difference from a
baseline model with a 95% bootstrap interval and a permutation p-value. It lands under
``comparisons/comparison_id=<id>/`` (:func:`evaluation.storage.comparison_key`):

* ``metrics.parquet`` — one row per (judge, metric, model): see :data:`METRICS_SCHEMA`;
* ``verdicts.parquet`` — the verdict mix per (judge, model) and its shift from the baseline;
* ``spec.json`` — the :class:`ComparisonSpec` and how the rows were obtained;
* ``report.html`` — a self-contained page (inline CSS and SVG, nothing fetched);
* when re-judging, also ``evaluations.parquet`` and ``judge_calls.parquet`` of the re-judged
  sample (the ``evaluations`` columns plus ``question_key``).

Two sources of judgements:

* without ``judge_model``: the scores already landed in ``evaluations`` for the date range;
* with ``judge_model``: a seeded sample of each model's valid records, read again from the raw
  input (ingest + the validation suite), judged by that model through the pipeline's own chunk
  stage (same prompts, client, ledger of paid calls and scoring rules).

**Paired or unpaired.** Records are matched across models on their normalised question text
(lowercase, whitespace collapsed, punctuation stripped at both ends; :func:`question_key`). When
at least ``min_pairs`` questions were answered by both the model and the baseline, and they make
up at least half of the questions of the model that answered fewer, the test is *paired*: each
question contributes the difference of the two models' mean values on it, the interval is a
bootstrap over questions and the p-value a sign-flip permutation test. Otherwise the test is
*unpaired*: a bootstrap of each sample and a two-sample permutation test on the difference of
means. Wins, ties and losses always count the shared questions.

Everything random draws from a numpy ``Generator`` seeded by ``(seed, judge, metric, model)``,
so the same spec over the same data gives identical tables whatever order they are computed in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import io
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaluation import storage
from evaluation.contract import JUDGE_STATUSES, JUDGES, VERDICTS, JudgeName, Thresholds
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS, read_fenced_blocks

__all__ = [
    "METRICS_SCHEMA",
    "VERDICTS_SCHEMA",
    "ComparisonError",
    "ComparisonSpec",
    "compare_metrics",
    "compare_verdicts",
    "judge_sample",
    "landed_rows",
    "paired_test",
    "question_key",
    "run_comparison",
    "sample_records",
    "unpaired_test",
]

logger = logging.getLogger(__name__)

#: Metrics compared per judge, in report order. ``pass_rate`` is the share of ``pass`` verdicts.
JUDGE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("score", *RAG_METRICS, "pass_rate"),
    "masis": ("score", *MASIS_DIMENSIONS, "pass_rate"),
    "prompt": ("score", "pass_rate"),
}
#: The share of the smaller side's questions that must be shared for a paired test.
MIN_PAIRED_SHARE = 0.5
#: Differences smaller than this count as a tie.
TIE_TOLERANCE = 1e-9
#: Cells (resamples x sample size) drawn at once; bounds memory on large samples.
_BATCH_CELLS = 2_000_000

METRICS_SCHEMA: dict[str, Any] = {
    "comparison_id": pl.String,
    "start_date": pl.Date,
    "end_date": pl.Date,
    "judge": pl.String,
    "metric": pl.String,
    "model": pl.String,
    "baseline": pl.String,
    "is_baseline": pl.Boolean,
    "n": pl.Int64,
    "n_questions": pl.Int64,
    "mean": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "baseline_n": pl.Int64,
    "baseline_mean": pl.Float64,
    "test": pl.String,
    "delta": pl.Float64,
    "delta_ci_low": pl.Float64,
    "delta_ci_high": pl.Float64,
    "p_value": pl.Float64,
    "significant": pl.Boolean,
    "n_pairs": pl.Int64,
    "wins": pl.Int64,
    "ties": pl.Int64,
    "losses": pl.Int64,
}

VERDICTS_SCHEMA: dict[str, Any] = {
    "comparison_id": pl.String,
    "start_date": pl.Date,
    "end_date": pl.Date,
    "judge": pl.String,
    "model": pl.String,
    "baseline": pl.String,
    "verdict": pl.String,
    "n": pl.Int64,
    "n_ok": pl.Int64,
    "share_pct": pl.Float64,
    "baseline_share_pct": pl.Float64,
    "shift_pp": pl.Float64,
}

#: Columns of the rows a comparison works on (``evaluations`` columns plus ``question_key``).
_ROW_COLUMNS = ("dt", "record_id", "model", "judge", "judge_status", "verdict", "score",
                *dict.fromkeys((*RAG_METRICS, *MASIS_DIMENSIONS)), "question_key")


class ComparisonError(RuntimeError):
    """A comparison cannot run as asked: the message names the range, the models and the cause."""


class ComparisonSpec(BaseModel):
    """What to compare. The DAG's Params form and ``python -m evaluation compare`` map onto it."""

    model_config = ConfigDict(extra="forbid")

    start_date: dt.date = Field(description="First day (dt) of the range, inclusive.")
    end_date: dt.date = Field(description="Last day (dt) of the range, inclusive.")
    models: list[str] = Field(min_length=2, description="The models (the `model` column) to compare.")
    baseline: str | None = Field(default=None, description="The model the others are compared to; default the first.")
    judges: list[JudgeName] = Field(default_factory=lambda: list(JUDGES), min_length=1, description="Judges compared.")
    sample_per_model: int | None = Field(
        default=None, ge=1, description="At most this many records per model, a seeded sample; None for all."
    )
    seed: int = Field(default=0, ge=0, description="Seeds the sample, the bootstrap and the permutations.")
    judge_model: str | None = Field(
        default=None, description="Re-judge the sample with this litellm model; None compares the landed scores."
    )
    api_base: str | None = Field(default=None, description="Base URL of an OpenAI-compatible judge server.")
    concurrency: int = Field(default=8, ge=1, le=1024, description="Judge calls in flight when re-judging.")
    bootstrap: int = Field(default=2000, ge=100, le=100_000, description="Bootstrap resamples and permutations.")
    thresholds: Thresholds = Field(
        default_factory=Thresholds, description="Verdict thresholds when re-judging (landed rows keep theirs)."
    )
    min_pairs: int = Field(default=10, ge=2, description="Shared questions needed for a paired test.")

    @field_validator("models", "judges", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("judges")
    @classmethod
    def _unique_judges(cls, value: list[JudgeName]) -> list[JudgeName]:
        return list(dict.fromkeys(value))

    @field_validator("models")
    @classmethod
    def _unique_models(cls, value: list[str]) -> list[str]:
        models = [m.strip() for m in value]
        if any(not m for m in models):
            raise ValueError("a model name is blank")
        repeated = sorted({m for m in models if models.count(m) > 1})
        if repeated:
            raise ValueError(f"models are repeated: {', '.join(repeated)}")
        return models

    @field_validator("baseline", "judge_model", "api_base", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _check(self) -> ComparisonSpec:
        if self.end_date < self.start_date:
            raise ValueError(f"end_date {self.end_date} is before start_date {self.start_date}")
        if self.judge_model is None:
            self.api_base = None  # only a judge call uses it; it must not change the comparison's id
        if self.baseline is None:
            self.baseline = self.models[0]
        elif self.baseline not in self.models:
            raise ValueError(f"baseline {self.baseline!r} is not one of the models {self.models}")
        return self

    @property
    def baseline_model(self) -> str:
        """The baseline (set by validation)."""
        assert self.baseline is not None
        return self.baseline

    def days(self) -> list[dt.date]:
        """Every day of the range."""
        return [self.start_date + dt.timedelta(days=i) for i in range((self.end_date - self.start_date).days + 1)]

    def default_id(self) -> str:
        """``cmp-`` and a hash of the spec: the same spec gets the same id."""
        digest = hashlib.sha256(self.model_dump_json().encode()).hexdigest()
        return f"cmp-{digest[:16]}"

    def describe(self) -> str:
        """The range and the models, for messages."""
        return f"{self.start_date}..{self.end_date}, models {', '.join(self.models)}"


# --------------------------------------------------------------------------------------------
# Statistics (pure functions over numpy arrays)


@dataclass(frozen=True)
class DeltaEstimate:
    """A difference of means with its 95% bootstrap interval and two-sided p-value."""

    test: str
    delta: float
    ci_low: float
    ci_high: float
    p_value: float


def rng_for(seed: int, *parts: str) -> np.random.Generator:
    """A Generator seeded by ``seed`` and the names of what it draws for (order independent)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "big") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def _batches(total: int, width: int) -> Iterator[int]:
    step = max(1, _BATCH_CELLS // max(width, 1))
    for start in range(0, total, step):
        yield min(step, total - start)


def bootstrap_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of ``values``."""
    n = values.size
    draws = [values[rng.integers(0, n, size=(k, n))].mean(axis=1) for k in _batches(resamples, n)]
    return np.concatenate(draws)


def _interval(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def _as_extreme(statistics: np.ndarray, observed: float) -> int:
    tolerance = 1e-12 * max(1.0, abs(observed))
    return int(np.count_nonzero(np.abs(statistics) >= abs(observed) - tolerance))


def mean_interval(values: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean."""
    if values.size == 1:
        return float(values[0]), float(values[0])
    return _interval(bootstrap_means(values, rng, resamples))


def paired_test(differences: np.ndarray, rng: np.random.Generator, resamples: int) -> DeltaEstimate:
    """Mean of per-question differences: bootstrap over questions, sign-flip permutation p-value."""
    n = differences.size
    observed = float(differences.mean())
    low, high = _interval(bootstrap_means(differences, rng, resamples))
    extreme = 0
    for k in _batches(resamples, n):
        signs = rng.integers(0, 2, size=(k, n)) * 2 - 1
        extreme += _as_extreme((signs * differences).mean(axis=1), observed)
    return DeltaEstimate("paired", observed, low, high, (extreme + 1) / (resamples + 1))


def unpaired_test(sample: np.ndarray, baseline: np.ndarray, rng: np.random.Generator, resamples: int) -> DeltaEstimate:
    """Difference of two means: bootstrap of each sample, two-sample permutation p-value."""
    observed = float(sample.mean() - baseline.mean())
    draws = bootstrap_means(sample, rng, resamples) - bootstrap_means(baseline, rng, resamples)
    low, high = _interval(draws)
    pooled = np.concatenate([sample, baseline])
    size = sample.size
    extreme = 0
    for k in _batches(resamples, pooled.size):
        shuffled = rng.permuted(np.broadcast_to(pooled, (k, pooled.size)), axis=1)
        extreme += _as_extreme(shuffled[:, :size].mean(axis=1) - shuffled[:, size:].mean(axis=1), observed)
    return DeltaEstimate("unpaired", observed, low, high, (extreme + 1) / (resamples + 1))


# --------------------------------------------------------------------------------------------
# Rows to compare


def question_key(question: pl.Expr) -> pl.Expr:
    """The matching key of a question: lowercase, whitespace collapsed, punctuation stripped at the ends."""
    return (
        question.str.to_lowercase()
        .str.replace_all(r"\s+", " ")
        .str.replace_all(r"^[\p{P}\p{S}\s]+|[\p{P}\p{S}\s]+$", "")
    )


def _keyed_questions(frame: pl.DataFrame) -> pl.DataFrame:
    key = question_key(pl.col("question"))
    return frame.with_columns(question_key=pl.when(key != "").then(key)).drop("question")


def _record_hash(seed: int, model: str, day: dt.date, record_id: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{model}\x1f{day.isoformat()}\x1f{record_id}".encode()).hexdigest()


def sample_records(records: pl.DataFrame, per_model: int | None, seed: int) -> pl.DataFrame:
    """At most ``per_model`` records (distinct ``dt``, ``record_id``) per ``model``, chosen by a
    seeded hash: the same seed picks the same records whatever the order of the input."""
    keys = records.select("dt", "record_id", "model").unique().sort("model", "dt", "record_id")
    if per_model is None:
        return keys
    ranks = [_record_hash(seed, m, d, r) for d, r, m in keys.iter_rows()]
    return (
        keys.with_columns(_rank=pl.Series(ranks, dtype=pl.String))
        .sort("model", "_rank")
        .group_by("model", maintain_order=True)
        .head(per_model)
        .drop("_rank")
        .sort("model", "dt", "record_id")
    )


def _check_models(found: set[str], spec: ComparisonSpec, where: str) -> None:
    missing = [m for m in spec.models if m not in found]
    if missing:
        raise ComparisonError(
            f"comparison {spec.describe()}: no records of {', '.join(missing)} in {where} "
            f"(models found: {', '.join(sorted(found)) or 'none'})"
        )


def _read_columns(store: storage.Store, key: str, columns: list[str]) -> pl.DataFrame:
    return pl.read_parquet(io.BytesIO(store.read_bytes(key)), columns=columns)


def _landed_questions(store: storage.Store, keys: pl.DataFrame) -> pl.DataFrame:
    """``question_key`` of landed records, from the prompts kept in ``judge_calls`` (every judge
    fences the question the same way; redacted runs match on the redacted text)."""
    frames = []
    for (day,), wanted in keys.group_by("dt", maintain_order=True):
        key = storage.table_key("judge_calls", day)
        if not store.exists(key):
            continue
        calls = (
            _read_columns(store, key, ["record_id", "user_prompt"])
            .filter(pl.col("record_id").is_in(wanted["record_id"].implode()) & pl.col("user_prompt").is_not_null())
            .unique("record_id", keep="first", maintain_order=True)
        )
        questions = [read_fenced_blocks(prompt).get("question") for prompt in calls["user_prompt"]]
        frames.append(pl.DataFrame({
            "dt": pl.Series([day] * calls.height, dtype=pl.Date),
            "record_id": calls["record_id"],
            "question": pl.Series(questions, dtype=pl.String),
        }))
    if not frames:
        return pl.DataFrame(schema={"dt": pl.Date, "record_id": pl.String, "question_key": pl.String})
    return _keyed_questions(pl.concat(frames))


def landed_rows(store: storage.Store, spec: ComparisonSpec) -> pl.DataFrame:
    """The landed ``evaluations`` rows of the spec's models, judges and days (sampled when
    asked), with the ``question_key`` each record was asked."""
    frame = storage.scan_table(store, "evaluations", spec.days())
    if frame.height == 0:
        raise ComparisonError(
            f"comparison {spec.describe()}: no landed evaluations under {store.uri('evaluations/')} for the range"
        )
    _check_models(set(frame["model"].unique().to_list()), spec, store.uri("evaluations/"))
    rows = frame.filter(pl.col("model").is_in(spec.models) & pl.col("judge").is_in(list(spec.judges)))
    keys = sample_records(rows, spec.sample_per_model, spec.seed)
    rows = rows.join(keys, on=["dt", "record_id", "model"], how="semi")
    questions = _landed_questions(store, keys)
    rows = rows.join(questions, on=["dt", "record_id"], how="left")
    return rows.select(_ROW_COLUMNS).sort("dt", "record_id", "judge")


# --------------------------------------------------------------------------------------------
# Re-judging a sample


def _valid_batches(raw_store: storage.Store, day: dt.date, batch_rows: int | None = None) -> Iterator[pl.DataFrame]:
    """The day's valid records as the pipeline stages them (ingest + the validation suite), one
    bounded batch at a time: objects are read one by one, never the whole day at once."""
    import tempfile

    from evaluation.ingest import BATCH_ROWS, ingest_batches
    from evaluation.pipeline import RECORD_SCHEMA, _raw_sources
    from evaluation.validation import DayValidator

    objects = [o for o in raw_store.list(storage.raw_prefix(day)) if o.key.endswith(storage.RAW_SUFFIXES)]
    validator = DayValidator(day, max_reject_ratio=1.0, allow_empty=True)
    with tempfile.TemporaryDirectory(prefix="evaluation-compare-") as folder:
        sources = _raw_sources(raw_store, objects, Path(folder))
        for batch in ingest_batches(sources, day, batch_rows=batch_rows or BATCH_ROWS):
            if batch.rows.height:
                valid = validator.validate_batch(batch.rows).valid
                if valid.height:
                    yield valid.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()])


def sampled_valid_records(raw_store: storage.Store, spec: ComparisonSpec, *, batch_rows: int | None = None) -> pl.DataFrame:
    """The valid records of the spec's days and models that :func:`sample_records` picks, streamed
    day by day and batch by batch: with ``sample_per_model`` at most that many records per model
    are held (the smallest seeded hashes so far), so the days' size does not matter."""
    found: set[str] = set()
    kept: list[pl.DataFrame] = []
    for day in spec.days():
        for valid in _valid_batches(raw_store, day, batch_rows):
            found.update(valid["model"].unique().to_list())
            part = valid.filter(pl.col("model").is_in(spec.models)).with_columns(dt=pl.lit(day, dtype=pl.Date))
            if spec.sample_per_model is None:
                kept.append(part)
                continue
            ranks = [_record_hash(spec.seed, m, day, r) for m, r in part.select("model", "record_id").iter_rows()]
            part = part.with_columns(_rank=pl.Series(ranks, dtype=pl.String))
            kept = [
                pl.concat([*kept, part], how="vertical")
                .sort("model", "_rank")
                .group_by("model", maintain_order=True)
                .head(spec.sample_per_model)
                .select(part.columns)
            ]
    _check_models(found, spec, raw_store.root)
    if not kept:
        from evaluation.pipeline import RECORD_SCHEMA

        return pl.DataFrame(schema={**RECORD_SCHEMA, "dt": pl.Date})
    records = pl.concat(kept, how="vertical")
    return records.drop("_rank", strict=False).select(pl.exclude("dt"), "dt").sort("dt", "record_id")


def _judging_key(comparison_id: str) -> str:
    return storage.comparison_key(comparison_id, "judging.json")


def judge_sample(
    store: storage.Store,
    spec: ComparisonSpec,
    *,
    comparison_id: str,
    raw_store: storage.Store,
    api_key: str | None = None,
    chunk_size: int = 500,
) -> dict[str, Any]:
    """Re-judge a seeded sample of each model's valid records with ``spec.judge_model`` and land
    them as the comparison's ``evaluations.parquet`` and ``judge_calls.parquet``.

    Runs the pipeline's own chunk stage under ``_work/dt=.../run=comparison-<id>/``, so replies
    already paid for (the day's ledger) are reused: a retry pays only for calls not made yet.
    """
    from evaluation import pipeline
    from evaluation.client import JudgeClient
    from evaluation.contract import EVALUATION_COLUMNS, RunConfig
    from evaluation.scoring import score_table

    if spec.judge_model is None:
        raise ComparisonError(f"comparison {comparison_id}: judge_sample needs a judge_model")
    run_id = f"comparison-{comparison_id}"
    try:  # fail before paying: an unusable judge model stops the comparison before any record is read
        pipeline.probe_judge(JudgeClient(spec.judge_model, api_base=spec.api_base, api_key=api_key),
                             f"comparison {comparison_id}")
    except pipeline.JudgeUnusable as exc:
        raise ComparisonError(str(exc)) from exc
    records = sampled_valid_records(raw_store, spec)
    stores = pipeline.Stores(raw=raw_store, out=store)
    judged: list[pl.DataFrame] = []
    calls: list[pl.DataFrame] = []
    for (day,), day_records in records.group_by("dt", maintain_order=True):
        cfg = RunConfig(
            date=day, input_uri=raw_store.root, output_uri=store.root, run_id=run_id, trigger="comparison",
            judges=list(spec.judges), judge_model=spec.judge_model, api_base=spec.api_base,
            concurrency=spec.concurrency, thresholds=spec.thresholds, chunk_size=chunk_size,
        )
        # In content-key order, as the daily plan stages chunks: each chunk reads only the day's
        # ledger objects of its own key range (see evaluation.ledger).
        staged = day_records.drop("dt").with_columns(sampled=pl.lit(True))
        staged = staged.with_columns(pipeline.content_keys(staged)).sort("_key", maintain_order=True).drop("_key")
        for index, offset in enumerate(range(0, staged.height, chunk_size)):
            part = staged.slice(offset, chunk_size)
            storage.write_parquet(store, storage.chunk_key(day, run_id, "records", index), part)
            pipeline.judge_chunk(cfg, stores, index, api_key=api_key)
            judged.append(storage.read_parquet(store, storage.chunk_key(day, run_id, "judged", index))
                          .with_columns(dt=pl.lit(day, dtype=pl.Date)))
            calls.append(storage.read_parquet(store, storage.chunk_key(day, run_id, "calls", index))
                         .with_columns(dt=pl.lit(day, dtype=pl.Date)))
        store.delete_prefix(storage.work_prefix(day, run_id))
    if not judged:
        raise ComparisonError(f"comparison {comparison_id} ({spec.describe()}): no valid records to judge")
    parsed = pl.concat(judged, how="vertical_relaxed")
    questions = _keyed_questions(records.select("dt", "record_id", "question"))
    evaluations = (
        score_table(parsed, spec.thresholds)
        .with_columns(run_id=pl.lit(run_id))
        .join(questions, on=["dt", "record_id"], how="left")
        .select(*EVALUATION_COLUMNS, "question_key")
        .sort("dt", "record_id", "judge")
    )
    call_table = pl.concat(calls, how="vertical_relaxed")
    call_table = call_table.select("dt", pl.exclude("dt"))
    storage.write_parquet(store, storage.comparison_key(comparison_id, "evaluations.parquet"), evaluations)
    storage.write_parquet(store, storage.comparison_key(comparison_id, "judge_calls.parquet"), call_table)
    counts = {
        "records": records.height,
        "records_per_model": {m: int(n) for m, n in records.group_by("model").len().sort("model").iter_rows()},
        "rows": evaluations.height,
        "statuses": {s: int(n) for s, n in evaluations.group_by("judge_status").len().sort("judge_status").iter_rows()},
        "calls_made": int((call_table["attempts"] > 0).sum()) if call_table.height else 0,
        "cost_usd": round(float(evaluations["cost_usd"].sum()), 6),
    }
    storage.write_json(store, _judging_key(comparison_id), {"spec": spec.model_dump(mode="json"), **counts})
    logger.info("comparison %s: re-judged %d records with %s: %s", comparison_id, records.height, spec.judge_model, counts)
    return counts


def _rejudged_rows(store: storage.Store, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame | None:
    """The landed re-judged sample of this comparison, when it was judged for this very spec."""
    key = storage.comparison_key(comparison_id, "evaluations.parquet")
    marker = _judging_key(comparison_id)
    if not (store.exists(key) and store.exists(marker)):
        return None
    if storage.read_json(store, marker).get("spec") != spec.model_dump(mode="json"):
        return None
    return storage.read_parquet(store, key).select(_ROW_COLUMNS)


def _rejudged(
    store: storage.Store, spec: ComparisonSpec, comparison_id: str, raw_store: storage.Store | None, api_key: str | None
) -> pl.DataFrame:
    """The re-judged sample of this comparison: the landed one for this spec, else judged now."""
    rows = _rejudged_rows(store, spec, comparison_id)
    if rows is not None:
        return rows
    if raw_store is None:
        raise ComparisonError(
            f"comparison {comparison_id}: no re-judged sample with {spec.judge_model} landed for this spec, "
            "and no raw input store to judge one from"
        )
    judge_sample(store, spec, comparison_id=comparison_id, raw_store=raw_store, api_key=api_key)
    rows = _rejudged_rows(store, spec, comparison_id)
    if rows is None:
        raise ComparisonError(f"comparison {comparison_id}: the re-judged sample did not land under {store.root}")
    return rows


# --------------------------------------------------------------------------------------------
# Tables


def _ok_values(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter(pl.col("judge_status") == "ok").with_columns(
        pass_rate=pl.when(pl.col("verdict").is_not_null()).then((pl.col("verdict") == "pass").cast(pl.Float64))
    )


def _values(frame: pl.DataFrame, model: str, metric: str) -> np.ndarray:
    values = frame.filter(pl.col("model") == model)[metric].drop_nulls()
    return values.to_numpy().astype(np.float64, copy=False)


def _question_means(frame: pl.DataFrame, model: str, metric: str) -> pl.DataFrame:
    return (
        frame.filter((pl.col("model") == model) & pl.col(metric).is_not_null() & pl.col("question_key").is_not_null())
        .group_by("question_key")
        .agg(pl.col(metric).mean().alias("value"))
        .sort("question_key")
    )


def _metric_row(
    comparison_id: str, spec: ComparisonSpec, frame: pl.DataFrame, judge: str, metric: str, model: str
) -> dict[str, Any]:
    baseline = spec.baseline_model
    values = _values(frame, model, metric)
    means = _question_means(frame, model, metric)
    row: dict[str, Any] = {
        "comparison_id": comparison_id, "start_date": spec.start_date, "end_date": spec.end_date,
        "judge": judge, "metric": metric, "model": model, "baseline": baseline,
        "is_baseline": model == baseline, "n": int(values.size), "n_questions": means.height,
    }
    if values.size:
        row["mean"] = float(values.mean())
        row["ci_low"], row["ci_high"] = mean_interval(values, rng_for(spec.seed, judge, metric, model, "mean"),
                                                      spec.bootstrap)
    base_values = _values(frame, baseline, metric)
    row["baseline_n"] = int(base_values.size)
    row["baseline_mean"] = float(base_values.mean()) if base_values.size else None
    if model == baseline:
        return row
    base_means = _question_means(frame, baseline, metric)
    shared = means.join(base_means, on="question_key", suffix="_baseline").sort("question_key")
    differences = (shared["value"] - shared["value_baseline"]).to_numpy().astype(np.float64, copy=False)
    row.update(
        n_pairs=shared.height,
        wins=int(np.count_nonzero(differences > TIE_TOLERANCE)),
        losses=int(np.count_nonzero(differences < -TIE_TOLERANCE)),
        ties=int(np.count_nonzero(np.abs(differences) <= TIE_TOLERANCE)),
    )
    if not values.size or not base_values.size:
        return row
    rng = rng_for(spec.seed, judge, metric, model, "delta")
    smaller = min(means.height, base_means.height)
    if shared.height >= spec.min_pairs and shared.height >= MIN_PAIRED_SHARE * smaller:
        result = paired_test(differences, rng, spec.bootstrap)
    else:
        result = unpaired_test(values, base_values, rng, spec.bootstrap)
    row.update(
        test=result.test, delta=result.delta, delta_ci_low=result.ci_low, delta_ci_high=result.ci_high,
        p_value=result.p_value, significant=result.ci_low > 0 or result.ci_high < 0,
    )
    return row


def compare_metrics(rows: pl.DataFrame, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame:
    """``metrics`` of a comparison: one row per (judge, metric, model), ``ok`` rows only."""
    ok = _ok_values(rows)
    out = []
    for judge in spec.judges:
        frame = ok.filter(pl.col("judge") == judge)
        for metric in JUDGE_METRICS[judge]:
            for model in spec.models:
                out.append(_metric_row(comparison_id, spec, frame, judge, metric, model))
    return pl.DataFrame(out, schema=METRICS_SCHEMA)


def compare_verdicts(rows: pl.DataFrame, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame:
    """``verdicts`` of a comparison: the verdict mix of ``ok`` rows per (judge, model) in percent,
    and its shift from the baseline in percentage points (shifts of a model sum to zero)."""
    ok = rows.filter((pl.col("judge_status") == "ok") & pl.col("verdict").is_not_null())
    counts = {(j, m, v): n for j, m, v, n in ok.group_by("judge", "model", "verdict").len().iter_rows()}
    out = []
    for judge in spec.judges:
        totals = {m: sum(counts.get((judge, m, v), 0) for v in VERDICTS) for m in spec.models}

        def share(model: str, verdict: str, judge: str = judge, totals: dict[str, int] = totals) -> float | None:
            total = totals[model]
            return 100.0 * counts.get((judge, model, verdict), 0) / total if total else None

        for model in spec.models:
            for verdict in VERDICTS:
                mine, base = share(model, verdict), share(spec.baseline_model, verdict)
                out.append({
                    "comparison_id": comparison_id, "start_date": spec.start_date, "end_date": spec.end_date,
                    "judge": judge, "model": model, "baseline": spec.baseline_model,
                    "verdict": verdict, "n": counts.get((judge, model, verdict), 0), "n_ok": totals[model],
                    "share_pct": mine, "baseline_share_pct": base,
                    "shift_pp": None if mine is None or base is None else mine - base,
                })
    return pl.DataFrame(out, schema=VERDICTS_SCHEMA)


def _status_counts(rows: pl.DataFrame) -> dict[str, dict[str, dict[str, int]]]:
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for model, judge, status, n in rows.group_by("model", "judge", "judge_status").len().sort(
        "model", "judge", "judge_status"
    ).iter_rows():
        counts.setdefault(model, {}).setdefault(judge, {})[status] = int(n)
    return counts


# --------------------------------------------------------------------------------------------
# The run


def run_comparison(
    store: storage.Store,
    spec: ComparisonSpec,
    *,
    comparison_id: str | None = None,
    raw_store: storage.Store | None = None,
    api_key: str | None = None,
) -> dict[str, Any]:
    """Compare the spec's models and land the comparison; returns ids, URIs, counts and deltas.

    ``raw_store`` (the raw input root) is needed only with ``spec.judge_model``. A re-judged
    sample already landed for this id and spec (by :func:`judge_sample`) is reused.
    """
    comparison_id = storage.safe_id(comparison_id or spec.default_id())
    if spec.judge_model is None:
        rows, source = landed_rows(store, spec), "landed"
    else:
        rows, source = _rejudged(store, spec, comparison_id, raw_store, api_key), "rejudged"
    metrics = compare_metrics(rows, spec, comparison_id)
    verdicts = compare_verdicts(rows, spec, comparison_id)
    records = {m: int(n) for m, n in rows.select("dt", "record_id", "model").unique().group_by("model").len()
               .sort("model").iter_rows()}
    statuses = _status_counts(rows)
    keys = {name: storage.comparison_key(comparison_id, name)
            for name in ("metrics.parquet", "verdicts.parquet", "spec.json", "report.html")}
    storage.write_parquet(store, keys["metrics.parquet"], metrics)
    storage.write_parquet(store, keys["verdicts.parquet"], verdicts)
    storage.write_json(store, keys["spec.json"], {
        "comparison_id": comparison_id, "source": source, "spec": spec.model_dump(mode="json"),
        "records_per_model": records, "statuses": statuses,
    })
    page = render_report(comparison_id, spec, source, metrics, verdicts, records, statuses)
    store.write_bytes(keys["report.html"], page.encode())
    result = {
        "comparison_id": comparison_id,
        "source": source,
        "uri": store.uri(storage.comparison_key(comparison_id, "")),
        "metrics_uri": store.uri(keys["metrics.parquet"]),
        "verdicts_uri": store.uri(keys["verdicts.parquet"]),
        "spec_uri": store.uri(keys["spec.json"]),
        "report_uri": store.uri(keys["report.html"]),
        "baseline": spec.baseline_model,
        "records_per_model": records,
        "rows": rows.height,
        "deltas": _deltas(metrics),
    }
    logger.info("comparison %s landed at %s", comparison_id, result["uri"])
    return result


def _rounded(value: Any, digits: int = 4) -> Any:
    return round(value, digits) if isinstance(value, float) and math.isfinite(value) else value


def _deltas(metrics: pl.DataFrame) -> list[dict[str, Any]]:
    columns = ["judge", "metric", "model", "n", "mean", "delta", "delta_ci_low", "delta_ci_high", "p_value",
               "test", "significant", "n_pairs", "wins", "ties", "losses"]
    rows = metrics.filter(~pl.col("is_baseline")).select(columns).iter_rows(named=True)
    return [{k: _rounded(v) for k, v in row.items()} for row in rows]


# --------------------------------------------------------------------------------------------
# The report page

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
main{max-width:1100px;margin:0 auto;padding:24px}
h1{font-size:1.6rem;margin:0 0 4px}h2{font-size:1.2rem;margin:28px 0 8px}h3{font-size:1rem;margin:18px 0 6px}
.meta{color:#57606a;font-size:.9rem}.card{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:16px;margin:12px 0}
table{border-collapse:collapse;width:100%;font-size:.85rem}th,td{padding:4px 8px;border-bottom:1px solid #eaeef2;text-align:right}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}th{background:#f6f8fa}
.pos{color:#1a7f37;font-weight:600}.neg{color:#cf222e;font-weight:600}.ns{color:#57606a}
svg{max-width:100%;height:auto}svg text{font-family:inherit}
"""

def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return html.escape(str(value))


def _delta_chart(judge: str, baseline: str, rows: list[dict[str, Any]]) -> str:
    """Deltas as intervals around zero: a dot at the delta, whiskers to the 95% interval, a
    diamond at zero on every row (bold label when the interval excludes zero)."""
    from evaluation import charts

    rows = [r for r in rows if r["delta"] is not None]
    if not rows:
        return "<p class='meta'>No deltas: a model or the baseline has no ok rows.</p>"
    limit = max(max(abs(r["delta_ci_low"]), abs(r["delta_ci_high"])) for r in rows)
    limit = max(limit * 1.1, 0.02)
    intervals = [
        charts.Interval(f"{r['metric']} · {r['model']}", r["delta"], r["delta_ci_low"], r["delta_ci_high"],
                        reference=0.0, flagged=bool(r["significant"]))
        for r in rows
    ]
    return charts.interval_chart(
        intervals, title=f"Difference from {baseline} — {judge}", x_label=f"difference from {baseline}",
        value_format=lambda v: f"{v:+.3f}", x_range=(-limit, limit), reference_label="no difference (0)", width=820,
    )


def _verdict_chart(judge: str, rows: list[dict[str, Any]], models: list[str]) -> str:
    from evaluation import charts

    segments = [charts.Segment(v, charts.OUTCOME_COLOURS[v]) for v in VERDICTS]
    bars = [charts.BarRow(m, [next((r["n"] for r in rows if r["model"] == m and r["verdict"] == v), 0)
                              for v in VERDICTS]) for m in models]
    return charts.stacked_bar_chart(bars, segments, title=f"Verdict mix of ok rows — {judge}", width=820)


def _verdict_table(rows: list[dict[str, Any]], models: list[str]) -> str:
    head = "<tr><th>model</th><th>ok rows</th>" + "".join(
        f"<th>{v} %</th><th>shift (pp)</th>" for v in VERDICTS) + "</tr>"
    body = []
    for model in models:
        mine = {r["verdict"]: r for r in rows if r["model"] == model}
        cells = []
        for verdict in VERDICTS:
            row = mine.get(verdict, {})
            shift = row.get("shift_pp")
            cells.append(f"<td>{_fmt(row.get('share_pct'), 1)}</td>"
                         f"<td>{'–' if shift is None or row.get('model') == row.get('baseline') else f'{shift:+.1f}'}</td>")
        n_ok = next(iter(mine.values()), {}).get("n_ok", 0)
        body.append(f"<tr><td>{html.escape(model)}</td><td>{n_ok}</td>{''.join(cells)}</tr>")
    return f"<table>{head}{''.join(body)}</table>"


def _metrics_table(rows: list[dict[str, Any]]) -> str:
    head = ("<tr><th>metric</th><th>model</th><th>n</th><th>mean</th><th>95% CI</th><th>delta</th>"
            "<th>95% CI of delta</th><th>p</th><th>test</th><th>W / T / L</th></tr>")
    body = []
    for r in rows:
        cls = "ns"
        if r["significant"]:
            cls = "pos" if r["delta"] > 0 else "neg"
        wtl = "–" if r["is_baseline"] else f"{r['wins']} / {r['ties']} / {r['losses']}"
        delta = "–" if r["delta"] is None else f"{r['delta']:+.3f}"
        delta_ci = "–" if r["delta"] is None else f"[{_fmt(r['delta_ci_low'])}, {_fmt(r['delta_ci_high'])}]"
        body.append(
            f"<tr><td>{html.escape(r['metric'])}</td><td>{html.escape(r['model'])}{' (baseline)' if r['is_baseline'] else ''}"
            f"</td><td>{r['n']}</td><td>{_fmt(r['mean'])}</td><td>[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]</td>"
            f"<td class='{cls}'>{delta}</td><td>{delta_ci}</td>"
            f"<td>{_fmt(r['p_value'], 4)}</td><td>{_fmt(r['test'])}</td><td>{wtl}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def render_report(
    comparison_id: str,
    spec: ComparisonSpec,
    source: str,
    metrics: pl.DataFrame,
    verdicts: pl.DataFrame,
    records: dict[str, int],
    statuses: dict[str, dict[str, dict[str, int]]],
) -> str:
    """The comparison's self-contained HTML page."""
    how = ("landed scores" if source == "landed"
           else f"re-judged with {spec.judge_model}")
    sample = "all records" if spec.sample_per_model is None else f"at most {spec.sample_per_model} records per model"
    sections = []
    for judge in spec.judges:
        judge_rows = metrics.filter(pl.col("judge") == judge).to_dicts()
        deltas = [r for r in judge_rows if not r["is_baseline"]]
        verdict_rows = verdicts.filter(pl.col("judge") == judge).to_dicts()
        sections.append(
            f"<section class='card'><h2>Judge <code>{html.escape(judge)}</code></h2>"
            f"{_delta_chart(judge, spec.baseline_model, deltas)}"
            f"<h3>Verdict mix and shift from {html.escape(spec.baseline_model)}</h3>"
            f"{_verdict_chart(judge, verdict_rows, spec.models)}{_verdict_table(verdict_rows, spec.models)}"
            f"<h3>Metrics</h3>{_metrics_table(judge_rows)}</section>"
        )
    status_rows = []
    for model in spec.models:
        for judge in spec.judges:
            counts = statuses.get(model, {}).get(judge, {})
            status_rows.append(
                f"<tr><td>{html.escape(model)}</td><td>{html.escape(judge)}</td>"
                + "".join(f"<td>{counts.get(s, 0)}</td>" for s in JUDGE_STATUSES)
                + "</tr>"
            )
    records_line = ", ".join(f"{html.escape(m)}: {records.get(m, 0)}" for m in spec.models)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Model comparison {html.escape(comparison_id)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>Model comparison</h1><p class='meta'>{html.escape(comparison_id)} · {spec.start_date} to {spec.end_date} · "
        f"baseline <b>{html.escape(spec.baseline_model)}</b> · {html.escape(how)} · {html.escape(sample)} · "
        f"seed {spec.seed}</p>"
        f"<div class='card'><p>Records per model: {records_line}.</p>"
        "<p class='meta'>Means and verdict mixes use <code>ok</code> rows only; other statuses are counted at the end. "
        "Intervals are 95% percentile "
        f"bootstraps ({spec.bootstrap} resamples). A <i>paired</i> test matches records on the normalised question "
        "and works on per-question differences (sign-flip permutation p-value); an <i>unpaired</i> test compares the "
        "two samples (two-sample permutation p-value). A bold label, a green or red delta: the interval excludes "
        "zero.</p></div>"
        + "".join(sections)
        + "<section class='card'><h2>Judge statuses</h2><table><tr><th>model</th><th>judge</th>"
        + "".join(f"<th>{s}</th>" for s in JUDGE_STATUSES) + "</tr>"
        + "".join(status_rows)
        + "</table></section></main></body></html>"
    )
