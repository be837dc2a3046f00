"""The ``masis`` judge (CONTRACT §2.3, seed 001's Evaluator fed by the Critic's deterministic
citation audit): the audit, its prompt, the reply it accepts, its parsing and its post-processing
over the parsed table. A missing or ``null`` dimension is a non-number, so a ``parse_error``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl
from pydantic import BaseModel, Field, ValidationError

from evaluation.contract.config import CitationAudit, InputRecord
from evaluation.judges.extract import Number, Strings
from evaluation.judges.rendering import DATA_RULES, RenderedPrompt, context_blocks, fill, prompt_version
from evaluation.judges.rounding import round_like_python
from evaluation.judges.row import ParsedRow, parse_error
from evaluation.judges.table import TableRules, divide, outside_unit
from evaluation.judges.verdicts import scored_rows

#: An answer sentence holding one of these is no uncited claim.
HEDGE_PHRASES = (
    "insufficient evidence", "not provided", "cannot provide", "lack sufficient evidence", "partially covers",
)
_CITATION = re.compile(r"\[(.*?)\]")
_ID_LIKE = re.compile(r"[A-Za-z0-9_.:/#-]{1,40}")  # what a context id looks like, nothing that reads as prose
_SENTENCE_SPLIT = re.compile(r"[.!?]")


def citation_audit(answer: str, context_ids: list[str]) -> CitationAudit:
    """The Critic's audit, computed in code before the call exactly as MASIS does (CONTRACT §2.3).

    Citations are the raw inner text of every non-greedy ``[...]`` on one line (no trim, no split
    on commas, duplicates kept); a citation is invalid unless it is exactly a context id. Sentences
    are the pieces between any ``.``, ``!`` or ``?`` (so ``e.g.`` and ``3.5`` split too, as in
    MASIS); an uncited claim is a non-blank sentence with no ``[`` and none of the hedge phrases.
    A hallucination is detected when there is an invalid citation.
    """
    citations = _CITATION.findall(answer)
    valid = set(context_ids)
    invalid = [c for c in citations if c not in valid]
    uncited = sum(
        1 for sentence in _SENTENCE_SPLIT.split(answer)
        if sentence.strip() and "[" not in sentence and not any(p in sentence.lower() for p in HEDGE_PHRASES)
    )
    return CitationAudit(citations=citations, invalid_citations=invalid, uncited_claim_count=uncited,
                         hallucination_detected=bool(invalid))


def _audit(record: InputRecord) -> CitationAudit:
    return citation_audit(record.answer, [c.id for c in record.contexts])


_MASIS_SYSTEM = """judge: masis
You are the Evaluator: an independent judge that scores a final answer on four dimensions \
(faithfulness, relevance, completeness, reasoning quality), each between 0 and 1.

""" + DATA_RULES

_MASIS_USER = """Question:
{question}

Answer:
{answer}

Evidence:
{evidence}

Score each dimension from 0 to 1:

Faithfulness:
1 = every claim directly supported by cited evidence
0.5 = partially supported
0 = unsupported

Relevance:
1 = fully answers user question
0.5 = partially answers
0 = does not address the question

Completeness:
1 = covers every aspect of the question
0.5 = covers some aspects
0 = covers none

Reasoning quality:
1 = clear, well-structured and logically sound
0.5 = understandable with gaps
0 = incoherent

Be strict. Do NOT default to 1.
Use the citation audit findings to calibrate Faithfulness accurately.

=== Citation Audit Results (from Critic) ===
- Invalid citation IDs found: {invalid_citations}
- Sentences with NO citation: {uncited_claim_count}
- Hallucination detected: {hallucination_detected}

IMPORTANT scoring rules:
- If uncited sentences >= 5, Faithfulness MUST be <= 0.5
- If uncited sentences >= 10, Faithfulness MUST be <= 0.3
- If hallucination_detected is True, Faithfulness MUST be <= 0.4
- If invalid citations exist, Faithfulness MUST be <= 0.4
- These are hard constraints — do not override them.

Return one JSON object: {{"faithfulness": <float>, "relevance": <float>, "completeness": <float>, \
"reasoning_quality": <float>, "overall_score": <float>, "improvement_suggestions": [<string>, ...]}}"""

MASIS_DIMENSIONS = ("faithfulness", "relevance", "completeness", "reasoning_quality")
#: The weights of the score, in the seed's order of addition.
MASIS_WEIGHTS = (("faithfulness", 0.35), ("relevance", 0.25), ("completeness", 0.25), ("reasoning_quality", 0.15))
PROMPT_VERSION = prompt_version("masis", _MASIS_SYSTEM, _MASIS_USER)


def render(record: InputRecord) -> RenderedPrompt:
    """Seed 001's Evaluator prompt: question, answer, evidence, the four rubrics, and the audit
    with its hard constraints."""
    audit = _audit(record)
    # The invalid ids are logged text too, and the audit line sits outside the data fences: an id-like
    # citation is shown as a JSON string, any other bracketed text only by its length (it is in the answer).
    shown = [c if _ID_LIKE.fullmatch(c) else f"<{len(c)} characters of answer text>" for c in audit.invalid_citations]
    invalid = json.dumps(shown) if shown else "None"
    user = fill(_MASIS_USER, {"question": record.question, "answer": record.answer, "evidence": context_blocks(record)},
                invalid_citations=invalid, uncited_claim_count=audit.uncited_claim_count,
                hallucination_detected=audit.hallucination_detected)
    return RenderedPrompt("masis", PROMPT_VERSION, _MASIS_SYSTEM, user, ("faithfulness",), reply_model=MasisReply)


class MasisReply(BaseModel):
    """Seed 001's Evaluator output as CONTRACT §2.3 reads it. Only a dimension can fail validation;
    the judge's own ``overall_score`` is ignored."""

    faithfulness: Number
    relevance: Number
    completeness: Number
    reasoning_quality: Number
    improvement_suggestions: Strings = Field(default_factory=list)


def fill_row(row: ParsedRow, record: InputRecord) -> None:
    """What every masis row carries, whatever the judge replied or failed to reply: the audit
    columns (CONTRACT §2.3)."""
    audit = _audit(record)
    row.update({"citations": audit.citations, "invalid_citations": audit.invalid_citations,
                "uncited_claim_count": audit.uncited_claim_count,
                "hallucination_detected": audit.hallucination_detected})


def parse(row: ParsedRow, reply: dict[str, Any] | None, record: InputRecord) -> ParsedRow:
    """CONTRACT §2.3 (1)–(2), object and types; scaling and clamps are :func:`table_rules`."""
    # CONTRACT §2.3 (1): no object → parse_error, all null
    if reply is None:
        return parse_error(row, "no judge JSON object")
    # CONTRACT §2.3 (2): a dimension that is not a number → parse_error
    try:
        judged = MasisReply.model_validate(reply)
    except ValidationError as error:
        failed = {str(detail["loc"][0]) for detail in error.errors()}
        bad = [dimension for dimension in MASIS_DIMENSIONS if dimension in failed]
        return parse_error(row, "not a number: " + ", ".join(bad))
    row.update({"faithfulness": judged.faithfulness, "relevance": judged.relevance,
                "completeness": judged.completeness, "reasoning_quality": judged.reasoning_quality,
                "improvement_suggestions": judged.improvement_suggestions})
    return row


def table_rules() -> TableRules:
    """CONTRACT §2.3 (2)–(4) over the parsed table. The four dimensions are not rounded."""
    values: dict[str, pl.Expr] = {}
    clamps: list[tuple[pl.Expr, str]] = []
    for dimension in MASIS_DIMENSIONS:
        # CONTRACT §2.3 (2): a value above 1 is divided by 100 (scale mismatch), then clamped to [0, 1]
        value = pl.col(dimension)
        scaled = pl.when(value > 1).then(divide(value, 100.0)).otherwise(value)
        clamps.append((value > 1, f"scale_100:{dimension}"))
        clamps.append((outside_unit(scaled), f"clamp_0_1:{dimension}"))
        values[dimension] = scaled.clip(0.0, 1.0)
    # CONTRACT §2.3 (3): faithfulness ≤ 0.4 if hallucination detected or any invalid citation;
    # ≤ 0.3 if uncited ≥ 10, else ≤ 0.5 if uncited ≥ 5
    flagged = pl.col("hallucination_detected").fill_null(False) | (pl.col("invalid_citations").list.len() > 0)
    uncited = pl.col("uncited_claim_count")
    over_citation_cap = flagged & (values["faithfulness"] > 0.4)
    capped = pl.when(over_citation_cap).then(pl.lit(0.4)).otherwise(values["faithfulness"])
    over_10_cap = (uncited >= 10) & (capped > 0.3)
    over_5_cap = (uncited >= 5) & (uncited < 10) & (capped > 0.5)
    clamps.append((over_citation_cap, "invalid_citation_cap_0.4:faithfulness"))
    clamps.append((over_10_cap, "uncited_ge_10_cap_0.3:faithfulness"))
    clamps.append((over_5_cap, "uncited_ge_5_cap_0.5:faithfulness"))
    values["faithfulness"] = (
        pl.when(over_10_cap).then(pl.lit(0.3)).when(over_5_cap).then(pl.lit(0.5)).otherwise(capped)
    )
    # CONTRACT §2.3 (4): score = round(0.35·faithfulness + 0.25·relevance + 0.25·completeness
    # + 0.15·reasoning_quality, 3); the judge's own overall_score is ignored
    (first, first_weight), *rest = MASIS_WEIGHTS
    total = sum((pl.col(dimension) * weight for dimension, weight in rest), pl.col(first) * first_weight)
    # CONTRACT §2.3 (5): the verdict is §2.5's, with no rule of its own
    return TableRules(scored=scored_rows("masis", "ok"), values=values, clamps=clamps,
                      score=round_like_python(total, 3))
