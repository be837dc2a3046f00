"""The row rules' first half (CONTRACT §1): one parsed log object flattened into typed-or-null
columns (:data:`ROW_SCHEMA`) plus ``problems``, the violations the flat columns cannot show (a
value of the wrong type, a blank required field, a context without text, a negative rubric
weight). The Great Expectations suite in :mod:`evaluation.storage.validation` turns the columns and
problems into accept / reject decisions; :mod:`evaluation.storage.ingest` reads the objects."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable
from typing import Any

import polars as pl

from evaluation.contract.adapters import type_name as _type_name

#: Columns and types of :attr:`IngestResult.rows` (one row per parsed record, filled by :func:`normalise`).
ROW_SCHEMA: dict[str, pl.DataType] = {
    "source_uri": pl.String(),
    "line_no": pl.Int64(),
    "record_id": pl.String(),
    "conversation_id": pl.String(),
    "timestamp": pl.Datetime("us", "UTC"),
    "timestamp_day": pl.String(),
    "model": pl.String(),
    "question": pl.String(),
    "answer": pl.String(),
    "contexts_json": pl.String(),
    "reference": pl.String(),
    "expected_outcome": pl.String(),
    "rubrics_json": pl.String(),
    "evaluation_goal": pl.String(),
    "metadata_json": pl.String(),
    "text_chars": pl.Int64(),
    "problems": pl.List(pl.String()),
    "raw": pl.String(),
}

# RFC 3339 date-time: the offset is mandatory; a space may replace "T" (RFC 3339 §5.6 note).
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII
)

def _encoder(default: Callable[[Any], Any] | None = None) -> Callable[[Any], str]:
    """``JSONEncoder(...).encode`` of a list or dict, with the C encoder built once.

    ``encode`` builds a new C encoder (and a closure) on every call, a third of the time it takes
    for a record's small contexts; this calls the very encoder ``encode`` would, so the text is
    the same. Normalised values come from JSON or Parquet: never circular, and non-finite floats
    are refused (ValueError), so the C encoder can skip both checks' slow paths.
    """
    encoder = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False, default=default)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator in this Python
        return encoder.encode
    iterencode = make(
        None,  # markers: no circular check
        encoder.default,
        json.encoder.encode_basestring,  # ensure_ascii=False
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )
    return lambda value: "".join(iterencode(value, 0))


_ENCODE = _encoder()
# Parquet structs may hold dates or bytes, which JSON has no type for: written as text.
_ENCODE_METADATA = _encoder(default=str)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


#: Strict JSON's decoder (CONTRACT §1, §2.1: no NaN, Infinity or -Infinity), for the logs' lines and
#: the judges' replies. Built once: json.loads with keyword arguments builds a new decoder on every call.
STRICT_JSON = json.JSONDecoder(parse_constant=_refuse_constant)


#: Longest value quoted inside a problem message.
_QUOTE_CHARS = 60


def is_number(value: object) -> bool:
    """An int or float that is not a boolean and is finite (CONTRACT §2.1): a context's score, a
    rubric's weight, a judge's reply value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int too large for a float
        return False


def _required_text(name: str, value: Any, problems: list[str]) -> str | None:
    if type(value) is str:
        return None if not value or value.isspace() else value
    if value is not None:
        problems.append(f"{name}: not a string (got {_type_name(value)})")
    return None


def _optional_text(name: str, value: Any, problems: list[str]) -> str | None:
    if value is None or type(value) is str:
        return value
    problems.append(f"{name}: not a string (got {_type_name(value)})")
    return None


def _timestamp(value: Any, problems: list[str]) -> dt.datetime | None:
    if value is None:
        return None
    if type(value) is str:
        if _RFC3339.match(value):
            try:
                return dt.datetime.fromisoformat(value.upper()).astimezone(dt.UTC)
            except ValueError:
                pass  # well-formed but impossible (month 13, second 60): reported below
        shown = value if len(value) <= _QUOTE_CHARS else value[:_QUOTE_CHARS] + "…"
        problems.append(f"timestamp: not RFC 3339: {shown!r}")
        return None
    if isinstance(value, dt.datetime):
        # Parquet timestamps without a time zone are UTC by contract.
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    problems.append(f"timestamp: not an RFC 3339 string or a timestamp (got {_type_name(value)})")
    return None


#: Normalises the ``index``-th object of a list: ``(index, object, problems)`` → (object, text length).
_ItemRule = Callable[[int, dict[str, Any], list[str]], tuple[dict[str, Any], int]]


def _object_list(
    field: str, value: Any, problems: list[str], item: _ItemRule, *, absent: str | None, text_items: bool = False
) -> tuple[str | None, int]:
    """JSON text of a list of objects, each normalised by ``item`` (``absent`` when the list is,
    null on any problem), and the text length ``item`` counted. With ``text_items``, an item may
    also be a plain string: it stands for ``{"text": item}``."""
    if value is None:
        return absent, 0
    if type(value) is not list:
        problems.append(f"{field}: not a list (got {_type_name(value)})")
        return None, 0
    chars = 0
    before = len(problems)
    items = []
    for index, obj in enumerate(value, start=1):
        if type(obj) is not dict:
            if not (text_items and type(obj) is str):
                problems.append(f"{field}: item {index} is not {'a string or ' if text_items else ''}an object")
                continue
            obj = {"text": obj}
        normalised, item_chars = item(index, obj, problems)
        items.append(normalised)
        chars += item_chars
    if len(problems) > before:
        return None, chars
    return _ENCODE(items), chars


