"""The daily report's page: one self-contained HTML document drawn from the numbers of
:func:`evaluation.report.compute.compute_summary` (the content of ``summary.json``), so the page
and the JSON always hold the same numbers.

The page has no script and fetches nothing: CSS and SVG are inline, a Content-Security-Policy
forbids any load, and every logged text (model names, ids, judge reasoning, raw rejected lines)
is HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence
from typing import Any

from evaluation import charts
from evaluation.calibration.daily import calibration_section
from evaluation.charts import esc
from evaluation.contract import JUDGE_STATUSES, VERDICTS
from evaluation.report.compute import BETTER_WHEN, judge_order
from evaluation.summary import METRICS

_RATE_LABELS = {"pass": "Pass rate", "borderline": "Borderline rate", "fail": "Fail rate"}
_METRIC_LABELS = {m: m.replace("_", " ").capitalize() for m in METRICS}
_SHORT_METRIC = {
    "score": "score", "faithfulness": "faithful.", "relevance": "relevance", "completeness": "complete.",
    "reasoning_quality": "reasoning", "context_relevance": "context rel.", "answer_relevance": "answer rel.",
    "semantic_similarity": "semantic sim.",
}

CSS = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f7f9; color: #1d1f23;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
header.top { background: #1f2a37; color: #fff; padding: 20px 32px 16px; }
header.top h1 { margin: 0 0 4px; font-size: 22px; font-weight: 650; }
header.top p { margin: 2px 0; color: #d5dbe3; font-size: 13px; }
header.top code { color: #fff; }
nav { background: #fff; border-bottom: 1px solid #dde1e6; padding: 8px 32px; position: sticky; top: 0; z-index: 1; }
nav a { color: #0b5cad; margin-right: 16px; text-decoration: none; font-size: 13px; }
nav a:hover { text-decoration: underline; }
main { max-width: 1280px; margin: 0 auto; padding: 8px 32px 48px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 16px 20px; margin: 18px 0; }
h2 { font-size: 18px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
p.note, .note { color: #4d5561; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
.card { border: 1px solid #dde1e6; border-radius: 6px; padding: 10px 12px; background: #fbfcfd; }
.card .label { color: #4d5561; font-size: 12px; }
.card .value { font-size: 22px; font-weight: 650; font-variant-numeric: tabular-nums; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; margin: 4px 0 8px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #e6e8eb; text-align: left; vertical-align: top; }
th { font-weight: 600; color: #333a44; background: #f3f5f7; font-size: 12.5px; }
td.num { text-align: right; white-space: nowrap; }
th.num { text-align: right; }
td.measure { font-weight: 600; }
tr.group-start td { border-top: 2px solid #cfd5dc; }
.flag { font-weight: 700; }
.worse { color: #b03a00; }
.better { color: #0b5cad; }
.changed { color: #6a3d9a; }
.muted { color: #6b7380; }
.charts { display: flex; flex-wrap: wrap; gap: 18px 26px; align-items: flex-start; }
figure { margin: 0; }
figcaption { font-size: 12.5px; color: #4d5561; margin-top: 2px; }
svg.chart { max-width: 100%; height: auto; display: block; }
ul.flags { margin: 4px 0; padding-left: 20px; }
ul.flags li { margin: 3px 0; }
ul.plain { margin: 0; padding-left: 16px; }
ul.plain li { margin: 0 0 2px; }
td.text { max-width: 360px; overflow-wrap: anywhere; font-size: 12.5px; }
td.nowrap, td.nowrap li { white-space: nowrap; }
td.text code { overflow-wrap: anywhere; }
table.compact th, table.compact td { padding: 4px 7px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: 0; }
pre.raw { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; max-width: 560px; }
code { font-size: 12.5px; }
header.top code { overflow-wrap: anywhere; }
footer { color: #4d5561; font-size: 12.5px; margin-top: 20px; }
"""

_MINUS = "\u2212"


def _signed(text: str) -> str:
    return text.replace("-", _MINUS)


def fmt_rate(value: float | None) -> str:
    """A share as a percentage with one decimal."""
    return "–" if value is None else _signed(f"{value * 100:.1f}%")


def fmt_mean(value: float | None) -> str:
    """A metric value with three decimals."""
    return "–" if value is None else _signed(f"{value:.3f}")


def _fmt(kind: str, value: float | None) -> str:
    return fmt_rate(value) if kind == "rate" else fmt_mean(value)


