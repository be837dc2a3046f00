"""Ingest: raw log objects → parsed rows → flat, typed rows for validation (CONTRACT §1).

Nothing read here is ever lost. Every line of a ``.jsonl`` / ``.jsonl.gz`` object and every row of a
``.parquet`` object becomes either a parsed row or a :class:`Reject` carrying its raw text and
reasons; damage to a whole object (unsupported suffix, unreadable Parquet, truncated gzip) becomes
one reject for the object. :func:`evaluation.contract.normalise.normalise` then flattens each parsed object
for the Great Expectations suite of :mod:`evaluation.storage.validation`.

A day is read as a stream of bounded batches (:func:`ingest_batches`): memory follows the batch,
not the day.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import gc
import gzip
import io
import itertools
import json
import logging
import os
import re
import sys
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypeAlias, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from evaluation.contract.adapters import InputAdapter
from evaluation.contract.normalise import NORMALISED_COLUMNS, ROW_SCHEMA, STRICT_JSON, normalised_values
from evaluation.storage import RAW_SUFFIXES

__all__ = [
    "BATCH_ROWS",
    "MAX_RAW_CHARS",
    "ROW_SCHEMA",
    "IngestResult",
    "ObjectRows",
    "ObjectSource",
    "ParsedRow",
    "Reject",
    "ingest_batches",
    "ingest_objects",
    "iter_object",
    "read_object",
    "truncate_raw",
]

logger = logging.getLogger(__name__)

#: Raw text kept in a reject; longer text is cut and the cut is stated in the text itself.
MAX_RAW_CHARS = 10_000
#: Input records (parsed rows plus rejects) per batch of :func:`ingest_batches`.
BATCH_ROWS = 50_000
#: Bytes read from a JSONL stream (decompressed bytes, for gzip) at a time.
_READ_CHUNK = 1 << 20
#: Rows converted from a Parquet object at a time.
_PARQUET_BATCH = 10_000
#: What a damaged gzip stream raises while it is read.
_GZIP_ERRORS = (OSError, EOFError, zlib.error)
#: Objects holding one JSON document each (LiteLLM's payloads, OTLP JSON exports); a ``.json``
#: object that is not one document is read as JSON lines.
DOCUMENT_SUFFIXES = (".json", ".json.gz")
#: Every suffix :func:`iter_object` reads.
READ_SUFFIXES = RAW_SUFFIXES + DOCUMENT_SUFFIXES
#: How the reason of an object that could not be read to its end starts: the records after the
#: damage are lost, and how many is unknown, so such an object fails the day (a table rule).
DAMAGED = "object damaged"
#: Hints for records of another shape read as the project's own: (keys that all mark it, format).
_SHAPE_HINTS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("call_type", "startTime", "messages"), "litellm"),
    (("resourceSpans",), "otel"),
    (("messages",), "openai-chat"),
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

    @classmethod
    def of(cls, source_uri: str, line_no: int | None, raw: str, *reasons: str, record_id: Any = None) -> Reject:
        """A reject of ``raw`` (cut by :func:`truncate_raw`); ``record_id`` kept when it is a string."""
        return cls(source_uri=source_uri, line_no=line_no, record_id=record_id if isinstance(record_id, str) else None,
                   raw=truncate_raw(raw), reasons=list(reasons))


#: One parsed record: ``(line_no, object, raw text)``.
ParsedRow: TypeAlias = tuple[int, dict[str, Any], str]
#: An object's content: its bytes, a local path, or a binary file object.
ObjectSource: TypeAlias = bytes | str | os.PathLike[str] | BinaryIO


@dataclass
class ObjectRows:
    """What one object yielded: parsed rows ``(line_no, object, raw text)`` and rejects.

    A dataclass, not a pydantic model: validating every parsed object again would double the
    cost of reading.
    """

    rows: list[ParsedRow] = field(default_factory=list)
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
    objects: int = Field(default=0, description="How many objects were read (first opened, for a batch).")
    skipped: dict[str, int] = Field(
        default_factory=dict, description="Parsed objects that are not records to judge, by why (a failed call, "
        "an embedding call, ...): counted, neither judged nor rejected.")
    damaged: list[str] = Field(
        default_factory=list, description="The reasons of objects that could not be read to their end.")

    @property
    def input_records(self) -> int:
        """Parsed rows plus ingest rejects (an object-level reject counts as one record)."""
        return self.rows.height + len(self.rejects)


def truncate_raw(raw: str) -> str:
    """``raw`` cut to :data:`MAX_RAW_CHARS`, stating how many chars were cut."""
    if len(raw) <= MAX_RAW_CHARS:
        return raw
    return f"{raw[:MAX_RAW_CHARS]}…[truncated {len(raw) - MAX_RAW_CHARS} chars]"


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


# A number too large for a float (1e400 → inf) is caught where numbers are used (score, weight, metadata).
_RAW_DECODE = STRICT_JSON.raw_decode


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


def _decode(line: str) -> Any:
    # raw_decode skips decode()'s two whitespace scans (a third of its time); a line it does not
    # parse whole is decoded again by decode(), whose result or error is the one that counts.
    try:
        obj, end = _RAW_DECODE(line)
        if end == len(line):
            return obj
    except (ValueError, RecursionError):
        pass
    return STRICT_JSON.decode(line)


def _parse_line(source_uri: str, line_no: int, line: str, check_surrogates: bool) -> ParsedRow | Reject:
    try:
        obj = _decode(line)
    except RecursionError:
        return Reject.of(source_uri, line_no, line, "not valid JSON: nesting too deep")
    except ValueError as exc:
        return Reject.of(source_uri, line_no, line, f"not valid JSON: {_json_error(exc)}")
    if type(obj) is not dict:
        return Reject.of(source_uri, line_no, line, "not a JSON object")
    if check_surrogates and _SURROGATE_ESCAPE.search(line) and _has_unpaired_surrogate(obj):
        return Reject.of(source_uri, line_no, line, "invalid UTF-8: unpaired surrogate escape",
                         record_id=obj.get("record_id"))
    return (line_no, obj, line)


def _parse_block(source_uri: str, block: bytes, line_no: int) -> Generator[ParsedRow | Reject, None, int]:
    """Parse the lines of ``block`` (split on b"\\n"); returns the number of the last line."""
    try:
        # One decode for the whole block is much faster than one per line; per line only on error.
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        return (yield from _parse_lines_bytewise(source_uri, block, line_no))
    check_surrogates = _SURROGATE_ESCAPE.search(text) is not None
    for line in text.split("\n"):
        line_no += 1
        if line.endswith("\r"):
            line = line[:-1]
        if line_no == 1 and line.startswith("\ufeff"):
            line = line[1:]
        if not line or line.isspace():
            continue
        yield _parse_line(source_uri, line_no, line, check_surrogates)
    return line_no


def _parse_lines_bytewise(
    source_uri: str, block: bytes, line_no: int
) -> Generator[ParsedRow | Reject, None, int]:
    """The slow path of :func:`_parse_block` for a block holding invalid UTF-8: line by line."""
    for item in block.split(b"\n"):
        try:
            item.decode("utf-8")
        except UnicodeDecodeError:
            line_no += 1
            text = item.decode("utf-8", errors="backslashreplace").removesuffix("\r")
            yield Reject.of(source_uri, line_no, text, "invalid UTF-8")
            continue
        line_no = yield from _parse_block(source_uri, item, line_no)
    return line_no


def _iter_jsonl(source_uri: str, stream: BinaryIO, *, gzipped: bool) -> Iterator[ParsedRow | Reject]:
    """The lines of a JSONL stream, read :data:`_READ_CHUNK` bytes at a time (memory follows the
    longest line, not the object). A gzip stream that breaks off keeps the lines before the damage
    and ends with one reject for the object."""
    with contextlib.ExitStack() as stack:
        if gzipped:
            decompressed = stack.enter_context(gzip.GzipFile(fileobj=stream))  # leaves `stream` open
            # read1, not read: read() keeps reading until it has the full size, and loses what it
            # had decompressed when the stream breaks off on the way.
            read = functools.partial(decompressed.read1, _READ_CHUNK)
        else:
            read = functools.partial(stream.read, _READ_CHUNK)
        pending: list[bytes] = []  # the start of a line that has not ended yet
        line_no = 0
        while True:
            try:
                chunk = read()
            except _GZIP_ERRORS as exc:
                if not gzipped:
                    raise
                # The partial line after the last newline is not parsed (it may be cut short) but
                # stays as evidence in the object's reject.
                raw = b"".join(pending).decode("utf-8", errors="backslashreplace")
                reason = _damage(source_uri, stream, line_no, len(raw.encode("utf-8", "surrogateescape")), exc)
                yield Reject.of(source_uri, line_no + 1, raw, reason)
                logger.warning("%s", reason)
                return
            if not chunk:
                break
            cut = chunk.rfind(b"\n")
            if cut < 0:
                pending.append(chunk)
                continue
            block = b"".join([*pending, chunk[:cut]]) if pending else chunk[:cut]
            pending = [chunk[cut + 1 :]] if cut + 1 < len(chunk) else []
            line_no = yield from _parse_block(source_uri, block, line_no)
        if pending:
            yield from _parse_block(source_uri, b"".join(pending), line_no)


def _damage(source_uri: str, stream: BinaryIO, line_no: int, cut: int, exc: BaseException) -> str:
    """The reason of a gzip object that breaks off: the object, the last line read, and what was
    not read (the bytes of the line cut short, and the compressed bytes after the damage)."""
    unread = ""
    with contextlib.suppress(OSError, ValueError):
        position = stream.tell()
        size = stream.seek(0, os.SEEK_END)
        unread = f", {size - position:,} of its {size:,} compressed bytes unread" if size > position else ""
    last = f"line {line_no} (the last read whole)" if line_no else "its first line"
    return (f"{DAMAGED}: {source_uri} is a truncated or corrupt gzip: read up to {last}; the {cut:,} "
            f"decompressed bytes after it and everything the object held beyond them were not read{unread} ({exc})")


def _iter_document(source_uri: str, stream: BinaryIO) -> Iterator[ParsedRow | Reject]:
    """A ``.json`` object: one JSON document (line 1), as LiteLLM and the OpenTelemetry collector
    write them, pretty-printed or not; anything else is read as JSON lines."""
    data = stream.read()
    try:
        text = data.decode("utf-8")
        obj = STRICT_JSON.decode(text.lstrip("\ufeff"))
    except (ValueError, RecursionError):
        obj = None
    if type(obj) is dict:
        yield (1, obj, text)
        return
    yield from _parse_block(source_uri, data, 0)


def _iter_parquet(source_uri: str, stream: BinaryIO) -> Iterator[ParsedRow | Reject]:
    """The rows of a Parquet object, :data:`_PARQUET_BATCH` at a time (row group by row group).

    An object that cannot be opened is one reject; one that breaks part way keeps the rows read
    before the damage and ends with one reject for the object (as a truncated gzip does)."""
    index = 0
    try:
        batches = pq.ParquetFile(stream).iter_batches(batch_size=_PARQUET_BATCH)
        for batch in batches:
            # Through Polars, as before streaming: the same Python values (time zones, structs).
            frame = cast(pl.DataFrame, pl.from_arrow(batch))
            for row in frame.iter_rows(named=True):
                index += 1
                yield (index, row, json.dumps(row, ensure_ascii=False, default=str))
    except (Exception, pl.exceptions.PanicException) as exc:  # a Rust panic is a BaseException
        reason = "unreadable Parquet" if index == 0 else f"{DAMAGED}: unreadable Parquet after row {index}"
        yield Reject.of(source_uri, None, "", f"{reason}: {str(exc)[:200]}")
        logger.warning("%s: unreadable Parquet after row %d: %s", source_uri, index, exc)


def iter_object(source_uri: str, source: ObjectSource) -> Iterator[ParsedRow | Reject]:
    """Parse one raw object by its suffix (``.jsonl``, ``.jsonl.gz``, ``.parquet``), streaming.

    Yields ``(line_no, object, raw text)`` for each parsed record and a :class:`Reject` for each
    line or object that cannot be parsed, in input order. ``source`` is the object's bytes, a
    local path or a binary file object (read from its current position, left open); memory
    follows one read block and the longest line (JSONL) or one row group (Parquet).

    JSONL lines are numbered from 1 (blank lines skipped, numbering kept); each line that is not
    UTF-8, not strict JSON, or not an object is a reject. A truncated or corrupt gzip keeps the
    lines decoded before the damage and adds one reject for the object (``line_no`` null). Parquet
    rows are numbered from 1; an unreadable Parquet, or any other suffix, is one reject.
    """
    name = source_uri.lower()
    if not name.endswith(READ_SUFFIXES):
        yield Reject.of(source_uri, None, "", "unsupported object type")
        return
    with contextlib.ExitStack() as stack:
        if isinstance(source, (bytes, bytearray, memoryview)):
            stream: BinaryIO = io.BytesIO(source)
        elif isinstance(source, (str, os.PathLike)):
            stream = stack.enter_context(open(source, "rb"))
        else:
            stream = source
        if name.endswith(".parquet"):
            yield from _iter_parquet(source_uri, stream)
        elif name.endswith(".json"):
            yield from _iter_document(source_uri, stream)
        else:
            yield from _iter_jsonl(source_uri, stream, gzipped=name.endswith(".gz"))


def read_object(source_uri: str, data: ObjectSource) -> ObjectRows:
    """Every item of :func:`iter_object` for one object, collected: parsed rows and rejects."""
    result = ObjectRows()
    with _gc_paused():
        for _, item in _ObjectItems([(source_uri, data)]):
            if type(item) is tuple:
                result.rows.append(item)
            else:
                result.rejects.append(item)  # type: ignore[arg-type]
    return result


# --------------------------------------------------------------------------------------------
# Batches of objects
# --------------------------------------------------------------------------------------------


def _frame(columns: dict[str, list[Any]]) -> pl.DataFrame:
    # pyarrow converts aware datetimes and nested lists in one C pass; Polars goes object by
    # object there (10-50x slower). Plain strings and ints are fastest through Polars.
    arrow_types = {"timestamp": pa.timestamp("us", "UTC"), "problems": pa.large_list(pa.large_string())}
    return pl.DataFrame([pl.Series(name, pa.array(columns[name], type=arrow_types[name])).cast(dtype)
                         if name in arrow_types else pl.Series(name, columns[name], dtype=dtype)
                         for name, dtype in ROW_SCHEMA.items()])


class _ObjectItems:
    """The items of every object in turn, ``(source_uri, item)``, counting the objects opened."""

    def __init__(self, objects: Iterable[tuple[str, ObjectSource]]) -> None:
        self.opened = 0
        self.objects = objects

    def __iter__(self) -> Iterator[tuple[str, ParsedRow | Reject]]:
        for source_uri, source in self.objects:
            self.opened += 1
            rows = rejects = 0
            for item in iter_object(source_uri, source):
                if type(item) is tuple:
                    rows += 1
                else:
                    rejects += 1
                yield source_uri, item
            logger.debug("%s: %d rows, %d rejects", source_uri, rows, rejects)


def _hinted(obj: dict[str, Any], values: tuple[Any, ...]) -> tuple[Any, ...]:
    """An own record's values, with a hint naming the input format when the record has no
    question but has the shape of another format's."""
    if "question" not in obj and "record_id" not in obj:
        for keys, input_format in _SHAPE_HINTS:
            if all(key in obj for key in keys):
                values[-1].append(f"{keys[0]}: the record looks like the {input_format} format: read it with "
                                  f"--input-format {input_format}")
                break
    return values


