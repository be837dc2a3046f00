"""Validation: the Great Expectations suites that decide which records are judged (CONTRACT §1).

Row rules are one expectation each, over the flat columns that :func:`evaluation.contract.normalise.normalise`
produces plus three helper columns computed here with Polars (``_row``, ``problem_count``,
``is_repeat``). Great Expectations alone decides which rows fail: their ids come back through the
``_row`` index (``unexpected_index_column_names``), and each failed expectation maps to a readable
reason. Table rules run second, as their own suite over one outcome flag per input record, because
the reject ratio depends on which rows the row rules rejected.

A day is validated as a stream of batches (:class:`DayValidator`); :func:`validate` is the same
over a single batch.

Great Expectations takes seconds to import, so it is imported on first use and its context is
built once per process.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from evaluation.contract.errors import InputError
from evaluation.contract.schemas import RECORD_SCHEMA
from evaluation.storage.ingest import ROW_SCHEMA, Reject

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuite
    from great_expectations.core.batch_definition import BatchDefinition

__all__ = [
    "SUITE_NAME",
    "TABLE_SUITE_NAME",
    "VALID_COLUMNS",
    "BatchOutcome",
    "DayOutcome",
    "DayValidator",
    "ValidationError",
    "ValidationOutcome",
    "build_suite",
    "build_table_suite",
    "validate",
]

logger = logging.getLogger(__name__)

SUITE_NAME = "conversation_logs"
TABLE_SUITE_NAME = "conversation_logs_table"
#: Index of the batch handed to Great Expectations: the row's position in the input.
ROW_INDEX = "_row"
#: Helper column: True for the 2nd and later rows with the same record_id.
DUPLICATE_COLUMN = "is_repeat"
#: Helper column: how many problems normalise found that the flat columns cannot show.
PROBLEM_COUNT_COLUMN = "problem_count"
#: Helper column of the table batch: 1 for a rejected input record, 0 for a valid one.
REJECTED_COLUMN = "rejected"

# A named index keeps GE's lookup of failing rows to a list of ids; with a plain `_row` column
# and the failing values included, GE fetches every failing cell one by one (18 s at 100k rows
# with 30% failing, against 0.3 s here).
_ROW_RESULT_FORMAT: dict[str, Any] = {
    "result_format": "COMPLETE",
    "unexpected_index_column_names": [ROW_INDEX],
    "exclude_unexpected_values": True,
}
_TABLE_RESULT_FORMAT: dict[str, Any] = {"result_format": "SUMMARY"}
#: Ids kept in a landed ``partial_unexpected_index_list`` (GE's default partial size).
_PARTIAL_IDS = 20
#: Failing row ids kept per expectation in a landed ``unexpected_index_list`` (counts stay whole).
_LANDED_IDS = 1_000

#: Columns of :attr:`ValidationOutcome.valid`, in order: the staged records' (``RECORD_SCHEMA``).
VALID_COLUMNS: tuple[str, ...] = tuple(RECORD_SCHEMA)
_RENAMED = {"contexts_json": "contexts", "rubrics_json": "rubrics", "metadata_json": "metadata"}

#: Not-null rules: column → reason when the column is null. A null that normalise explained
#: (wrong type, unparseable timestamp) is reported by that problem instead, so each violation
#: reads once, in its most specific words.
_PRESENT_RULES: dict[str, str] = {
    "record_id": "record_id: missing or blank",
    "timestamp": "timestamp: missing",
    "model": "model: missing or blank",
    "question": "question: missing or blank",
    "answer": "answer: missing",
}
_CHECKED_COLUMNS = (
    *_PRESENT_RULES,
    "timestamp_day",
    "text_chars",
    PROBLEM_COUNT_COLUMN,
)
_INPUT_COLUMNS = tuple(ROW_SCHEMA)


class ValidationError(InputError, RuntimeError):
    """The suite could not be evaluated (a broken batch or expectation), as opposed to bad rows."""


class DayOutcome(BaseModel):
    """What the suites decided for the whole day, once every batch was validated."""

    result_json: dict[str, Any] = Field(description="Both Great Expectations results, JSON-ready, to land.")
    table_failures: list[str] = Field(description="Table rules that failed, each naming the day and cause.")
    input_records: int = Field(description="Parsed rows plus ingest rejects.")
    valid_records: int = Field(description="Rows that passed every row rule.")
    rejected_records: int = Field(description="Ingest rejects plus rows rejected by the row rules.")

    @property
    def success(self) -> bool:
        """True when no table rule failed (rejected rows alone do not fail a run)."""
        return not self.table_failures


class ValidationOutcome(DayOutcome):
    """What the suites decided for a day validated as one batch, with the batch's rows."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    valid: pl.DataFrame = Field(description=f"Rows that pass every row rule, input order: {VALID_COLUMNS}.")
    rejects: list[Reject] = Field(description="Every row that failed a row rule, with every reason.")