def _fmt_delta(kind: str, value: float | None) -> str:
    if value is None:
        return "–"
    return _signed(f"{value * 100:+.1f} pp") if kind == "rate" else _signed(f"{value:+.3f}")


def _fmt_ci(kind: str, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "–"
    return f"{_fmt(kind, low)} – {_fmt(kind, high)}"


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return _signed(f"{value:,.{digits}f}")


def _cell(text: str, *, num: bool = False, cls: str = "", title: str = "", rowspan: int = 1) -> str:
    classes = " ".join(c for c in ("num" if num else "", cls) if c)
    attrs = f' class="{classes}"' if classes else ""
    if title:
        attrs += f' title="{esc(title)}"'
    if rowspan > 1:
        attrs += f' rowspan="{rowspan}"'
    return f"<td{attrs}>{text}</td>"


def _th(text: str, num: bool = False, title: str = "") -> str:
    attrs = ' class="num"' if num else ""
    if title:
        attrs += f' title="{esc(title)}"'
    return f'<th scope="col"{attrs}>{esc(text)}</th>'


def _delta_cell(kind: str, name: str, measure: dict[str, Any], baseline: str) -> str:
    comparison = measure.get(baseline)
    if not comparison:
        return _cell('<span class="muted">–</span>', num=True)
    text = esc(_fmt_delta(kind, comparison["delta"]))
    if not comparison["outside_ci"]:
        return _cell(text, num=True, title="within the day's 95% interval" if comparison["outside_ci"] is False else "no interval")
    delta = comparison["delta"] or 0.0
    direction = "up" if delta > 0 else "down"
    better = BETTER_WHEN.get(name, "up") if kind == "rate" else "up"
    assessment = "changed" if better is None else ("better" if direction == better else "worse")
    arrow = "▲" if direction == "up" else "▼"
    tip = f"flag: {_fmt(kind, comparison['value'])} is outside today's 95% interval ({assessment})"
    return _cell(f'<span class="flag {assessment}">{arrow} {text}</span>', num=True, title=tip)


def _measure_rows(kind: str, name: str, label: str, groups: list[dict[str, Any]]) -> list[str]:
    rows = []
    for index, group in enumerate(groups):
        measure = group["rates" if kind == "rate" else "metrics"][name]
        prev = measure.get("previous") or {}
        trail = measure.get("trailing_7d") or {}
        cells = []
        if index == 0:
            cells.append(_cell(esc(label), cls="measure", rowspan=len(groups)))
        prev_title = f"previous landed day {prev['dt']}, n={prev['n']}" if prev else "no earlier day within 7 days"
        trail_title = f"{len(trail['days'])} days ({', '.join(trail['days'])}), n={trail['n']}" if trail else "no earlier day within 7 days"
        cells += [
            _cell(esc(group["model"])),
            _cell(_num(measure["n"]), num=True),
            _cell(esc(_fmt(kind, measure["value"])), num=True),
            _cell(esc(_fmt_ci(kind, measure["ci_low"], measure["ci_high"])), num=True),
            _cell(esc(_fmt(kind, prev.get("value"))), num=True, title=prev_title),
            _delta_cell(kind, name, measure, "previous"),
            _cell(esc(_fmt(kind, trail.get("value"))), num=True, title=trail_title),
            _delta_cell(kind, name, measure, "trailing_7d"),
        ]
        start = ' class="group-start"' if index == 0 else ""
        rows.append(f"<tr{start}>{''.join(cells)}</tr>")
    return rows


def _model_colours(summary: dict[str, Any]) -> dict[str, str]:
    """One colour per model, the same in every chart of the page."""
    return {model: charts.colour(i) for i, model in enumerate(summary["models"])}


def _quality_section(summary: dict[str, Any]) -> str:
    parts = ['<section id="quality"><h2>Quality by model and judge</h2>']
    if not summary["groups"]:
        parts.append('<p class="note">No evaluations landed for this day.</p></section>')
        return "".join(parts)
    parts.append(
        '<p class="note">Rates are shares of the <code>ok</code> rows; means are over <code>ok</code> rows. '
        "Intervals are 95% (Wilson for rates, Student-t for means). Δ is today minus the baseline; "
        "▲/▼ in bold marks a baseline outside today’s interval (blue: better, vermillion: worse).</p>"
    )
    colours = _model_colours(summary)
    for judge in summary["judges"]:
        groups = [g for g in summary["groups"] if g["judge"] == judge]
        parts.append(f'<h3 id="quality-{esc(judge)}">Judge <code>{esc(judge)}</code></h3>')
        figures = []
        pass_rows = [
            charts.Interval(
                g["model"], g["rates"]["pass"]["value"], g["rates"]["pass"]["ci_low"], g["rates"]["pass"]["ci_high"],
                (g["rates"]["pass"]["trailing_7d"] or {}).get("value"),
                bool((g["rates"]["pass"]["trailing_7d"] or {}).get("outside_ci")),
                colours[g["model"]],
            )
            for g in groups
        ]
        figures.append(charts.interval_chart(pass_rows, title=f"Pass rate by model — {judge}", x_label="pass rate (share of ok rows)",
                                             value_format=charts.fmt_percent, width=560))
        score_rows = [
            charts.Interval(
                g["model"], g["metrics"]["score"]["value"], g["metrics"]["score"]["ci_low"], g["metrics"]["score"]["ci_high"],
                (g["metrics"]["score"]["trailing_7d"] or {}).get("value"),
                bool((g["metrics"]["score"]["trailing_7d"] or {}).get("outside_ci")),
                colours[g["model"]],
            )
            for g in groups
        ]
        figures.append(charts.interval_chart(score_rows, title=f"Mean score by model — {judge}", x_label="mean score", width=560))
        parts.append('<div class="charts">' + "".join(f"<figure>{f}</figure>" for f in figures) + "</div>")
        header = "".join([
            _th("Measure"), _th("Model"), _th("n", True, "ok rows (rates) or rows with the metric (means)"),
            _th("Value", True), _th("95% interval", True), _th("Prev. day", True), _th("Δ prev.", True),
            _th("7-day", True, "trailing 7 days, pooled"), _th("Δ 7-day", True),
        ])
        body: list[str] = []
        for verdict in VERDICTS:
            body += _measure_rows("rate", verdict, _RATE_LABELS[verdict], groups)
        for metric in METRICS:
            if any(g["metrics"][metric]["n"] or g["metrics"][metric]["previous"] or g["metrics"][metric]["trailing_7d"] for g in groups):
                body += _measure_rows("metric", metric, f"{_METRIC_LABELS[metric]} (mean)", groups)
        parts.append(f'<div class="table-wrap"><table><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    parts.append("</section>")
    return "".join(parts)


_ASSESSMENT_ORDER = {"worse": 0, "changed": 1, "better": 2}
_MEASURE_ORDER = [f"{v}_rate" for v in VERDICTS] + [f"{m}_mean" for m in METRICS]


def _measure_label(measure: str) -> tuple[str, str]:
    """``("rate" | "metric", label)`` of a flag's measure name."""
    name = measure.rsplit("_", 1)[0]
    if measure.endswith("_rate"):
        return "rate", _RATE_LABELS.get(name, name)
    return "metric", f"{_METRIC_LABELS.get(name, name)} (mean)"


def _flags_section(summary: dict[str, Any]) -> str:
    flags = summary["flags"]
    parts = ['<section id="flags"><h2>Flags</h2>']
    if not flags:
        has_baseline = any(
            m.get("previous") or m.get("trailing_7d")
            for g in summary["groups"] for m in [*g["rates"].values(), *g["metrics"].values()]
        )
        note = ("No measure moved outside its 95% interval against the previous day or the trailing 7 days."
                if has_baseline else "No earlier day within 7 days to compare with yet.")
        parts.append(f'<p class="note">{note}</p></section>')
        return "".join(parts)
    counts = Counter(f["assessment"] for f in flags)
    tally = ", ".join(f"{counts[a]} {a}" for a in _ASSESSMENT_ORDER if counts[a])
    parts.append(f'<p class="note">{len(flags)} comparison(s) where the baseline lies outside today’s 95% interval ({tally}); '
                 "worse first.</p>")
    ordered = sorted(flags, key=lambda f: (
        _ASSESSMENT_ORDER.get(f["assessment"], 3), judge_order(f["judge"]), f["model"],
        _MEASURE_ORDER.index(f["measure"]) if f["measure"] in _MEASURE_ORDER else len(_MEASURE_ORDER), f["baseline"] != "previous",
    ))
    header = "".join([_th(""), _th("Model"), _th("Judge"), _th("Measure"), _th("Today", True), _th("95% interval", True),
                      _th("Baseline"), _th("Baseline value", True), _th("Δ", True)])
    body = []
    for flag in ordered:
        kind, label = _measure_label(flag["measure"])
        base = f"previous day {flag['baseline_dt']}" if flag["baseline"] == "previous" else "trailing 7 days"
        arrow = "▲" if flag["direction"] == "up" else "▼"
        body.append("<tr>" + "".join([
            _cell(f'<span class="flag {flag["assessment"]}">{arrow} {esc(flag["assessment"])}</span>', cls="nowrap"),
            _cell(f"<code>{esc(flag['model'])}</code>", cls="nowrap"), _cell(f"<code>{esc(flag['judge'])}</code>"),
            _cell(esc(label)), _cell(esc(_fmt(kind, flag["value"])), num=True),
            _cell(esc(_fmt_ci(kind, flag["ci_low"], flag["ci_high"])), num=True), _cell(esc(base), cls="nowrap"),
            _cell(esc(_fmt(kind, flag["baseline_value"])), num=True),
            _cell(f'<span class="flag {flag["assessment"]}">{esc(_fmt_delta(kind, flag["delta"]))}</span>', num=True),
        ]) + "</tr>")
    parts.append(f'<div class="table-wrap"><table class="compact"><thead><tr>{header}</tr></thead>'
                 f'<tbody>{"".join(body)}</tbody></table></div></section>')
    return "".join(parts)


def _mix_section(summary: dict[str, Any]) -> str:
    parts = ['<section id="mix"><h2>Verdict and status mix</h2>']
    if not summary["groups"]:
        parts.append('<p class="note">No evaluations landed for this day.</p></section>')
        return "".join(parts)
    order = ["pass", "borderline", "fail", "parse_error", "judge_failed", "call_error", "skipped"]
    segments = [charts.Segment(o.replace("_", " "), charts.OUTCOME_COLOURS[o]) for o in order]
    rows = []
    for g in summary["groups"]:
        values = [g["verdict_counts"][v] for v in VERDICTS]
        values += [g["status_counts"][s] for s in ("parse_error", "judge_failed", "call_error", "skipped")]
        rows.append(charts.BarRow(f"{g['model']} · {g['judge']}", values))
    parts.append(charts.stacked_bar_chart(rows, segments, title="Share of all rows by verdict (ok rows) and status", width=980))
    parts.append('<p class="note">Each bar is every row of a model and judge: the verdicts of <code>ok</code> rows, '
                 "then the rows without a verdict by status.</p></section>")
    return "".join(parts)


def _day_labels(summary: dict[str, Any]) -> list[str]:
    days = summary["source"]["days_with_summary"]
    if not days:
        return []
    first, last = dt.date.fromisoformat(days[0]), dt.date.fromisoformat(summary["dt"])
    return [(first + dt.timedelta(days=i)).isoformat() for i in range((last - first).days + 1)]


def _trend_section(summary: dict[str, Any]) -> str:
    source = summary["source"]
    parts = [f'<section id="trends"><h2>Trends (last {source["history_days"]} days)</h2>']
    days = _day_labels(summary)
    if len(source["days_with_summary"]) < 2:
        parts.append(
            f'<p class="note">No trend yet: only one day of history ({esc(summary["dt"])}) in the last '
            f'{source["history_days"]} days.</p></section>'
        )
        return "".join(parts)
    if source["missing_days"]:
        parts.append(
            f'<p class="note">No landed summary for {len(source["missing_days"])} day(s): '
            f'{esc(", ".join(source["missing_days"]))} (gaps in the lines).</p>'
        )
    labels = [d[5:] for d in days]
    index = {d: i for i, d in enumerate(days)}
    colours = _model_colours(summary)
    figures = []
    for judge in summary["judges"]:
        groups = [g for g in summary["groups"] if g["judge"] == judge]
        rate_series, score_series = [], []
        for g in groups:
            rates: list[float | None] = [None] * len(days)
            scores: list[float | None] = [None] * len(days)
            band: list[tuple[float, float] | None] = [None] * len(days)
            for point in g["trend"]:
                i = index.get(point["dt"])
                if i is None:
                    continue
                rates[i] = point["pass_rate"]
                scores[i] = point["score_mean"]
                band[i] = (point["score_ci"][0], point["score_ci"][1]) if point["score_ci"] else None
            rate_series.append(charts.LineSeries(g["model"], rates, colour=colours[g["model"]]))
            score_series.append(charts.LineSeries(g["model"], scores, band, colour=colours[g["model"]]))
        figures.append(charts.line_chart(labels, rate_series, title=f"Pass rate — {judge}", y_label="pass rate",
                                         value_format=charts.fmt_percent))
        figures.append(charts.line_chart(labels, score_series, title=f"Mean score with 95% interval — {judge}",
                                         y_label="mean score", y_range=None, value_format=fmt_mean,
                                         tick_format=charts.fmt_decimal))
    parts.append('<div class="charts">' + "".join(f"<figure>{f}</figure>" for f in figures) + "</div></section>")
    return "".join(parts)


def _distribution_section(summary: dict[str, Any]) -> str:
    parts = ['<section id="distributions"><h2>Metric distributions (ok rows)</h2>']
    if not summary["source"]["evaluations_landed"]:
        parts.append('<p class="note">The evaluations table of this day is not landed.</p></section>')
        return "".join(parts)
    if not summary["distributions"]:
        parts.append('<p class="note">No ok rows with metric values.</p></section>')
        return "".join(parts)
    colours = _model_colours(summary)
    parts.append('<p class="note">Share of each model’s ok rows per bin of width 0.1 (the legend gives each model’s n); '
                 "hover a bar for its count.</p>")
    for judge in summary["judges"]:
        items = [d for d in summary["distributions"] if d["judge"] == judge]
        if not items:
            continue
        parts.append(f'<h3>Judge <code>{esc(judge)}</code></h3><div class="charts">')
        for item in items:
            series = [charts.HistogramSeries(model, counts, colours.get(model)) for model, counts in item["counts"].items()]
            chart = charts.histogram(series, title=f"{_METRIC_LABELS[item['metric']]} — {judge}", x_label=item["metric"], width=370)
            parts.append(f"<figure>{chart}</figure>")
        parts.append("</div>")
    parts.append("</section>")
    return "".join(parts)


def _health_section(summary: dict[str, Any]) -> str:
    parts = ['<section id="health"><h2>Judge health</h2>']
    if not summary["groups"]:
        parts.append('<p class="note">No evaluations landed for this day.</p></section>')
        return "".join(parts)
    header = "".join([
        _th("Model"), _th("Judge"), _th("Rows", True), _th("ok", True), _th("Parse error", True), _th("Judge failed", True),
        _th("Call error", True), _th("Skipped", True), _th("Cached", True, "replies reused from the ledger"),
        _th("Tokens in", True), _th("Tokens out", True), _th("Cost (USD)", True), _th("Latency p50 (ms)", True),
        _th("Latency p95 (ms)", True),
    ])
    body = []
    for g in summary["groups"]:
        h = g["health"]
        rate_cells = [
            _cell(esc(fmt_rate(g["status_rates"][s])), num=True, title=f"{g['status_counts'][s]} rows")
            for s in JUDGE_STATUSES
        ]
        body.append("<tr>" + "".join([
            _cell(f"<code>{esc(g['model'])}</code>", cls="nowrap"), _cell(f"<code>{esc(g['judge'])}</code>", cls="nowrap"),
            _cell(_num(g["rows"]), num=True),
            *rate_cells, _cell(_num(h["n_cached"]), num=True), _cell(_num(h["input_tokens"]), num=True),
            _cell(_num(h["output_tokens"]), num=True), _cell(_num(h["cost_usd"], 4), num=True),
            _cell(_num(h["latency_p50_ms"], 0), num=True), _cell(_num(h["latency_p95_ms"], 0), num=True),
        ]) + "</tr>")
    t = summary["totals"]
    rows = t["rows"]
    total_rates = [
        _cell(esc(fmt_rate(t["status_counts"][s] / rows if rows else None)), num=True, title=f"{t['status_counts'][s]} rows")
        for s in JUDGE_STATUSES
    ]
    body.append('<tr class="group-start">' + "".join([
        _cell("<strong>All</strong>"), _cell(""), _cell(_num(rows), num=True), *total_rates, _cell(_num(t["n_cached"]), num=True),
        _cell(_num(t["input_tokens"]), num=True), _cell(_num(t["output_tokens"]), num=True),
        _cell(_num(t["cost_usd"], 4), num=True), _cell(""), _cell(""),
    ]) + "</tr>")
    parts.append(f'<div class="table-wrap"><table class="compact"><thead><tr>{header}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    parts.append('<p class="note">Status rates are shares of all rows; hover a rate for its count. Latency counts calls that '
                 "reached the judge (replies reused from the ledger are left out).</p></section>")
    return "".join(parts)


def _rejects_section(summary: dict[str, Any]) -> str:
    rejects = summary["rejects"]
    parts = ['<section id="rejects"><h2>Rejected input records</h2>']
    if not rejects["landed"]:
        parts.append('<p class="note">The rejects table of this day is not landed.</p></section>')
        return "".join(parts)
    if not rejects["total"]:
        parts.append('<p class="note">No input record was rejected.</p></section>')
        return "".join(parts)
    parts.append(f'<p class="note">{rejects["total"]} record(s) rejected, {rejects["distinct_reasons"]} distinct reason(s).</p>')
    by_rule = rejects["by_rule"]
    parts.append(charts.bar_chart([r["rule"] for r in by_rule], [r["records"] for r in by_rule],
                                  title="Rejected records by rule", unit="records", bar_colour=charts.PALETTE[5], width=760))
    rows = "".join(f"<tr>{_cell(esc(r['reason']), cls='text')}{_cell(_num(r['count']), num=True)}</tr>" for r in rejects["by_reason"])
    parts.append(f'<h3>By reason</h3><div class="table-wrap"><table><thead><tr>{_th("Reason")}{_th("Count", True)}</tr></thead>'
                 f"<tbody>{rows}</tbody></table></div>")
    sample_rows = []
    for s in rejects["samples"]:
        reasons = "".join(f"<li>{esc(r)}</li>" for r in s["reasons"])
        sample_rows.append("<tr>" + "".join([
            _cell(f"<code>{esc(s['source_uri'] or '')}</code>", cls="text"), _cell(_num(s["line_no"]), num=True),
            _cell(f"<code>{esc(s['record_id'] or '–')}</code>", cls="text"), _cell(f'<ul class="plain">{reasons}</ul>', cls="text"),
            _cell(f'<pre class="raw">{esc(s["raw"] or "")}</pre>'),
        ]) + "</tr>")
    shown = len(rejects["samples"])
    parts.append(
        f"<h3>Records{' (first ' + str(shown) + ')' if shown < rejects['total'] else ''}</h3>"
        f'<div class="table-wrap"><table><thead><tr>{_th("Object")}{_th("Line", True)}{_th("Record id")}{_th("Reasons")}'
        f'{_th("Raw (cut)")}</tr></thead><tbody>{"".join(sample_rows)}</tbody></table></div></section>'
    )
    return "".join(parts)


def _list(items: Sequence[str] | None) -> str:
    if not items:
        return '<span class="muted">–</span>'
    return '<ul class="plain">' + "".join(f"<li>{esc(i)}</li>" for i in items) + "</ul>"


def _worst_section(summary: dict[str, Any]) -> str:
    parts = ['<section id="worst"><h2>Worst records (lowest scores among ok rows)</h2>']
    if not summary["source"]["evaluations_landed"]:
        parts.append('<p class="note">The evaluations table of this day is not landed.</p></section>')
        return "".join(parts)
    if not summary["worst_records"]:
        parts.append('<p class="note">No ok rows with a score.</p></section>')
        return "".join(parts)
    header = "".join([
        _th("Record"), _th("Model"), _th("Score", True), _th("Verdict"), _th("Metrics"), _th("Misses"),
        _th("Reasoning, reason, explanations"), _th("Invalid citations"), _th("Clamps applied"),
    ])
    for judge in summary["judges"]:
        records = [r for r in summary["worst_records"] if r["judge"] == judge]
        if not records:
            continue
        body = []
        for r in records:
            metrics = [f"{_SHORT_METRIC[m]} {fmt_mean(r.get(m))}" for m in METRICS[1:] if r.get(m) is not None]
            if r.get("uncited_claim_count") is not None:
                metrics.append(f"uncited claims {r['uncited_claim_count']}")
            if r.get("hallucination_detected"):
                metrics.append("hallucination detected")
            reasoning = [t for t in (r.get("reasoning"), r.get("reason")) if t]
            explanations = r.get("explanations")
            if isinstance(explanations, dict):
                reasoning += [f"{k.replace('_', ' ')}: {v}" for k, v in explanations.items()]
            elif explanations:
                reasoning.append(str(explanations))
            reasoning += [f"suggestion: {t}" for t in r.get("improvement_suggestions") or []]
            body.append("<tr>" + "".join([
                _cell(f"<code>{esc(r['record_id'])}</code>", cls="text"), _cell(f"<code>{esc(r['model'])}</code>", cls="nowrap"),
                _cell(esc(fmt_mean(r["score"])), num=True), _cell(esc(r.get("verdict") or "–")),
                _cell(_list(metrics), cls="nowrap"), _cell(_list(r.get("misses")), cls="text"),
                _cell(_list(reasoning), cls="text"), _cell(_list(r.get("invalid_citations")), cls="text"),
                _cell(_list(r.get("clamps_applied")), cls="text"),
            ]) + "</tr>")
        parts.append(f'<h3>Judge <code>{esc(judge)}</code></h3><div class="table-wrap"><table><thead><tr>{header}</tr></thead>'
                     f'<tbody>{"".join(body)}</tbody></table></div>')
    parts.append("</section>")
    return "".join(parts)


def _overview(summary: dict[str, Any]) -> str:
    t = summary["totals"]
    run = summary["run"].get("run") or {}
    ok = t["status_counts"]["ok"]
    cards = [
        ("Input records", _num(run.get("input_records")) if run.get("input_records") is not None else "–"),
        ("Valid records", _num(run.get("valid_records", t.get("records")))),
        ("Rejected", _num(t["rejected"])),
        ("Judge rows", _num(t["rows"])),
        ("ok rows", fmt_rate(ok / t["rows"]) if t["rows"] else "–"),
        ("Flags", _num(len(summary["flags"]))),
        ("Cost (USD)", _num(t["cost_usd"], 4)),
    ]
    body = "".join(f'<div class="card"><div class="label">{esc(k)}</div><div class="value">{esc(v)}</div></div>' for k, v in cards)
    return f'<section id="overview"><h2>Overview</h2><div class="cards">{body}</div></section>'


def render_html(summary: dict[str, Any]) -> str:
    """The page for a summary built by :func:`compute_summary`."""
    day = summary["dt"]
    source = summary["source"]
    run = summary["run"]
    meta = [
        f"Tables under <code>{esc(source['root'])}</code>",
        f"run {esc(', '.join(run['run_ids']) or '–')}",
        f"judge model {esc(', '.join(run['judge_models']) or '–')}",
    ]
    if run["prompt_versions"]:
        meta.append(f"prompts {esc(', '.join(run['prompt_versions']))}")
    if run["rules_versions"]:
        meta.append(f"rules {esc(', '.join(run['rules_versions']))}")
    if source["summary_from"] != "daily_summary":
        meta.append("daily summary recomputed from evaluations (daily_summary not landed)")
    nav = "".join(
        f'<a href="#{a}">{esc(t)}</a>'
        for a, t in (("overview", "Overview"), ("flags", "Flags"), ("quality", "Quality"), ("mix", "Verdict mix"),
                     ("trends", "Trends"), ("distributions", "Distributions"), ("health", "Judge health"),
                     ("rejects", "Rejects"), ("worst", "Worst records"), ("agreement", "Agreement"))
    )
    sections = [
        _overview(summary), _flags_section(summary), _quality_section(summary), _mix_section(summary),
        _trend_section(summary), _distribution_section(summary), _health_section(summary),
        _rejects_section(summary), _worst_section(summary), calibration_section(summary),
    ]
    method = summary["method"]
    footer = (
        f"<footer>Method: rates — {esc(method['rate_interval'])}; means — {esc(method['mean_interval'])}; "
        f"previous — {esc(method['previous'])}; trailing 7-day — {esc(method['trailing_7d'])}; flag — {esc(method['flag'])}. "
        f"The same numbers are in <code>summary.json</code> next to this page (report version {summary['report_version']}).</footer>"
    )
    return page(f"LLM evaluation — daily report {day}", f"LLM evaluation — daily report {day}", meta, nav,
                [*sections, footer])


def page(title: str, heading: str, meta: Sequence[str], nav: str, sections: Sequence[str]) -> str:
    """A self-contained page in the report's style: no script, nothing fetched (its Content
    Security Policy allows inline CSS and data: images only), nothing sent as a referrer."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(title)}</title>"
        f"<style>{CSS}</style></head><body>"
        f'<header class="top"><h1>{esc(heading)}</h1><p>{" · ".join(meta)}</p></header>'
        f"<nav>{nav}</nav><main>{''.join(sections)}</main></body></html>\n"
    )
