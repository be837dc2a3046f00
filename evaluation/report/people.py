"""People's labels in the daily report: the labels' count and age, agreement between annotators
and with the judges, and each model's headline rates corrected by the labels of the uniform
slice (:mod:`evaluation.contract.estimate`), beside the judge-only figures.

:func:`people_summary` is the ``people`` part of ``summary.json``; :func:`people_section` its HTML.
Both cover the records of the report's day and the days before it (``window_days``); a model's
corrected rates are shown only once its uniform slice holds ``min_labels`` labelled records.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import numpy as np
import polars as pl

from evaluation import storage
from evaluation.contract.estimate import fleiss_kappa, ppi_rate
from evaluation.contract.review import QUESTIONS, ReviewSpec
from evaluation.pages.charts import esc
from evaluation.pages.html import table
from evaluation.pages.markup import note, section
from evaluation.report.summary import JudgeAgreement, LabelledRate, People
from evaluation.storage.labels import read_labels

logger = logging.getLogger(__name__)

#: The headline rates corrected: name -> the verdict counted.
RATES = {"pass_rate": "pass", "fail_rate": "fail"}
_DEFAULTS = ReviewSpec()


def _judged(store: storage.Store, first: dt.date, last: dt.date) -> pl.DataFrame:
    frame = storage.scan_table(store, "evaluations")
    empty = pl.DataFrame(schema={"dt": pl.Date, "record_id": pl.String, "model": pl.String, "judge": pl.String,
                                 "verdict": pl.String})
    if frame is None:
        return empty
    return (frame.filter(pl.col("dt").is_between(first, last) & (pl.col("judge_status") == "ok")
                         & pl.col("verdict").is_not_null())
            .select(*empty.columns).collect())


def _human_verdicts(labels: pl.DataFrame) -> pl.DataFrame:
    """Per labelled record of the uniform slice: the share of its annotators who said pass / fail."""
    return (labels.filter((pl.col("question") == "verdict") & (pl.col("stratum") == "uniform"))
            .group_by("record_dt", "record_id")
            .agg(human_pass=(pl.col("label") == "pass").mean(), human_fail=(pl.col("label") == "fail").mean(),
                 human=pl.col("label").mode().first(), inclusion_probability=pl.col("inclusion_probability").first()))


def corrected_rates(judged: pl.DataFrame, humans: pl.DataFrame, min_labels: int) -> list[LabelledRate]:
    """Per (model, judge) and headline rate: the judge-only and corrected figures, or the label
    count and why none is shown."""
    found = []
    joined = judged.join(humans, left_on=["dt", "record_id"], right_on=["record_dt", "record_id"], how="left")
    for (model, judge), group in joined.group_by(["model", "judge"], maintain_order=True):
        labelled = group.filter(pl.col("human_pass").is_not_null())
        for rate, verdict in RATES.items():
            row: dict[str, Any] = {"model": model, "judge": judge, "rate": rate, "labels": labelled.height,
                                   "records": group.height}
            if labelled.height < min_labels:
                row["note"] = f"{labelled.height} labelled records of the uniform slice; {min_labels} needed"
            else:
                estimate = ppi_rate((group["verdict"] == verdict).to_numpy().astype(float),
                                    (labelled["verdict"] == verdict).to_numpy().astype(float),
                                    labelled[f"human_{verdict}"].to_numpy(),
                                    labelled["inclusion_probability"].to_numpy())
                row.update(estimate.model_dump())
            found.append(LabelledRate.model_validate(row))
    return sorted(found, key=lambda r: (r.model, r.judge, r.rate))


def _judge_agreement(judged: pl.DataFrame, humans: pl.DataFrame) -> list[JudgeAgreement]:
    joined = judged.join(humans, left_on=["dt", "record_id"], right_on=["record_dt", "record_id"], how="inner")
    return [JudgeAgreement(judge=judge, records=group.height,
                           agreement=float(group.select((pl.col("verdict") == pl.col("human")).mean()).item() or 0.0))
            for (judge,), group in joined.group_by(["judge"], maintain_order=True)]


def people_summary(store: storage.Store, day: dt.date, *, window_days: int = _DEFAULTS.people_window_days,
                   min_labels: int = _DEFAULTS.min_labels) -> People:
    """The ``people`` part of the day's ``summary.json`` (see the module's docstring)."""
    first, last = day - dt.timedelta(days=window_days - 1), day
    window = [first.isoformat(), last.isoformat()]
    try:
        labels = read_labels(store).filter(pl.col("record_dt").is_between(first, last))
    except (storage.StorageError, pl.exceptions.PolarsError) as exc:  # the report must not fail on unreadable labels
        logger.warning("human_labels under %s could not be read: %s", store.uri("human_labels/"), exc)
        return People(window=window, labels=0, error=str(exc))
    if labels.is_empty():
        return People(window=window, labels=0, min_labels=min_labels)
    latest = labels["labelled_at"].max()
    assert isinstance(latest, dt.datetime)
    judged = _judged(store, first, last)
    humans = _human_verdicts(labels)
    return People(
        window=window, labels=labels.height, min_labels=min_labels,
        records=labels.select("record_dt", "record_id").n_unique(), annotators=labels["annotator"].n_unique(),
        latest_label=latest.isoformat(), age_days=(day - latest.date()).days,
        annotator_kappa={q: fleiss_kappa(labels.filter(pl.col("question") == q).group_by("record_dt", "record_id")
                                         .agg("label")["label"].to_list()) for q in QUESTIONS},
        judge_agreement=_judge_agreement(judged, humans), estimates=corrected_rates(judged, humans, min_labels))


def _pct(value: float | None) -> str:
    return "–" if value is None or not np.isfinite(value) else f"{100 * value:.1f}%"


def _estimate_row(r: LabelledRate) -> str:
    head = f"<tr><td>{esc(r.model)}</td><td><code>{esc(r.judge)}</code></td><td>{esc(r.rate)}</td>"
    if r.corrected is None or r.bias is None:
        return f"{head}<td colspan='3' class='text'>{esc(r.note)}</td><td class='num'>{r.labels}</td></tr>"
    return (f"{head}<td class='num'>{_pct(r.judge_rate)} ({_pct(r.judge_low)} – {_pct(r.judge_high)})</td>"
            f"<td class='num'><b>{_pct(r.corrected)}</b> ({_pct(r.low)} – {_pct(r.high)})</td>"
            f"<td class='num'>{r.bias * 100:+.1f} pts</td><td class='num'>{r.labels} of {r.records}</td></tr>")


def people_section(data: People | None) -> str:
    """The daily report's "People's labels" section (from ``summary.json``'s ``people``: :func:`people_summary`)."""
    window = data.window if data is not None else ["", ""]
    if data is None or not data.labels:
        return section("people", "People's labels", note(
            f"No labels from people on the records of {esc(window[0])} – {esc(window[1])} (the review queue: "
            "<code>python -m evaluation review</code>): every figure on this page is the judges' alone."))
    kappas = ", ".join(f"{q} {'–' if k is None else f'{k:.2f}'}" for q, k in (data.annotator_kappa or {}).items())
    agreement = "; ".join(f"<code>{esc(a.judge)}</code> {_pct(a.agreement)} of {a.records}"
                          for a in data.judge_agreement or [])
    head = ("<th>model</th><th>judge</th><th>rate</th><th class='num'>judge only (95%)</th>"
            "<th class='num'>corrected (95%)</th><th class='num'>judge bias</th><th class='num'>labels</th>")
    return section(
        "people", "People's labels",
        note(f"{data.labels} labels on {data.records} records of {esc(window[0])} – "
             f"{esc(window[1])} by {data.annotators} people; the latest labelled {esc((data.latest_label or '')[:10])} "
             f"({data.age_days} days before this report). Agreement between annotators (Fleiss' κ): {kappas}. "
             f"Judges' verdicts equal to people's (uniform slice): {agreement or '–'}."),
        note("Corrected: the judge's rate over all its records plus its error measured on the "
             "uniform slice people labelled (prediction-powered inference); its 95% interval holds whatever "
             "the judge's bias. The judge-only interval counts sampling error only. Bias: judge minus people."),
        table([head], [_estimate_row(r) for r in data.estimates or []], compact=True),
    )
