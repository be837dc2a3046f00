"""The daily report's page: one self-contained HTML document drawn from the numbers of
:func:`evaluation.report.compute.compute_summary` (the content of ``summary.json``), so the page
and the JSON always hold the same numbers.

The page has no script and fetches nothing: CSS and SVG are inline, a Content-Security-Policy
forbids any load, and every logged text (model names, ids, judge reasoning, raw rejected lines)
is HTML-escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from evaluation.calibration.daily import Calibrations, calibration_section
from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.contract.schemas import SUMMARY_METRICS as METRICS
from evaluation.pages import charts
from evaluation.pages.charts import esc
from evaluation.pages.html import page, table
from evaluation.pages.markup import ARROWS as _ARROWS
from evaluation.pages.markup import bullets as _list
from evaluation.pages.markup import cards, first_of, fmt_mean, fmt_rate
from evaluation.pages.markup import cell as _cell
from evaluation.pages.markup import fmt as _fmt
from evaluation.pages.markup import fmt_ci as _fmt_ci
from evaluation.pages.markup import fmt_delta as _fmt_delta
from evaluation.pages.markup import note as _note
from evaluation.pages.markup import num as _num
from evaluation.pages.markup import row as _row
from evaluation.pages.markup import section as _section
from evaluation.pages.markup import th as _th
from evaluation.report.alerts import FLAG_BASELINES, HEADLINE_METRICS, assess, measures_of
from evaluation.report.evidence_page import (
    asked_cell,
    change_text,
    evidence_section,
    failed_run_banner,
    measure_words,
    not_significant_note,
    segment_headline_items,
    segments_section,
)
from evaluation.report.people import people_section
from evaluation.report.summary import (
    DaySummary,
    Distribution,
    Group,
    Measure,
    People,
    Previous,
    Reference,
    WorstRecord,
)

_RATE_LABELS = {"pass": "Pass rate", "borderline": "Borderline rate", "fail": "Fail rate"}
_METRIC_LABELS = {m: m.replace("_", " ").capitalize() for m in METRICS}
_SHORT_METRIC = {
    "score": "score", "faithfulness": "faithful.", "relevance": "relevance", "completeness": "complete.",
    "reasoning_quality": "reasoning", "context_relevance": "context rel.", "answer_relevance": "answer rel.",
    "semantic_similarity": "semantic sim.",
}

def _figures(svgs: Iterable[str]) -> str:
    return '<div class="charts">' + "".join(f"<figure>{svg}</figure>" for svg in svgs) + "</div>"


_Judged = TypeVar("_Judged", Group, Distribution)


def _per_judge(summary: DaySummary, items: list[_Judged]) -> Iterator[tuple[str, list[_Judged]]]:
    """The day's judges in order, each with its ``items`` (a judge without any left out)."""
    for judge in summary.judges:
        mine = [item for item in items if item.judge == judge]
        if mine:
            yield judge, mine


_NO_EVALUATIONS = _note("No evaluations landed for this day.")
_EVALUATIONS_NOT_LANDED = _note("The evaluations table of this day is not landed.")


def _delta_cell(kind: str, name: str, comparison: Previous | Reference | None) -> str:
    if comparison is None:
        return _cell('<span class="muted">–</span>', num=True)
    text = esc(_fmt_delta(kind, comparison.delta))
    p_adjusted = comparison.p_adjusted
    if not comparison.flagged or comparison.delta is None:
        tip = "no test (too few rows)" if p_adjusted is None else f"not flagged (adjusted p = {_fmt_p(p_adjusted)})"
        return _cell(text, num=True, title=tip)
    direction, assessment = assess(kind, name, comparison.delta)
    tip = f"flag ({assessment}): adjusted p = {_fmt_p(p_adjusted)}"
    return _cell(f'<span class="flag {assessment}">{_ARROWS[direction]} {text}</span>', num=True, title=tip)


def _fmt_p(value: float | None) -> str:
    """A p-value: three significant digits, below 0.0001 as such."""
    if value is None:
        return "–"
    return "< 0.0001" if value < 1e-4 else f"{value:.3g}"


def _label(kind: str, name: str) -> str:
    return _RATE_LABELS.get(name, name) if kind == "rate" else f"{_METRIC_LABELS.get(name, name)} (mean)"


