"""The parts of the daily report's page that say why and where: the failed-run banner, the
changes that were large but not significant, and each regressed model's own failing records
(``summary.json``'s ``latest_run_failed``, ``not_significant`` and ``evidence``)."""

from __future__ import annotations

from collections.abc import Sequence

from evaluation.pages.charts import esc
from evaluation.pages.html import table
from evaluation.pages.markup import bullets, cell, first_of, fmt, fmt_delta, fmt_mean, fmt_rate, note, row, section, th
from evaluation.report.alerts import flag_change
from evaluation.report.segments import key_name
from evaluation.report.summary import (
    Change,
    DaySummary,
    Evidence,
    EvidenceRecord,
    NotSignificant,
    Segment,
    SegmentLine,
    Segments,
)

#: Large non-significant changes named in the headline (the rest are counted).
NOT_SIGNIFICANT_SHOWN = 6


def measure_words(measure: str) -> tuple[str, str]:
    """(kind, words) of a measure name: ``pass_rate`` → ("rate", "pass rate"), ``score_mean`` →
    ("metric", "score")."""
    name, suffix = measure.rsplit("_", 1)
    return ("rate", f"{name} rate") if suffix == "rate" else ("metric", name.replace("_", " "))


def segment_words(segment: Segment | None) -> str:
    """`` in locale=de`` for a segment, nothing for a whole model."""
    return "" if not segment else f" in {segment.key}={segment.value}"


def change_text(change: Change | NotSignificant) -> str:
    """``rag pass rate 85.0% → 64.0% (−21.0 pp)``."""
    kind, words = measure_words(change.measure)
    return (f"{change.judge} {words} {fmt(kind, change.before)} → {fmt(kind, change.after)} "
            f"({fmt_delta(kind, change.delta)})")


def segment_headline_items(lines: Sequence[SegmentLine], shown: int = 4) -> dict[str, list[str]]:
    """By model, the headline's lines of its segments that regressed: ``assistant-v2 regressed in
    locale=de: masis pass rate 81.0% → 52.0% (−29.0 pp); other locale values steady``, and on
    the days after ``still regressed in locale=de since D (day N) (paged before): …``."""
    items: dict[str, list[str]] = {}
    for line in lines:
        name = key_name(line.segment.key)
        text = first_of([esc(change_text(c)) for c in line.changes], shown)
        others = f"; other {esc(name)} values steady" if line.others_steady else ""
        where = f"in {esc(name)}={esc(line.segment.value)}"
        state = (f"regressed {where}" if line.day in (None, 1)
                 else f"still regressed {where} since {esc(str(line.since))} (day {line.day})")
        paged = "" if line.pages else " (paged before)"
        items.setdefault(line.model, []).append(f'<li><code>{esc(line.model)}</code> <span class="flag worse">'
                                                f"{state}</span>{paged}: {text}{others}</li>")
    return items


def segments_section(segments: Segments) -> str:
    """The segment flags (their own family of tests) and the segment values too small to monitor."""
    if not segments.keys:
        return ""
    names = ", ".join(f"<code>{esc(k)}</code>" for k in segments.keys)
    parts = [note(f"Measures per model, judge and value of {names} (the most frequent values; the rest as "
                  "<code>other</code>), flagged with the same rule; the segment tests are adjusted together, "
                  "as their own family, so more segments make each test stricter rather than add false alarms.")]
    if segments.flags:
        header = [th("Model"), th("Segment"), th("Change"), th("Baseline"), th("p (adj.)", True), th("Alerts")]
        body = [row([cell(f"<code>{esc(f.model)}</code>"), cell(esc(f"{key_name(f.segment.key)}={f.segment.value}")),
                     cell(f'<span class="flag {esc(f.assessment)}">{esc(change_text(flag_change(f)))}</span>'),
                     cell(esc(f.baseline)), cell(esc(f"{f.p_adjusted:.3g}"), num=True),
                     cell("yes" if f.alerts else '<span class="muted">no</span>')]) for f in segments.flags]
        parts.append(table(header, body, compact=True))
    else:
        parts.append(note("No segment moved by more than sampling, day-to-day variation and the minimum effect allow."))
    if segments.too_few:
        listed = first_of([f"{esc(t.model)} {esc(t.judge)} {esc(key_name(t.segment.key))}={esc(t.segment.value)} "
                           f"({t.n_ok})" for t in segments.too_few], 12)
        parts.append(note(f"Too few records to monitor (fewer than {segments.min_rows} ok rows today, "
                          f"not tested): {listed}."))
    return section("segments", "Segments", *parts)


