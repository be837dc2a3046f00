"""The ``prompt`` judge (CONTRACT §2.4, seed 002's PromptEvaluator): applicability, its prompts
(freeform and rubric mode), the replies it accepts, their parsing and the post-processing over the
parsed table.

Readings of the contract where it leaves room (the seed decides): freeform mode runs when
``expected_outcome`` is a non-blank string or the reference is not missing; rubric mode when
``rubrics`` is a non-empty list. Rubric hits/misses read ``"[id] description: reasoning"`` with the
check's reasoning stripped (``""`` when absent, and ``"not evaluated"`` for a rubric the judge left
out); they are not capped at four (seed 002 caps only freeform hits/misses).
"""

from __future__ import annotations

from typing import Annotated, Any

import polars as pl
from pydantic import BaseModel, BeforeValidator, Field, PlainValidator, ValidationError

from evaluation.contract.config import InputRecord, Rubric
from evaluation.judges.extract import Number, Text, strings
from evaluation.judges.rendering import DATA_RULES, RenderedPrompt, fill, prompt_version
from evaluation.judges.row import ParsedRow
from evaluation.judges.table import TableRules, outside_unit
from evaluation.judges.verdicts import scored_rows

_FREEFORM_SYSTEM = """judge: prompt/freeform
You are an impartial evaluator. Compare the candidate answer with the expected outcome and the \
reference answer. Respond with a single JSON object {"score": <number between 0 and 1>, \
"hits": [<at most four strings>], "misses": [<at most four strings>], "reasoning": <string>}.

""" + DATA_RULES

_FREEFORM_USER = """Expected outcome:
{expected_outcome}

Question:
{question}

Reference answer:
{reference_answer}

Candidate answer:
{candidate_answer}"""

_RUBRIC_SYSTEM = """judge: prompt/rubric
You are an impartial evaluator. Check the candidate answer against every rubric item. Respond \
with a single JSON object {"checks": [{"id": <rubric id>, "satisfied": <true or false>, \
"reasoning": <string>}, ...], "overall_reasoning": <string>} with one check per rubric item.

""" + DATA_RULES

_RUBRIC_USER = """Rubric items:
{rubrics}

Question:
{question}

Candidate answer:
{candidate_answer}"""

PROMPT_VERSION = prompt_version("prompt", _FREEFORM_SYSTEM, _FREEFORM_USER, _RUBRIC_SYSTEM, _RUBRIC_USER)


def prompt_mode(record: InputRecord) -> str | None:
    """CONTRACT §2.4: ``rubric`` for a record with rubrics, ``freeform`` for one with an expected
    outcome or a reference, None (the row is ``skipped``, ``not_applicable``) for any other."""
    if record.rubrics:
        return "rubric"
    has_outcome = record.expected_outcome is not None and record.expected_outcome.strip() != ""
    if has_outcome or not record.reference_missing:
        return "freeform"
    return None


def rubric_line(rubric_id: str, description: str, weight: float, required: bool) -> str:
    """CONTRACT §2.4: ``- [id] (REQUIRED) (weight: w): description``, REQUIRED only when required,
    the weight only when not 1, as itself: ``2`` for 2.0, the shortest exact repr otherwise."""
    parts = [f"- [{rubric_id}]"]
    if required:
        parts.append("(REQUIRED)")
    if weight != 1:
        value = float(weight)
        parts.append(f"(weight: {int(value) if value.is_integer() else repr(value)})")
    return " ".join(parts) + f": {description}"


def render(record: InputRecord) -> RenderedPrompt | None:
    """Seed 002's PromptEvaluator prompt (rubric or freeform mode); None when the judge does not apply."""
    mode = prompt_mode(record)
    if mode is None:
        return None
    if mode == "rubric":
        rubrics = "\n".join(rubric_line(r.id, r.description, r.weight, r.required) for r in record.rubrics or [])
        user = fill(_RUBRIC_USER, {"rubrics": rubrics, "question": record.question, "candidate_answer": record.answer})
        return RenderedPrompt("prompt", PROMPT_VERSION, _RUBRIC_SYSTEM, user, ("checks",), extra={"mode": "rubric"},
                              reply_model=RubricReply)
    user = fill(_FREEFORM_USER, {
        "expected_outcome": record.expected_outcome or "",
        "question": record.question,
        "reference_answer": "" if record.reference_missing else (record.reference or ""),
        "candidate_answer": record.answer,
    })
    return RenderedPrompt("prompt", PROMPT_VERSION, _FREEFORM_SYSTEM, user, ("score",), extra={"mode": "freeform"},
                          reply_model=FreeformReply)


_FirstFour = Annotated[list[str], PlainValidator(lambda value: strings(value, 4))]


class FreeformReply(BaseModel):
    """CONTRACT §2.4 freeform mode: ``{score, hits, misses, reasoning}``. Only the score can fail
    validation; hits and misses keep the non-blank string items, stripped, the first four."""

    score: Number
    hits: _FirstFour = Field(default_factory=list)
    misses: _FirstFour = Field(default_factory=list)
    reasoning: Text = None