def _measure(group: Group, kind: str, name: str) -> Measure:
    return group.rates[name] if kind == "rate" else group.metrics[name]


def _measure_rows(kind: str, name: str, groups: list[Group]) -> list[str]:
    rows = []
    for index, group in enumerate(groups):
        measure = _measure(group, kind, name)
        prev, trail = measure.previous, measure.trailing_7d
        cells = []
        if index == 0:
            cells.append(_cell(esc(_label(kind, name)), cls="measure", rowspan=len(groups)))
        prev_title = f"previous landed day {prev.dt}, n={prev.n}" if prev else "no earlier day within 7 days"
        trail_title = f"{len(trail.days)} days ({', '.join(trail.days)}), n={trail.n}" if trail else "no earlier day within 7 days"
        cells += [
            _cell(esc(group.model)),
            _cell(_num(measure.n), num=True),
            _cell(esc(_fmt(kind, measure.value)), num=True),
            _cell(esc(_fmt_ci(kind, measure.ci_low, measure.ci_high)), num=True),
            _cell(esc(_fmt(kind, prev.value if prev else None)), num=True, title=prev_title),
            _delta_cell(kind, name, prev),
            _cell(esc(_fmt(kind, trail.value if trail else None)), num=True, title=trail_title),
            _delta_cell(kind, name, trail),
        ]
        rows.append(_row(cells, "group-start" if index == 0 else ""))
    return rows


def _model_colours(summary: DaySummary) -> dict[str, str]:
    """One colour per model, the same in every chart of the page."""
    return {model: charts.colour(i) for i, model in enumerate(summary.models)}


def _intervals(groups: list[Group], kind: str, name: str, colours: dict[str, str]) -> list[charts.Interval]:
    """Each model's estimate of one measure with its interval, against its trailing 7-day value."""
    rows = []
    for g in groups:
        measure = _measure(g, kind, name)
        trailing = measure.trailing_7d
        rows.append(charts.Interval(g.model, measure.value, measure.ci_low, measure.ci_high,
                                    trailing.value if trailing else None, bool(trailing and trailing.flagged),
                                    colours[g.model]))
    return rows


def _quality_section(summary: DaySummary) -> str:
    title = "Quality by model and judge"
    if not summary.groups:
        return _section("quality", title, _NO_EVALUATIONS)
    parts = [_note(
        "Rates are shares of the <code>ok</code> rows; means are over <code>ok</code> rows. "
        "Intervals are 95% (Wilson for rates, Student-t for means). Δ is today minus the baseline; "
        "▲/▼ in bold marks a flag (see Flags; blue: better, vermillion: worse)."
    )]
    colours = _model_colours(summary)
    header = [
        _th("Measure"), _th("Model"), _th("n", True, "ok rows (rates) or rows with the metric (means)"),
        _th("Value", True), _th("95% interval", True), _th("Prev. day", True), _th("Δ prev.", True),
        _th("7-day", True, "trailing 7 days, pooled"), _th("Δ 7-day", True),
    ]
    for judge, groups in _per_judge(summary, summary.groups):
        figures = [
            charts.interval_chart(_intervals(groups, "rate", "pass", colours), title=f"Pass rate by model — {judge}",
                                  x_label="pass rate (share of ok rows)", value_format=charts.fmt_percent, width=560),
            charts.interval_chart(_intervals(groups, "metric", "score", colours),
                                  title=f"Mean score by model — {judge}", x_label="mean score", width=560),
        ]
        body: list[str] = []
        for verdict in VERDICTS:
            body += _measure_rows("rate", verdict, groups)
        for metric in METRICS:
            if any(g.metrics[metric].n or g.metrics[metric].previous or g.metrics[metric].trailing_7d for g in groups):
                body += _measure_rows("metric", metric, groups)
        parts.append(f'<h3 id="quality-{esc(judge)}">Judge <code>{esc(judge)}</code></h3>')
        parts += [_figures(figures), table(header, body)]
    return _section("quality", title, *parts)


_HEADLINE_CLASS = {"regressed": "worse", "improved": "better", "too_few": "muted", "no_baseline": "muted", "steady": "muted"}
_MAX_CHANGES = 4


