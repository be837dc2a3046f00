"""Analysts' SQL over the landed tables, with Polars' ``SQLContext`` (``python -m evaluation sql``).

Tables are registered by name, lazily (one ``LazyFrame`` per table, scanning Parquet), and only
when the query names them:

==========================  ================================================================
``evaluations``             ``evaluations/dt=*/part-0.parquet`` plus ``dt`` (Date)
``judge_calls``             ``judge_calls/dt=*/part-0.parquet`` plus ``dt``
``rejects``                 ``rejects/dt=*/part-0.parquet`` plus ``dt``
``daily_summary``           ``daily_summary/dt=*/part-0.parquet`` plus ``dt``
``runs``                    ``runs/dt=*/run-*.parquet`` plus ``dt``
``comparisons``             ``comparisons/comparison_id=*/metrics.parquet`` (has ``comparison_id``)
``comparison_verdicts``     ``comparisons/comparison_id=*/verdicts.parquet``
==========================  ================================================================

**Partition pruning (best effort).** Before anything is read, the query's ``WHERE`` clause is
searched for simple ``dt`` predicates — ``dt = DATE 'YYYY-MM-DD'``, ``dt = 'YYYY-MM-DD'``,
``dt BETWEEN ... AND ...``, ``dt >= / > / <= / < ...``, ``dt IN (...)``, optionally qualified by a
table name or alias — and only the matching ``dt=`` partitions are listed and scanned. Pruning is
applied only where it cannot change the answer: a single ``SELECT`` (no subquery, CTE or
``UNION``), one ``WHERE``, no ``OR``, no ``NOT`` or ``CASE`` around a predicate, each predicate a
conjunct of its own (``WHERE``/``AND`` before it, ``AND`` or the clause's end after it), and a
table named once. Anything else reads every partition; the SQL itself always filters, so pruning
only ever saves reading.

Local roots are scanned in place; on S3 the selected objects are downloaded through the store to
a temporary folder for the duration of the query.
"""

from __future__ import annotations

import datetime as dt
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import polars as pl

from evaluation import storage

__all__ = [
    "COMPARISON_TABLES",
    "DAILY_TABLES",
    "TABLES",
    "DayFilter",
    "Partition",
    "SqlError",
    "SqlSession",
    "day_filters",
    "list_partitions",
    "referenced_tables",
    "run_sql",
]

DAILY_TABLES: tuple[str, ...] = ("evaluations", "judge_calls", "rejects", "daily_summary", "runs")
#: SQL name -> file of each comparison.
COMPARISON_TABLES: dict[str, str] = {"comparisons": "metrics.parquet", "comparison_verdicts": "verdicts.parquet"}
TABLES: tuple[str, ...] = (*DAILY_TABLES, *COMPARISON_TABLES)


class SqlError(RuntimeError):
    """A query cannot run: the message names the table or the cause."""


# --------------------------------------------------------------------------------------------
# dt predicates


@dataclass(frozen=True)
class DayFilter:
    """The ``dt`` values a query can match: an inclusive range and/or a set of days."""

    low: dt.date | None = None
    high: dt.date | None = None
    days: frozenset[dt.date] | None = None

    def matches(self, day: dt.date) -> bool:
        """Whether a partition of ``day`` may hold matching rows."""
        if self.low is not None and day < self.low:
            return False
        if self.high is not None and day > self.high:
            return False
        return self.days is None or day in self.days

    def and_(self, other: DayFilter) -> DayFilter:
        """Both filters at once."""
        lows = [d for d in (self.low, other.low) if d is not None]
        highs = [d for d in (self.high, other.high) if d is not None]
        days = self.days if other.days is None else other.days if self.days is None else self.days & other.days
        return DayFilter(max(lows) if lows else None, min(highs) if highs else None, days)

    @property
    def prunes(self) -> bool:
        """Whether this filter excludes anything."""
        return self.low is not None or self.high is not None or self.days is not None