# --------------------------------------------------------------------------------------------
# Great Expectations, imported lazily
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Batches:
    rows: BatchDefinition
    outcomes: BatchDefinition


@functools.cache
def _batches() -> _Batches:
    """The ephemeral context and its two whole-dataframe batch definitions, built once."""
    # GE logs hundreds of INFO lines on import when a root handler is configured (Airflow).
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    # great_expectations: seconds to import, only when a day is validated
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(),
        progress_bars=ProgressBarsConfig(globally=False),  # tqdm bars on stderr in task logs
        analytics_enabled=False,
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    source = context.data_sources.add_pandas(SUITE_NAME)
    rows = source.add_dataframe_asset("rows").add_batch_definition_whole_dataframe("rows")
    outcomes = source.add_dataframe_asset("outcomes").add_batch_definition_whole_dataframe("outcomes")
    logger.info("Great Expectations %s context ready", gx.__version__)
    return _Batches(rows=rows, outcomes=outcomes)


def _new_suite(name: str, meta: dict[str, Any] | None = None) -> tuple[ExpectationSuite, Any]:
    """An empty suite, and GE's expectations to fill it with."""
    _batches()  # GE builds suites only inside an active context
    # great_expectations: seconds to import, only when a day is validated
    import great_expectations as gx
    import great_expectations.expectations as gxe

    return gx.ExpectationSuite(name=name, meta=meta), gxe


def build_suite(day: dt.date, max_record_chars: int) -> ExpectationSuite:
    """The row rules of CONTRACT §1 for one day, one expectation per rule.

    Each expectation's ``meta["rule"]`` names the rule; :func:`_rejects` turns it into a reason.
    The batch must hold the normalised columns plus ``problem_count`` and ``is_repeat``.
    """
    suite, gxe = _new_suite(SUITE_NAME, {"day": day.isoformat(), "max_record_chars": max_record_chars})
    expectations = [gxe.ExpectColumnValuesToNotBeNull(column=column, meta={"rule": "present", "column": column})
                    for column in _PRESENT_RULES]
    expectations += [
        gxe.ExpectColumnValuesToBeInSet(column="timestamp_day", value_set=[day.isoformat()], meta={"rule": "on_day"}),
        gxe.ExpectColumnValuesToBeBetween(column="text_chars", min_value=0, max_value=max_record_chars,
                                          meta={"rule": "within_size"}),
        # problems hold the violations the flat columns cannot show (wrong types, broken contexts
        # or rubrics): a row passes only with none.
        gxe.ExpectColumnValuesToBeBetween(column=PROBLEM_COUNT_COLUMN, min_value=0, max_value=0,
                                          meta={"rule": "no_problems"}),
        gxe.ExpectColumnValuesToBeInSet(column=DUPLICATE_COLUMN, value_set=[False], meta={"rule": "unique"}),
    ]
    for expectation in expectations:
        suite.add_expectation(expectation)
    return suite


