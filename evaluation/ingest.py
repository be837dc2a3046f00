"""Ingest: raw log objects → parsed rows → flat, typed rows for validation (CONTRACT §1).

Nothing read here is ever lost. Every line of a ``.jsonl`` / ``.jsonl.gz`` object and every row of a
``.parquet`` object becomes either a parsed row or a :class:`Reject` carrying its raw text and
reasons; damage to a whole object (unsupported suffix, unreadable Parquet, truncated gzip) becomes
one reject for the object. :func:`normalise` then flattens each parsed object into typed-or-null
columns plus ``problems`` (violations the flat columns cannot show), which the Great Expectations
suite in :mod:`evaluation.validation` turns into accept / reject decisions.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import gzip
import io
import json
import logging
import math
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_RAW_CHARS",
    "ROW_SCHEMA",
    "IngestResult",
    "ObjectRows",
    "Reject",
    "ingest_objects",
    "normalise",
    "read_object",
    "truncate_raw",
]

logger = logging.getLogger(__name__)

#: Raw text kept in a reject; longer text is cut and the cut is stated in the text itself.
MAX_RAW_CHARS = 10_000
#: Decompressed bytes read from a gzip stream at a time.
_GZIP_CHUNK = 1 << 20
#: Longest value quoted inside a problem message.
_QUOTE_CHARS = 60

#: Columns and types of :attr:`IngestResult.rows` (one row per parsed record).
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
# A \uD800-\uDFFF escape; only lines holding one need the (slower) unpaired-surrogate check.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


class Reject(BaseModel):
    """One input record (or whole object) that will never be judged, with every reason why."""

    source_uri: str = Field(description="The object the record came from.")
    line_no: int | None = Field(
        default=None,
        description="1-based line (JSONL) or row (Parquet); null when the whole object is rejected.",
    )
    record_id: str | None = Field(default=None, description="The record's id, when it could be read.")
    raw: str = Field(
        description=f"The raw text, cut to {MAX_RAW_CHARS:,} chars with a `…[truncated N chars]` suffix."
    )
    reasons: list[str] = Field(min_length=1, description="Every rule the record breaks.")


@dataclass
class ObjectRows:
    """What one object yielded: parsed rows ``(line_no, object, raw text)`` and rejects.

    A dataclass, not a pydantic model: validating every parsed object again would double the
    cost of reading.
    """

    rows: list[tuple[int, dict[str, Any], str]] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)


class IngestResult(BaseModel):
    """Every input record of a batch of objects: normalised rows plus rejects.

    ``rows`` follows :data:`ROW_SCHEMA`, in input order (objects in the order given, lines in file
    order). ``raw`` is kept for every row because the validation suite, which runs later, decides
    which rows fail and their rejects must carry the raw text.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rows: pl.DataFrame = Field(description="One row per parsed record, columns of ROW_SCHEMA.")
    rejects: list[Reject] = Field(description="Lines and objects that could not be parsed.")
    objects: int = Field(default=0, description="How many objects were read.")

    @property
    def input_records(self) -> int:
        """Parsed rows plus ingest rejects (an object-level reject counts as one record)."""
        return self.rows.height + len(self.rejects)


def truncate_raw(raw: str) -> str:
    """``raw`` cut to :data:`MAX_RAW_CHARS`, stating how many chars were cut."""
    if len(raw) <= MAX_RAW_CHARS:
        return raw
    return f"{raw[:MAX_RAW_CHARS]}…[truncated {len(raw) - MAX_RAW_CHARS} chars]"


def _reject(source_uri: str, line_no: int | None, raw: str, *reasons: str, record_id: Any = None) -> Reject:
    return Reject(
        source_uri=source_uri,
        line_no=line_no,
        record_id=record_id if isinstance(record_id, str) else None,
        raw=truncate_raw(raw),
        reasons=list(reasons),
    )


# --------------------------------------------------------------------------------------------
# Reading objects
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    # Parsing allocates millions of small containers that all stay alive; the cyclic collector
    # would re-scan the growing heap again and again (about half the ingest time) for nothing:
    # parsed JSON holds no reference cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


