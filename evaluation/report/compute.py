"""The numbers of the daily report: what ``summary.json`` holds and the page shows.

Reads the landed tables of an output root where they live (lazily, only the columns used; see
:func:`evaluation.storage.scan_table`), every day through one reading of its commit record (one
run's day, all tables together): ``daily_summary`` of the day and of up to
``history_days`` before it (trends, baselines; a ``dt`` filter reads only those days), the day's
``runs`` rows, and the day's ``evaluations`` and ``rejects`` as lazy tables that are aggregated
by Polars' streaming engine — per-bin counts of the distributions, the lowest scores per judge
(a bottom-k, then only those rows' texts, and their question and answer from the day's
``judge_calls`` prompts), distinct run ids and versions — so memory follows the groups and the
few rows shown, not the day.

Statistics (all at 95%): a rate gets a Wilson score interval, a mean a Student-t one; each is
shown beside the previous landed day (at most 7 days back) and tested against its reference
(``reference``, also under its earlier name ``trailing_7d``) as :mod:`evaluation.report.monitor`
says, replaying the window's days (:func:`assess_days`), and flagged as :mod:`evaluation.report.alerts`
says (which also documents the ``flags`` and ``headline`` structures of ``summary.json``).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.contract.errors import InputError, UsageError
from evaluation.contract.estimate import Z_95
from evaluation.contract.schemas import SUMMARY_METRICS as METRICS
from evaluation.report.alerts import (
    AlertPolicy,
    ModelState,
    build_headline,
    decide_flags,
    is_headline,
    model_states,
    monitoring_entry,
    previous_entry,
    reference_entry,
    t_quantile_975,
)
from evaluation.report.distributions import distributions, judge_order
from evaluation.report.evidence import change_evidence, evidence_changes
from evaluation.report.labels import landed_root, large_unflagged, latest_failure, run_object
from evaluation.report.monitor import Daily, Result, SeriesKey, monitor
from evaluation.report.records import rejects_summary, worst_records
from evaluation.report.segments import SEP, segment_of, segment_report, split_segments
from evaluation.report.summary import (
    DaySummary,
    Evidence,
    Flag,
    Group,
    HeadlineLine,
    Health,
    Method,
    MetricMeasure,
    RateMeasure,
    RunInfo,
    SegmentGroup,
    SegmentLine,
    Segments,
    Source,
    Thresholds,
    Totals,
    TrendPoint,
)
from evaluation.storage import Landed, Store, commit_key, scan_day, scan_table
from evaluation.storage.summary import build_daily_summary

REPORT_VERSION = 1
CONFIDENCE = 0.95
BASELINE_DAYS = 7


class ReportError(InputError, RuntimeError):
    """The report cannot be built (nothing landed for the day); the message says where."""


# --------------------------------------------------------------------------------------------
# Statistics


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (None when n is 0)."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if successes <= 0 else max(0.0, centre - half)  # exact bounds at 0 and n (no rounding residue)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


def mean_interval(mean: float | None, std: float | None, n: int) -> tuple[float, float] | None:
    """The Student-t interval of a mean (None for n < 2 or an unknown std)."""
    if mean is None or std is None or n < 2:
        return None
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return mean - half, mean + half


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _int(value: Any) -> int:
    return 0 if value is None else int(value)


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass
class ReportInputs:
    """The landed tables a day's report reads: small ones read, the day's big ones lazily."""

    day: dt.date
    root: str
    history_days: int
    history: pl.DataFrame  # daily_summary rows of the window, with dt (the day included)
    evaluations: pl.LazyFrame | None  # the day's evaluations (None: not landed)
    rejects: pl.LazyFrame | None
    runs: pl.DataFrame | None
    summary_source: str  # "daily_summary" or "evaluations"
    judge_calls: pl.LazyFrame | None = None  # the day's judge calls: the worst records' question and answer
    baseline_evaluations: pl.LazyFrame | None = None  # evaluations of D-7 … D-1: earlier answers to the same questions
    baseline_calls: pl.LazyFrame | None = None  # judge calls of D-7 … D-1: those answers' texts


def report_days(day: dt.date, history_days: int = 30) -> list[dt.date]:
    """The days the report of ``day`` reads: its trend window, at least the baseline's days."""
    if history_days < 1:
        raise UsageError("history_days: must be at least 1")
    first = day - dt.timedelta(days=max(history_days, BASELINE_DAYS + 1) - 1)
    return [first + dt.timedelta(days=n) for n in range((day - first).days + 1)]