def _headline_section(summary: DaySummary) -> str:
    """One line per model: regressed (its alerting changes), improved, or steady."""
    lines = summary.headline
    if not lines:
        return _section("headline", "What changed", _note("No model was evaluated this day."))
    items = []
    in_segments = segment_headline_items(summary.segments.headline, _MAX_CHANGES)
    for line in lines:
        status, changes = line.status, line.changes
        text = first_of([esc(change_text(c)) for c in changes], _MAX_CHANGES)
        words = line.text or status
        if status == "regressed" and not line.pages:
            words += " — paged before, not again today"
        if status != "steady" or line.model not in in_segments:  # a segment's regression says more than "steady"
            items.append(f'<li><code>{esc(line.model)}</code> <span class="flag {_HEADLINE_CLASS[status]}">'
                         f'{esc(words)}</span>{": " + text if text else ""}</li>')
        items += in_segments.pop(line.model, [])
    items += [item for rest in in_segments.values() for item in rest]
    lead = (f"{len(summary.alerting)} model(s) regressed: {esc(', '.join(summary.alerting))}." if summary.alerting
            else "No model regressed: nothing alerts today.")
    return _section("headline", "What changed", _note(lead), f'<ul class="plain">{"".join(items)}</ul>',
                    not_significant_note(summary.not_significant), _note(
        "A model regressed when a headline measure (pass or fail rate, score, "
        f"{esc('; '.join(f'{j}: ' + ', '.join(m) for j, m in HEADLINE_METRICS.items() if m))}) "
        "got worse by more than sampling and its own day-to-day variation explain, after "
        f"{esc(summary.method.alerts['adjustment'])} across the day's tests, "
        "and by at least the minimum effect (see Flags). It stays regressed, against its level before the change, "
        "until it is back within the minimum effect of it, and pages again only when it gets worse. "
        "<em>Too few records to monitor</em>: the day's volume cannot catch the useful drop; <em>no baseline</em>: "
        "no earlier day to compare with."))


def _thresholds_section(summary: DaySummary) -> str:
    """The verdict thresholds in force per judge, and where they came from."""
    if not summary.thresholds:
        return ""
    body = [_row([_cell(f"<code>{esc(judge)}</code>"), _cell(esc(fmt_mean(t.pass_)), num=True),
                  _cell(esc(fmt_mean(t.borderline)), num=True), _cell(f"<code>{esc(t.source or '–')}</code>")])
            for judge, t in summary.thresholds.items()]
    return ("<h3>Verdict thresholds in force</h3>"
            + table([_th("Judge"), _th("Pass ≥", True), _th("Borderline ≥", True), _th("Source")], body, compact=True))


def _flags_section(summary: DaySummary) -> str:
    flags = summary.flags
    rule = _note(f"Flag rule: {esc(summary.method.flag)}. Only <strong>worse</strong> flags on headline "
                 "measures alert; the others are shown, not sent.")
    if not flags:
        has_baseline = any(m.previous or m.trailing_7d for *_, m in measures_of(summary.groups))
        note = ("No measure moved by more than sampling, day-to-day variation and the minimum effect allow, "
                "against the previous day or the trailing 7 days." if has_baseline
                else "No earlier day within 7 days to compare with yet.")
        return _section("flags", "Flags", _note(note), rule, _thresholds_section(summary))
    counts = Counter(f.assessment for f in flags)
    tally = ", ".join(f"{counts[a]} {a}" for a in ("worse", "changed", "better") if counts[a])
    alerting = sum(1 for f in flags if f.alerts)
    header = [_th(""), _th("Model"), _th("Judge"), _th("Measure"), _th("Today", True), _th("Baseline"),
              _th("Baseline value", True), _th("Δ", True), _th("95% interval of Δ", True, "day-to-day variation included"),
              _th(f"p ({summary.method.alerts['p_adjust']})", True, "adjusted across the day's tests"), _th("Alerts")]
    body = []
    for flag in flags:
        kind = measure_words(flag.measure)[0]
        label = _label(kind, flag.measure.rsplit("_", 1)[0])
        assessment, arrow = flag.assessment, _ARROWS[flag.direction]
        delta_ci = _fmt_ci(kind, flag.delta_ci_low, flag.delta_ci_high)
        body.append(_row([
            _cell(f'<span class="flag {assessment}">{arrow} {esc(assessment)}</span>', cls="nowrap"),
            _cell(f"<code>{esc(flag.model)}</code>", cls="nowrap"), _cell(f"<code>{esc(flag.judge)}</code>"),
            _cell(esc(label)), _cell(esc(_fmt(kind, flag.value)), num=True), _cell(FLAG_BASELINES[flag.baseline], cls="nowrap"),
            _cell(esc(_fmt(kind, flag.baseline_value)), num=True),
            _cell(f'<span class="flag {assessment}">{esc(_fmt_delta(kind, flag.delta))}</span>', num=True),
            _cell(esc(delta_ci.replace("%", " pp") if kind == "rate" else delta_ci), num=True),
            _cell(esc(_fmt_p(flag.p_adjusted)), num=True),
            _cell("yes" if flag.alerts else '<span class="muted">no</span>'),
        ]))
    note = (f"{len(flags)} flag(s) ({tally}), {alerting} alerting; most severe first (adjusted p-value, "
            "then the change in units of its minimum effect).")
    return _section("flags", "Flags", _note(note), rule, table(header, body, compact=True), _thresholds_section(summary))


