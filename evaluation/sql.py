"""Analysts' SQL over the landed tables, with Polars' ``SQLContext`` (``python -m evaluation sql``).

Tables are registered by name, only when the query names them, each as a ``LazyFrame`` over the
table's objects where they live (a directory, or S3 read in place: see
:func:`evaluation.storage.scan_table`):

==========================  ================================================================
``evaluations``             ``evaluations/dt=*/part-0.parquet``, ``dt`` (Date) from the path
``judge_calls``             ``judge_calls/dt=*/part-0.parquet``, ``dt``
``rejects``                 ``rejects/dt=*/part-0.parquet``, ``dt``
``daily_summary``           ``daily_summary/dt=*/part-0.parquet``, ``dt``
``runs``                    ``runs/dt=*/run-*.parquet``, ``dt``
``comparisons``             ``comparisons/comparison_id=*/metrics.parquet`` (has ``comparison_id``)
``comparison_verdicts``     ``comparisons/comparison_id=*/verdicts.parquet``
``calibrations``            ``calibrations/calibration_id=*/calibration.parquet`` (has ``calibration_id``)
==========================  ================================================================

Polars plans the whole query before it reads anything: only the columns the query uses are read,
and any predicate on ``dt`` that Polars can evaluate on the partition values (``=``, ``BETWEEN``,
``IN``, comparisons, ``OR`` of these, in a ``WHERE``, a join or a subquery) skips the other
``dt=`` partitions' objects unopened. The SQL itself always filters, so pruning only ever saves
reading.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from evaluation import storage

__all__ = ["CALIBRATION_TABLES", "COMPARISON_TABLES", "DAILY_TABLES", "TABLES", "SqlError", "csv_ready", "referenced_tables",
           "run_sql"]

DAILY_TABLES: tuple[str, ...] = storage.TABLES
#: SQL name -> file of each comparison.
COMPARISON_TABLES: dict[str, str] = {"comparisons": "metrics.parquet", "comparison_verdicts": "verdicts.parquet"}
#: SQL name -> file of each judge calibration.
CALIBRATION_TABLES: dict[str, str] = {"calibrations": "calibration.parquet"}
TABLES: tuple[str, ...] = (*DAILY_TABLES, *COMPARISON_TABLES, *CALIBRATION_TABLES)

#: A string literal or a comment, whichever starts first (a quote in a comment, or `--` in a
#: literal, must not be mistaken for the other).
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)


class SqlError(RuntimeError):
    """A query cannot run: the message names the table or the cause."""


def referenced_tables(query: str) -> list[str]:
    """The known tables the query names (outside string literals and comments), in :data:`TABLES` order."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_]\w*", _LITERAL_OR_COMMENT.sub(" ", query))}
    return [t for t in TABLES if t in words]


def scan(store: storage.Store, table: str) -> pl.LazyFrame:
    """One table of :data:`TABLES` as a LazyFrame over its objects, read in place."""
    if table in COMPARISON_TABLES:
        name = COMPARISON_TABLES[table]
        keys = [o.key for o in store.list("comparisons/") if re.fullmatch(rf"comparisons/comparison_id=[^/]+/{name}", o.key)]
        frame = storage.scan_parquet(store, keys, hive=False) if keys else None
        where = store.uri("comparisons/")
    elif table in CALIBRATION_TABLES:
        name = CALIBRATION_TABLES[table]
        keys = [o.key for o in store.list("calibrations/")
                if re.fullmatch(rf"calibrations/calibration_id=[^/]+/{name}", o.key)]
        frame = storage.scan_parquet(store, keys, hive=False) if keys else None
        where = store.uri("calibrations/")
    elif table in DAILY_TABLES:
        frame = storage.scan_table(store, table)
        where = store.uri(storage.table_prefix(table))
    else:
        raise SqlError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
    if frame is None:
        raise SqlError(f"table {table} has no data under {where}")
    return frame


def run_sql(store: storage.Store, query: str) -> pl.DataFrame:
    """Run one query over the tables under ``store`` (see the module docstring)."""
    context: pl.SQLContext[Any] = pl.SQLContext()
    for table in referenced_tables(query):
        context.register(table, scan(store, table))
    try:  # the streaming engine: aggregations over many days need memory for the groups, not the rows
        return context.execute(query, eager=False).collect(engine="streaming")
    except Exception as exc:  # Polars raises several SQL and I/O error types: one message for the user
        raise SqlError(f"query failed: {exc} (tables: {', '.join(TABLES)})") from exc


def csv_ready(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with nested columns (lists, structs) as JSON text, which CSV can hold."""
    nested = [name for name, dtype in frame.schema.items() if dtype.is_nested()]
    if not nested:
        return frame
    # {"name": value} as JSON, minus the wrapper: the value's JSON text.
    return frame.with_columns(
        pl.when(pl.col(name).is_not_null())
        .then(pl.struct(name).struct.json_encode().str.slice(len(name) + 4).str.head(-1))
        .alias(name)
        for name in nested
    )