def load_inputs(store: Store, day: dt.date, *, history_days: int = 30, landed: Landed) -> ReportInputs:
    """Read what the report of ``day`` needs (through ``landed``, the commit records of
    :func:`report_days`); raises ReportError when nothing landed for the day."""
    days = report_days(day, history_days)
    summaries = scan_table(store, "daily_summary", landed)
    history = pl.DataFrame() if summaries is None else summaries.filter(pl.col("dt").is_between(days[0], day)).collect()
    evaluations = scan_day(store, "evaluations", day, landed)
    source = "daily_summary"
    has_day = not history.is_empty() and history.filter(pl.col("dt") == day).height > 0
    if not has_day and landed.key("daily_summary", day) is None:
        if evaluations is None:
            raise ReportError(
                f"no daily_summary or evaluations landed for {day.isoformat()} under {store.root}"
                f" (expected the commit record {store.uri(commit_key(day))})"
            )
        run_id = evaluations.select(pl.col("run_id").first()).collect().item() or "unknown"
        built = build_daily_summary(evaluations, run_id).with_columns(dt=pl.lit(day, dtype=pl.Date))
        history = built if history.is_empty() else pl.concat([history, built], how="diagonal_relaxed")
        source = "evaluations"
    runs = scan_table(store, "runs")
    in_baseline = pl.col("dt").is_between(day - dt.timedelta(days=BASELINE_DAYS), day - dt.timedelta(days=1))
    earlier = {table: scan_table(store, table, landed) for table in ("evaluations", "judge_calls")}
    return ReportInputs(
        day=day,
        root=store.root,
        history_days=history_days,
        history=history,
        evaluations=evaluations,
        rejects=scan_day(store, "rejects", day, landed),
        judge_calls=scan_day(store, "judge_calls", day, landed),
        runs=None if runs is None else runs.filter(pl.col("dt") == day).collect(),
        summary_source=source,
        baseline_evaluations=None if earlier["evaluations"] is None else earlier["evaluations"].filter(in_baseline),
        baseline_calls=None if earlier["judge_calls"] is None else earlier["judge_calls"].filter(in_baseline),
    )


# --------------------------------------------------------------------------------------------
# Numbers (summary.json)


def _estimate(kind: str, key: str, row: dict[str, Any]) -> tuple[dict[str, Any], tuple[float, float] | None]:
    """One measure of a ``daily_summary`` row: its n and value (with a rate's count or a mean's
    std), and the value's 95% interval. A rate is a verdict's share of the ``ok`` rows."""
    if kind == "rate":
        n, hits = _int(row.get("n_ok")), _int(row.get(f"n_{key}"))
        return {"n": n, "count": hits, "value": hits / n if n else None}, wilson_interval(hits, n)
    n = _int(row.get(f"{key}_n"))
    value = _finite(row.get(f"{key}_mean")) if n else None
    std = _finite(row.get(f"{key}_std")) if n else None
    return {"n": n, "value": value, "std": std}, mean_interval(value, std, n)


def _daily(kind: str, key: str, row: dict[str, Any]) -> Daily | None:
    """One day's estimate of a measure as a side of a comparison (None: no value that day)."""
    estimate, _ = _estimate(kind, key, row)
    if estimate["value"] is None or not estimate["n"]:
        return None
    if kind == "rate":
        p = estimate["value"]
        return Daily(p, estimate["n"], p * (1 - p), estimate["count"])
    std = estimate["std"] or 0.0
    return Daily(estimate["value"], estimate["n"], std * std)