def _mix_section(summary: DaySummary) -> str:
    title = "Verdict and status mix"
    if not summary.groups:
        return _section("mix", title, _NO_EVALUATIONS)
    outcomes = [*VERDICTS, *(s for s in JUDGE_STATUSES if s != "ok")]
    segments = [charts.Segment(o.replace("_", " "), charts.OUTCOME_COLOURS[o]) for o in outcomes]
    rows = []
    for g in summary.groups:
        counts = {**g.verdict_counts, **g.status_counts}
        rows.append(charts.BarRow(f"{g.model} · {g.judge}", [counts[o] for o in outcomes]))
    chart = charts.stacked_bar_chart(rows, segments, title="Share of all rows by verdict (ok rows) and status",
                                     width=980)
    return _section("mix", title, chart, _note(
        "Each bar is every row of a model and judge: the verdicts of <code>ok</code> rows, "
        "then the rows without a verdict by status."
    ))


def _trend_section(summary: DaySummary) -> str:
    source = summary.source
    title = f"Trends (last {source.history_days} days)"
    if len(source.days_with_summary) < 2:
        return _section("trends", title, _note(
            f"No trend yet: only one day of history ({esc(summary.dt)}) in the last {source.history_days} days."
        ))
    parts = []
    if source.missing_days:
        parts.append(_note(
            f"No landed summary for {len(source.missing_days)} day(s): "
            f"{esc(', '.join(source.missing_days))} (gaps in the lines)."
        ))
    days = sorted([*source.days_with_summary, *source.missing_days])  # every day from the first landed one to dt
    labels = [d[5:] for d in days]
    colours = _model_colours(summary)
    figures = []
    for judge, groups in _per_judge(summary, summary.groups):
        rate_series, score_series = [], []
        for g in groups:
            by_day = {point.dt: point for point in g.trend}
            points = [by_day.get(d) for d in days]  # None: no landed summary that day
            rates = [p.pass_rate if p else None for p in points]
            scores = [p.score_mean if p else None for p in points]
            band = [(p.score_ci[0], p.score_ci[1]) if p and p.score_ci else None for p in points]
            rate_series.append(charts.LineSeries(g.model, rates, colour=colours[g.model]))
            score_series.append(charts.LineSeries(g.model, scores, band, colour=colours[g.model]))
        figures.append(charts.line_chart(labels, rate_series, title=f"Pass rate — {judge}", y_label="pass rate",
                                         value_format=charts.fmt_percent))
        figures.append(charts.line_chart(labels, score_series, title=f"Mean score with 95% interval — {judge}",
                                         y_label="mean score", y_range=None, value_format=fmt_mean,
                                         tick_format=charts.fmt_decimal))
    return _section("trends", title, *parts, _figures(figures))


