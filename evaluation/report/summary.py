"""The structures of ``summary.json``: the day's summary (:class:`DaySummary`), a (model, judge)
group (:class:`Group`, a segment's :class:`SegmentGroup`), a measure's entry (:class:`RateMeasure`,
:class:`MetricMeasure`, with its :class:`Previous` day and its :class:`Reference` test), a flag
(:class:`Flag`, a segment's :class:`SegmentFlag`), a model's headline line (:class:`HeadlineLine`,
a segment's :class:`SegmentLine`) and the day's evidence, records and rejects.
:mod:`evaluation.report.compute` builds them; ``model_dump()`` is the JSON ``summary.json`` holds,
key for key and in the same order (the fields are declared in that order), so the page,
notifications and readers of earlier reports read it unchanged. What each key means:
:mod:`evaluation.report.alerts`, :mod:`evaluation.report.segments`, :mod:`evaluation.report.evidence`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer


class _Entry(BaseModel):
    """A part of the summary: built once, then completed in place (a flag's adjusted p-values)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class _Sparse(_Entry):
    """An entry whose optional keys are in the JSON only when given (a column the landed table
    has, a run row that is landed)."""

    @model_serializer(mode="wrap")
    def _given_keys_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        return {key: value for key, value in out.items() if key in self.model_fields_set}


class Segment(_Entry):
    """A segment of a model's traffic: a ``daily_summary`` segment key and one of its values."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: str


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
    p_two_sided_adjusted: float | None = Field(default=None, exclude_if=lambda value: value is None)


class Monitoring(_Entry):
    """What the day's volume can catch on a headline measure (:func:`evaluation.report.alerts.monitoring_entry`)."""

    detectable_drop: float
    power: float
    level: float


class RateMonitoring(Monitoring):
    """A rate's :class:`Monitoring`, with the rows a day needs per drop (None: out of reach)."""

    needs: dict[str, int | None]
    needs_useful: int | None


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
    monitoring: RateMonitoring | None


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
    monitoring: Monitoring | None


Measure = RateMeasure | MetricMeasure


class Health(_Entry):
    """A group's judge health: each status's share of all rows, tokens, cost, cached replies, latency."""

    parse_error_rate: float | None
    judge_failed_rate: float | None
    call_error_rate: float | None
    skipped_rate: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    n_cached: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None


class TrendPoint(_Entry):
    """One landed day of a group's trend: its pass rate and mean score with their intervals."""

    dt: str
    rows: int
    n_ok: int
    ok_rate: float | None
    pass_rate: float | None
    pass_ci: list[float] | None
    score_n: int
    score_mean: float | None
    score_ci: list[float] | None


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
    health: Health
    trend: list[TrendPoint]


class SegmentGroup(Group):
    """One (model, segment value, judge) of the day (:mod:`evaluation.report.segments`)."""

    segment: Segment


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

    segment: Segment


class Change(_Entry):
    """A headline line's change of one measure: before, after, and how significant."""

    judge: str
    measure: str
    baseline: str
    before: float
    after: float | None
    delta: float
    p_adjusted: float | None
    assessment: str


class Regression(Change):
    """A regressed measure's :class:`Change`: since when, and whether it pages today."""

    since: str | None
    pages: bool


class SegmentRegression(Regression):
    """A segment's :class:`Regression`, with the segment."""

    segment: Segment


class HeadlineLine(_Entry):
    """One model's line of the headline (:func:`evaluation.report.alerts.build_headline`)."""

    model: str
    status: str
    since: str | None
    day: int | None
    pages: bool
    changes: Sequence[Regression | Change]
    other_flags: int
    records: int
    detectable_drop: float | None
    needs: dict[str, int | None] | None
    text: str = ""


class SegmentLine(HeadlineLine):
    """A regressed segment's headline line (:func:`evaluation.report.segments.segment_report`)."""

    changes: Sequence[SegmentRegression]
    segment: Segment
    others_steady: bool


class TooFew(_Entry):
    """A segment value with too few ``ok`` rows today to be tested."""

    model: str
    judge: str
    segment: Segment
    n_ok: int
    needed: int


class Segments(_Entry):
    """The segments' part of the summary (:func:`evaluation.report.segments.segment_report`)."""

    keys: list[str]
    min_rows: int
    groups: list[SegmentGroup]
    flags: list[SegmentFlag]
    headline: list[SegmentLine]
    too_few: list[TooFew]


class NotSignificant(_Entry):
    """A large change of a headline measure that did not flag (:func:`evaluation.report.labels.large_unflagged`)."""

    model: str
    judge: str
    segment: Segment | None
    measure: str
    baseline: str
    before: float
    after: float | None
    delta: float
    n: int
    baseline_n: int
    p_adjusted: float | None
    assessment: str


class FailureReason(_Entry):
    """A failure reason of a change's failing rows, with its count and share."""

    reason: str
    count: int
    share: float


class Earlier(_Entry):
    """The model's answer to the same question on the latest baseline day that has one."""

    dt: str
    record_id: str
    score: float | None
    verdict: str | None
    answer: str | None


class EvidenceRecord(_Entry):
    """A failing record shown as evidence, with its texts and the earlier answer."""

    record_id: str
    reason: str
    score: float | None
    verdict: str | None
    question: str | None
    answer: str | None
    contexts: str | None
    judge_reasons: list[str]
    clamps_applied: list[str]
    earlier: Earlier | None


class Evidence(_Entry):
    """The failing records behind a regressed model's alerting measures (:mod:`evaluation.report.evidence`)."""

    model: str
    judge: str
    measure: str
    measures: list[str]
    segment: Segment | None
    failing: int
    ok_rows: int
    reasons: list[FailureReason]
    records: list[EvidenceRecord]


class Source(_Entry):
    """Where the report read from, and which days its trends have."""

    root: str
    landed_root: str
    summary_from: str
    evaluations_landed: bool
    history_days: int
    window_start: str
    days_with_summary: list[str]
    missing_days: list[str]


class Method(_Entry):
    """How the intervals, comparisons and flags are worked out, as the page says it; ``alerts`` is
    the policy in force (:meth:`evaluation.report.alerts.AlertPolicy.describe`)."""

    confidence: float
    rate_interval: str
    mean_interval: str
    previous: str
    trailing_7d: str
    flag: str
    alerts: dict[str, Any]


class RunInfo(_Sparse):
    """The day's run ids and versions, and (when landed) its ``runs`` row's counts and status."""

    run_ids: list[str]
    judge_models: list[str]
    prompt_versions: list[str]
    rules_versions: list[str]
    run: dict[str, Any] | None = None


class Thresholds(_Entry):
    """The verdict thresholds a judge's rows were given, and where they came from."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    pass_: float | None = Field(validation_alias="pass", serialization_alias="pass")
    borderline: float | None
    source: str


class Totals(_Sparse):
    """The day's rows, statuses, tokens and cost over the groups; its records (when judged) and rejects."""

    rows: int
    status_counts: dict[str, int]
    input_tokens: int
    output_tokens: int
    n_cached: int
    cost_usd: float | int  # 0, an int, on a day without groups
    records: int | None = None
    rejected: int


class Distribution(_Entry):
    """Per (judge, metric): each model's count of ok values per bin."""

    judge: str
    metric: str
    edges: list[float]
    counts: dict[str, list[int]]
    n: dict[str, int]


class WorstRecord(_Sparse):
    """One of a judge's lowest-scored ``ok`` rows (the columns the day's table has), with the
    question and answer it was judged on."""

    record_id: str
    conversation_id: str | None = None
    model: str
    judge: str
    score: float | None
    verdict: str | None = None
    faithfulness: float | None = None
    relevance: float | None = None
    completeness: float | None = None
    reasoning_quality: float | None = None
    context_relevance: float | None = None
    answer_relevance: float | None = None
    semantic_similarity: float | None = None
    misses: list[str] | None = None
    hits: list[str] | None = None
    reasoning: str | None = None
    explanations: dict[str, str] | str | None = None
    reason: str | None = None
    invalid_citations: list[str] | None = None
    clamps_applied: list[str] | None = None
    hallucination_detected: bool | None = None
    uncited_claim_count: int | None = None
    improvement_suggestions: list[str] | None = None
    question: str | None
    answer: str | None


class EmptyAnswers(_Entry):
    """A judge's empty answers, counted once (the first ids named)."""

    judge: str
    count: int
    record_ids: list[str]


class RuleCount(_Entry):
    """Rejected records breaking one rule."""

    rule: str
    records: int


class ReasonCount(_Entry):
    """Rejected records giving one reason."""

    reason: str
    count: int


class RejectSample(_Entry):
    """A rejected record in full (its raw line cut)."""

    source_uri: str | None
    line_no: int | None
    record_id: str | None
    reasons: list[str]
    raw: str | None


class Rejects(_Sparse):
    """The day's rejects by rule and reason, and the first few records."""

    landed: bool
    total: int
    by_rule: list[RuleCount]
    by_reason: list[ReasonCount]
    distinct_reasons: int | None = None
    samples: list[RejectSample]


class DaySummary(_Entry):
    """Every number of the day's report (:func:`evaluation.report.compute.compute_summary`);
    ``summary.json`` is its ``model_dump()``, with the day's ``calibration`` and ``people``."""

    report_version: int
    dt: str
    source: Source
    method: Method
    run: RunInfo
    thresholds: dict[str, Thresholds]
    cascade: dict[str, Any] | None
    models: list[str]
    judges: list[str]
    headline: list[HeadlineLine]
    alerting: list[str]
    paging: list[str]
    segments: Segments
    latest_run_failed: dict[str, Any] | None
    not_significant: list[NotSignificant]
    evidence: list[Evidence]
    totals: Totals
    groups: list[Group]
    flags: list[Flag]
    distributions: list[Distribution]
    worst_records: list[WorstRecord]
    empty_answers: list[EmptyAnswers]
    rejects: Rejects


class LabelledRate(_Sparse):
    """A model's headline rate beside people's labels (:func:`evaluation.report.people.corrected_rates`):
    the judge-only and corrected figures (:class:`evaluation.contract.estimate.Estimate`), or the
    ``note`` saying why none is shown."""

    model: str
    judge: str
    rate: str
    labels: int
    records: int
    note: str | None = None
    judge_rate: float | None = None
    judge_low: float | None = None
    judge_high: float | None = None
    corrected: float | None = None
    low: float | None = None
    high: float | None = None
    bias: float | None = None


class JudgeAgreement(_Entry):
    """A judge's verdicts equal to people's on the labelled records of the uniform slice."""

    judge: str
    records: int
    agreement: float


class People(_Sparse):
    """The ``people`` part of ``summary.json`` (:func:`evaluation.report.people.people_summary`):
    the window and its label count, then either the ``error`` reading them, ``min_labels`` alone
    (no labels), or every figure."""

    window: list[str]
    labels: int
    error: str | None = None
    min_labels: int | None = None
    records: int | None = None
    annotators: int | None = None
    latest_label: str | None = None
    age_days: int | None = None
    annotator_kappa: dict[str, float | None] | None = None
    judge_agreement: list[JudgeAgreement] | None = None
    estimates: list[LabelledRate] | None = None
