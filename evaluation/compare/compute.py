"""Model comparisons, the numbers: the rows compared (landed, or a re-judged sample), the
``metrics`` and ``verdicts`` tables (statistics of :mod:`evaluation.compare.stats`), and
:func:`run_comparison`, which lands them with the page of :mod:`evaluation.compare.render`. See
:mod:`evaluation.compare` for the method."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl

from evaluation import stages, storage
from evaluation.compare.render import render_report
from evaluation.compare.stats import (
    ALPHA,
    TIE_TOLERANCE,
    mean_interval,
    paired_test,
    permutations_for,
    rng_for,
    unpaired_test,
)
from evaluation.contract.comparison import ComparisonError, ComparisonSpec
from evaluation.contract.config import EVALUATION_COLUMNS, VERDICTS, RunConfig, question_key
from evaluation.contract.multiplicity import adjust_p_values
from evaluation.contract.schemas import METRICS_SCHEMA, VERDICTS_SCHEMA
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS, read_fenced_blocks, score_table
from evaluation.stages import CostEstimate, PlanRecord, write_record
from evaluation.storage.ingest import BATCH_ROWS

logger = logging.getLogger(__name__)

#: Metrics compared per judge, in report order. ``pass_rate`` is the share of ``pass`` verdicts.
JUDGE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("score", *RAG_METRICS, "pass_rate"),
    "masis": ("score", *MASIS_DIMENSIONS, "pass_rate"),
    "prompt": ("score", "pass_rate"),
}
#: The share of the smaller side's questions that must be shared for a paired test.
MIN_PAIRED_SHARE = 0.5

#: Columns of the rows a comparison works on (``evaluations`` columns).
_ROW_COLUMNS = ("dt", "record_id", "question_key", "model", "judge", "judge_status", "verdict", "score",
                *dict.fromkeys((*RAG_METRICS, *MASIS_DIMENSIONS)))


# --------------------------------------------------------------------------------------------
# Rows to compare


def _seeded_hash(seed: int, *parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, (seed, *parts))).encode()).hexdigest()


def _with_question_keys(records: pl.DataFrame) -> pl.DataFrame:
    if "question_key" in records.columns:
        return records
    if "question" in records.columns:
        keys = [None if q is None else question_key(q) for q in records["question"]]
        return records.with_columns(question_key=pl.Series(keys, dtype=pl.String))
    return records.with_columns(question_key=pl.lit(None, dtype=pl.String))


def sample_records(records: pl.DataFrame, per_model: int | None, seed: int) -> pl.DataFrame:
    """At most ``per_model`` records (distinct ``dt``, ``record_id``) per ``model``, sampled by
    question so that the models' samples pair up: first one record of each question that every
    model in ``records`` answered (by ``question_key``, or the ``question`` text), the questions
    in the same seeded order for every model; then the other questions' records; then further
    records of questions already taken. Records and questions are ranked by seeded hashes, so the
    same seed picks the same records whatever the order of the input."""
    keys = (_with_question_keys(records).select("dt", "record_id", "model", "question_key")
            .unique(["dt", "record_id", "model"]).sort("model", "dt", "record_id"))
    if per_model is None:
        return keys.drop("question_key")
    shared = _shared_questions(keys, keys["model"].unique().to_list())
    record_ranks = [_seeded_hash(seed, m, d.isoformat(), r) for d, r, m, _ in keys.iter_rows()]
    question_ranks = [record_ranks[i] if q is None else _seeded_hash(seed, "question", q)
                      for i, (_, _, _, q) in enumerate(keys.iter_rows())]
    return (
        keys.with_columns(
            _record=pl.Series(record_ranks, dtype=pl.String),
            _question=pl.Series(question_ranks, dtype=pl.String),
            _unpaired=~pl.col("question_key").is_in(shared).fill_null(False),
        )
        .with_columns(_repeat=pl.col("_record").rank("ordinal").over("model", "_question"))
        .sort("model", "_repeat", "_unpaired", "_question", "_record")
        .group_by("model", maintain_order=True)
        .head(per_model)
        .select("dt", "record_id", "model")
        .sort("model", "dt", "record_id")
    )


def _shared_questions(rows: pl.DataFrame, models: list[str]) -> pl.Series:
    """The questions (``question_key``) of ``rows`` that every one of ``models`` answered."""
    return (
        rows.filter(pl.col("model").is_in(models)).drop_nulls("question_key")
        .group_by("question_key").agg(pl.col("model").n_unique())
        .filter(pl.col("model") == len(models))["question_key"]
    )


def paired_questions(rows: pl.DataFrame, models: list[str]) -> int:
    """How many questions (``question_key``) of ``rows`` every one of ``models`` answered."""
    return len(_shared_questions(rows, models))


def _check_models(found: set[str], spec: ComparisonSpec, where: str) -> None:
    missing = [m for m in spec.models if m not in found]
    if missing:
        raise ComparisonError(
            f"comparison {spec.describe()}: no records of {', '.join(missing)} in {where} "
            f"(models found: {', '.join(sorted(found)) or 'none'})"
        )


def _landed_questions(store: storage.Store, keys: pl.DataFrame, landed: storage.Landed) -> pl.DataFrame:
    """``question_key`` of records landed before ``evaluations`` carried it, from the prompts kept
    in ``judge_calls`` (every judge fences the question the same way; redacted runs match on the
    redacted text). Reads two columns of the days concerned."""
    calls = storage.scan_table(store, "judge_calls", landed)
    if calls is None or keys.is_empty():
        return pl.DataFrame(schema={"dt": pl.Date, "record_id": pl.String, "question_key": pl.String})
    prompts = (
        calls.filter(pl.col("dt").is_in(keys["dt"].unique().implode()) & pl.col("user_prompt").is_not_null())
        .select("dt", "record_id", "user_prompt")
        .join(keys.lazy().select("dt", "record_id"), on=["dt", "record_id"], how="semi")
        .unique(["dt", "record_id"], keep="first", maintain_order=True)
        .collect(engine="streaming")
    )
    questions = pl.Series("question", [read_fenced_blocks(prompt).get("question") for prompt in prompts["user_prompt"]],
                          dtype=pl.String)
    return _with_question_keys(prompts.select("dt", "record_id", questions)).drop("question")


def landed_rows(store: storage.Store, spec: ComparisonSpec) -> pl.DataFrame:
    """The landed ``evaluations`` rows of the spec's models, judges and days (sampled when
    asked), with the ``question_key`` each record was asked: read in place, the range's
    partitions and the columns compared only, each day the run its commit names (one reading of
    the commit records for ``evaluations`` and ``judge_calls``, read again when a day is landed
    again during the read: :func:`~evaluation.storage.read_consistently`)."""
    return storage.read_consistently(store, spec.days(), lambda landed: _landed_rows(store, spec, landed))


def _landed_rows(store: storage.Store, spec: ComparisonSpec, landed: storage.Landed) -> pl.DataFrame:
    where = store.uri("evaluations/")
    evaluations = storage.scan_table(store, "evaluations", landed)
    in_range = None if evaluations is None else evaluations.filter(pl.col("dt").is_between(spec.start_date, spec.end_date))
    found = set() if in_range is None else set(in_range.select(pl.col("model").unique()).collect(engine="streaming")["model"])
    if in_range is None or not found:
        raise ComparisonError(f"comparison {spec.describe()}: no landed evaluations under {where} for the range")
    _check_models(found, spec, where)
    columns = [c for c in _ROW_COLUMNS if c in in_range.collect_schema()]
    rows = (
        in_range.filter(pl.col("model").is_in(spec.models) & pl.col("judge").is_in(list(spec.judges)))
        .select(columns)
        .collect(engine="streaming")
    )
    rows = _with_question_keys(rows)
    unkeyed = rows.filter(pl.col("question_key").is_null()).select("dt", "record_id").unique()
    if unkeyed.height:  # landed before evaluations had question_key
        found_keys = _landed_questions(store, unkeyed, landed).rename({"question_key": "_key"})
        rows = rows.join(found_keys, on=["dt", "record_id"], how="left").with_columns(
            question_key=pl.coalesce("question_key", "_key")
        ).drop("_key")
    # Sampled by question: the records' keys are known before the sample is drawn.
    keys = sample_records(rows, spec.sample_per_model, spec.seed)
    rows = rows.join(keys, on=["dt", "record_id", "model"], how="semi")
    return rows.select(_ROW_COLUMNS).sort("dt", "record_id", "judge")


# --------------------------------------------------------------------------------------------
# Re-judging a sample


def _valid_batches(raw_store: storage.Store, day: dt.date, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The day's valid records as the daily ingest stages them (the same reading and row rules),
    one bounded batch at a time: objects are read one by one, never the whole day at once."""
    # pandas via validation (Great Expectations on use): only when a day is read
    from evaluation.storage.validation import DayValidator

    validator = DayValidator(day, max_reject_ratio=1.0, allow_empty=True)
    objects = stages.raw_objects(raw_store, day)
    for batch in stages.validated_batches(raw_store, objects, validator, batch_rows=batch_rows):
        if batch.valid.height:
            yield batch.valid