def _distribution_section(summary: DaySummary) -> str:
    title = "Metric distributions (ok rows)"
    if not summary.source.evaluations_landed:
        return _section("distributions", title, _EVALUATIONS_NOT_LANDED)
    if not summary.distributions:
        return _section("distributions", title, _note("No ok rows with metric values."))
    colours = _model_colours(summary)
    parts = [_note("Share of each model’s ok rows per bin of width 0.1 (the legend gives each model’s n); "
                   "hover a bar for its count.")]
    for judge, items in _per_judge(summary, summary.distributions):
        figures = []
        for item in items:
            series = [charts.HistogramSeries(model, counts, colours.get(model)) for model, counts in item.counts.items()]
            chart_title = f"{_METRIC_LABELS[item.metric]} — {judge}"
            figures.append(charts.histogram(series, title=chart_title, x_label=item.metric, width=370))
        parts += [f"<h3>Judge <code>{esc(judge)}</code></h3>", _figures(figures)]
    return _section("distributions", title, *parts)


def _status_cells(counts: dict[str, int], rows: int) -> list[str]:
    """Each judge status's share of all rows, its count in the tooltip."""
    return [_cell(esc(fmt_rate(counts[s] / rows if rows else None)), num=True, title=f"{counts[s]} rows")
            for s in JUDGE_STATUSES]


def _health_section(summary: DaySummary) -> str:
    if not summary.groups:
        return _section("health", "Judge health", _NO_EVALUATIONS)
    header = [
        _th("Model"), _th("Judge"), _th("Rows", True), _th("ok", True), _th("Parse error", True), _th("Judge failed", True),
        _th("Call error", True), _th("Skipped", True), _th("Cached", True, "replies reused from the ledger"),
        _th("Tokens in", True), _th("Tokens out", True), _th("Cost (USD)", True), _th("Latency p50 (ms)", True),
        _th("Latency p95 (ms)", True),
    ]
    body = []
    for g in summary.groups:
        h = g.health
        body.append(_row([
            _cell(f"<code>{esc(g.model)}</code>", cls="nowrap"), _cell(f"<code>{esc(g.judge)}</code>", cls="nowrap"),
            _cell(_num(g.rows), num=True), *_status_cells(g.status_counts, g.rows),
            _cell(_num(h.n_cached), num=True), _cell(_num(h.input_tokens), num=True),
            _cell(_num(h.output_tokens), num=True), _cell(_num(h.cost_usd, 4), num=True),
            _cell(_num(h.latency_p50_ms, 0), num=True), _cell(_num(h.latency_p95_ms, 0), num=True),
        ]))
    t = summary.totals
    body.append(_row([
        _cell("<strong>All</strong>"), _cell(""), _cell(_num(t.rows), num=True),
        *_status_cells(t.status_counts, t.rows), _cell(_num(t.n_cached), num=True),
        _cell(_num(t.input_tokens), num=True), _cell(_num(t.output_tokens), num=True),
        _cell(_num(t.cost_usd, 4), num=True), _cell(""), _cell(""),
    ], "group-start"))
    return _section("health", "Judge health", table(header, body, compact=True), _note(
        "Status rates are shares of all rows; hover a rate for its count. Latency counts calls that "
        "reached the judge (replies reused from the ledger are left out)."
    ), _cascade_table(summary.cascade))


def _cascade_table(cascade: dict[str, Any] | None) -> str:
    """The run's cascade, level by level: the rows each level decided, its calls and their cost,
    against the judge model alone."""
    if not cascade:
        return ""
    body = [_row([
        _cell(_num(number), num=True), _cell(f"<code>{esc(level['judge_model'])}</code>", cls="nowrap"),
        _cell(f"{_num(level['decided'])} ({fmt_rate(level.get('share_decided'))})", num=True),
        _cell(_num(level["calls"]), num=True), _cell(_num(level["cost_usd"], 4), num=True),
        _cell(_num(level["list_cost_usd"], 4), num=True),
    ]) for number, level in enumerate(cascade["levels"])]
    alone, total = cascade.get("judge_model_alone_list_cost_usd"), cascade.get("list_cost_usd")
    saved = cascade.get("saved_share")
    lead = (f"At list prices the cascade's calls cost {_num(total, 4)} USD against about {_num(alone, 4)} USD for "
            f"<code>{esc(cascade['levels'][-1]['judge_model'])}</code> alone on the same rows"
            + (f": {fmt_rate(saved)} saved." if saved is not None else " (no price for the judge model)."))
    return ("<h3>Cascade</h3>" + _note(lead) + table(
        [_th("Level", True), _th("Judge model"), _th("Rows decided", True, "and their share of the rows that needed a call"),
         _th("Calls", True), _th("Cost paid (USD)", True, "replies reused from the ledger cost nothing"),
         _th("List cost (USD)", True, "the calls' tokens at litellm's online prices")], body, compact=True)
        + _note("A level decides a row it scores ok outside its band; any other row goes to the next level. The "
                "judge model alone's cost is its price for one call per row, with each row's tokens as its first "
                "call reported."))


