"""Analysts' SQL over the landed tables, with Polars' ``SQLContext`` (``python -m evaluation sql``).

Tables are registered by name, only when the query names them, each as a ``LazyFrame`` over the
table's objects where they live (a directory, or S3 read in place: see
:func:`evaluation.storage.scan_table`). The four day tables are read through the days' commit
records, read once for the query (again when a day is landed again during it), so every day is one
run's, in every table the query joins:

==========================  ================================================================
``evaluations``             ``evaluations/dt=*/run-*.parquet`` that a day's commit names, ``dt`` (Date) from the path
``judge_calls``             ``judge_calls/dt=*/run-*.parquet``, likewise
``rejects``                 ``rejects/dt=*/run-*.parquet``, likewise
``daily_summary``           ``daily_summary/dt=*/run-*.parquet``, likewise
``runs``                    ``runs/dt=*/run-*.parquet``, ``dt``
``comparisons``             ``comparisons/comparison_id=*/metrics.parquet`` (has ``comparison_id``)
``comparison_verdicts``     ``comparisons/comparison_id=*/verdicts.parquet``
``calibrations``            ``calibrations/calibration_id=*/calibration.parquet`` (has ``calibration_id``)
``failed_rejects``          ``_failed/dt=*/run=*/rejects.parquet``: the rejects of runs that failed
                            (columns of ``rejects``, ``dt`` from the path)
==========================  ================================================================

Polars plans the whole query before it reads anything: only the columns the query uses are read,
and any predicate on ``dt`` that Polars can evaluate on the partition values (``=``, ``BETWEEN``,
``IN``, comparisons, ``OR`` of these, in a ``WHERE``, a join or a subquery) skips the other
``dt=`` partitions' objects unopened. The SQL itself always filters, so pruning only ever saves
reading.

:func:`render` prints a result for people (a table, CSV, JSON or Markdown); an unaliased expression
of the ``SELECT`` list names its column as the SQL wrote it (:func:`with_sql_names`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
import re
import shutil
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.contract.errors import InputError
from evaluation.storage.labels import scan_labels

__all__ = ["FORMATS", "TABLES", "SqlError", "referenced_tables", "render", "run_sql", "with_sql_names"]

#: SQL name -> file of each comparison.
COMPARISON_TABLES: dict[str, str] = {"comparisons": "metrics.parquet", "comparison_verdicts": "verdicts.parquet"}
#: SQL name -> file of each judge calibration.
CALIBRATION_TABLES: dict[str, str] = {"calibrations": "calibration.parquet"}
#: SQL name -> the file each failed run's evidence holds under ``_failed/dt=*/run=*/``.
FAILED_TABLES: dict[str, str] = {"failed_rejects": "rejects.parquet"}
#: The review queue and people's labels (docs/people.md): ``human_labels`` one row per label id.
PEOPLE_TABLES: tuple[str, ...] = ("review_queue", "human_labels")
TABLES: tuple[str, ...] = (*storage.TABLES, *COMPARISON_TABLES, *CALIBRATION_TABLES, *FAILED_TABLES, *PEOPLE_TABLES)
#: What ``--format`` accepts for printing (``parquet`` also writes, with ``--to``).
FORMATS = ("table", "csv", "json", "markdown")
#: Widest cell of a printed table, in characters.
CELL_CHARS = 40

#: A string literal or a comment, whichever starts first (a quote in a comment, or `--` in a
#: literal, must not be mistaken for the other).
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)


class SqlError(InputError, RuntimeError):
    """A query cannot run: the message names the table or the cause."""


def referenced_tables(query: str) -> list[str]:
    """The known tables the query names (outside string literals and comments), in :data:`TABLES` order."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_]\w*", _LITERAL_OR_COMMENT.sub(" ", query))}
    return [t for t in TABLES if t in words]