#: A string literal or a comment, whichever starts first (a quote in a comment, or `--` in a
#: literal, must not be mistaken for the other).
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)
_VALUE = r"(?:date\s*)?'#(\d+)'"
_COLUMN = r"(?<![\w.])(?:([A-Za-z_]\w*)\.)?dt\b"
_PREDICATES = (
    ("between", re.compile(rf"{_COLUMN}\s+between\s+{_VALUE}\s+and\s+{_VALUE}", re.I)),
    ("in", re.compile(rf"{_COLUMN}\s+in\s*\(\s*({_VALUE}(?:\s*,\s*{_VALUE})*)\s*\)", re.I)),
    ("compare", re.compile(rf"{_COLUMN}\s*(>=|<=|=|>|<)\s*{_VALUE}", re.I)),
)
_KEYWORDS = (
    "where", "join", "inner", "left", "right", "full", "outer", "cross", "on", "using", "group", "order",
    "limit", "having", "natural", "union", "except", "intersect", "window", "qualify", "offset", "fetch",
    "semi", "anti", "lateral",
)
_TABLE_REFERENCE = re.compile(
    rf"\b(?:from|join)\s+([A-Za-z_]\w*)(?:\s+(?:as\s+)?(?!(?:{'|'.join(_KEYWORDS)})\b)([A-Za-z_]\w*))?", re.I
)
_CLAUSE_END = re.compile(r"\b(?:group\s+by|order\s+by|having|limit|qualify|window|offset|fetch)\b", re.I)


def _mask(query: str) -> tuple[str, list[str]]:
    """The query without comments, each string literal replaced by ``'#i'``; and the literals."""
    literals: list[str] = []

    def keep(match: re.Match[str]) -> str:
        token = match.group(0)
        if not token.startswith("'"):
            return " "
        literals.append(token[1:-1].replace("''", "'"))
        return f"'#{len(literals) - 1}'"

    return _LITERAL_OR_COMMENT.sub(keep, query), literals


def referenced_tables(query: str) -> list[str]:
    """The known tables the query names (outside string literals), in :data:`TABLES` order."""
    masked, _ = _mask(query)
    words = {w.lower() for w in re.findall(r"[A-Za-z_]\w*", masked)}
    return [t for t in TABLES if t in words]


def _where_clause(masked: str) -> str | None:
    wheres = list(re.finditer(r"\bwhere\b", masked, re.I))
    if len(re.findall(r"\bselect\b", masked, re.I)) != 1 or len(wheres) != 1:
        return None
    clause = masked[wheres[0].end():]
    end = _CLAUSE_END.search(clause)
    clause = clause[: end.start()] if end else clause
    if re.search(r"\bor\b|\bcase\b|\bnot\s*\(|\bnot\b[\s(]*(?:\w+\.)?dt\b|\bdt\s+not\b", clause, re.I):
        return None
    return " where " + clause


def _is_conjunct(clause: str, start: int, end: int) -> bool:
    before = clause[:start].rstrip(" \t\r\n(").lower()
    after = clause[end:].lstrip(" \t\r\n)").lower()
    return (before.endswith((" where", " and")) and (after == "" or after.startswith(("and ", "and(", ";"))))


