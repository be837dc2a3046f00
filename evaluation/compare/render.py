"""A model comparison's page: self-contained HTML (inline CSS and SVG, nothing fetched) drawn from
the landed ``metrics`` and ``verdicts`` tables — the deltas as intervals around zero, the verdict
mixes and their shifts, the metrics table and the judge statuses."""

from __future__ import annotations

import html
import math
from typing import Any

import polars as pl

from evaluation import charts
from evaluation.contract import JUDGE_STATUSES, VERDICTS, ComparisonSpec

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


_ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg"}
#: What each adjustment controls, as the page says it.
_ADJUSTMENT_CONTROLS = {"holm": "the family-wise error rate", "bh": "the false discovery rate"}


def _effect(row: dict[str, Any]) -> str:
    if row.get("effect_size") is None:
        return "–"
    return (f"{row['effect_size']:+.2f} [{_fmt(row.get('effect_size_ci_low'), 2)}, "
            f"{_fmt(row.get('effect_size_ci_high'), 2)}]")


def _metrics_table(rows: list[dict[str, Any]]) -> str:
    method = next((r["p_adjust_method"] for r in rows if r.get("p_adjust_method")), None)
    adjusted = _ADJUSTMENT_NAMES.get(method or "", method or "adjusted")
    head = ("<tr><th>metric</th><th>model</th><th>n</th><th>mean</th><th>95% CI</th><th>delta</th>"
            "<th>95% CI of delta</th><th>p (raw)</th>"
            f"<th>p ({html.escape(adjusted)})</th><th>effect size d [95% CI]</th>"
            "<th>test</th><th>pairs</th><th>W / T / L</th></tr>")
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
            f"<td>{_fmt(r['p_value'], 4)}</td><td class='{cls}'>{_fmt(r.get('p_adjusted'), 4)}</td>"
            f"<td>{_effect(r)}</td><td>{_fmt(r['test'])}</td>"
            f"<td>{'–' if r['is_baseline'] else _fmt(r.get('n_pairs'))}</td><td>{wtl}</td></tr>"
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
    paired_questions: int,
) -> str:
    """The comparison's self-contained HTML page."""
    tested = metrics.filter(pl.col("p_adjusted").is_not_null())
    method = tested["p_adjust_method"][0] if tested.height else None
    adjustment = html.escape(_ADJUSTMENT_NAMES.get(method or "", method or ""))
    controls = _ADJUSTMENT_CONTROLS.get(method or "")
    multiplicity = (
        f" p-values are adjusted for the {tested.height} tests of this comparison with the {adjustment} method "
        f"(<code>p_adjust={html.escape(method or '')}</code>{', controlling ' + controls if controls else ''}; both the raw and the adjusted value are shown); a delta is marked significant when its adjusted p-value "
        "is below 0.05." if tested.height else ""
    )
    paired_line = (f" Sampled by question: {paired_questions} questions were answered by every compared model "
                   "(paired); the rest of each model's records are unpaired.")
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
        f"<div class='card'><p>Records per model: {records_line}.{html.escape(paired_line)}</p>"
        "<p class='meta'>Means and verdict mixes use <code>ok</code> rows only; other statuses are counted at the end. "
        "Intervals are 95% percentile "
        f"bootstraps ({spec.bootstrap} resamples). A <i>paired</i> test matches records on the normalised question "
        "and works on per-question differences (sign-flip permutation p-value); an <i>unpaired</i> test compares the "
        "two samples (two-sample permutation p-value). The effect size is Cohen's d (d<sub>z</sub>, the mean over "
        "the standard deviation of the per-question differences, for a paired test) with a bootstrap interval."
        f"{multiplicity} A bold label, a green or red delta: significant after the adjustment.</p></div>"
        + "".join(sections)
        + "<section class='card'><h2>Judge statuses</h2><table><tr><th>model</th><th>judge</th>"
        + "".join(f"<th>{s}</th>" for s in JUDGE_STATUSES) + "</tr>"
        + "".join(status_rows)
        + "</table></section></main></body></html>"
    )