def scan(store: storage.Store, table: str, landed: storage.Landed | None = None) -> pl.LazyFrame:
    """One table of :data:`TABLES` as a LazyFrame over its objects, read in place; a day table
    through ``landed`` (else the commit records as they are now)."""
    if table in COMPARISON_TABLES or table in CALIBRATION_TABLES:
        kind = "comparison" if table in COMPARISON_TABLES else "calibration"
        name = {**COMPARISON_TABLES, **CALIBRATION_TABLES}[table]
        keys = [o.key for o in store.list(f"{kind}s/") if re.fullmatch(rf"{kind}s/{kind}_id=[^/]+/{name}", o.key)]
        frame = storage.scan_parquet(store, keys, hive=False) if keys else None
        where = store.uri(f"{kind}s/")
    elif table in FAILED_TABLES:
        frame = _scan_failed(store, FAILED_TABLES[table])
        where = store.uri("_failed/")
    elif table in PEOPLE_TABLES or table in storage.TABLES:  # only a day table is read through ``landed``
        frame = scan_labels(store) if table == "human_labels" else storage.scan_table(store, table, landed)
        where = store.uri(f"{table}/")
    else:
        raise SqlError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
    if frame is None:
        raise SqlError(f"table {table} has no data under {where}")
    return frame


def _scan_failed(store: storage.Store, name: str) -> pl.LazyFrame | None:
    """One file of every failed run's evidence, with ``dt`` (Date) from its path."""
    frames = []
    for info in store.list("_failed/"):
        found = re.fullmatch(rf"_failed/dt=(\d{{4}}-\d{{2}}-\d{{2}})/run=[^/]+/{re.escape(name)}", info.key)
        if found:
            day = dt.date.fromisoformat(found.group(1))
            frames.append(storage.scan_parquet(store, [info.key], hive=False).select(pl.lit(day).alias("dt"), pl.all()))
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _error_line(exc: Exception, tables: dict[str, pl.LazyFrame]) -> str:
    """Polars' error without its query plan; an unknown column named with the tables' columns."""
    text = str(exc).split("\n\n")[0].strip()
    missing = re.search(r'unable to find column "([^"]+)"', text)
    if isinstance(exc, pl.exceptions.ColumnNotFoundError) and missing:
        column = missing.group(1)
        known = {name: frame.collect_schema().names() for name, frame in tables.items()}
        close = difflib.get_close_matches(column, [c for names in known.values() for c in names], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        listed = "; ".join(f"{name} has {', '.join(names)}" for name, names in known.items())
        return f"unknown column {column!r}{hint}: {listed}"
    return f"query failed: {text} (tables: {', '.join(TABLES)})"


def run_sql(store: storage.Store, query: str) -> pl.DataFrame:
    """Run one query over the tables under ``store`` (see the module docstring)."""
    named = referenced_tables(query)

    def execute(landed: storage.Landed | None) -> pl.DataFrame:
        context: pl.SQLContext[Any] = pl.SQLContext()
        tables = {table: scan(store, table, landed) for table in named}
        for table, frame in tables.items():
            context.register(table, frame)
        try:  # the streaming engine: aggregations over many days need memory for the groups, not the rows
            return with_sql_names(query, context.execute(query, eager=False).collect(engine="streaming"))
        except Exception as exc:  # Polars raises several SQL and I/O error types: one message for the user
            raise SqlError(_error_line(exc, tables)) from exc

    if not set(named) & set(storage.DAY_TABLES):
        return execute(None)
    # The commit records, read once per try: every day table of the query is of the same run per day.
    return storage.read_consistently(store, None, execute)


_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[(),]|[^\s'\"(),]+|\s+")
_BARE_ALIAS = re.compile(r"(?:\)|[\w\"])\s+(?:as\s+)?(\"(?:[^\"]|\"\")*\"|[A-Za-z_]\w*)$", re.I)
_EXPRESSION = re.compile(r"[()+\-*/%|<>=]")


def select_items(query: str) -> list[str]:
    """The items of the outermost ``SELECT`` list of ``query`` as written (commas and ``FROM``
    inside parentheses or quotes are not theirs); [] when it has none."""
    depth, inside = 0, False
    items: list[str] = []
    current: list[str] = []
    for token in _TOKEN.findall(query):
        word = token.lower()
        if depth == 0 and not inside and word == "select":
            inside, items, current = True, [], []
            continue
        if inside and depth == 0 and (word in ("from", "where", "group", "order", "limit", "having", "union") or token == ";"):
            break
        depth += (token == "(") - (token == ")")
        if not inside:
            continue
        if depth == 0 and token == ",":
            items.append("".join(current).strip())
            current = []
        else:
            current.append(token)
    tail = "".join(current).strip()
    items = [*items, tail] if inside and tail else items
    return [item[len("distinct"):].strip() if index == 0 and item.lower().startswith("distinct ") else item
            for index, item in enumerate(items)]


def with_sql_names(query: str, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with each unaliased expression of the query's ``SELECT`` list named as the SQL
    wrote it (``count(*)``, not Polars' ``len``; ``avg(score)``, not ``score``); columns whose item
    has an alias, is a plain column, or whose list has a ``*`` keep their names."""
    items = select_items(query)
    if len(items) != frame.width or any(item == "*" or item.endswith(".*") for item in items):
        return frame
    names = list(frame.columns)
    for index, item in enumerate(items):
        if _EXPRESSION.search(item) and not _BARE_ALIAS.search(item):
            wanted = " ".join(item.split())
            if wanted not in names:
                names[index] = wanted
    return frame.rename(dict(zip(frame.columns, names, strict=True)))


def _number(value: float) -> str:
    """A float as a table shows it: 4 decimals, or 3 significant digits below 0.001."""
    if value == 0 or not math.isfinite(value) or abs(value) >= 0.001:
        return repr(round(value, 4)) if math.isfinite(value) else str(value)
    return f"{value:.3g}"


def _cell(value: Any, width: int) -> str:
    text = "null" if value is None else json.dumps(value, default=str) if isinstance(value, (list, dict)) \
        else _number(value) if isinstance(value, float) else str(value)
    text = " ".join(text.split())  # one line per cell
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(frame: pl.DataFrame, width: int) -> str:
    rows = [[_cell(v, CELL_CHARS) for v in row] for row in frame.iter_rows()]
    sizes = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(frame.columns)]
    if sum(sizes) + 3 * len(sizes) > width:  # too wide for the terminal: one block per row
        label = max(len(name) for name in frame.columns)
        blocks = []
        for number, row in enumerate(rows, 1):
            lines = [f"-[ row {number} ]" + "-" * max(0, min(width, label + CELL_CHARS + 3) - 12)]
            lines += [f"{name:<{label}} | {value}" for name, value in zip(frame.columns, row, strict=True)]
            blocks.append("\n".join(lines))
        return "\n".join(blocks)
    line = " | ".join(f"{name:<{size}}" for name, size in zip(frame.columns, sizes, strict=True))
    rule = "-+-".join("-" * size for size in sizes)
    body = [" | ".join(f"{v:<{size}}" for v, size in zip(row, sizes, strict=True)) for row in rows]
    return "\n".join([line.rstrip(), rule, *(b.rstrip() for b in body)])


def _markdown(frame: pl.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_cell(v, 10_000).replace("|", "\\|") for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines)


def render(frame: pl.DataFrame, fmt: str, *, max_rows: int = 50, width: int | None = None) -> str:
    """A query's result as text: ``table`` (at most ``max_rows`` rows, cells cut at
    :data:`CELL_CHARS`, one block per row when wider than ``width``, the terminal's by default),
    ``csv``, ``json`` (an array of row objects) or ``markdown``; ends with a newline."""
    if fmt == "csv":
        return csv_ready(frame).write_csv()
    if fmt == "json":
        return json.dumps(frame.to_dicts(), default=str, indent=1) + "\n"
    if fmt == "markdown":
        return _markdown(frame) + "\n"
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    width = width or shutil.get_terminal_size((120, 24)).columns
    shown = frame.head(max_rows)
    more = f"\n({frame.height} rows, {shown.height} shown; --max-rows to see more)" if frame.height > shown.height \
        else f"\n({frame.height} row{'s' if frame.height != 1 else ''})"
    return (_table(shown, width) if frame.width else "(no columns)") + more + "\n"


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