def _adapted_values(adapter: InputAdapter | None, obj: dict[str, Any]) -> tuple[Any, ...]:
    if adapter is None:
        return _hinted(obj, normalised_values(obj))
    record, problems = adapter.adapt(obj)
    values = normalised_values(record)
    values[-1].extend(problems)  # the problems list is the last column
    return values


#: Turns a day's items into the items of its records (traces into one record per answer).
Assembler: TypeAlias = Callable[[Iterator[tuple[str, "ParsedRow | Reject"]]], Iterator[tuple[str, "ParsedRow | Reject"]]]


@dataclass
class _Batch:
    """A batch being filled."""

    values: list[tuple[Any, ...]] = field(default_factory=list)
    source_uris: list[str] = field(default_factory=list)
    line_nos: list[int] = field(default_factory=list)
    raws: list[str] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)

    def add(self, source_uri: str, item: ParsedRow | Reject, adapter: InputAdapter | None) -> None:
        if type(item) is not tuple:
            reject = cast(Reject, item)
            self.rejects.append(reject)
            if reject.reasons[0].startswith(DAMAGED):
                self.damaged.append(reject.reasons[0])
            return
        line_no, obj, raw = item
        skip = adapter.skip(obj) if adapter is not None else None
        if skip is not None:
            self.skipped[skip] = self.skipped.get(skip, 0) + 1
            return
        self.values.append(_adapted_values(adapter, obj))
        self.source_uris.append(source_uri)
        self.line_nos.append(line_no)
        self.raws.append(raw)

    def result(self, objects: int) -> IngestResult:
        columns: dict[str, list[Any]] = {name: [] for name in NORMALISED_COLUMNS}
        columns.update(zip(NORMALISED_COLUMNS, map(list, zip(*self.values, strict=True)), strict=False))  # none with no rows
        columns.update(source_uri=self.source_uris, line_no=self.line_nos, raw=self.raws)
        return IngestResult(rows=_frame(columns), rejects=self.rejects, objects=objects, skipped=self.skipped,
                            damaged=self.damaged)