def _checks_with_ids(value: object) -> list[object]:
    if not isinstance(value, list):
        raise ValueError("checks is not a list")
    return [check for check in value if isinstance(check, dict) and isinstance(check.get("id"), str)]


class RubricCheck(BaseModel):
    """One check of rubric mode; only ``satisfied: true`` satisfies."""

    id: str
    satisfied: Annotated[bool, PlainValidator(lambda value: value is True)] = False
    reasoning: Annotated[str, PlainValidator(lambda value: value.strip() if isinstance(value, str) else "")] = ""


class RubricReply(BaseModel):
    """CONTRACT §2.4 rubric mode: ``{checks: [{id, satisfied, reasoning}], overall_reasoning}``.
    Only ``checks`` not being a list fails validation; a check without a string id is ignored."""

    checks: Annotated[list[RubricCheck], BeforeValidator(_checks_with_ids)]
    overall_reasoning: Text = None


def fill_row(row: ParsedRow, record: InputRecord) -> None:
    """What every prompt row carries, whatever the reply: its mode."""
    row["rubric_mode"] = prompt_mode(record) == "rubric"


def _fallback(row: ParsedRow, reason: str) -> ParsedRow:
    """CONTRACT §2.4, seed 002's fallback: score 0, empty hits/misses, verdict fail (see
    :func:`table_rules`); ``parse_error`` tells a broken judge from a bad answer."""
    row.update({"judge_status": "parse_error", "score": 0.0, "hits": [], "misses": [], "reason": reason})
    return row


def parse(row: ParsedRow, reply: dict[str, Any] | None, record: InputRecord) -> ParsedRow:
    """CONTRACT §2.4, freeform or rubric mode; the freeform score stays unclamped for :func:`table_rules`."""
    # CONTRACT §2.4: no object (either mode), or checks not a list (rubric mode) → the fallback
    if reply is None:
        return _fallback(row, "no judge JSON object")
    if row["rubric_mode"]:
        try:
            checked = RubricReply.model_validate(reply)
        except ValidationError:
            return _fallback(row, "checks is not a list")
        row["reasoning"] = checked.overall_reasoning
        return grade_rubrics(row, record.rubrics or [], checked.checks)
    # CONTRACT §2.4 freeform: the score must be a number, else the fallback
    try:
        judged = FreeformReply.model_validate(reply)
    except ValidationError:
        return _fallback(row, "score is not a number")
    row.update({"score": judged.score, "hits": judged.hits, "misses": judged.misses, "reasoning": judged.reasoning})
    return row


def grade_rubrics(row: ParsedRow, rubrics: list[Rubric], checks: list[RubricCheck]) -> ParsedRow:
    """CONTRACT §2.4 rubric mode: the first check per rubric id counts, unknown ids are ignored, a
    rubric with no check is unsatisfied ("not evaluated"). The satisfied and the total weight are
    kept for :func:`table_rules`, which computes the score from them; hits and misses read
    ``"[id] description: reasoning"``."""
    first_checks = {each.id: each for each in reversed(checks)}
    total = satisfied_weight = 0.0
    hits: list[str] = []
    misses: list[str] = []
    required_unsatisfied = False
    for rubric in rubrics:
        total += rubric.weight
        check = first_checks.get(rubric.id)
        item = f"[{rubric.id}] {rubric.description}: {'not evaluated' if check is None else check.reasoning}"
        if check is not None and check.satisfied:
            satisfied_weight += rubric.weight
            hits.append(item)
        else:
            misses.append(item)
            required_unsatisfied = required_unsatisfied or rubric.required
    row.update({"rubric_weight_satisfied": satisfied_weight, "rubric_weight_total": total, "hits": hits,
                "misses": misses, "required_unsatisfied": required_unsatisfied})
    return row


def table_rules() -> TableRules:
    """CONTRACT §2.4 over the parsed table: the scored rows are the judge's replies and the
    fallback's zeros (never a call that did not return)."""
    score = pl.col("score")
    status = pl.col("judge_status")
    rubric = pl.col("rubric_mode").fill_null(False) & (status == "ok")
    satisfied, total = pl.col("rubric_weight_satisfied"), pl.col("rubric_weight_total")
    return TableRules(
        scored=scored_rows("prompt", "ok", "parse_error") & (score.is_not_null() | rubric),
        # CONTRACT §2.4 rubric mode: score = satisfied weight / total weight, 0 when the total is 0
        values={"score": pl.when(rubric).then(pl.when(total > 0).then(satisfied / total).otherwise(0.0))
                .otherwise(score)},
        # CONTRACT §2.4 freeform: the score clamped to [0, 1] (1.5 → 1.0, 85 → 1.0, −0.1 → 0.0), not rounded
        clamps=[(outside_unit(score), "clamp_0_1:score")],
        score=score.clip(0.0, 1.0),
        fails=[
            # CONTRACT §2.4 rubric mode: verdict fail if any required rubric is unsatisfied, else §2.5
            ((status == "ok") & pl.col("required_unsatisfied").fill_null(False), "required_rubric_fail:verdict"),
            # CONTRACT §2.4: the fallback's verdict is fail whatever the thresholds
            (status == "parse_error", None),
        ],
    )
