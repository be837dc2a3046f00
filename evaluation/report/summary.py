"""The structures of ``summary.json``: the day's summary (:class:`DaySummary`), a (model, judge)
group (:class:`Group`, a segment's :class:`SegmentGroup`), a measure's entry (:class:`RateMeasure`,
:class:`MetricMeasure`, with its :class:`Previous` day and its :class:`Reference` test) and a flag
(:class:`Flag`, a segment's :class:`SegmentFlag`). :mod:`evaluation.report.compute` builds them;
``model_dump()`` is the JSON ``summary.json`` holds, key for key and in the same order (the fields
are declared in that order), so the page, notifications and readers of earlier reports read it
unchanged. What each key means: :mod:`evaluation.report.alerts`, :mod:`evaluation.report.segments`,
:mod:`evaluation.report.evidence`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer


class _Entry(BaseModel):
    """A part of the summary: built once, then completed in place (a flag's adjusted p-values)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class Previous(_Entry):
    """Today beside the previous landed day: descriptive, never tested."""

    dt: str
    n: int
    value: float
    delta: float | None
    outside_ci: bool | None
    p_value: None = None
    p_adjusted: None = None
    flagged: bool = False
    tested: bool = False


class Reference(_Entry):
    """Today against its reference (:func:`evaluation.report.alerts.reference_entry`);
    ``p_two_sided_adjusted`` is set by :func:`evaluation.report.alerts.decide_flags` when the
    comparison has a two-sided test (absent from the JSON otherwise)."""

    baseline: str
    days: list[str]
    n: int
    value: float
    delta: float | None
    outside_ci: bool | None
    se: float | None
    df: float | None
    delta_ci_low: float | None
    delta_ci_high: float | None
    test: str
    p_value: float | None
    p_worse: float | None
    p_two_sided: float | None
    p_adjusted: float | None
    alerts: bool
    flagged: bool
    regressed_since: str | None
    pages: bool
    recovered: bool
    tested: bool
    p_two_sided_adjusted: float | None = None

    @model_serializer(mode="wrap")
    def _without_unset_adjustment(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.p_two_sided_adjusted is None:
            out.pop("p_two_sided_adjusted", None)
        return out


class RateMeasure(_Entry):
    """A verdict's share of the ``ok`` rows: its count, Wilson interval, previous day and reference."""

    n: int
    count: int
    value: float | None
    ci_low: float | None
    ci_high: float | None
    interval: str = "wilson"
    previous: Previous | None
    day_to_day: dict[str, Any] | None
    reference: Reference | None
    trailing_7d: Reference | None  #: the name earlier summaries used: the same entry as ``reference``
    monitoring: dict[str, Any] | None


class MetricMeasure(_Entry):
    """A metric's mean over the ``ok`` rows: its std and percentiles, Student-t interval, previous
    day and reference."""

    n: int
    value: float | None
    std: float | None
    p10: float | None
    p50: float | None
    p90: float | None
    ci_low: float | None
    ci_high: float | None
    interval: str = "student_t"
    previous: Previous | None
    day_to_day: dict[str, Any] | None
    reference: Reference | None
    trailing_7d: Reference | None  #: the name earlier summaries used: the same entry as ``reference``
    monitoring: dict[str, Any] | None


Measure = RateMeasure | MetricMeasure


class Group(_Entry):
    """One (model, judge) of the day: its rows, statuses, verdicts, each rate and metric, health
    and trend."""

    model: str
    judge: str
    run_id: str | None
    rows: int
    status_counts: dict[str, int]
    status_rates: dict[str, float | None]
    verdict_counts: dict[str, int]
    rates: dict[str, RateMeasure]
    metrics: dict[str, MetricMeasure]
    health: dict[str, Any]
    trend: list[dict[str, Any]]


class SegmentGroup(Group):
    """One (model, segment value, judge) of the day (:mod:`evaluation.report.segments`)."""

    segment: dict[str, str]


class Flag(_Entry):
    """A comparison that flagged (:func:`evaluation.report.alerts.decide_flags`)."""

    model: str
    judge: str
    measure: str
    baseline: str
    baseline_dt: str | None = None
    baseline_days: list[str]
    value: float | None
    baseline_value: float
    delta: float
    delta_ci_low: float | None
    delta_ci_high: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_adjusted: float
    min_effect: float
    direction: str
    assessment: str
    headline: bool
    alerts: bool


class SegmentFlag(Flag):
    """A segment's flag: a :class:`Flag` of its model, with the segment."""

    segment: dict[str, str]


class Segments(_Entry):
    """The segments' part of the summary (:func:`evaluation.report.segments.segment_report`)."""

    keys: list[str]
    min_rows: int
    groups: list[SegmentGroup]
    flags: list[SegmentFlag]
    headline: list[dict[str, Any]]
    too_few: list[dict[str, Any]]


class DaySummary(_Entry):
    """Every number of the day's report (:func:`evaluation.report.compute.compute_summary`);
    ``summary.json`` is its ``model_dump()``, with the day's ``calibration`` and ``people``."""

    report_version: int
    dt: str
    source: dict[str, Any]
    method: dict[str, Any]
    run: dict[str, Any]
    thresholds: dict[str, dict[str, Any]]
    cascade: dict[str, Any] | None
    models: list[str]
    judges: list[str]
    headline: list[dict[str, Any]]
    alerting: list[str]
    paging: list[str]
    segments: Segments
    latest_run_failed: dict[str, Any] | None
    not_significant: list[dict[str, Any]]
    evidence: list[dict[str, Any]]
    totals: dict[str, Any]
    groups: list[Group]
    flags: list[Flag]
    distributions: list[dict[str, Any]]
    worst_records: list[dict[str, Any]]
    empty_answers: list[dict[str, Any]]
    rejects: dict[str, Any]
