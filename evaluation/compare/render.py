"""A model comparison's page in the daily report's style (its ``page``): self-contained HTML drawn
from the landed ``metrics`` and ``verdicts`` tables — the deltas as intervals around zero, the
verdict mixes and their shifts, the metrics table and the judge statuses."""

from __future__ import annotations

from typing import Any

import polars as pl

from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.pages import charts
from evaluation.pages.charts import esc
from evaluation.pages.html import page, table
from evaluation.pages.markup import figure as _fmt
from evaluation.pages.markup import note, section


def _delta_chart(judge: str, baseline: str, rows: list[dict[str, Any]]) -> str:
    """Deltas as intervals around zero: a dot at the delta, whiskers to the 95% interval, a
    diamond at zero on every row (bold label when the interval excludes zero)."""
    rows = [r for r in rows if r["delta"] is not None]
    if not rows:
        return note("No deltas: a model or the baseline has no ok rows.")
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
    head = "<th>model</th><th class='num'>ok rows</th>" + "".join(
        f"<th class='num'>{v} %</th><th class='num'>shift (pp)</th>" for v in VERDICTS)
    body = []
    for model in models:
        mine = {r["verdict"]: r for r in rows if r["model"] == model}
        cells = []
        for verdict in VERDICTS:
            row = mine.get(verdict, {})
            shift = row.get("shift_pp")
            cells.append(f"<td class='num'>{_fmt(row.get('share_pct'), 1)}</td><td class='num'>"
                         f"{'–' if shift is None or row.get('model') == row.get('baseline') else f'{shift:+.1f}'}</td>")
        n_ok = next(iter(mine.values()), {}).get("n_ok", 0)
        body.append(f"<tr><td>{esc(model)}</td><td class='num'>{n_ok}</td>{''.join(cells)}</tr>")
    return table([head], body, compact=True)


_ADJUSTMENT_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg"}
#: What each adjustment controls, as the page says it.
_ADJUSTMENT_CONTROLS = {"holm": "the family-wise error rate", "bh": "the false discovery rate"}


def _metrics_table(rows: list[dict[str, Any]]) -> str:
    method = next((r["p_adjust_method"] for r in rows if r.get("p_adjust_method")), None)
    adjusted = _ADJUSTMENT_NAMES.get(method or "", method or "adjusted")
    head = ("<th>metric</th><th>model</th><th class='num'>n</th><th class='num'>mean</th><th class='num'>95% CI</th>"
            "<th class='num'>tested mean</th><th class='num'>baseline's tested mean</th><th class='num'>delta</th><th class='num'>95% CI of delta</th><th class='num'>p (raw)</th>"
            f"<th class='num'>p ({esc(adjusted)})</th><th class='num'>effect size d [95% CI]</th>"
            "<th>test</th><th class='num'>pairs</th><th class='num'>W / T / L</th>")
    body = []
    for r in rows:
        cls = "muted"
        if r["significant"]:
            cls = "flag better" if r["delta"] > 0 else "flag worse"
        wtl = "–" if r["is_baseline"] else f"{r['wins']} / {r['ties']} / {r['losses']}"
        delta = "–" if r["delta"] is None else f"{r['delta']:+.3f}"
        delta_ci = "–" if r["delta"] is None else f"[{_fmt(r['delta_ci_low'])}, {_fmt(r['delta_ci_high'])}]"
        effect = ("–" if r.get("effect_size") is None else f"{r['effect_size']:+.2f} "
                  f"[{_fmt(r.get('effect_size_ci_low'), 2)}, {_fmt(r.get('effect_size_ci_high'), 2)}]")
        body.append(
            f"<tr><td>{esc(r['metric'])}</td><td>{esc(r['model'])}{' (baseline)' if r['is_baseline'] else ''}</td>"
            f"<td class='num'>{r['n']}</td><td class='num'>{_fmt(r['mean'])}</td>"
            f"<td class='num'>[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]</td>"
            f"<td class='num'>{_fmt(r.get('delta_mean'))}</td><td class='num'>{_fmt(r.get('delta_baseline_mean'))}</td>"
            f"<td class='num {cls}'>{delta}</td><td class='num'>{delta_ci}</td>"
            f"<td class='num'>{_fmt(r['p_value'], 4)}</td><td class='num {cls}'>{_fmt(r.get('p_adjusted'), 4)}</td>"
            f"<td class='num'>{effect}</td><td>{_fmt(r['test'])}</td>"
            f"<td class='num'>{'–' if r['is_baseline'] else _fmt(r.get('n_pairs'))}</td><td class='num'>{wtl}</td></tr>"
        )
    return table([head], body, compact=True)