def sampled_valid_records(raw_store: storage.Store, spec: ComparisonSpec, *, batch_rows: int = BATCH_ROWS) -> pl.DataFrame:
    """The valid records of the spec's days and models that :func:`sample_records` picks, streamed
    day by day and batch by batch. With ``sample_per_model`` the days are read twice: first only
    the keys (day, record, model, question key) to draw the sample by question, then the sampled
    records, so at most that many records per model are held whatever the days' size."""
    found: set[str] = set()
    kept: list[pl.DataFrame] = []
    keys: list[pl.DataFrame] = []
    for day in spec.days():
        for valid in _valid_batches(raw_store, day, batch_rows):
            found.update(valid["model"].unique().to_list())
            part = valid.filter(pl.col("model").is_in(spec.models)).with_columns(dt=pl.lit(day, dtype=pl.Date))
            if spec.sample_per_model is None:
                kept.append(part)
            else:
                keys.append(_with_question_keys(part.select("dt", "record_id", "model", "question")).drop("question"))
    _check_models(found, spec, raw_store.root)
    if keys:
        sample = sample_records(pl.concat(keys, how="vertical"), spec.sample_per_model, spec.seed)
        for day in sample["dt"].unique().sort():
            chosen = sample.filter(pl.col("dt") == day)
            for valid in _valid_batches(raw_store, day, batch_rows):
                part = valid.with_columns(dt=pl.lit(day, dtype=pl.Date))
                kept.append(part.join(chosen, on=["dt", "record_id", "model"], how="semi"))
    # every model has valid records (_check_models), so each one has a part, or a sampled record
    return pl.concat(kept, how="vertical").select(pl.exclude("dt"), "dt").sort("dt", "record_id")