def _date(literals: list[str], index: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(literals[int(index)].strip())
    except ValueError:
        return None


def _predicate_filter(kind: str, match: re.Match[str], literals: list[str]) -> DayFilter | None:
    if kind == "between":
        low, high = _date(literals, match.group(2)), _date(literals, match.group(3))
        return None if low is None or high is None else DayFilter(low, high)
    if kind == "in":
        days = [_date(literals, i) for i in re.findall(r"'#(\d+)'", match.group(2))]
        return None if any(d is None for d in days) else DayFilter(days=frozenset(d for d in days if d is not None))
    day = _date(literals, match.group(3))
    if day is None:
        return None
    one = dt.timedelta(days=1)
    return {
        "=": DayFilter(day, day),
        ">=": DayFilter(low=day),
        ">": DayFilter(low=day + one),
        "<=": DayFilter(high=day),
        "<": DayFilter(high=day - one),
    }[match.group(2)]


def day_filters(query: str) -> dict[str, DayFilter]:
    """The ``dt`` filter the query puts on each daily table it names (see the module docstring
    for when a predicate counts); a table without one is read whole."""
    masked, literals = _mask(query)
    clause = _where_clause(masked)
    if clause is None:
        return {}
    references = [(m.group(1).lower(), (m.group(2) or "").lower()) for m in _TABLE_REFERENCE.finditer(masked)]
    named = [table for table, _ in references]
    aliases: dict[str, str] = {}
    for table, alias in references:
        if table in DAILY_TABLES and named.count(table) == 1:
            aliases[table] = table
            if alias:
                aliases[alias] = table
    filters: dict[str, DayFilter] = {}
    for kind, pattern in _PREDICATES:
        for match in pattern.finditer(clause):
            if not _is_conjunct(clause, match.start(), match.end()):
                continue
            qualifier = (match.group(1) or "").lower()
            if qualifier:
                table = aliases.get(qualifier)
            else:
                table = named[0] if len(named) == 1 and named[0] in aliases else None
            found = _predicate_filter(kind, match, literals)
            if table is not None and found is not None:
                filters[table] = filters.get(table, DayFilter()).and_(found)
    return filters


# --------------------------------------------------------------------------------------------
# Partitions


@dataclass(frozen=True)
class Partition:
    """One object of a table: its key, and its ``dt`` (daily tables) or comparison id."""

    key: str
    day: dt.date | None = None
    comparison_id: str | None = None


def list_partitions(store: storage.Store, table: str, day_filter: DayFilter | None = None) -> list[Partition]:
    """The objects of ``table`` whose ``dt`` may match ``day_filter`` (all without one)."""
    if table in COMPARISON_TABLES:
        name = "/" + COMPARISON_TABLES[table]
        found = []
        for info in store.list("comparisons/"):
            match = re.match(r"comparisons/comparison_id=([^/]+)/", info.key)
            if match and info.key.endswith(name):
                found.append(Partition(info.key, comparison_id=match.group(1)))
        return found
    if table not in DAILY_TABLES:
        raise SqlError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
    partitions = []
    for info in store.list(storage.table_prefix(table)):
        match = re.match(rf"{table}/dt=(\d{{4}}-\d{{2}}-\d{{2}})/[^/]+\.parquet$", info.key)
        if not match:
            continue
        day = dt.date.fromisoformat(match.group(1))
        if day_filter is None or day_filter.matches(day):
            partitions.append(Partition(info.key, day=day))
    return partitions


# --------------------------------------------------------------------------------------------
# Running a query


class SqlSession:
    """Tables of one output root registered in a ``SQLContext``; a context manager (it may hold
    downloaded objects in a temporary folder)."""

    def __init__(self, store: storage.Store) -> None:
        self.store = store
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self.partitions: dict[str, list[Partition]] = {}

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Remove downloaded objects."""
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def _path(self, key: str) -> Path:
        if isinstance(self.store, storage.LocalStore):
            return self.store.path / key
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="evaluation-sql-")
        path = Path(self._folder.name) / key
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            self.store.download_file(key, path)
        return path

    def _scan(self, partition: Partition) -> pl.LazyFrame:
        frame = pl.scan_parquet(self._path(partition.key))
        if partition.day is not None:
            return frame.select(pl.lit(partition.day, dtype=pl.Date).alias("dt"), pl.all())
        return frame

    def table(self, table: str, day_filter: DayFilter | None = None) -> pl.LazyFrame:
        """``table`` as a LazyFrame over its (matching) partitions; empty with the table's schema
        when the filter matches none."""
        partitions = list_partitions(self.store, table, day_filter)
        self.partitions[table] = partitions
        if partitions:
            return pl.concat([self._scan(p) for p in partitions], how="diagonal_relaxed")
        every = list_partitions(self.store, table)
        if not every:
            where = self.store.uri("comparisons/" if table in COMPARISON_TABLES else storage.table_prefix(table))
            raise SqlError(f"table {table} has no data under {where}")
        return self._scan(every[0]).head(0)

    def context(self, query: str) -> pl.SQLContext[Any]:
        """A SQLContext with every table the query names, pruned by its ``dt`` predicates."""
        filters = day_filters(query)
        context: pl.SQLContext[Any] = pl.SQLContext()
        for table in referenced_tables(query):
            context.register(table, self.table(table, filters.get(table)))
        return context

    def execute(self, query: str) -> pl.DataFrame:
        """Run ``query`` and collect the result."""
        context = self.context(query)
        try:
            result = context.execute(query, eager=True)
        except Exception as exc:  # Polars raises several SQL error types: one message for the user
            raise SqlError(f"query failed: {exc} (tables: {', '.join(TABLES)})") from exc
        assert isinstance(result, pl.DataFrame)
        return result


def run_sql(store: storage.Store, query: str) -> pl.DataFrame:
    """Run one query over the tables under ``store`` (see the module docstring)."""
    with SqlSession(store) as session:
        return session.execute(query)


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