def _rejects_section(summary: DaySummary) -> str:
    rejects = summary.rejects
    title = "Rejected input records"
    if not rejects.landed:
        return _section("rejects", title, _note("The rejects table of this day is not landed."))
    if not rejects.total:
        return _section("rejects", title, _note("No input record was rejected."))
    by_rule = charts.stacked_bar_chart([charts.BarRow(r.rule, [r.records]) for r in rejects.by_rule],
                                       [charts.Segment("records", charts.PALETTE[5])], title="Rejected records by rule",
                                       normalize=False, unit="records")
    by_reason = [_row([_cell(esc(r.reason), cls="text"), _cell(_num(r.count), num=True)]) for r in rejects.by_reason]
    samples = []
    for s in rejects.samples:
        reasons = "".join(f"<li>{esc(r)}</li>" for r in s.reasons)
        samples.append(_row([
            _cell(f"<code>{esc(s.source_uri or '')}</code>", cls="text"), _cell(_num(s.line_no), num=True),
            _cell(f"<code>{esc(s.record_id or '–')}</code>", cls="text"), _cell(f'<ul class="plain">{reasons}</ul>', cls="text"),
            _cell(f'<pre class="raw">{esc(s.raw or "")}</pre>'),
        ]))
    shown = len(rejects.samples)
    return _section(
        "rejects", title,
        _note(f"{rejects.total} record(s) rejected, {rejects.distinct_reasons} distinct reason(s)."), by_rule,
        "<h3>By reason</h3>", table([_th("Reason"), _th("Count", True)], by_reason),
        f"<h3>Records{' (first ' + str(shown) + ')' if shown < rejects.total else ''}</h3>",
        table([_th("Object"), _th("Line", True), _th("Record id"), _th("Reasons"), _th("Raw (cut)")], samples),
    )


def _worst_row(r: WorstRecord) -> str:
    """A worst record's row: its ids, texts, score, verdict, metrics and the judge's reasons."""
    metrics = [f"{_SHORT_METRIC[m]} {fmt_mean(getattr(r, m))}" for m in METRICS[1:] if getattr(r, m) is not None]
    if r.uncited_claim_count is not None:
        metrics.append(f"uncited claims {r.uncited_claim_count}")
    if r.hallucination_detected:
        metrics.append("hallucination detected")
    reasons = [t for t in (r.reasoning, r.reason) if t]
    if isinstance(r.explanations, dict):
        reasons += [f"{k.replace('_', ' ')}: {v}" for k, v in r.explanations.items()]
    elif r.explanations:
        reasons.append(str(r.explanations))
    reasons += [f"miss: {t}" for t in r.misses or []]
    reasons += [f"suggestion: {t}" for t in r.improvement_suggestions or []]
    return _row([
        _cell(f"<code>{esc(r.record_id)}</code><br><code>{esc(r.model)}</code>", cls="text"),
        asked_cell(r.question, r.answer), _cell(esc(fmt_mean(r.score)), num=True), _cell(esc(r.verdict or "–")),
        _cell(_list(metrics), cls="nowrap"), _cell(_list(reasons), cls="text"),
        _cell(_list(r.invalid_citations), cls="text"), _cell(_list(r.clamps_applied), cls="text"),
    ])