def _fill(items: _ObjectItems, records: Iterator[tuple[str, ParsedRow | Reject]], batch_rows: int,
          adapter: InputAdapter | None) -> IngestResult | None:
    """The next batch: up to ``batch_rows`` parsed objects (records, rejects and skipped ones),
    each mapped by ``adapter`` (when given) and normalised."""
    batch = _Batch()
    opened = items.opened
    # a shared iterator: the next batch goes on where this one stops
    for source_uri, item in itertools.islice(records, batch_rows):
        batch.add(source_uri, item, adapter)
    if not (batch.values or batch.rejects or batch.skipped) and items.opened == opened:  # each item is one of them
        return None
    return batch.result(items.opened - opened)


def ingest_batches(
    objects: Iterable[tuple[str, ObjectSource]],
    day: dt.date,
    *,
    batch_rows: int = BATCH_ROWS,
    adapter: InputAdapter | None = None,
    assemble: Assembler | None = None,
) -> Iterator[IngestResult]:
    """Read and normalise objects, given as ``(source_uri, bytes | path | binary file)`` pairs, as a
    stream of bounded batches.

    Each batch holds at most ``batch_rows`` input records (parsed rows plus ingest rejects, in
    input order; a batch may span objects) and ``objects`` counts the objects first opened while
    it was read, so the batches' sums are the day's totals. Objects are opened one at a time, as
    the batches are taken. Pass objects in key order: the order decides which of two rows with
    the same record_id comes first (the first is kept). ``day`` names the day in the log.
    ``adapter`` maps records of another shape onto the contract's fields before normalisation
    (:mod:`evaluation.contract.adapters`); the rows keep the original raw text. ``assemble`` turns the
    parsed objects into records first (OpenTelemetry's spans into one record per answer).
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, got {batch_rows}")
    items = _ObjectItems(objects)
    records = iter(items) if assemble is None else assemble(iter(items))
    batches = rows = rejects = 0
    while True:
        # The collector is paused while a batch is read (see _gc_paused), not while the caller
        # works on it.
        with _gc_paused():
            batch = _fill(items, records, batch_rows, adapter)
        if batch is None:
            break
        batches += 1
        rows += batch.rows.height
        rejects += len(batch.rejects)
        yield batch
    logger.info(
        "ingested %s: %d objects, %d rows, %d rejects in %d batches", day, items.opened, rows, rejects, batches
    )


def ingest_objects(
    objects: Iterable[tuple[str, ObjectSource]], day: dt.date, *, adapter: InputAdapter | None = None
) -> IngestResult:
    """Read and normalise every object in one batch (see :func:`ingest_batches`)."""
    batches = list(ingest_batches(objects, day, batch_rows=sys.maxsize, adapter=adapter))
    return batches[0] if batches else IngestResult(rows=pl.DataFrame(schema=ROW_SCHEMA), rejects=[])