def build_table_suite(*, max_reject_ratio: float, allow_empty: bool, has_records: bool) -> ExpectationSuite:
    """The table rules, over a batch with one ``rejected`` flag (0/1) per input record.

    The reject ratio is the flags' mean; it is undefined with no records, so the rule is left out
    then, and an empty day is governed by the row-count rule alone (left out when empty days are
    allowed).
    """
    suite, gxe = _new_suite(TABLE_SUITE_NAME)
    if not allow_empty:
        suite.add_expectation(gxe.ExpectTableRowCountToBeBetween(min_value=1, meta={"rule": "not_empty"}))
    if has_records:
        suite.add_expectation(gxe.ExpectColumnMeanToBeBetween(column=REJECTED_COLUMN, min_value=0,
                                                              max_value=max_reject_ratio, meta={"rule": "reject_ratio"}))
    return suite


# --------------------------------------------------------------------------------------------
# Running the suites
# --------------------------------------------------------------------------------------------


def _run(
    day: dt.date,
    batch_definition: BatchDefinition,
    batch_frame: pd.DataFrame,
    suite: ExpectationSuite,
    result_format: dict[str, Any],
) -> tuple[dict[str, Any], list[tuple[dict[str, Any], list[int]]]]:
    """Validate one batch: the result as JSON, and each expectation's meta with its failing ``_row`` ids.

    A failing row list is read from the result object and put back into the JSON as plain ints,
    at most :data:`_LANDED_IDS` of them: GE's own serialisation deep-copies and converts such
    lists element by element (13 s for two expectations failing on 100k rows).
    ``unexpected_index_query`` is dropped from the landed result: it repeats the same ids as a
    pandas snippet.
    """
    result = batch_definition.get_batch(batch_parameters={"dataframe": batch_frame}).validate(
        suite, result_format=result_format
    )
    failing: list[tuple[dict[str, Any], list[int]]] = []
    for item in result.results:
        config = item.expectation_config
        if config is None:
            raise ValidationError(f"{day}: a result of suite {suite.name} names no expectation")
        info = item.exception_info or {}
        if info.get("raised_exception"):
            raise ValidationError(
                f"{day}: expectation {config.type} {dict(config.kwargs)} could not run: "
                f"{info.get('exception_message')}"
            )
        # exclude_unexpected_values gives [{"_row": [ids...]}], and the "partial" list holds every id as well.
        ids = [int(index) for index in _landed_ids(item.result)]
        failing.append((dict(config.meta or {}), ids))
        for key in ("unexpected_index_list", "partial_unexpected_index_list", "unexpected_index_query"):
            item.result.pop(key, None)
        if not item.success and "unexpected_count" in item.result and not ids:
            raise ValidationError(f"{day}: {config.type} failed without naming its rows")
    result_json = result.to_json_dict()
    for item_json, (_, ids) in zip(result_json["results"], failing, strict=True):
        if "unexpected_count" in item_json["result"]:
            _set_landed_ids(item_json["result"], ids[:_LANDED_IDS])
    return result_json, failing


def _landed_ids(result: dict[str, Any]) -> list[int]:
    return [index for entry in result.get("unexpected_index_list") or [] for index in entry[ROW_INDEX]]


def _set_landed_ids(result: dict[str, Any], ids: list[int]) -> None:
    result["unexpected_index_list"] = [{ROW_INDEX: ids}] if ids else []
    result["partial_unexpected_index_list"] = [{ROW_INDEX: ids[:_PARTIAL_IDS]}] if ids else []


def _percent(part: int, whole: int) -> float | None:
    return part / whole * 100 if whole > 0 else None


def _merge_row_results(total: dict[str, Any], batch: dict[str, Any]) -> None:
    """Fold one batch's row-suite result into the day's: counts summed, success flags and-ed,
    percentages recomputed as GE computes them, failing ids kept up to :data:`_LANDED_IDS`."""
    total["success"] = bool(total["success"] and batch["success"])
    for item, other in zip(total["results"], batch["results"], strict=True):
        item["success"] = bool(item["success"] and other["success"])
        result, more = item["result"], other["result"]
        if "unexpected_count" not in result:
            continue
        for key in ("element_count", "unexpected_count", "missing_count"):
            if key in result:
                result[key] = (result[key] or 0) + (more.get(key) or 0)
        elements, unexpected = result["element_count"], result["unexpected_count"]
        if "missing_count" in result:  # the expectation counts nulls as missing, not as unexpected
            nonmissing = _percent(unexpected, elements - result["missing_count"])
            result.update(
                missing_percent=_percent(result["missing_count"], elements),
                unexpected_percent_total=_percent(unexpected, elements),
                unexpected_percent_nonmissing=nonmissing,
                unexpected_percent=nonmissing,
            )
        else:
            result["unexpected_percent"] = _percent(unexpected, elements)
        _set_landed_ids(result, [*_landed_ids(result), *_landed_ids(more)][:_LANDED_IDS])
    successful = sum(1 for item in total["results"] if item["success"])
    evaluated = len(total["results"])
    total["statistics"].update(
        evaluated_expectations=evaluated,
        successful_expectations=successful,
        unsuccessful_expectations=evaluated - successful,
        success_percent=_percent(successful, evaluated),
    )