def _comparisons(kind: str, key: str, today: dict[str, Any], previous: dict[str, Any] | None,
                 result: Result | None, level: float, policy: AlertPolicy,
                 interval: tuple[float, float] | None) -> dict[str, Any]:
    """A measure's interval bounds and its comparisons: beside the ``previous`` landed day's row, and
    tested against its reference (``result``: the series' day, :func:`evaluation.report.monitor.step`)."""
    day: dt.date = today["dt"]
    current = _daily(kind, key, today)
    last = None if previous is None else _daily(kind, key, previous)
    ref = result.reference if result is not None else None
    reference = None if result is None else reference_entry(result, interval, day)
    ci_low, ci_high = interval if interval is not None else (None, None)
    return {
        "ci_low": ci_low, "ci_high": ci_high,
        "previous": None if previous is None or last is None else previous_entry(current, interval, previous, last),
        "day_to_day": None if ref is None else {
            "sd": math.sqrt(ref.tau2), "own_sd": None if ref.own_tau2 is None else math.sqrt(ref.own_tau2),
            "days": len(ref.days), "df": ref.tau_df, "prior_sd": policy.prior_day_sd},
        "reference": reference,
        "trailing_7d": reference,
        "monitoring": None if result is None else monitoring_entry(kind, result, level, policy),
    }


def _rate(name: str, today: dict[str, Any], previous: dict[str, Any] | None,
          result: Result | None, level: float, policy: AlertPolicy) -> RateMeasure:
    """A verdict's rate in one group: its count and share of the ``ok`` rows, Wilson interval, comparisons."""
    estimate, interval = _estimate("rate", name, today)
    return RateMeasure(**estimate, **_comparisons("rate", name, today, previous, result, level, policy, interval))


def _metric(name: str, today: dict[str, Any], previous: dict[str, Any] | None,
            result: Result | None, level: float, policy: AlertPolicy) -> MetricMeasure:
    """A metric's mean in one group: its std and percentiles, Student-t interval, comparisons."""
    estimate, interval = _estimate("metric", name, today)
    percentiles: dict[str, Any] = {f"p{q}": _finite(today.get(f"{name}_p{q}")) if estimate["n"] else None for q in (10, 50, 90)}
    return MetricMeasure(**estimate, **percentiles,
                         **_comparisons("metric", name, today, previous, result, level, policy, interval))


def series_of(rows_by_day: dict[tuple[str, str], dict[dt.date, dict[str, Any]]]
              ) -> tuple[dict[SeriesKey, dict[dt.date, Daily]], dict[SeriesKey, bool]]:
    """Every measure of every (model, judge) as a series of days (:mod:`evaluation.report.monitor`),
    and whether each is a headline measure (its worse flags alert)."""
    series: dict[SeriesKey, dict[dt.date, Daily]] = {}
    for (model, judge), by_day in rows_by_day.items():
        for kind, names in (("rate", VERDICTS), ("metric", METRICS)):
            for name in names:
                days = {d: daily for d, row in by_day.items() if (daily := _daily(kind, name, row)) is not None}
                if days:
                    series[(model, judge, kind, name)] = days
    return series, {key: is_headline(key[1], key[2], key[3]) for key in series}


def _trend_point(row: dict[str, Any]) -> TrendPoint:
    rate, rate_ci = _estimate("rate", "pass", row)
    score, score_ci = _estimate("metric", "score", row)
    rows = _int(row.get("rows"))
    return TrendPoint(dt=row["dt"].isoformat(), rows=rows, n_ok=rate["n"], ok_rate=rate["n"] / rows if rows else None,
                      pass_rate=rate["value"], pass_ci=list(rate_ci) if rate_ci else None, score_n=score["n"],
                      score_mean=score["value"], score_ci=list(score_ci) if score_ci else None)