#: Starts the progress of one judging pass: (what is judged, the (record, judge) rows to judge) ->
#: the function told how many more rows are done, as they are (a command line's progress bar).
ProgressStart = Callable[[str, int], Callable[[int], None]]


def judge_by_day(
    cfg: RunConfig, stores: Any, records: pl.DataFrame, *, api_key: str | None,
    call_parameters: dict[str, Any] | None = None, progress: Callable[[int], None] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, int, int]:
    """Judge ``records`` (their day in ``dt``) a day at a time through the pipeline's own chunk stage
    under ``_work/dt=.../run=<cfg.run_id>/``: the parsed rows and judge calls (with ``dt``), and the
    calls made and reused. Chunks are staged in content-key order, as the daily plan stages them, so
    each reads only its key range of the day's ledger (see evaluation.storage.ledger) and a retry pays only
    for calls not made yet. With ``call_parameters`` the plan record carries them: a chunk whose
    replies are all in the ledger then sets up no judge client (nor litellm, seconds to import).
    ``progress`` is told the (record, judge) rows done as they are."""

    judged: list[pl.DataFrame] = []
    calls: list[pl.DataFrame] = []
    made = reused = 0
    for (day,), day_records in records.group_by("dt", maintain_order=True):
        day_cfg = cfg.model_copy(update={"date": day})
        staged = day_records.drop("dt").with_columns(sampled=pl.lit(True))
        chunks = stages.stage_chunks(day_cfg, stores, stages.in_key_order(staged, cfg.chunk_size))
        if call_parameters is not None:
            write_record(day_cfg, stores, "plan", PlanRecord(
                chunks=len(chunks), chunk_size=cfg.chunk_size, sampled=staged.height,
                estimate=CostEstimate(records=staged.height, prompt_tokens=0, cost_usd=0.0, sampled_records=0),
                call_parameters=call_parameters, seconds=0.0))
        for chunk in chunks:
            result = stages.judge_chunk(day_cfg, stores, chunk.index, api_key=api_key, progress=progress)
            made += result.calls_made
            reused += result.reused
            for kind, parts in (("judged", judged), ("calls", calls)):
                key = storage.chunk_key(day, cfg.run_id, kind, chunk.index)
                parts.append(storage.read_parquet(stores.out, key).with_columns(dt=pl.lit(day, dtype=pl.Date)))
        stores.out.delete_prefix(storage.work_prefix(day, cfg.run_id))
    call_table = pl.concat(calls, how="vertical_relaxed").select("dt", pl.exclude("dt"))
    return pl.concat(judged, how="vertical_relaxed"), call_table, made, reused


