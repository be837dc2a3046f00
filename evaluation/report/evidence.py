"""Each regressed model's own evidence (CONTRACT §7): the failing records behind each measure
that alerted, chosen to represent the change, with the model's earlier answer to the same
question.

For an alerting change (a model, a judge, a measure) the model's ``ok`` rows of that judge that
fail the measure are read (for the rates and the score, the ``borderline`` rows too when none
failed), each gets one failure reason (:func:`failure_reason`), and the records shown are taken
from the most frequent reasons in turn, each with the same model's earlier answer where one
exists (its score and verdict too). Which rows fail, the reasons, how the records are chosen and
where their texts and the earlier answer come from: docs/reports.md, "Why a model regressed, and where".

In ``summary.json``, ``evidence`` is a list of :class:`~evaluation.report.summary.Evidence`, one
entry per (model, judge, set of failing rows: the verdict's, or a metric's), with the alerting
measures it backs (a regressed model's own changes first, then its segments' changes the model's
own do not cover; evaluations hold no metadata, so a segment's entry shows the model's failing
records of every segment).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from evaluation.contract.schemas import SUMMARY_METRICS
from evaluation.judges import read_fenced_blocks
from evaluation.report.summary import (
    Earlier,
    Evidence,
    EvidenceRecord,
    FailureReason,
    HeadlineLine,
    Segment,
    SegmentLine,
)

#: Failure reasons shown per change (the most frequent), and records shown per change.
REASONS_SHOWN = 3
RECORDS_SHOWN = 6
TEXT_LIMIT = 400
CONTEXT_LIMIT = 240
QUESTION_LIMIT = 300
#: The metrics whose lowest names a failure nothing else explains: every metric but the score.
_REASON_METRICS = SUMMARY_METRICS[1:]
_COLUMNS = ("record_id", "question_key", "model", "judge", "score", "verdict", "reasoning", "reason", "misses",
            "explanations", "invalid_citations", "clamps_applied", "uncited_claim_count", *_REASON_METRICS)


def shorten(text: str | None, limit: int = TEXT_LIMIT) -> str | None:
    """``text`` cut to ``limit`` characters, saying how many more there were."""
    if text is None:
        return None
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def failure_reason(schema: Iterable[str]) -> pl.Expr:
    """One short reason per failing row, the first that applies: an empty answer; a citation of a
    context never retrieved; five or more uncited claims; the first rubric (or expectation) the
    answer missed; another clamp; the judge's own ``reason``; else the row's lowest metric."""
    names = set(schema)

    def present(column: str, default: pl.Expr) -> pl.Expr:
        return pl.col(column) if column in names else default

    empty_list = pl.lit([], dtype=pl.List(pl.String))
    clamps = present("clamps_applied", empty_list).fill_null([])
    invalid = present("invalid_citations", empty_list).fill_null([])
    misses = present("misses", empty_list).fill_null([])
    uncited = present("uncited_claim_count", pl.lit(None, dtype=pl.Int64))
    first_miss = misses.list.first()
    rubric = first_miss.str.extract(r"^\[([^\]]+)\]", 1)
    metrics = [m for m in _REASON_METRICS if m in names]
    lowest = (pl.concat_str(pl.lit("lowest metric: "), pl.lit(metrics).list.get(
        pl.concat_list([pl.col(m).fill_null(2.0) for m in metrics]).list.arg_min()))
        if metrics else pl.lit("low score"))
    return (
        pl.when(clamps.list.contains("empty_answer")).then(pl.lit("empty answer"))
        .when(invalid.list.len() > 0).then(pl.lit("cites a context never retrieved"))
        .when(uncited >= 5).then(pl.lit("five or more uncited claims"))
        .when(rubric.is_not_null()).then(pl.concat_str(pl.lit("missed rubric "), rubric))
        .when(first_miss.is_not_null()).then(pl.concat_str(pl.lit("missed: "), first_miss.str.slice(0, 80)))
        .when(clamps.list.len() > 0).then(pl.concat_str(pl.lit("clamped: "), clamps.list.sort().list.join(", ")))
        .when(present("reason", pl.lit(None, dtype=pl.String)).is_not_null()).then(pl.col("reason"))
        .otherwise(lowest)
    )


def failing_rule(measure: str) -> str:
    """Which rows fail ``measure``: ``verdict`` (the rates and the score) or a metric's name."""
    name, suffix = measure.rsplit("_", 1)
    return name if suffix == "mean" and name != "score" else "verdict"