def _context(index: int, item: dict[str, Any], problems: list[str]) -> tuple[dict[str, Any], int]:
    get = item.get
    text = get("text")
    if type(text) is not str:
        problems.append(f"contexts: item {index} has no string text")
    context_id = get("id")
    if context_id is None:
        context_id = f"ctx-{index}"
    elif type(context_id) is not str:
        problems.append(f"contexts: item {index} has a non-string id")
    source = get("source")
    if source is not None and type(source) is not str:
        problems.append(f"contexts: item {index} has a non-string source")
    score = get("score")
    if score is not None:
        if is_number(score):
            score = float(score)
        else:
            problems.append(f"contexts: item {index} has a non-numeric score")
    chars = len(text) if type(text) is str else 0
    return {"id": context_id, "text": text, "source": source, "score": score}, chars


def _rubric(index: int, item: dict[str, Any], problems: list[str]) -> tuple[dict[str, Any], int]:
    description = item.get("description")
    if type(description) is not str or not description or description.isspace():
        problems.append(f"rubrics: item {index} has no description")
    rubric_id = item.get("id")
    if rubric_id is None:
        rubric_id = f"rubric-{index}"
    elif type(rubric_id) is not str:
        problems.append(f"rubrics: item {index} has a non-string id")
    weight = item.get("weight")
    if weight is None:
        weight = 1.0
    elif not is_number(weight):
        problems.append(f"rubrics: item {index} has a non-numeric weight")
    elif weight < 0:
        problems.append(f"rubrics: item {index} has a negative weight")
    else:
        weight = float(weight)
    required = item.get("required")
    if required is None:
        required = True
    elif type(required) is not bool:
        problems.append(f"rubrics: item {index} has a non-boolean required")
    chars = len(description) if type(description) is str else 0
    return {"id": rubric_id, "description": description, "weight": weight, "required": required}, chars


def _metadata(value: Any, problems: list[str]) -> str | None:
    if value is None:
        return None
    if type(value) is not dict:
        problems.append(f"metadata: not an object (got {_type_name(value)})")
        return None
    try:
        return _ENCODE_METADATA(value)
    except ValueError:
        problems.append("metadata: holds a non-finite number")
    except RecursionError:
        problems.append("metadata: nesting too deep")
    return None


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """Flatten one parsed record into typed-or-null columns plus ``problems``.

    A required text field (record_id, model, question) that is missing, blank or not a string is
    null; ``answer`` must be a string (empty allowed). Wrong types, unparseable timestamps and
    broken contexts / rubrics / metadata add a message to ``problems``; a value that is simply
    missing or blank only shows as null, for the suite's not-null rules to report.

    Whether the timestamp falls on the day and whether ``text_chars`` fits ``max_record_chars``
    are expectations of the suite (:func:`evaluation.storage.validation.build_suite`), which alone decides.
    ``text_chars`` counts question, answer, context texts, reference, expected_outcome and rubric
    descriptions.
    """
    return dict(zip(NORMALISED_COLUMNS, normalised_values(obj), strict=True))


#: The columns :func:`normalise` fills, in order (ROW_SCHEMA without source_uri, line_no, raw).
NORMALISED_COLUMNS = tuple(name for name in ROW_SCHEMA if name not in ("source_uri", "line_no", "raw"))


def normalised_values(obj: dict[str, Any]) -> tuple[Any, ...]:
    """:func:`normalise` as a tuple in :data:`NORMALISED_COLUMNS` order: a batch is built by transposing
    these tuples in one C pass instead of appending to 15 lists per record."""
    problems: list[str] = []
    get = obj.get
    # Fields in contract order, so that problems read in the order of CONTRACT §1.
    record_id = _required_text("record_id", get("record_id"), problems)
    conversation_id = _optional_text("conversation_id", get("conversation_id"), problems)
    timestamp = _timestamp(get("timestamp"), problems)
    model = _required_text("model", get("model"), problems)
    question = get("question")
    question_chars = len(question) if type(question) is str else 0  # a blank question counts too
    question = _required_text("question", question, problems)
    answer = _optional_text("answer", get("answer"), problems)
    contexts_json, context_chars = _object_list(
        "contexts", get("contexts"), problems, _context, absent="[]", text_items=True
    )
    reference = _optional_text("reference", get("reference"), problems)
    expected_outcome = _optional_text("expected_outcome", get("expected_outcome"), problems)
    rubrics_json, rubric_chars = _object_list("rubrics", get("rubrics"), problems, _rubric, absent=None)
    evaluation_goal = _optional_text("evaluation_goal", get("evaluation_goal"), problems)
    metadata_json = _metadata(get("metadata"), problems)
    chars = question_chars + context_chars + rubric_chars
    chars += sum(len(text) for text in (answer, reference, expected_outcome) if text is not None)
    return (
        record_id,
        conversation_id,
        timestamp,
        None if timestamp is None else timestamp.date().isoformat(),
        model,
        question,
        answer,
        contexts_json,
        reference,
        expected_outcome,
        rubrics_json,
        evaluation_goal,
        metadata_json,
        chars,
        problems,
    )