def _health(row: dict[str, Any]) -> Health:
    rows = _int(row.get("rows"))
    return Health(**{f"{s}_rate": (_int(row.get(f"n_{s}")) / rows if rows else None) for s in JUDGE_STATUSES if s != "ok"},
                  input_tokens=_int(row.get("input_tokens")), output_tokens=_int(row.get("output_tokens")),
                  cost_usd=_finite(row.get("cost_usd")) or 0.0, n_cached=_int(row.get("n_cached")),
                  latency_p50_ms=_finite(row.get("latency_p50_ms")), latency_p95_ms=_finite(row.get("latency_p95_ms")))


_RUN_COLUMNS = {"run_ids": "run_id", "judge_models": "judge_model", "prompt_versions": "prompt_version",
                "rules_versions": "rules_version"}


@dataclass
class _Facts:
    """Of the day's whole ``evaluations``: rows, records (the rows of the judge with most: every
    valid record has a row per selected judge, CONTRACT §4), models, judges with ok rows, and the
    distinct run ids and versions (by :class:`RunInfo` field, of the columns the table has)."""

    rows: int
    records: int
    models: list[str]
    judges: list[str]
    versions: dict[str, list[str]]


def _evaluation_facts(evaluations: pl.LazyFrame) -> _Facts:
    """The day's :class:`_Facts`, in one streaming pass."""
    present = {key: c for key, c in _RUN_COLUMNS.items() if c in evaluations.collect_schema()}
    per_judge, models, *distinct = pl.collect_all([
        evaluations.group_by("judge").agg(pl.len().alias("rows"), (pl.col("judge_status") == "ok").any().alias("ok")),
        *[evaluations.select(pl.col(c).drop_nulls().unique().cast(pl.String)) for c in ("model", *present.values())],
    ], engine="streaming")
    return _Facts(rows=int(per_judge["rows"].sum()), records=max(per_judge["rows"].to_list(), default=0),
                  models=sorted(models.to_series().to_list()),
                  judges=sorted(per_judge.filter("ok")["judge"].to_list(), key=judge_order),
                  versions={key: sorted(frame.to_series().to_list()) for key, frame in zip(present, distinct, strict=True)})


def _run_info(inputs: ReportInputs, facts: _Facts | None) -> tuple[RunInfo, dict[str, Any] | None]:
    """The day's run ids and versions, and the ``runs`` row of its landed run (:func:`_latest_run`)."""
    info: dict[str, Any] = {key: [] for key in _RUN_COLUMNS}
    if facts is not None:
        info.update(facts.versions)
    elif "run_id" in inputs.history.columns:
        info["run_ids"] = sorted(str(v) for v in inputs.history.filter(pl.col("dt") == inputs.day)["run_id"].unique().to_list())
    latest = _latest_run(inputs, info["run_ids"])
    if latest is not None:
        info["run"] = {k: latest.get(k) for k in ("run_id", "trigger", "status", "input_records", "valid_records", "rejected_records") if k in latest}
    return RunInfo(**info), latest


def _latest_run(inputs: ReportInputs, run_ids: list[str]) -> dict[str, Any] | None:
    """The ``runs`` row of the day's landed run: the latest among ``run_ids`` (any run of the
    day when none of them has a row)."""
    runs = inputs.runs
    if runs is None or not runs.height:
        return None
    order = "finished_at" if "finished_at" in runs.columns else "run_id"
    candidates = runs.filter(pl.col("run_id").is_in(run_ids)) if run_ids else runs
    return (candidates if candidates.height else runs).sort(order, nulls_last=True).row(-1, named=True)