# Built once: json.loads with keyword arguments builds a new decoder on every call. A number too
# large for a float (1e400 → inf) is caught where numbers are used (score, weight, metadata).
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
# Normalised values come from JSON or Parquet: never circular, and non-finite floats are refused
# before encoding, so the C encoder can skip both checks' slow paths.
_ENCODE = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False).encode
# Parquet structs may hold dates or bytes, which JSON has no type for: written as text.
_ENCODE_METADATA = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, default=str
).encode


def _json_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg}: column {exc.colno}"
    return str(exc)[:200]


def _has_unpaired_surrogate(obj: dict[str, Any]) -> bool:
    # json accepts "\ud800" on its own; such a string cannot be written as UTF-8 (Parquet) later.
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse_line(source_uri: str, line_no: int, line: str, check_surrogates: bool, out: ObjectRows) -> None:
    try:
        obj = _DECODER.decode(line)
    except RecursionError:
        out.rejects.append(_reject(source_uri, line_no, line, "not valid JSON: nesting too deep"))
        return
    except ValueError as exc:
        out.rejects.append(_reject(source_uri, line_no, line, f"not valid JSON: {_json_error(exc)}"))
        return
    if type(obj) is not dict:
        out.rejects.append(_reject(source_uri, line_no, line, "not a JSON object"))
    elif check_surrogates and _SURROGATE_ESCAPE.search(line) and _has_unpaired_surrogate(obj):
        out.rejects.append(
            _reject(
                source_uri,
                line_no,
                line,
                "invalid UTF-8: unpaired surrogate escape",
                record_id=obj.get("record_id"),
            )
        )
    else:
        out.rows.append((line_no, obj, line))


def _parse_block(source_uri: str, block: bytes, line_no: int, out: ObjectRows) -> int:
    """Parse the lines of ``block`` (split on b"\\n"); returns the number of the last line."""
    try:
        # One decode for the whole block is much faster than one per line; per line only on error.
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return _parse_lines_bytewise(source_uri, block, line_no, out)
    check_surrogates = _SURROGATE_ESCAPE.search(text) is not None
    for line in text.split("\n"):
        line_no += 1
        if line.endswith("\r"):
            line = line[:-1]
        if line_no == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if not line or line.isspace():
            continue
        _parse_line(source_uri, line_no, line, check_surrogates, out)
    return line_no


def _parse_lines_bytewise(source_uri: str, block: bytes, line_no: int, out: ObjectRows) -> int:
    """The slow path of :func:`_parse_block` for a block holding invalid UTF-8: line by line."""
    for item in block.split(b"\n"):
        try:
            item.decode("utf-8")
        except UnicodeDecodeError:
            line_no += 1
            text = item.decode("utf-8", errors="backslashreplace").removesuffix("\r")
            out.rejects.append(_reject(source_uri, line_no, text, "invalid UTF-8"))
            continue
        line_no = _parse_block(source_uri, item, line_no, out)
    return line_no


def _gzip_chunks(data: bytes) -> Iterator[bytes]:
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
        # read1, not read: read() keeps reading until it has the full size, and loses what it had
        # decompressed when the stream breaks off on the way.
        while chunk := stream.read1(_GZIP_CHUNK):
            yield chunk


def _read_jsonl_gzip(source_uri: str, data: bytes) -> ObjectRows:
    out = ObjectRows()
    pending = b""
    line_no = 0
    try:
        for chunk in _gzip_chunks(data):
            block = pending + chunk if pending else chunk
            cut = block.rfind(b"\n")
            if cut < 0:
                pending = block
                continue
            line_no = _parse_block(source_uri, block[:cut], line_no, out)
            pending = block[cut + 1 :]
    except (OSError, EOFError, zlib.error) as exc:
        # Lines completed before the damage are kept; the partial line after the last newline is
        # not parsed (it may be cut short) but stays as evidence in the object's reject.
        out.rejects.append(
            _reject(
                source_uri,
                None,
                pending.decode("utf-8", errors="backslashreplace"),
                f"truncated or corrupt gzip: {exc}",
            )
        )
        logger.warning("%s: truncated or corrupt gzip after line %d: %s", source_uri, line_no, exc)
        return out
    if pending:
        _parse_block(source_uri, pending, line_no, out)
    return out


def _read_parquet(source_uri: str, data: bytes) -> ObjectRows:
    out = ObjectRows()
    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except (Exception, pl.exceptions.PanicException) as exc:  # a Rust panic is a BaseException
        out.rejects.append(_reject(source_uri, None, "", f"unreadable Parquet: {str(exc)[:200]}"))
        logger.warning("%s: unreadable Parquet: %s", source_uri, exc)
        return out
    for index, row in enumerate(frame.iter_rows(named=True), start=1):
        out.rows.append((index, row, json.dumps(row, ensure_ascii=False, default=str)))
    return out