def judge_sample(
    store: storage.Store,
    spec: ComparisonSpec,
    *,
    comparison_id: str,
    raw_store: storage.Store,
    api_key: str | None = None,
    progress: ProgressStart | None = None,
) -> dict[str, Any]:
    """Re-judge a seeded sample of each model's valid records with ``spec.judge_model`` and land
    them as the comparison's ``evaluations.parquet`` and ``judge_calls.parquet``
    (:func:`judge_by_day`: a retry pays only for calls not made yet)."""

    if not spec.rejudges:
        raise ComparisonError(f"comparison {comparison_id}: judge_sample needs a judge_model")
    records = sampled_valid_records(raw_store, spec)
    cfg = RunConfig(
        date=records["dt"][0], input_uri=raw_store.root, output_uri=store.root, run_id=f"comparison-{comparison_id}",
        trigger="comparison", judges=list(spec.judges), thresholds=spec.thresholds,
        **spec.judge_settings().model_dump(),
    )
    try:  # fail before paying: an unusable judge model stops the comparison here
        stages.probe_judge(stages.judge_client(cfg, api_key), f"comparison {comparison_id}",
                           timeout_s=cfg.probe_timeout_s)
    except stages.JudgeUnusable as exc:
        raise ComparisonError(str(exc)) from exc
    advance = None if progress is None else progress(
        f"re-judging {records.height:,} records with {spec.judge_model}", records.height * len(spec.judges))
    parsed, call_table, _, _ = judge_by_day(cfg, stages.Stores(raw=raw_store, out=store), records, api_key=api_key,
                                            progress=advance)
    evaluations = (
        score_table(parsed, spec.thresholds)
        .with_columns(run_id=pl.lit(cfg.run_id))
        .select(*EVALUATION_COLUMNS)
        .sort("dt", "record_id", "judge")
    )
    storage.write_parquet(store, storage.comparison_key(comparison_id, "evaluations.parquet"), evaluations)
    storage.write_parquet(store, storage.comparison_key(comparison_id, "judge_calls.parquet"), call_table)
    counts = {
        "records": records.height,
        "records_per_model": {m: int(n) for m, n in records.group_by("model").len().sort("model").iter_rows()},
        "paired_questions": paired_questions(_with_question_keys(records), spec.models),
        "rows": evaluations.height,
        "statuses": {s: int(n) for s, n in evaluations.group_by("judge_status").len().sort("judge_status").iter_rows()},
        "calls_made": int((call_table["attempts"] > 0).sum()) if call_table.height else 0,
        "cost_usd": round(float(evaluations["cost_usd"].sum()), 6),
    }
    storage.write_json(store, storage.comparison_key(comparison_id, "judging.json"),
                       {"spec": spec.model_dump(mode="json"), **counts})
    logger.info("comparison %s: re-judged %d records with %s: %s", comparison_id, records.height, spec.judge_model, counts)
    return counts