def _rejects(
    day: dt.date,
    max_record_chars: int,
    frame: pl.DataFrame,
    failed_ids: list[int],
    failing_by_rule: list[tuple[dict[str, Any], list[int]]],
) -> list[Reject]:
    """One reject per failing row, its reasons in suite order. ``frame`` carries the first
    occurrence of each row's record_id (``first_source_uri``, ``first_line_no``)."""
    if not failed_ids:
        return []
    details = frame.filter(pl.col(ROW_INDEX).is_in(failed_ids)).with_columns(
        pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%S%.fZ").alias("timestamp_utc")
    )
    # Column lists, not row dicts: iter_rows over 100k failing rows costs seconds.
    column = {name: details[name].to_list() for name in details.columns if name != "timestamp"}
    position = {row_id: pos for pos, row_id in enumerate(column[ROW_INDEX])}
    problems = column["problems"]
    reasons: list[list[str]] = [[] for _ in failed_ids]
    for meta, ids in failing_by_rule:
        rule, field_name = meta["rule"], meta.get("column")
        positions = [position[index] for index in ids]
        if rule == "present":
            message = _PRESENT_RULES[field_name or ""]
            prefix = f"{field_name}:"
            for pos in positions:
                # A problem already names this field's violation more precisely (wrong type,
                # unparseable timestamp): report it once, in those words.
                if not any(problem.startswith(prefix) for problem in problems[pos]):
                    reasons[pos].append(message)
        elif rule == "on_day":
            for pos in positions:
                reasons[pos].append(f"timestamp: falls outside {day} (UTC {column['timestamp_utc'][pos]})")
        elif rule == "within_size":
            for pos in positions:
                reasons[pos].append(
                    f"text: {column['text_chars'][pos]} chars exceeds max_record_chars {max_record_chars}"
                )
        elif rule == "no_problems":
            for pos in positions:
                reasons[pos].extend(problems[pos])
        elif rule == "unique":
            for pos in positions:
                reasons[pos].append(
                    f"record_id: repeated (first kept: {column['first_source_uri'][pos]} "
                    f"line {column['first_line_no'][pos]})"
                )
        else:
            raise ValidationError(f"{day}: no reason known for rule {rule!r}")
    return [Reject.of(column["source_uri"][pos], column["line_no"][pos], column["raw"][pos], *reasons[pos],
                      record_id=column["record_id"][pos]) for pos in range(len(failed_ids))]


# --------------------------------------------------------------------------------------------
# A day, batch by batch


@dataclass
class BatchOutcome:
    """What the row rules decided for one batch."""

    valid: pl.DataFrame
    """Rows that pass every row rule, input order, columns :data:`VALID_COLUMNS`."""
    rejects: list[Reject]
    """Every row of the batch that failed a row rule, with every reason."""


#: Seed of the 64-bit hash that stands for a record id in :class:`SeenIds`.
_ID_HASH_SEED = 0x5EED