def _failing(measure: str, borderline: float) -> tuple[pl.Expr, pl.Expr | None]:
    """Rows that fail ``measure`` (``pass_rate``, ``score_mean``, ``faithfulness_mean`` …), and the
    wider set used when none does (the borderline rows of a verdict measure)."""
    rule = failing_rule(measure)
    if rule != "verdict":
        return pl.col(rule) < borderline, None
    return pl.col("verdict") == "fail", pl.col("verdict") != "pass"


def read_prompts(calls: pl.LazyFrame | None, wanted: pl.DataFrame) -> dict[tuple[dt.date | None, str], dict[str, str]]:
    """The fenced blocks of each wanted record's judge call (any judge's: every judge fences the
    question and the answer), by (dt, record_id); ``wanted`` has ``record_id`` and, for several
    days, ``dt``. Records without a call are absent."""
    if calls is None or wanted.is_empty() or "user_prompt" not in calls.collect_schema():
        return {}
    on = [c for c in ("dt", "record_id") if c in wanted.columns]
    found = (calls.filter(pl.col("user_prompt").is_not_null()).join(wanted.lazy().select(on).unique(), on=on, how="semi")
             .select(*on, "judge", "user_prompt").sort(*on, "judge")
             .unique(on, keep="first", maintain_order=True).collect(engine="streaming"))
    return {(row.get("dt"), row["record_id"]): read_fenced_blocks(row["user_prompt"])
            for row in found.iter_rows(named=True)}


def asked(blocks: dict[str, str] | None) -> tuple[str | None, str | None]:
    """(question, answer) of a judge call's blocks: ``answer`` (rag, masis) or ``candidate_answer`` (prompt)."""
    if not blocks:
        return None, None
    return blocks.get("question"), blocks.get("answer", blocks.get("candidate_answer"))


def _contexts(blocks: dict[str, str] | None) -> str | None:
    if not blocks:
        return None
    text = blocks.get("context", blocks.get("evidence"))
    return shorten(text, CONTEXT_LIMIT) if text else None


def _judge_reasons(row: dict[str, Any]) -> list[str]:
    reasons = [shorten(str(t)) or "" for t in (row.get("reasoning"), row.get("reason")) if t]
    reasons += [f"miss: {shorten(m)}" for m in row.get("misses") or []]
    reasons += [f"invalid citation: {c}" for c in row.get("invalid_citations") or []]
    if (row.get("uncited_claim_count") or 0) > 0:
        reasons.append(f"uncited claims: {row['uncited_claim_count']}")
    return reasons


def _representatives(failing: pl.DataFrame) -> tuple[list[FailureReason], pl.DataFrame]:
    """The reasons by frequency (the top :data:`REASONS_SHOWN`), and the records shown: taken
    from those reasons in turn, lowest score first within each (Polars)."""
    counts = failing.group_by("failure_reason").len().sort(["len", "failure_reason"], descending=[True, False])
    top = counts.head(REASONS_SHOWN)
    reasons = [FailureReason(reason=r, count=int(n), share=n / failing.height) for r, n in top.iter_rows()]
    ranked = (failing.join(top.with_row_index("reason_rank").select("failure_reason", "reason_rank"), on="failure_reason")
              .sort("reason_rank", "score", "record_id")
              .with_columns(turn=pl.int_range(pl.len()).over("failure_reason"))
              .sort("turn", "reason_rank").head(RECORDS_SHOWN).sort("reason_rank", "turn"))
    return reasons, ranked