def read_object(source_uri: str, data: bytes) -> ObjectRows:
    """Parse one raw object by its suffix (``.jsonl``, ``.jsonl.gz``, ``.parquet``).

    JSONL lines are numbered from 1 (blank lines skipped, numbering kept); each line that is not
    UTF-8, not strict JSON, or not an object is a reject. A truncated or corrupt gzip keeps the
    lines decoded before the damage and adds one reject for the object (``line_no`` null). Parquet
    rows are numbered from 1; an unreadable Parquet, or any other suffix, is one reject.
    """
    name = source_uri.lower()
    with _gc_paused():
        if name.endswith(".jsonl.gz"):
            result = _read_jsonl_gzip(source_uri, data)
        elif name.endswith(".jsonl"):
            result = ObjectRows()
            _parse_block(source_uri, data, 0, result)
        elif name.endswith(".parquet"):
            result = _read_parquet(source_uri, data)
        else:
            result = ObjectRows(rejects=[_reject(source_uri, None, "", "unsupported object type")])
    logger.info("%s: %d rows, %d rejects", source_uri, len(result.rows), len(result.rejects))
    return result


# --------------------------------------------------------------------------------------------
# Normalising one parsed object
# --------------------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _quote(value: str) -> str:
    return repr(value if len(value) <= _QUOTE_CHARS else value[:_QUOTE_CHARS] + "…")