class SeenIds:
    """The record ids a day has seen so far, each with its first occurrence (source, line), in
    memory that does not follow the day's ids.

    Held in memory: one 64-bit hash per id (8 bytes a record, 80 MB at ten million) and the last
    batch's ids. Each earlier batch's new ids, with their first occurrences, are spilled to a local
    Parquet file (a few tens of bytes a record on disk), removed by :meth:`close`. :meth:`earlier`
    probes the hashes (one vectorised pass over them per batch) and reads back only the spilled
    files that hold a hash it is asked about, then compares the ids themselves: a repeat is decided
    on the ids, a shared hash alone decides nothing.
    """

    def __init__(self) -> None:
        self._hashes: list[pl.Series] = []  # per batch, the hashes of the ids it saw first
        self._batches: list[pl.DataFrame | Path] = []  # per batch: its first occurrences, or their file
        self._starts: list[int] = []  # each batch's offset among the hashes
        self._count = 0
        self._folder: tempfile.TemporaryDirectory[str] | None = None

    @staticmethod
    def hashes(ids: pl.Series) -> pl.Series:
        """The 64-bit hash that stands for each id (stable within a process)."""
        return ids.hash(seed=_ID_HASH_SEED)

    def earlier(self, ids: pl.Series) -> pl.DataFrame:
        """``record_id``, ``_seen_uri``, ``_seen_line`` of each of the distinct, non-null ``ids``
        seen before (by :meth:`add`), at its first occurrence."""
        empty = pl.DataFrame(schema={"record_id": pl.String, "_seen_uri": pl.String, "_seen_line": pl.Int64})
        if not self._count or ids.len() == 0:
            return empty
        hits = pl.concat(self._hashes, rechunk=False).is_in(self.hashes(ids).implode()).arg_true().to_numpy()
        if hits.size == 0:
            return empty
        batch_of = np.searchsorted(np.asarray(self._starts), hits, side="right") - 1
        found = []
        for batch in np.unique(batch_of):
            held = self._batches[batch]
            frame = pl.read_parquet(held) if isinstance(held, Path) else held
            found.append(frame[hits[batch_of == batch] - self._starts[batch]])
        candidates = pl.concat(found).rename({"source_uri": "_seen_uri", "line_no": "_seen_line"})
        return candidates.filter(pl.col("record_id").is_in(ids.implode()))

    def add(self, first: pl.DataFrame) -> None:
        """Note the ids of a batch not seen before: ``record_id``, ``source_uri``, ``line_no`` of
        each id's first occurrence, each id once. The previous batch's are spilled to disk."""
        if self._batches and isinstance(self._batches[-1], pl.DataFrame):
            if self._folder is None:
                self._folder = tempfile.TemporaryDirectory(prefix="evaluation-record-ids-")
            path = Path(self._folder.name) / f"ids-{len(self._batches) - 1:06d}.parquet"
            self._batches[-1].write_parquet(path)
            self._batches[-1] = path
        if first.height == 0:
            return
        frame = first.select(pl.col("record_id"), pl.col("source_uri").cast(pl.String), pl.col("line_no").cast(pl.Int64))
        self._hashes.append(self.hashes(frame["record_id"]))
        self._batches.append(frame)
        self._starts.append(self._count)
        self._count += frame.height

    def close(self) -> None:
        """Remove the spilled files (the hashes stay: the ids can still be counted, not looked up)."""
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None