def failed_run_banner(summary: DaySummary) -> str:
    """The day's latest run failed: its cause and where its evidence is, above everything else."""
    failed = summary.latest_run_failed
    if not failed:
        return ""
    evidence = failed.get("evidence_uri")
    where = f" Its evidence: <code>{esc(evidence)}</code>." if evidence else ""
    return (f'<section id="latest-run" class="banner"><h2><span class="flag worse">The latest run of '
            f'{esc(summary.dt)} {esc(failed.get("status") or "failed")}</span></h2>'
            + note(f"Run <code>{esc(failed.get('run_id') or '–')}</code>: {esc(failed.get('message') or 'no cause recorded')}."
                   f"{where} The tables below are the last landed run's.")
            + "</section>")


def not_significant_text(change: NotSignificant) -> str:
    """``assistant-v1 prompt pass rate 45.3% → 25.0% (−20.3 pp), not significant at n = 92``."""
    return f"{change.model}{segment_words(change.segment)} {change_text(change)}, not significant at n = {change.n:,}"


def not_significant_note(found: list[NotSignificant]) -> str:
    """The large changes the flag rule did not reach (:func:`evaluation.report.labels.large_unflagged`:
    one per group and measure)."""
    if not found:
        return ""
    shown = first_of([esc(not_significant_text(c)) for c in found], NOT_SIGNIFICANT_SHOWN)
    return note(f"Large changes that are not significant (at least the minimum effect, but within what "
                f"sampling and day-to-day variation explain after the adjustment): {shown}.")


def asked_cell(question: str | None, answer: str | None, contexts: str | None = None) -> str:
    """The question and the answer a record was judged on (cut), and its contexts when given, or
    why they are not shown."""
    if question is None and answer is None:
        return cell('<span class="muted">no judge call kept this record\'s prompt</span>', cls="text")
    answer_html = f"<q>{esc(answer)}</q>" if (answer or "").strip() else '<span class="flag worse">empty answer</span>'
    context_html = f'<br><b>Contexts</b> <span class="muted">{esc(contexts)}</span>' if contexts else ""
    return cell(f"<b>Q</b> <q>{esc(question or '')}</q><br><b>A</b> {answer_html}{context_html}", cls="text")


def _earlier_cell(record: EvidenceRecord) -> str:
    earlier = record.earlier
    if not earlier:
        return cell('<span class="muted">not asked of this model on a baseline day</span>', cls="text")
    text = f"<q>{esc(earlier.answer)}</q>" if earlier.answer else '<span class="muted">(no prompt kept)</span>'
    return cell(f"{esc(earlier.dt)}: {text}<br>score {esc(fmt_mean(earlier.score))} "
                f"({esc(earlier.verdict or '–')})", cls="text")


def _evidence_table(item: Evidence) -> str:
    header = [th("Record"), th("Failure reason"), th("Question, answer, contexts (cut)"), th("Score", True),
              th("Judge's reasons"), th("Clamps applied"), th("Earlier answer to the same question")]
    body = [row([
        cell(f"<code>{esc(r.record_id)}</code>", cls="text"), cell(esc(r.reason), cls="text"),
        asked_cell(r.question, r.answer, r.contexts), cell(f"{esc(fmt_mean(r.score))}<br>{esc(r.verdict or '–')}", num=True),
        cell(bullets(r.judge_reasons), cls="text"), cell(bullets(r.clamps_applied), cls="text"),
        _earlier_cell(r),
    ]) for r in item.records]
    return table(header, body)


def evidence_section(items: list[Evidence]) -> str:
    """Per regressed model and alerting measure: how many of its ok rows fail the measure, the
    most frequent failure reasons, and records of those reasons with the earlier answer."""
    title = "Why: each regressed model's failing records"
    if not items:
        return section("evidence", title, note("No model regressed: no evidence to show."))
    parts = [note("For each alerting measure, the model's own ok rows that fail it, grouped by the failure "
                  "reason (most frequent first); records are drawn from those reasons in turn, so they show "
                  "what most failures are, not only the lowest scores. Beside each, the same model's answer "
                  "to the same question on the latest baseline day that has one.")]
    for item in items:
        words = ", ".join(measure_words(m)[1] for m in item.measures)
        share = fmt_rate(item.failing / item.ok_rows) if item.ok_rows else "–"
        reasons = "; ".join(f"{esc(r.reason)} ({r.count}, {fmt_rate(r.share)})" for r in item.reasons)
        parts.append(f'<h3 id="evidence-{esc(item.model)}-{esc(item.judge)}-{esc(item.measure)}">'
                     f"<code>{esc(item.model)}</code>{esc(segment_words(item.segment))} · <code>{esc(item.judge)}</code>"
                     f" · {esc(words)}</h3>")
        scope = " (of every segment: the evaluations hold no metadata)" if item.segment else ""
        parts.append(note(f"{item.failing:,} of {item.ok_rows:,} ok rows{scope} fail it ({share})"
                          + (f"; most frequent reasons: {reasons}." if reasons else ".")))
        if item.records:
            parts.append(_evidence_table(item))
    return section("evidence", title, *parts)