def _earlier(baseline: pl.LazyFrame | None, model: str, judge: str, keys: list[str]) -> pl.DataFrame:
    """The model's latest baseline-day row of the judge for each question key (ok rows)."""
    if baseline is None or not keys:
        return pl.DataFrame()
    return (baseline.filter((pl.col("model") == model) & (pl.col("judge") == judge) & (pl.col("judge_status") == "ok")
                            & pl.col("question_key").is_in(keys))
            .select("dt", "record_id", "question_key", "score", "verdict")
            .sort("dt", "record_id", descending=[True, False]).unique("question_key", keep="first", maintain_order=True)
            .collect())


@dataclass
class FailingSet:
    """The failing rows to show of a model (and segment) and judge: those failing ``measure``, which
    back each of ``measures``."""

    model: str
    judge: str
    measure: str
    measures: list[str]
    segment: Segment | None = None


def change_evidence(day: pl.LazyFrame, calls: pl.LazyFrame | None, baseline: pl.LazyFrame | None,
                    baseline_calls: pl.LazyFrame | None, change: FailingSet, borderline: float) -> Evidence:
    """The evidence of one alerting change: see the module docstring and docs/reports.md. ``day`` is
    the day's evaluations (of the change's segment, when it has one)."""
    schema = day.collect_schema()
    mine = day.filter((pl.col("model") == change.model) & (pl.col("judge") == change.judge)
                      & (pl.col("judge_status") == "ok"))
    strict, wider = _failing(change.measure, borderline)
    columns = [*(c for c in _COLUMNS if c in schema), failure_reason(schema).alias("failure_reason")]
    ok_rows, failing = pl.collect_all([mine.select(pl.len()), mine.filter(strict).select(columns)])
    if failing.is_empty() and wider is not None:
        failing = mine.filter(wider).select(columns).collect()
    out = Evidence(model=change.model, judge=change.judge, measure=change.measure, measures=change.measures,
                   segment=change.segment, failing=failing.height, ok_rows=int(ok_rows.item()), reasons=[], records=[])
    if failing.is_empty():
        return out
    out.reasons, shown = _representatives(failing)
    keys = [k for k in shown["question_key"].to_list() if k] if "question_key" in shown.columns else []
    earlier = _earlier(baseline, change.model, change.judge, keys)
    texts = read_prompts(calls, shown.select("record_id"))
    before_texts = read_prompts(baseline_calls, earlier.select("dt", "record_id")) if earlier.height else {}
    by_key = {row["question_key"]: row for row in earlier.iter_rows(named=True)}
    for row in shown.iter_rows(named=True):
        blocks = texts.get((None, row["record_id"]))
        question, answer = asked(blocks)
        before = by_key.get(row.get("question_key"))
        out.records.append(EvidenceRecord(
            record_id=row["record_id"], reason=row["failure_reason"], score=row["score"], verdict=row["verdict"],
            question=shorten(question, QUESTION_LIMIT), answer=shorten(answer), contexts=_contexts(blocks),
            judge_reasons=_judge_reasons(row), clamps_applied=list(row.get("clamps_applied") or []),
            earlier=None if before is None else Earlier(
                dt=before["dt"].isoformat(), record_id=before["record_id"], score=before["score"],
                verdict=before["verdict"],
                answer=shorten(asked(before_texts.get((before["dt"], before["record_id"])))[1]))))
    return out


def evidence_changes(lines: Sequence[HeadlineLine]) -> list[FailingSet]:
    """The changes of regressed headline lines (a model's, or a segment's) whose failing records
    to show: one entry per set of failing rows, the measures it backs listed together."""
    changes: dict[tuple[str, str, str], FailingSet] = {}
    for line in lines:
        segment = line.segment if isinstance(line, SegmentLine) else None
        for c in line.changes:
            entry = changes.setdefault((line.model, c.judge, failing_rule(c.measure)),
                                       FailingSet(line.model, c.judge, c.measure, [], segment))
            if c.measure not in entry.measures:
                entry.measures.append(c.measure)
    return list(changes.values())
