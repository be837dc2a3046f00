"""The three judges of CONTRACT §2, each in one module: ``rag`` (§2.2), ``masis`` (§2.3) and
``prompt`` (§2.4) hold their templates, rendering, reply model, parsing and post-processing over
the parsed table, each rule beside its contract reference. Shared beside them: JSON extraction
(:mod:`~evaluation.judges.extract`, §2.1), verdicts (:mod:`~evaluation.judges.verdicts`, §2.5),
Python-exact rounding for table code (:mod:`~evaluation.judges.rounding`), fenced prompts
(:mod:`~evaluation.judges.rendering`) and the table path (:mod:`~evaluation.judges.table`).

A judge turns one :class:`~evaluation.contract.config.InputRecord` into one rendered prompt (one LLM call)
and the judge's raw reply into a parsed row (:class:`ParsedRow`); :func:`route` decides which
records are sent at all (an empty answer, or a judge that does not apply, lands with no call); :func:`score_table` applies the
deterministic rules (clamps, scores, verdicts) to a whole table of parsed rows.
"""

from evaluation.contract.normalise import is_number
from evaluation.judges.dispatch import (
    PROMPT_VERSIONS,
    base_row,
    call_error_row,
    empty_answer_row,
    not_applicable_row,
    parse_reply,
    render,
    route,
    score_table,
)
from evaluation.judges.extract import extract_json_object
from evaluation.judges.masis import HEDGE_PHRASES, MASIS_DIMENSIONS, citation_audit
from evaluation.judges.prompt import prompt_mode, rubric_line
from evaluation.judges.rag import RAG_METRICS, normalise_goal
from evaluation.judges.rendering import PROBE_PROMPT, RenderedPrompt, fence_nonce, read_fenced_blocks
from evaluation.judges.row import ParsedRow
from evaluation.judges.verdicts import verdict

__all__ = [
    "HEDGE_PHRASES", "MASIS_DIMENSIONS", "PROBE_PROMPT", "PROMPT_VERSIONS", "ParsedRow", "RAG_METRICS",
    "RenderedPrompt", "base_row", "call_error_row", "citation_audit", "empty_answer_row", "extract_json_object",
    "fence_nonce", "is_number", "normalise_goal", "not_applicable_row", "parse_reply", "prompt_mode",
    "read_fenced_blocks", "render", "route", "rubric_line", "score_table", "verdict",
]