def _permutations_line(tested: pl.DataFrame) -> str:
    """How many permutations each p-value took, and its floor against the adjustment's threshold."""
    if not tested.height:
        return ""
    permutations = max(int(count) for count in tested["permutations"].to_list())
    return (f" Each p-value is from {permutations:,} permutations: its floor, 1/{permutations + 1:,}, is below "
            f"0.05/{tested.height} (the threshold of the first adjusted test), so the floor cannot hide a difference.")


def _overview(spec: ComparisonSpec, tested: pl.DataFrame, records: dict[str, int], paired_questions: int) -> str:
    """The overview section: the records per model, and how the intervals and tests are made."""
    method = tested["p_adjust_method"][0] if tested.height else None
    adjustment = esc(_ADJUSTMENT_NAMES.get(method or "", method or ""))
    controls = _ADJUSTMENT_CONTROLS.get(method or "")
    multiplicity = (
        f" p-values are adjusted for the {tested.height} tests of this comparison with the {adjustment} method "
        f"(<code>p_adjust={esc(method or '')}</code>{', controlling ' + controls if controls else ''}; both the raw and the adjusted value are shown); a delta is marked significant when its adjusted p-value "
        "is below 0.05." if tested.height else ""
    )
    paired_line = (f" Sampled by question: {paired_questions} questions were answered by every compared model "
                   "(paired); the rest of each model's records are unpaired.")
    records_line = ", ".join(f"{esc(m)}: {records.get(m, 0)}" for m in spec.models)
    return section(
        "overview", "Overview", f"<p>Records per model: {records_line}.{esc(paired_line)}</p>",
        note("Means and verdict mixes use <code>ok</code> rows only; other statuses are counted at the end. Intervals "
             f"are 95% percentile bootstraps ({spec.bootstrap} resamples). A <i>paired</i> test matches records on the "
             "normalised question and works on per-question differences (sign-flip permutation p-value); an "
             "<i>unpaired</i> test compares the two samples (two-sample permutation p-value). The effect size is "
             "Cohen's d (d<sub>z</sub>, the mean over the standard deviation of the per-question differences, for a "
             f"paired test) with a bootstrap interval.{multiplicity}{_permutations_line(tested)} A bold label, a blue "
             "or vermillion delta: significant after the adjustment."),
        note("The delta is the difference of the two <i>tested means</i> beside it: for a "
             "paired test the means of the per-question means over the questions both models answered (so it can "
             "differ from the difference of the means over all rows), for an unpaired test the means over all rows."),
    )


def _statuses(spec: ComparisonSpec, statuses: dict[str, dict[str, dict[str, int]]]) -> str:
    status_rows = [
        f"<tr><td>{esc(model)}</td><td>{esc(judge)}</td>"
        + "".join(f"<td class='num'>{statuses.get(model, {}).get(judge, {}).get(s, 0)}</td>" for s in JUDGE_STATUSES)
        + "</tr>"
        for model in spec.models for judge in spec.judges
    ]
    status_head = "<th>model</th><th>judge</th>" + "".join(f"<th class='num'>{s}</th>" for s in JUDGE_STATUSES)
    return section("statuses", "Judge statuses", table([status_head], status_rows, compact=True))


def render_report(comparison_id: str, spec: ComparisonSpec, source: str, metrics: pl.DataFrame,
                  verdicts: pl.DataFrame, records: dict[str, int], statuses: dict[str, dict[str, dict[str, int]]],
                  paired_questions: int) -> str:
    """The comparison's self-contained HTML page."""
    tested = metrics.filter(pl.col("p_adjusted").is_not_null())
    sections = [_overview(spec, tested, records, paired_questions)]
    for judge in spec.judges:
        judge_rows = metrics.filter(pl.col("judge") == judge).to_dicts()
        deltas = [r for r in judge_rows if not r["is_baseline"]]
        verdict_rows = verdicts.filter(pl.col("judge") == judge).to_dicts()
        sections.append(section(
            f"judge-{esc(judge)}", f"Judge <code>{esc(judge)}</code>", _delta_chart(judge, spec.baseline_model, deltas),
            f"<h3>Verdict mix and shift from {esc(spec.baseline_model)}</h3>",
            _verdict_chart(judge, verdict_rows, spec.models), _verdict_table(verdict_rows, spec.models),
            f"<h3>Metrics</h3>{_metrics_table(judge_rows)}",
        ))
    sections.append(_statuses(spec, statuses))
    how = "landed scores" if source == "landed" else f"re-judged with {spec.judge_model}"
    sample = "all records" if spec.sample_per_model is None else f"at most {spec.sample_per_model} records per model"
    meta = [esc(comparison_id), f"{spec.start_date} to {spec.end_date}", f"baseline <b>{esc(spec.baseline_model)}</b>",
            esc(how), esc(sample), f"seed {spec.seed}"]
    nav = [("overview", "Overview"), *((f"judge-{j}", f"Judge {j}") for j in spec.judges),
           ("statuses", "Judge statuses")]
    return page(f"Model comparison {comparison_id}", "Model comparison", meta, nav, sections)