def _rejudged_rows(store: storage.Store, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame | None:
    """The landed re-judged sample of this comparison, when it was judged for this very spec."""
    key = storage.comparison_key(comparison_id, "evaluations.parquet")
    marker = storage.comparison_key(comparison_id, "judging.json")
    if not (store.exists(key) and store.exists(marker)):
        return None
    judged = dict(storage.read_json(store, marker).get("spec") or {})
    judged.pop("p_adjust", None)  # the adjustment does not change what is judged
    if judged != spec.model_dump(mode="json", exclude={"p_adjust"}):
        return None
    return storage.scan_parquet(store, [key], hive=False).select(_ROW_COLUMNS).collect()


def _rejudged(
    store: storage.Store, spec: ComparisonSpec, comparison_id: str, raw_store: storage.Store | None, api_key: str | None,
    progress: ProgressStart | None = None,
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
    judge_sample(store, spec, comparison_id=comparison_id, raw_store=raw_store, api_key=api_key, progress=progress)
    rows = _rejudged_rows(store, spec, comparison_id)
    if rows is None:
        raise ComparisonError(f"comparison {comparison_id}: the re-judged sample did not land under {store.root}")
    return rows


# --------------------------------------------------------------------------------------------
# Tables


def _values(frame: pl.DataFrame, model: str, metric: str) -> np.ndarray:
    return frame.filter(pl.col("model") == model)[metric].drop_nulls().to_numpy().astype(np.float64, copy=False)


def _question_means(frame: pl.DataFrame, model: str, metric: str) -> pl.DataFrame:
    return (
        frame.filter((pl.col("model") == model) & pl.col(metric).is_not_null() & pl.col("question_key").is_not_null())
        .group_by("question_key")
        .agg(pl.col(metric).mean().alias("value"))
        .sort("question_key")
    )


def _metric_row(
    comparison_id: str, spec: ComparisonSpec, frame: pl.DataFrame, judge: str, metric: str, model: str,
    permutations: int,
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
        result = paired_test(differences, rng, spec.bootstrap, permutations)
        # the delta is the difference of these two: per-question means over the shared questions only
        row.update(delta_mean=float(shared["value"].to_numpy().mean()),
                   delta_baseline_mean=float(shared["value_baseline"].to_numpy().mean()))
    else:
        result = unpaired_test(values, base_values, rng, spec.bootstrap, permutations)
        row.update(delta_mean=row["mean"], delta_baseline_mean=row["baseline_mean"])
    row.update(
        test=result.test, delta=result.delta, permutations=permutations, delta_ci_low=result.ci_low, delta_ci_high=result.ci_high,
        p_value=result.p_value, effect_size=result.effect_size, effect_size_ci_low=result.effect_ci_low,
        effect_size_ci_high=result.effect_ci_high,
    )
    return row


def permutation_count(spec: ComparisonSpec) -> int:
    """The permutations of each delta's p-value: ``spec.bootstrap``, raised to what the comparison's
    number of tests needs (:func:`evaluation.compare.stats.permutations_for`: every judge's metrics
    for every model but the baseline, the most the family can hold) so that the p-value's floor
    cannot keep a delta from being significant after the adjustment."""
    tests = sum(len(JUDGE_METRICS[judge]) for judge in spec.judges) * (len(spec.models) - 1)
    needed = permutations_for(tests)
    if spec.bootstrap < needed:
        logger.info("comparison of %d models: %d permutations a delta instead of bootstrap=%d, so that the p-value's "
                    "floor 1/(permutations + 1) is a tenth of the threshold %g/%d of the first of %d adjusted tests",
                    len(spec.models), needed, spec.bootstrap, ALPHA, tests, tests)
    return max(spec.bootstrap, needed)


def compare_metrics(rows: pl.DataFrame, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame:
    """``metrics`` of a comparison: one row per (judge, metric, model), ``ok`` rows only. The
    p-values of all its deltas (:func:`permutation_count` permutations each) are adjusted together
    with ``spec.p_adjust`` (Holm or Benjamini–Hochberg); ``significant`` is an adjusted p-value
    below :data:`ALPHA`."""
    ok = rows.filter(pl.col("judge_status") == "ok").with_columns(
        pass_rate=pl.when(pl.col("verdict").is_not_null()).then((pl.col("verdict") == "pass").cast(pl.Float64))
    )
    permutations = permutation_count(spec)
    out = []
    for judge in spec.judges:
        frame = ok.filter(pl.col("judge") == judge)
        for metric in JUDGE_METRICS[judge]:
            for model in spec.models:
                out.append(_metric_row(comparison_id, spec, frame, judge, metric, model, permutations))
    # One family: every delta of the comparison (all judges, metrics and models) is one test.
    tested = [row for row in out if row.get("p_value") is not None]
    adjusted = adjust_p_values(np.array([row["p_value"] for row in tested]), spec.p_adjust)
    for row, p_adjusted in zip(tested, adjusted, strict=True):
        row.update(p_adjusted=float(p_adjusted), p_adjust_method=spec.p_adjust, n_tests=len(tested),
                   significant=bool(p_adjusted < ALPHA))
    return pl.DataFrame(out, schema=METRICS_SCHEMA)


def compare_verdicts(rows: pl.DataFrame, spec: ComparisonSpec, comparison_id: str) -> pl.DataFrame:
    """``verdicts`` of a comparison: the verdict mix of ``ok`` rows per (judge, model) in percent,
    and its shift from the baseline in percentage points (shifts of a model sum to zero)."""
    ok = rows.filter((pl.col("judge_status") == "ok") & pl.col("verdict").is_not_null())
    counts = {(j, m, v): n for j, m, v, n in ok.group_by("judge", "model", "verdict").len().iter_rows()}
    out = []
    for judge in spec.judges:
        count = {(m, v): counts.get((judge, m, v), 0) for m in spec.models for v in VERDICTS}
        totals = {m: sum(count[m, v] for v in VERDICTS) for m in spec.models}
        shares = {(m, v): 100.0 * count[m, v] / totals[m] if totals[m] else None for m, v in count}
        for model in spec.models:
            for verdict in VERDICTS:
                mine, base = shares[model, verdict], shares[spec.baseline_model, verdict]
                out.append({
                    "comparison_id": comparison_id, "start_date": spec.start_date, "end_date": spec.end_date,
                    "judge": judge, "model": model, "baseline": spec.baseline_model,
                    "verdict": verdict, "n": count[model, verdict], "n_ok": totals[model],
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
    progress: ProgressStart | None = None,
) -> dict[str, Any]:
    """Compare the spec's models and land the comparison; returns ids, URIs, counts and deltas.

    ``raw_store`` (the raw input root) is needed only with ``spec.judge_model``. A re-judged
    sample already landed for this id and spec (by :func:`judge_sample`) is reused; ``progress``
    starts the progress of its judging.
    """
    comparison_id = storage.safe_id(comparison_id or spec.default_id())
    if not spec.rejudges:
        rows, source = landed_rows(store, spec), "landed"
    else:
        rows, source = _rejudged(store, spec, comparison_id, raw_store, api_key, progress), "rejudged"
    metrics = compare_metrics(rows, spec, comparison_id)
    verdicts = compare_verdicts(rows, spec, comparison_id)
    records = {m: int(n) for m, n in rows.select("dt", "record_id", "model").unique().group_by("model").len()
               .sort("model").iter_rows()}
    statuses = _status_counts(rows)
    paired = paired_questions(rows, spec.models)
    used = sorted({d.isoformat() for d in rows["dt"].unique().to_list() if d is not None})
    missing = [d.isoformat() for d in spec.days() if d.isoformat() not in used]
    if missing:
        logger.info("comparison %s: %d of the range's %d days have no data: %s", comparison_id, len(missing),
                       len(used) + len(missing), ", ".join(missing))
    keys = {name: storage.comparison_key(comparison_id, name)
            for name in ("metrics.parquet", "verdicts.parquet", "spec.json", "report.html")}
    storage.write_parquet(store, keys["metrics.parquet"], metrics)
    storage.write_parquet(store, keys["verdicts.parquet"], verdicts)
    storage.write_json(store, keys["spec.json"], {
        "comparison_id": comparison_id, "source": source, "spec": spec.model_dump(mode="json"),
        "records_per_model": records, "paired_questions": paired, "statuses": statuses,
        "p_adjust": spec.p_adjust, "days": used, "days_without_data": missing,
    })
    page = render_report(comparison_id, spec, source, metrics, verdicts, records, statuses, paired)
    store.write_bytes(keys["report.html"], page.encode())
    result = {
        "comparison_id": comparison_id,
        "source": source,
        "uri": store.uri(storage.comparison_key(comparison_id, "")),
        **{f"{name.partition('.')[0]}_uri": store.uri(key) for name, key in keys.items()},
        "baseline": spec.baseline_model,
        "records_per_model": records,
        "paired_questions": paired,
        "p_adjust": spec.p_adjust,
        "days": used,
        "days_without_data": missing,
        "rows": rows.height,
        "deltas": rounded_rows(metrics.filter(~pl.col("is_baseline")), _DELTA_COLUMNS),
    }
    logger.info("comparison %s landed at %s", comparison_id, result["uri"])
    return result


#: The figures of a delta that :func:`run_comparison` returns (and the CLI prints).
_DELTA_COLUMNS = ["judge", "metric", "model", "n", "mean", "delta_mean", "delta_baseline_mean", "delta", "delta_ci_low", "delta_ci_high", "p_value",
                  "p_adjusted", "effect_size", "effect_size_ci_low", "effect_size_ci_high", "test", "significant",
                  "n_pairs", "wins", "ties", "losses"]


def rounded_rows(table: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """The rows of ``table``'s ``columns``, floats rounded to 4 digits (a summary to print)."""
    return [{k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
            for row in table.select(columns).iter_rows(named=True)]