def _worst_section(summary: DaySummary) -> str:
    title = "Worst records (lowest scores among ok rows)"
    if not summary.source.evaluations_landed:
        return _section("worst", title, _EVALUATIONS_NOT_LANDED)
    empties = {e.judge: e for e in summary.empty_answers}
    if not summary.worst_records and not empties:
        return _section("worst", title, _note("No ok rows with a score."))
    header = [
        _th("Record"), _th("Question and answer (cut)"), _th("Score", True), _th("Verdict"), _th("Metrics"),
        _th("Judge's reasons"), _th("Invalid citations"), _th("Clamps applied"),
    ]
    parts = []
    judges = {r.judge for r in summary.worst_records} | set(empties)
    for judge in sorted(judges, key=lambda j: [*summary.judges, j].index(j)):
        parts.append(f"<h3>Judge <code>{esc(judge)}</code></h3>")
        if judge in empties:
            e = empties[judge]
            more = f" and {e.count - len(e.record_ids)} more" if e.count > len(e.record_ids) else ""
            parts.append(_note(f"{e.count} empty answer(s) (score 0, verdict fail), not listed below: "
                               f"{esc(', '.join(e.record_ids))}{more}."))
        body = [_worst_row(r) for r in summary.worst_records if r.judge == judge]
        if body:
            parts.append(table(header, body))
    return _section("worst", title, *parts)


def _overview(summary: DaySummary) -> str:
    t = summary.totals
    run = summary.run.run or {}
    return _section("overview", "Overview", cards([
        ("Input records", _num(run.get("input_records"))),
        ("Valid records", _num(run.get("valid_records", t.records))),
        ("Rejected", _num(t.rejected)),
        ("Judge rows", _num(t.rows)),
        ("ok rows", fmt_rate(t.status_counts["ok"] / t.rows) if t.rows else "–"),
        ("Flags", _num(len(summary.flags))),
        ("Alerting models", _num(len(summary.alerting))),
        ("Cost (USD)", _num(t.cost_usd, 4)),
    ]))


def render_html(summary: DaySummary, *, calibration: Calibrations | None = None,
                people: People | None = None) -> str:
    """The page for a summary built by :func:`compute_summary`, with the day's ``calibration``
    (:func:`evaluation.calibration.daily.calibration_summary`) and ``people``
    (:func:`evaluation.report.people.people_summary`) parts of ``summary.json``."""
    source, run = summary.source, summary.run
    meta = [
        f"Tables under <code>{esc(source.landed_root or source.root)}</code>",
        f"run {esc(', '.join(run.run_ids) or '–')}",
        f"judge model {esc(', '.join(run.judge_models) or '–')}",
    ]
    if run.prompt_versions:
        meta.append(f"prompts {esc(', '.join(run.prompt_versions))}")
    if run.rules_versions:
        meta.append(f"rules {esc(', '.join(run.rules_versions))}")
    if source.summary_from != "daily_summary":
        meta.append("daily summary recomputed from evaluations (daily_summary not landed)")
    nav = (("headline", "What changed"), ("overview", "Overview"), ("flags", "Flags"), ("segments", "Segments"),
           ("evidence", "Why"), ("quality", "Quality"), ("mix", "Verdict mix"),
           ("trends", "Trends"), ("distributions", "Distributions"), ("health", "Judge health"),
           ("rejects", "Rejects"), ("worst", "Worst records"), ("agreement", "Agreement"),
           ("people", "People"))
    sections = [
        failed_run_banner(summary), _headline_section(summary), _overview(summary), _flags_section(summary),
        segments_section(summary.segments), evidence_section(summary.evidence), _quality_section(summary),
        _mix_section(summary), _trend_section(summary), _distribution_section(summary), _health_section(summary),
        _rejects_section(summary), _worst_section(summary), calibration_section(calibration), people_section(people),
    ]
    method = summary.method
    footer = (
        f"<footer>Method: rates — {esc(method.rate_interval)}; means — {esc(method.mean_interval)}; "
        f"previous — {esc(method.previous)}; trailing 7-day — {esc(method.trailing_7d)}; flag — {esc(method.flag)}; "
        f"tests — rates: {esc(method.alerts['rate_test'])}, means: {esc(method.alerts['mean_test'])}. "
        f"The same numbers are in <code>summary.json</code> next to this page (report version {summary.report_version})"
        + (f"; read from <code>{esc(source.root)}</code>" if source.landed_root != source.root else "")
        + ".</footer>"
    )
    title = f"LLM evaluation — daily report {summary.dt}"
    return page(title, title, meta, nav, [*sections, footer])
