"""The typed parsed row (:class:`evaluation.judges.ParsedRow`) against ``PARSED_SCHEMA``: the same
columns with the same types, and the judges' rows carry no key the type does not name."""

from __future__ import annotations

import datetime as dt
import json
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import polars as pl
import pytest

from evaluation.contract.config import InputRecord, JudgeName
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import ParsedRow, call_error_row, not_applicable_row, parse_reply
from tests.factories import make_record

_HINTS = get_type_hints(ParsedRow)
_SCALARS: dict[object, Any] = {
    str: pl.String, float: pl.Float64, int: pl.Int64, bool: pl.Boolean, dt.datetime: pl.Datetime("us", "UTC"),
}


def _dtype(annotation: object) -> Any:
    """The Polars dtype of a column annotated ``annotation`` (every column is nullable, so ``| None``
    changes nothing)."""
    args = [arg for arg in get_args(annotation) if arg is not type(None)]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        (only,) = args
        return _dtype(only)
    if origin is Literal:
        assert all(isinstance(arg, str) for arg in args)
        return pl.String
    if origin is list:
        return pl.List(_dtype(args[0]))
    return _SCALARS[annotation]


def test_parsed_row_has_the_columns_of_parsed_schema() -> None:
    assert list(_HINTS) == list(PARSED_SCHEMA)


@pytest.mark.parametrize("column", list(PARSED_SCHEMA))
def test_parsed_row_types_are_the_schema_dtypes(column: str) -> None:
    assert column in _HINTS
    assert _dtype(_HINTS[column]) == PARSED_SCHEMA[column]


_RUBRICS = [{"id": "r1", "description": "d", "required": True}, {"id": "r2", "description": "e"}]
_VALID_REPLIES: list[tuple[JudgeName, dict[str, Any], str]] = [
    ("rag", {}, json.dumps({"evaluation_status": "success", "faithfulness": 0.9, "context_relevance": 0.8,
                            "answer_relevance": 0.7, "semantic_similarity": 0.6, "faithfulness_explanation": "ok"})),
    ("rag", {}, json.dumps({"evaluation_status": "failed", "reason": "empty", "error": "x"})),
    ("masis", {}, json.dumps({"faithfulness": 0.9, "relevance": 80, "completeness": 0.5, "reasoning_quality": 1,
                              "improvement_suggestions": ["cite more"]})),
    ("prompt", {}, json.dumps({"score": 0.5, "hits": ["a"], "misses": ["b"], "reasoning": "fine"})),
    ("prompt", {"rubrics": _RUBRICS}, json.dumps({"checks": [{"id": "r1", "satisfied": True, "reasoning": "yes"}],
                                                  "overall_reasoning": "overall"})),
]


def _rows() -> list[Any]:
    rows = []
    for judge, overrides, reply in _VALID_REPLIES:
        record: InputRecord = make_record(**overrides)
        rows.append(pytest.param(parse_reply(judge, record, reply), id=f"{judge}-reply"))
        rows.append(pytest.param(parse_reply(judge, record, "no json"), id=f"{judge}-parse-error"))
        rows.append(pytest.param(parse_reply(judge, record, '{"faithfulness": "high", "score": "high"}'),
                                 id=f"{judge}-not-a-number"))
        rows.append(pytest.param(not_applicable_row(judge, record), id=f"{judge}-not-applicable"))
        rows.append(pytest.param(call_error_row(judge, record, "Timeout: retries exhausted"), id=f"{judge}-call-error"))
    return rows


@pytest.mark.parametrize("row", _rows())
def test_judges_rows_carry_only_parsed_row_keys(row: ParsedRow) -> None:
    assert set(row) <= set(_HINTS)
    assert ParsedRow.__required_keys__ <= set(row)
