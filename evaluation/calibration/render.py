"""A calibration's page: self-contained HTML in the daily report's style (inline CSS and SVG, no
script, nothing fetched, every logged text escaped), drawn from the landed ``calibrations`` rows
and the ROC curves of :func:`evaluation.calibration.compute.roc_curves`."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.config import JUDGE_STATUSES, VERDICTS
from evaluation.pages import charts
from evaluation.pages.charts import esc
from evaluation.pages.html import page, table
from evaluation.pages.markup import cards, fmt_mean, fmt_rate, note, section

Curve = list[tuple[float, float, float]]


def _fmt(value: Any) -> str:
    return fmt_mean(value) if value is None or isinstance(value, float) else esc(value)


def _operating_point(points: Curve, cut: float | None) -> tuple[float, float] | None:
    if cut is None or not points:
        return None
    return next(((fpr, tpr) for threshold, fpr, tpr in points if threshold >= cut), (points[-1][1], points[-1][2]))


def _metrics_table(rows: list[dict[str, Any]]) -> str:
    head = ("<th>metric</th><th class='num'>n (good / bad)</th><th class='num'>mean</th><th class='num'>AUROC</th>"
            "<th class='num'>95% CI</th><th class='num'>Spearman</th><th>against</th><th class='num'>κ of fail</th>"
            "<th class='num'>F1</th><th class='num'>precision</th><th class='num'>recall</th>"
            "<th class='num'>best on the whole set: borderline / pass (κ)</th>"
            "<th class='num'>suggested borderline / pass</th><th class='num'>κ fit / held out</th>"
            "<th class='num'>κ held out, current</th>")
    body = []
    for r in rows:
        ci = "–" if r["auroc_ci_low"] is None else f"{_fmt(r['auroc_ci_low'])} – {_fmt(r['auroc_ci_high'])}"
        suggested = ("–" if r["suggested_borderline"] is None
                     else f"{_fmt(r['suggested_borderline'])} / {_fmt(r['suggested_pass'])}")
        fitted = f"{_fmt(r['suggested_kappa_fit'])} / {_fmt(r['suggested_kappa_holdout'])}"
        best = ("–" if r["best_borderline"] is None
                else f"{_fmt(r['best_borderline'])} / {_fmt(r['best_pass'])} ({_fmt(r['best_kappa'])})")
        body.append(
            f"<tr><td class='measure'>{esc(r['metric'])}</td><td class='num'>{r['n']} ({r['n_good']} / {r['n_bad']})</td>"
            f"<td class='num'>{_fmt(r['mean'])}</td><td class='num'>{_fmt(r['auroc'])}</td><td class='num'>{ci}</td>"
            f"<td class='num'>{_fmt(r['spearman'])}</td><td>{_fmt(r['spearman_label'])}</td>"
            f"<td class='num'>{_fmt(r['kappa'])}</td><td class='num'>{_fmt(r['f1'])}</td>"
            f"<td class='num'>{_fmt(r['precision'])}</td><td class='num'>{_fmt(r['recall'])}</td>"
            f"<td class='num'>{best}</td><td class='num'>{suggested}</td><td class='num'>{fitted}</td><td class='num'>{_fmt(r['current_kappa_holdout'])}</td></tr>"
        )
    return table([head], body, compact=True)


def _confusion_table(row: dict[str, Any]) -> str:
    if not row.get("confusion"):
        return note("No labelled ok rows: no confusion matrix.")
    counts = json.loads(row["confusion"])
    head = "<tr><th>verdict</th><th class='num'>labelled faithful</th><th class='num'>labelled not faithful</th></tr>"
    body = "".join(f"<tr><td>{esc(v)}</td><td class='num'>{counts[v]['good']}</td><td class='num'>{counts[v]['bad']}</td></tr>"
                   for v in VERDICTS)
    tables = f"<table class='compact'><thead>{head}</thead><tbody>{body}</tbody></table>"
    if row.get("verdict_confusion"):
        expected = json.loads(row["verdict_confusion"])
        head = "<tr><th>verdict \\ expected</th>" + "".join(f"<th class='num'>{esc(e)}</th>" for e in VERDICTS) + "</tr>"
        body = "".join("<tr><td>" + esc(p) + "</td>" + "".join(f"<td class='num'>{expected[p][e]}</td>" for e in VERDICTS)
                       + "</tr>" for p in VERDICTS)
        tables += (note(f"Against the expected verdicts ({row['n_expected']} records): κ "
                        f"{_fmt(row['verdict_kappa'])}, accuracy {fmt_rate(row['verdict_accuracy'])}.")
                   + f"<table class='compact'><thead>{head}</thead><tbody>{body}</tbody></table>")
    return tables


def _judge_section(judge: str, rows: list[dict[str, Any]], curves: dict[str, Curve]) -> str:
    score = next((r for r in rows if r["metric"] == "score"), rows[0])
    statuses = " · ".join(f"{s} {fmt_rate(score[f'rate_{s}'])}" for s in JUDGE_STATUSES)
    anchor, title = f"judge-{esc(judge)}", f"Judge <code>{esc(judge)}</code>"
    lead = note(f"prompt <code>{esc(score['prompt_version'] or '–')}</code> · {score['n_records']} records · "
                f"statuses: {statuses}")
    if score["n_ok"] == 0:
        return section(anchor, title, lead, note("No <code>ok</code> row: nothing to measure (a judge that does not "
                                                 "apply to the set's records is <code>skipped</code>)."))
    figures = [("AUROC of the score", _fmt(score["auroc"])), ("κ of fail", _fmt(score["kappa"])),
               ("F1 of fail", _fmt(score["f1"])), ("Spearman", _fmt(score["spearman"])),
               ("Suggested borderline", _fmt(score["suggested_borderline"])),
               ("κ held out (suggested / current)",
                f"{_fmt(score['suggested_kappa_holdout'])} / {_fmt(score['current_kappa_holdout'])}")]
    marks = []
    points = curves.get("score", [])
    current = _operating_point(points, score["borderline_threshold"])
    if current is not None:
        marks.append((f"score < {score['borderline_threshold']} (current borderline threshold)", *current))
    suggested = _operating_point(points, score["suggested_borderline"])
    if suggested is not None and score["suggested_borderline"] != score["borderline_threshold"]:
        marks.append((f"score < {score['suggested_borderline']} (suggested)", *suggested))
    chart = charts.roc_chart(curves, title=f"ROC — {judge}", marks=marks) if curves else note("No ROC curve.")
    return section(anchor, title, lead, cards(figures),
                   f"<div class='charts'><figure>{chart}<figcaption>A record is flagged when the value is below a cut; "
                   "circles: the score at the current and the suggested borderline threshold.</figcaption></figure>"
                   f"<div><h3>Verdicts against the labels</h3>{_confusion_table(score)}</div></div>",
                   f"<h3>Per metric</h3>{_metrics_table(rows)}")


def _cascade_section(spec: CalibrationSpec, cascade: pl.DataFrame) -> str:
    """Per judge, each level of the cascade: its band, the model alone, what it decides in the
    cascade and its cost there, against the judge model alone."""
    head = ("<th>judge</th><th class='num'>level</th><th>model</th><th class='num'>band</th><th>band from</th>"
            "<th class='num'>κ alone (held out)</th><th class='num'>rows reaching it</th>"
            "<th class='num'>decided here</th><th class='num'>cost in the cascade</th><th class='num'>cost alone</th>")
    body = []
    summary = []
    for judge in spec.judges:
        rows = cascade.filter(pl.col("judge") == judge).sort("level").to_dicts()
        if not rows:
            continue
        for r in rows:
            band = "–" if r["band_low"] is None else f"{_fmt(r['band_low'])} – {_fmt(r['band_high'])}"
            body.append(
                f"<tr><td>{esc(judge)}</td><td class='num'>{r['level']}</td><td><code>{esc(r['judge_model'])}</code></td>"
                f"<td class='num'>{band}</td><td>{_fmt(r['band_source'])}</td>"
                f"<td class='num'>{_fmt(r['kappa_alone'])} ({_fmt(r['kappa_alone_holdout'])})</td>"
                f"<td class='num'>{r['reached']}</td>"
                f"<td class='num'>{r['decided']} ({fmt_rate(r['share_decided'])})</td>"
                f"<td class='num'>{r['cost_usd']:.4f}</td><td class='num'>{r['cost_alone_usd']:.4f}</td></tr>")
        cost = sum(r["cost_usd"] for r in rows)
        alone = rows[-1]["cost_alone_usd"]
        saved = f"{1 - cost / alone:.0%} saved" if alone else "no price for the judge model"
        last = rows[-1]
        summary.append(f"<li><b>{esc(judge)}</b>: differs from <code>{esc(spec.judge_model)}</code> alone on "
                       f"{fmt_rate(last['disagreement_fit'])} of the fit split (upper bound "
                       f"{fmt_rate(last['disagreement_bound'])} at {fmt_rate(last['band_confidence'])}) and "
                       f"{fmt_rate(last['disagreement_holdout'])} held out; κ of fail {_fmt(last['kappa_cascade'])} "
                       f"(held out {_fmt(last['kappa_cascade_holdout'])}) against "
                       f"{_fmt(last['kappa_alone'])} ({_fmt(last['kappa_alone_holdout'])}) alone; cost "
                       f"{cost:.4f} against {alone:.4f} USD ({saved})</li>")
    return section("cascade", "Cascade", note(
        "A level decides a row it scores <code>ok</code> outside its band (both ends inside the band); any other row "
        "goes to the next level. Bands not given are fitted on the fit split with a guarantee: with probability at "
        f"least {spec.band_confidence:g}, the cascade's verdict (fail or not) differs from the judge model's on at "
        f"most {spec.band_loss:g} of new records (the cheapest bands passed in a fixed sequence of candidates, each "
        "tested with the Clopper–Pearson bound of its disagreements on the fit split). It assumes the records judged "
        "later are like the fit split's (drawn from the same population): other questions or another answering model "
        "void it, so calibrate again on records like them. Judges whose errors go together (a record hard for one is "
        "hard for the other) keep the disagreement bound, but the errors they share are no disagreements, so a "
        "disagreement is likelier the cheaper level's own mistake than a correction of the judge model: the "
        "guarantee is on agreement with the judge model, not on κ against the labels, which is shown beside it. "
        "Costs are the calls' tokens at litellm's online prices."),
        f"<ul class='plain'>{''.join(summary)}</ul>", table([head], body, compact=True))


def render_page(table_: pl.DataFrame, curves: dict[str, dict[str, Curve]], spec: CalibrationSpec, calibration: str,
                judging: dict[str, Any], *, cascade: pl.DataFrame | None = None) -> str:
    """The calibration's self-contained HTML page (with a cascade's section when it calibrated one)."""
    info = judging.get("set_info") or {}
    meta = [f"set <code>{esc(spec.set_name)}</code> at <code>{esc(spec.golden_uri)}</code>",
            f"judge model <code>{esc(spec.judge_name)}</code>", f"calibration <code>{esc(calibration)}</code>",
            f"thresholds pass {spec.thresholds.pass_} / borderline {spec.thresholds.borderline}", f"seed {spec.seed}"]
    figures = [("Records", f"{judging['input_records']:,}"), ("Judged", f"{judging['records']:,}"),
               ("Rejected", f"{judging['rejected']:,}"), ("Calls made", f"{judging['calls_made']:,}"),
               ("Calls reused", f"{judging['calls_reused']:,}"), ("Cost (USD)", f"{judging['cost_usd']:.4f}")]
    about = "".join(f"<li><b>{esc(k)}</b>: {esc(info[k])}</li>"
                    for k in ("description", "source", "licence", "label_origin", "citation") if info.get(k))
    sections = [section("overview", "Overview", cards(figures), f"<ul class='plain'>{about}</ul>" if info else "")]
    if cascade is not None:
        sections.append(_cascade_section(spec, cascade))
    for judge in spec.judges:
        rows = table_.filter(pl.col("judge") == judge).to_dicts()
        if rows:
            sections.append(_judge_section(judge, rows, curves.get(judge, {})))
    nav = [("overview", "Overview"), *([("cascade", "Cascade")] if cascade is not None else []),
           *((f"judge-{j}", f"Judge {j}") for j in spec.judges)]
    holdout = f"{spec.holdout_share:.0%}"
    footer = (
        "<footer>Method: statistics over <code>ok</code> rows with a label; the binary label is <code>faithful</code> (else "
        "an expected verdict other than fail), and a record labelled not faithful is what <code>fail</code> should catch. "
        "AUROC = P(a faithful record's value is above a not-faithful one's), ties ½; its interval is a 95% percentile "
        f"bootstrap ({spec.bootstrap} resamples, within each class). Spearman against the finest label there is (the "
        "record's human score for the metric, else its rating, else the binary label). κ is Cohen's κ of <code>fail</code> "
        "(for a metric other than the score: the value below the borderline threshold) against not faithful. Suggested "
        f"thresholds maximise κ on the fit split; {holdout} of each label class is held out, and the κ there is what "
        "the suggestion is worth on records it was not fitted to (the best thresholds on the whole set are its "
        "in-sample ceiling). Rules that force fail (rag: faithfulness 0; prompt: an "
        "unsatisfied required rubric) hold at every cut. The same numbers are in <code>calibration.parquet</code> next to "
        "this page.</footer>"
    )
    return page(f"Judge calibration — {spec.set_name} — {spec.judge_name}", f"Judge calibration — {spec.set_name}",
                meta, nav, [*sections, footer])