def cascade_of(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the day's run's cascade did (its ``runs.cascade``: each level's decided rows, calls and
    cost, and the judge model alone's cost); None for a run without one."""
    found = run_object(run, "cascade")
    return found if isinstance(found.get("levels"), list) else None


def thresholds_in_force(run: dict[str, Any] | None, judges: list[str]) -> dict[str, Thresholds]:
    """Per judge, the verdict thresholds the day's run applied and where they came from: the run
    config's ``thresholds_in_force`` when it has one; else (older runs) the run's ``thresholds``
    for every judge, from its ``thresholds_from`` calibration when it names one, else the options
    (the contract's defaults when no run row is landed)."""
    config = run_object(run, "config")
    in_force = config.get("thresholds_in_force")
    if isinstance(in_force, dict) and in_force:
        return {judge: Thresholds(pass_=_finite(v.get("pass")), borderline=_finite(v.get("borderline")),
                                  source=str(v.get("source") or "options"))
                for judge, v in sorted(in_force.items(), key=lambda kv: judge_order(kv[0])) if isinstance(v, dict)}
    given = config.get("thresholds") if isinstance(config.get("thresholds"), dict) else {}
    pass_ = _finite(given.get("pass", given.get("pass_"))) if given else None
    borderline = _finite(given.get("borderline")) if given else None
    if pass_ is None and run is not None:
        pass_, borderline = _finite(run.get("pass_threshold")), _finite(run.get("borderline_threshold"))
    if pass_ is None:
        pass_, borderline = 0.8, 0.6
    source = str((run or {}).get("thresholds_from") or config.get("thresholds_from") or "options")
    return {judge: Thresholds(pass_=pass_, borderline=borderline, source=source) for judge in judges}


def assess_days(rows_by_day: dict[tuple[str, str], dict[dt.date, dict[str, Any]]], days: list[dt.date],
                policy: AlertPolicy, *, trend_from: dt.date | None = None
                ) -> dict[dt.date, tuple[list[Group], list[Flag], dict[str, ModelState]]]:
    """The report's groups, flags and model states (:func:`evaluation.report.alerts.model_states`)
    of each of ``days``, from ``daily_summary`` rows by (model, judge) and day: the landed days up
    to the last of ``days`` are replayed in order (:func:`evaluation.report.monitor.monitor`), so a
    regression found on an earlier day is carried. ``make bench`` feeds simulated rows through it."""
    series, headline_keys = series_of(rows_by_day)
    landed = sorted({d for by_day in rows_by_day.values() for d in by_day if d <= max(days)})
    replayed = dict(zip(landed, monitor(series, landed, policy, headline_keys), strict=True))
    return {day: _assess_day(rows_by_day, day, replayed.get(day, {}), policy, trend_from or dt.date.min)
            for day in days}


def _assess_day(rows_by_day: dict[tuple[str, str], dict[dt.date, dict[str, Any]]], day: dt.date,
                results: dict[SeriesKey, Result], policy: AlertPolicy, window_start: dt.date
                ) -> tuple[list[Group], list[Flag], dict[str, ModelState]]:
    # the day's Bonferroni level: alpha over the alerting family's tests (those with an adjusted p)
    level = policy.alpha / max(sum(1 for r in results.values() if r.p_adjusted is not None), 1)
    groups: list[Group] = []
    today_rows = sorted((r for by_day in rows_by_day.values() for d, r in by_day.items() if d == day),
                        key=lambda r: (judge_order(str(r["judge"])), str(r["model"])))
    for today in today_rows:
        key = (str(today["model"]), str(today["judge"]))
        by_day = rows_by_day[key]
        earlier = [by_day[d] for d in sorted(by_day) if day - dt.timedelta(days=BASELINE_DAYS) <= d < day]
        last = earlier[-1] if earlier else None
        rows = _int(today.get("rows"))
        groups.append(Group(
            model=key[0],
            judge=key[1],
            run_id=today.get("run_id"),
            rows=rows,
            status_counts={s: _int(today.get(f"n_{s}")) for s in JUDGE_STATUSES},
            status_rates={s: (_int(today.get(f"n_{s}")) / rows if rows else None) for s in JUDGE_STATUSES},
            verdict_counts={v: _int(today.get(f"n_{v}")) for v in VERDICTS},
            rates={v: _rate(v, today, last, results.get((*key, "rate", v)), level, policy)
                   for v in VERDICTS},
            metrics={m: _metric(m, today, last, results.get((*key, "metric", m)), level, policy)
                     for m in METRICS},
            health=_health(today),
            trend=[_trend_point(by_day[d]) for d in sorted(by_day) if window_start <= d <= day],
        ))
    flags = decide_flags(groups, policy)
    return groups, flags, model_states(day, groups, policy)


def _evidence(inputs: ReportInputs, headline: list[HeadlineLine], segment_lines: list[SegmentLine],
              thresholds: dict[str, Thresholds], facts: _Facts | None) -> list[Evidence]:
    """Each regressed model's failing records behind each of its alerting changes, and behind each
    alerting change of a segment (:mod:`evaluation.report.evidence`)."""
    if inputs.evaluations is None or not facts or not facts.rows:
        return []
    lines = [line for line in headline if line.status == "regressed"] + segment_lines
    borderline = {judge: t.borderline or 0.6 for judge, t in thresholds.items()}
    return [change_evidence(inputs.evaluations, inputs.judge_calls, inputs.baseline_evaluations, inputs.baseline_calls,
                            change, borderline.get(change.judge, 0.6)) for change in evidence_changes(lines)]


def _rows_by_day(history: pl.DataFrame) -> dict[tuple[str, str], dict[dt.date, dict[str, Any]]]:
    """The ``daily_summary`` rows by (unit, judge) and day: a unit is a model, or a segment's model,
    key and value joined by :data:`SEP` (the name its row's ``model`` takes)."""
    rows_by_day: dict[tuple[str, str], dict[dt.date, dict[str, Any]]] = {}
    for row in history.iter_rows(named=True) if not history.is_empty() else []:
        unit = SEP.join((str(row["model"]), *segment_of(row).values()))
        rows_by_day.setdefault((unit, str(row["judge"])), {})[row["dt"]] = {**row, "model": unit}
    return rows_by_day


def _segments(segmented: pl.DataFrame, day: dt.date, policy: AlertPolicy) -> Segments:
    """The day's segments: each (model, segment) tested as a unit of its own through the same
    replay as the models (:func:`assess_days`), and flagged as one family apart from them."""
    rows_by_day = _rows_by_day(segmented)
    found = []
    if any(day in by_day for by_day in rows_by_day.values()):
        groups, _, _ = assess_days(rows_by_day, [day], policy)[day]
        for group in groups:  # the measures are carried over as they are (the same objects)
            model, key, value = group.model.split(SEP)
            found.append(SegmentGroup(**{**dict(group), "model": model, "trend": [], "segment": {"key": key, "value": value}}))
    day_segments = segmented.filter(pl.col("dt") == day) if not segmented.is_empty() else segmented
    return segment_report(found, policy,
                          sorted(day_segments["segment_key"].unique().to_list()) if day_segments.height else [], day)


def _totals(groups: list[Group], facts: _Facts | None, rejected: int) -> Totals:
    records = {"records": facts.records} if facts is not None and facts.rows else {}
    return Totals(rows=sum(g.rows for g in groups),
                  status_counts={s: sum(g.status_counts[s] for g in groups) for s in JUDGE_STATUSES},
                  input_tokens=sum(g.health.input_tokens for g in groups),
                  output_tokens=sum(g.health.output_tokens for g in groups),
                  n_cached=sum(g.health.n_cached for g in groups), cost_usd=sum(g.health.cost_usd for g in groups),
                  **records, rejected=rejected)


def _source(inputs: ReportInputs, latest: dict[str, Any] | None, history: pl.DataFrame, start: dt.date) -> Source:
    """Where the report read from, and which days from ``start`` its trends have and miss."""
    day = inputs.day
    landed = [d for d in sorted(history["dt"].unique().to_list()) if start <= d <= day] if not history.is_empty() else []
    first = landed[0] if landed else day
    missing = [first + dt.timedelta(days=i) for i in range((day - first).days + 1)]
    return Source(root=inputs.root, landed_root=landed_root(latest) or inputs.root, summary_from=inputs.summary_source,
                  evaluations_landed=inputs.evaluations is not None, history_days=inputs.history_days,
                  window_start=start.isoformat(), days_with_summary=[d.isoformat() for d in landed],
                  missing_days=[d.isoformat() for d in missing if d not in landed])


def _method(policy: AlertPolicy) -> Method:
    return Method(
        confidence=CONFIDENCE,
        rate_interval="Wilson score interval over ok rows",
        mean_interval="Student-t interval over ok rows (n >= 2)",
        previous=f"latest landed day within {BASELINE_DAYS} days before dt (shown beside today, not tested)",
        trailing_7d=(f"the reference: days dt-{BASELINE_DAYS} … dt-1 pooled (n-weighted); while a measure is "
                     "regressed, the days before the regression"),
        flag=(f"alerting: {policy.adjustment_name()}-adjusted one-sided p-value below {policy.alpha:g} over the "
              f"day's headline-measure tests and a drop of at least {policy.min_rate_effect * 100:g} pp (rates) "
              f"or {policy.min_metric_effect:g} (means); shown only: the same over every measure's two-sided test"),
        alerts=policy.describe(),
    )


def compute_summary(inputs: ReportInputs, *, worst_per_judge: int = 10, policy: AlertPolicy | None = None) -> DaySummary:
    """Every number of the report; its ``model_dump()`` is what lands in ``summary.json``.
    ``policy`` decides the flags (the defaults of :class:`evaluation.report.alerts.AlertPolicy`
    when None)."""
    policy = policy or AlertPolicy()
    day = inputs.day
    history, segmented = split_segments(inputs.history)
    start = day - dt.timedelta(days=inputs.history_days - 1)
    groups, flags, states = assess_days(_rows_by_day(history), [day], policy, trend_from=start)[day]
    facts = _evaluation_facts(inputs.evaluations) if inputs.evaluations is not None else None
    judged = inputs.evaluations if inputs.evaluations is not None and facts and facts.rows else None
    models = sorted({g.model for g in groups} | (set(facts.models) if judged is not None and facts else set()))
    rejects = rejects_summary(inputs.rejects)
    info, latest = _run_info(inputs, facts)
    judges = sorted({g.judge for g in groups}, key=judge_order)
    headline = build_headline(models, flags, states)
    segments = _segments(segmented, day, policy)
    alerting = [line.model for line in headline if line.status == "regressed"]
    alerting += sorted({line.model for line in segments.headline} - set(alerting))
    thresholds = thresholds_in_force(latest, judges)
    worst, empty_answers = (worst_records(judged, inputs.judge_calls, facts.judges, worst_per_judge)
                            if judged is not None and facts else ([], []))
    return DaySummary(
        report_version=REPORT_VERSION, dt=day.isoformat(), source=_source(inputs, latest, history, start),
        method=_method(policy), run=info, thresholds=thresholds, cascade=cascade_of(latest),
        models=models, judges=judges, headline=headline, alerting=alerting,
        paging=[line.model for line in headline if line.pages], segments=segments,
        latest_run_failed=latest_failure(inputs.runs), not_significant=large_unflagged(groups, policy),
        evidence=_evidence(inputs, headline, segments.headline, thresholds, facts),
        totals=_totals(groups, facts, rejects.total), groups=groups, flags=flags,
        distributions=distributions(judged, models) if judged is not None else [],
        worst_records=worst, empty_answers=empty_answers, rejects=rejects,
    )