def _is_number(value: Any) -> bool:
    """An int or float that is not a boolean and is finite (CONTRACT §2.1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
        problems.append(f"timestamp: not RFC 3339: {_quote(value)}")
        return None
    if isinstance(value, dt.datetime):
        # Parquet timestamps without a time zone are UTC by contract.
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    problems.append(f"timestamp: not an RFC 3339 string or a timestamp (got {_type_name(value)})")
    return None


def _contexts(value: Any, problems: list[str]) -> tuple[str | None, int]:
    """JSON text of the normalised contexts (null on any problem) and their text length."""
    if value is None:
        return "[]", 0
    if type(value) is not list:
        problems.append(f"contexts: not a list (got {_type_name(value)})")
        return None, 0
    chars = 0
    before = len(problems)
    items = []
    for index, item in enumerate(value, start=1):
        if type(item) is not dict:
            problems.append(f"contexts: item {index} is not an object")
            continue
        get = item.get
        text = get("text")
        if type(text) is str:
            chars += len(text)
        else:
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
            if _is_number(score):
                score = float(score)
            else:
                problems.append(f"contexts: item {index} has a non-numeric score")
        items.append({"id": context_id, "text": text, "source": source, "score": score})
    if len(problems) > before:
        return None, chars
    return _ENCODE(items), chars


def _rubrics(value: Any, problems: list[str]) -> tuple[str | None, int]:
    """JSON text of the normalised rubrics (null when absent or on any problem), description length."""
    if value is None:
        return None, 0
    if type(value) is not list:
        problems.append(f"rubrics: not a list (got {_type_name(value)})")
        return None, 0
    chars = 0
    before = len(problems)
    items = []
    for index, item in enumerate(value, start=1):
        if type(item) is not dict:
            problems.append(f"rubrics: item {index} is not an object")
            continue
        description = item.get("description")
        if type(description) is str:
            chars += len(description)
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
        elif not _is_number(weight):
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
        items.append({"id": rubric_id, "description": description, "weight": weight, "required": required})
    if len(problems) > before:
        return None, chars
    return _ENCODE(items), chars


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


def normalise(
    obj: dict[str, Any], day: dt.date | None = None, max_record_chars: int | None = None
) -> dict[str, Any]:
    """Flatten one parsed record into typed-or-null columns plus ``problems``.

    A required text field (record_id, model, question) that is missing, blank or not a string is
    null; ``answer`` must be a string (empty allowed). Wrong types, unparseable timestamps and
    broken contexts / rubrics / metadata add a message to ``problems``; a value that is simply
    missing or blank only shows as null, for the suite's not-null rules to report.

    ``day`` and ``max_record_chars`` are accepted so callers pass the run's settings in one place,
    but are not applied here: whether the timestamp falls on the day and whether ``text_chars``
    fits are expectations of the suite (:func:`evaluation.validation.build_suite`), which alone
    decides. ``text_chars`` counts question, answer, context texts, reference, expected_outcome
    and rubric descriptions.
    """
    del day, max_record_chars  # decided by the validation suite, see the docstring
    problems: list[str] = []
    get = obj.get
    # Fields in contract order, so that problems read in the order of CONTRACT §1.
    record_id = _required_text("record_id", get("record_id"), problems)
    conversation_id = _optional_text("conversation_id", get("conversation_id"), problems)
    timestamp = _timestamp(get("timestamp"), problems)
    model = _required_text("model", get("model"), problems)
    question = get("question")
    chars = len(question) if type(question) is str else 0
    question = _required_text("question", question, problems)
    answer = get("answer")
    if type(answer) is str:
        chars += len(answer)
    elif answer is not None:
        problems.append(f"answer: not a string (got {_type_name(answer)})")
        answer = None
    contexts_json, context_chars = _contexts(get("contexts"), problems)
    reference = _optional_text("reference", get("reference"), problems)
    expected_outcome = _optional_text("expected_outcome", get("expected_outcome"), problems)
    rubrics_json, rubric_chars = _rubrics(get("rubrics"), problems)
    evaluation_goal = _optional_text("evaluation_goal", get("evaluation_goal"), problems)
    metadata_json = _metadata(get("metadata"), problems)
    if reference is not None:
        chars += len(reference)
    if expected_outcome is not None:
        chars += len(expected_outcome)
    return {
        "record_id": record_id,
        "conversation_id": conversation_id,
        "timestamp": timestamp,
        "timestamp_day": None if timestamp is None else timestamp.date().isoformat(),
        "model": model,
        "question": question,
        "answer": answer,
        "contexts_json": contexts_json,
        "reference": reference,
        "expected_outcome": expected_outcome,
        "rubrics_json": rubrics_json,
        "evaluation_goal": evaluation_goal,
        "metadata_json": metadata_json,
        "text_chars": chars + context_chars + rubric_chars,
        "problems": problems,
    }


# --------------------------------------------------------------------------------------------
# A batch of objects
# --------------------------------------------------------------------------------------------


def _frame(columns: dict[str, list[Any]]) -> pl.DataFrame:
    # pyarrow converts aware datetimes and nested lists in one C pass; Polars goes object by
    # object there (10-50x slower). Plain strings and ints are fastest through Polars.
    arrow_types = {"timestamp": pa.timestamp("us", "UTC"), "problems": pa.large_list(pa.large_string())}
    series = []
    for name, dtype in ROW_SCHEMA.items():
        if name in arrow_types:
            series.append(pl.Series(name, pa.array(columns[name], type=arrow_types[name])).cast(dtype))
        else:
            series.append(pl.Series(name, columns[name], dtype=dtype))
    return pl.DataFrame(series)


def ingest_objects(
    objects: Iterable[tuple[str, bytes]], day: dt.date, *, max_record_chars: int = 200_000
) -> IngestResult:
    """Read and normalise every object of a batch, given as ``(source_uri, bytes)`` pairs.

    Pass objects in key order: the order decides which of two rows with the same record_id comes
    first (the first is kept).
    """
    columns: dict[str, list[Any]] = {name: [] for name in ROW_SCHEMA}
    normalised = [
        (name, columns[name]) for name in ROW_SCHEMA if name not in ("source_uri", "line_no", "raw")
    ]
    source_uris, line_nos, raws = columns["source_uri"], columns["line_no"], columns["raw"]
    rejects: list[Reject] = []
    count = 0
    with _gc_paused():
        for source_uri, data in objects:
            count += 1
            parsed = read_object(source_uri, data)
            rejects.extend(parsed.rejects)
            for line_no, obj, raw in parsed.rows:
                row = normalise(obj, day, max_record_chars)
                for name, values in normalised:
                    values.append(row[name])
                source_uris.append(source_uri)
                line_nos.append(line_no)
                raws.append(raw)
            del parsed
        frame = _frame(columns)
    logger.info("ingested %s: %d objects, %d rows, %d rejects", day, count, frame.height, len(rejects))
    return IngestResult(rows=frame, rejects=rejects, objects=count)