class DayValidator:
    """The row suite run on every batch of a day, the table suite once over the day's totals.

    Feed the day in input order: :meth:`add_ingest_rejects` for what ingest could not parse,
    :meth:`validate_batch` for each batch of normalised rows (:data:`evaluation.storage.ingest.ROW_SCHEMA`),
    then :meth:`finish`. Memory follows the batch, plus 8 bytes a record for the day's record ids
    (:class:`SeenIds`, which finds a ``record_id`` repeated in a later batch or object) and one
    byte per input record for the table suite's flags, built by :meth:`finish`. The rows'
    ``_row`` index in the landed result is their position among the day's parsed rows, whatever
    the batching; the result keeps every count but at most :data:`_LANDED_IDS` failing ids per
    expectation."""

    def __init__(
        self,
        day: dt.date,
        *,
        max_record_chars: int = 200_000,
        max_reject_ratio: float = 0.05,
        allow_empty: bool = False,
    ) -> None:
        self.day = day
        self.max_record_chars = max_record_chars
        self.max_reject_ratio = max_reject_ratio
        self.allow_empty = allow_empty
        self.ingest_rejects = 0
        self.damaged: list[str] = []
        self.rows = 0
        self.failed_rows = 0
        self.batches = 0
        self._suite: ExpectationSuite | None = None
        self._row_result: dict[str, Any] | None = None
        self._seen = SeenIds()
        self._finished = False

    def add_ingest_rejects(self, count: int, damaged: list[str] | None = None) -> None:
        """Count records ingest could not parse: input records, and rejects in the ratio.
        ``damaged`` are the reasons of objects that could not be read to their end: how many
        records they lost is unknown, so each fails the day (a table rule)."""
        self.ingest_rejects += count
        self.damaged.extend(damaged or ())

    def _mark_repeats(self, frame: pl.DataFrame) -> pl.DataFrame:
        """``is_repeat`` and the first occurrence of each row's record_id, over every batch so far."""
        marked = frame.with_columns(
            # is_first_distinct counts a null as a value; a missing id is reported by its own rule.
            pl.col("record_id").is_first_distinct().alias("_first_in_batch"),
            pl.col("source_uri").first().over("record_id").alias("_batch_uri"),
            pl.col("line_no").first().over("record_id").alias("_batch_line"),
        )
        firsts = marked.filter(pl.col("record_id").is_not_null() & pl.col("_first_in_batch"))
        marked = marked.join(self._seen.earlier(firsts["record_id"]), on="record_id", how="left",
                             maintain_order="left")
        seen_before = pl.col("_seen_line").is_not_null()
        marked = marked.with_columns(
            (pl.col("record_id").is_not_null() & (seen_before | ~pl.col("_first_in_batch"))).alias(
                DUPLICATE_COLUMN
            ),
            pl.coalesce("_seen_uri", "_batch_uri").alias("first_source_uri"),
            pl.coalesce("_seen_line", "_batch_line").alias("first_line_no"),
        )
        self._seen.add(marked.filter(pl.col("record_id").is_not_null() & pl.col("_first_in_batch") & ~seen_before)
                       .select("record_id", "source_uri", "line_no"))
        return marked.drop("_first_in_batch", "_batch_uri", "_batch_line", "_seen_uri", "_seen_line")

    def validate_batch(self, rows: pl.DataFrame) -> BatchOutcome:
        """Run the row suite on one batch of normalised rows; the batch's valid rows and rejects."""
        if self._finished:
            raise ValidationError(f"{self.day}: the day was already finished")
        missing = [name for name in _INPUT_COLUMNS if name not in rows.columns]
        if missing:
            raise ValidationError(f"{self.day}: rows lack columns {missing}")
        frame = self._mark_repeats(
            rows.select(_INPUT_COLUMNS)
            .with_row_index(ROW_INDEX, offset=self.rows)
            .with_columns(pl.col("problems").list.len().alias(PROBLEM_COUNT_COLUMN))
        )
        batch_frame = (
            frame.select(ROW_INDEX, *_CHECKED_COLUMNS, DUPLICATE_COLUMN)
            .to_pandas(use_pyarrow_extension_array=False)
            .set_index(ROW_INDEX)
        )
        if self._suite is None:
            self._suite = build_suite(self.day, self.max_record_chars)
        row_result, failing = _run(self.day, _batches().rows, batch_frame, self._suite, _ROW_RESULT_FORMAT)
        failed_ids = sorted({index for _, ids in failing for index in ids})
        rejects = _rejects(self.day, self.max_record_chars, frame, failed_ids, failing)
        valid = frame.filter(~pl.col(ROW_INDEX).is_in(failed_ids)).rename(_RENAMED).select(VALID_COLUMNS)
        if self._row_result is None:
            self._row_result = row_result
        else:
            _merge_row_results(self._row_result, row_result)
        self.rows += rows.height
        self.failed_rows += len(failed_ids)
        self.batches += 1
        logger.debug("validated a batch of %s: %d rows, %d rejected", self.day, rows.height, len(failed_ids))
        return BatchOutcome(valid=valid, rejects=rejects)

    def finish(self, *, input_objects: int | None = None, missing: str | None = None) -> DayOutcome:
        """Run the table suite over the day's totals and combine the results to land.

        ``input_objects``, when given, lets an empty day's message say whether there were objects
        at all, and ``missing`` what was found instead of input objects (the URI read and what it
        holds). Failed table rules are returned in ``table_failures`` for the caller to raise after
        landing the rejects.
        """
        if self._row_result is None:  # no rows at all: the row suite still runs, on an empty batch
            self.validate_batch(pl.DataFrame(schema=ROW_SCHEMA))
        assert self._row_result is not None
        self._finished = True
        self._seen.close()
        input_records = self.rows + self.ingest_rejects
        rejected = self.ingest_rejects + self.failed_rows
        # One flag per input record (1 = rejected): a small column even for a large day.
        flags = np.zeros(input_records, np.int8)
        flags[:rejected] = 1
        table_suite = build_table_suite(
            max_reject_ratio=self.max_reject_ratio, allow_empty=self.allow_empty, has_records=input_records > 0
        )
        outcome_flags = pd.DataFrame({REJECTED_COLUMN: flags})
        table_result, _ = _run(self.day, _batches().outcomes, outcome_flags, table_suite, _TABLE_RESULT_FORMAT)
        table_failures = self._table_failures(table_result, input_records, rejected, input_objects, missing)
        if self.damaged:
            table_failures.append(f"{self.day}: {len(self.damaged)} object(s) could not be read to the end, the records "
                                  f"after the damage are lost (repair or replace the object): {self.damaged[0]}")
        logger.info(
            "validated %s: %d input records, %d valid, %d rejected (%d at ingest) in %d batches; table rules %s",
            self.day,
            input_records,
            input_records - rejected,
            rejected,
            self.ingest_rejects,
            self.batches,
            "; ".join(table_failures) if table_failures else "passed",
        )
        return DayOutcome(
            result_json={
                "day": self.day.isoformat(),
                "success": self._row_result["success"] and table_result["success"],
                "batches": self.batches,
                "row_rules": self._row_result,
                "table_rules": table_result,
            },
            table_failures=table_failures,
            input_records=input_records,
            valid_records=input_records - rejected,
            rejected_records=rejected,
        )

    def _table_failures(self, result: dict[str, Any], input_records: int, rejected: int, input_objects: int | None,
                        missing: str | None) -> list[str]:
        failures = []
        for item in result["results"]:
            if item["success"]:
                continue
            rule = item["expectation_config"]["meta"]["rule"]
            if rule == "not_empty":
                if input_objects:
                    failures.append(f"{self.day}: no input records ({input_objects} objects, all empty)")
                else:
                    failures.append(f"{self.day}: {missing or 'no input objects'}")
            elif rule == "reject_ratio":
                ratio = item["result"]["observed_value"]
                failures.append(
                    f"{self.day}: reject ratio {ratio:.4g} ({rejected} of {input_records}) "
                    f"exceeds max_reject_ratio {self.max_reject_ratio:g}"
                )
            else:
                raise ValidationError(f"{self.day}: no message known for table rule {rule!r}")
        return failures


def validate(
    rows: pl.DataFrame,
    *,
    day: dt.date,
    max_record_chars: int = 200_000,
    max_reject_ratio: float = 0.05,
    allow_empty: bool = False,
    ingest_rejects: int = 0,
    input_objects: int | None = None,
) -> ValidationOutcome:
    """Run the row and table suites on one day's normalised rows (:data:`evaluation.storage.ingest.ROW_SCHEMA`)
    as one batch (:class:`DayValidator` streams a day in batches).

    ``ingest_rejects`` (lines or objects ingest could not parse) count as input records and as
    rejects in the reject ratio; ``input_objects`` is as in :meth:`DayValidator.finish`.
    """
    validator = DayValidator(
        day, max_record_chars=max_record_chars, max_reject_ratio=max_reject_ratio, allow_empty=allow_empty
    )
    validator.add_ingest_rejects(ingest_rejects)
    batch = validator.validate_batch(rows)
    outcome = validator.finish(input_objects=input_objects)
    return ValidationOutcome(valid=batch.valid, rejects=batch.rejects, **dict(outcome))
