"""Reading the landed tables: DuckDB over the hive-partitioned Parquet agrees with the pipeline's
own ``daily_summary``, and so does ``python -m evaluation sql`` (evaluation.storage.sql), which reads the
tables in place and never opens a ``dt`` partition the query cannot match."""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from evaluation import compare, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import Stores
from evaluation.storage import sql
from evaluation.testing import synthetic

DAYS = (dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3))
RECORDS = 150  # per day; enough that the planted bad lines stay under max_reject_ratio

#: Per (dt, model, judge): the daily_summary columns recomputed from evaluations. Standard SQL
#: that DuckDB and Polars both run; {evaluations} is the table expression.
AGGREGATES = """
SELECT dt, model, judge,
       COUNT(*) AS rows,
       SUM(CASE WHEN judge_status = 'ok' THEN 1 ELSE 0 END) AS n_ok,
       SUM(CASE WHEN judge_status = 'parse_error' THEN 1 ELSE 0 END) AS n_parse_error,
       SUM(CASE WHEN judge_status = 'judge_failed' THEN 1 ELSE 0 END) AS n_judge_failed,
       SUM(CASE WHEN judge_status = 'call_error' THEN 1 ELSE 0 END) AS n_call_error,
       SUM(CASE WHEN judge_status = 'skipped' THEN 1 ELSE 0 END) AS n_skipped,
       SUM(CASE WHEN judge_status = 'ok' AND verdict = 'pass' THEN 1 ELSE 0 END) AS n_pass,
       SUM(CASE WHEN judge_status = 'ok' AND verdict = 'borderline' THEN 1 ELSE 0 END) AS n_borderline,
       SUM(CASE WHEN judge_status = 'ok' AND verdict = 'fail' THEN 1 ELSE 0 END) AS n_fail,
       AVG(CASE WHEN judge_status = 'ok' THEN score END) AS score_mean,
       CAST(SUM(CASE WHEN judge_status = 'ok' AND verdict = 'pass' THEN 1 ELSE 0 END) AS DOUBLE)
           / NULLIF(SUM(CASE WHEN judge_status = 'ok' THEN 1 ELSE 0 END), 0) AS pass_rate
FROM {evaluations}
GROUP BY dt, model, judge
ORDER BY dt, model, judge
"""
COUNTS = ["rows", "n_ok", "n_parse_error", "n_judge_failed", "n_call_error", "n_skipped", "n_pass", "n_borderline",
          "n_fail"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> storage.Store:
    """Three generated days evaluated by the pipeline (offline judge), and one comparison."""
    root = tmp_path_factory.mktemp("sql")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        synthetic.write_day(storage.open_store(raw_uri), day, RECORDS)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"test-{day}")
        run_day(cfg, Stores.open(cfg))
    store = storage.open_store(out_uri)
    spec = compare.ComparisonSpec(start_date=DAYS[0], end_date=DAYS[-1], models=["assistant-lite", "assistant-v2"],
                                  bootstrap=200)
    compare.run_comparison(store, spec, comparison_id="sql-test")
    return store


def _summary(store: storage.Store) -> pl.DataFrame:
    summary = storage.scan_table(store, "daily_summary")
    assert summary is not None
    return summary.collect().sort("dt", "model", "judge")


def _assert_matches_summary(result: pl.DataFrame, summary: pl.DataFrame) -> None:
    assert result.height == summary.height == len(DAYS) * 9
    assert result.select("dt", "model", "judge").rows() == summary.select("dt", "model", "judge").rows()
    for column in COUNTS:
        assert result[column].cast(pl.Int64).to_list() == summary[column].cast(pl.Int64).to_list(), column
    for column in ("score_mean", "pass_rate"):
        assert result[column].to_list() == pytest.approx(summary[column].to_list(), rel=1e-12, abs=1e-12), column


def test_duckdb_over_the_landed_parquet_agrees_with_daily_summary(out) -> None:
    source = f"read_parquet('{out.root}/evaluations/*/*.parquet', hive_partitioning = true)"
    result = duckdb.sql(AGGREGATES.format(evaluations=source)).pl()
    assert result.schema["dt"] == pl.Date  # the hive partition reads back as a date
    _assert_matches_summary(result, _summary(out))

    summary = duckdb.sql(
        f"SELECT dt, model, judge, n_ok, score_mean, pass_rate FROM read_parquet('{out.root}/daily_summary/*/*.parquet',"
        " hive_partitioning = true) ORDER BY dt, model, judge"
    ).pl()
    assert summary["n_ok"].to_list() == result["n_ok"].to_list()
    [(total,)] = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{out.root}/evaluations/*/*.parquet', hive_partitioning = true)"
        " WHERE dt = DATE '2026-11-02'"
    ).fetchall()
    assert total == _summary(out).filter(pl.col("dt") == DAYS[1])["rows"].sum()


def test_sql_runs_the_same_aggregates(out) -> None:
    result = sql.run_sql(out, AGGREGATES.format(evaluations="evaluations"))
    _assert_matches_summary(result, _summary(out))


def test_sql_tables_are_registered_with_their_dt(out) -> None:
    runs = sql.run_sql(out, "SELECT dt, run_id, status, input_records FROM runs ORDER BY dt")
    assert runs["dt"].to_list() == list(DAYS) and set(runs["status"]) == {"success"}
    rejects = sql.run_sql(out, "SELECT dt, count(*) AS n FROM rejects GROUP BY dt ORDER BY dt")
    assert rejects["n"].to_list() == [len(synthetic.bad_lines(d)) + 1 for d in DAYS]
    calls = sql.run_sql(out, "SELECT count(*) AS n FROM judge_calls WHERE dt = DATE '2026-11-03'")
    assert calls["n"][0] > 0
    metrics = sql.run_sql(
        out,
        "SELECT judge, model, delta, test FROM comparisons WHERE comparison_id = 'sql-test' AND metric = 'score' "
        "AND NOT is_baseline ORDER BY judge",
    )
    assert metrics["judge"].to_list() == ["masis", "prompt", "rag"] and set(metrics["model"]) == {"assistant-v2"}
    shifts = sql.run_sql(out, "SELECT judge, model, SUM(shift_pp) AS s FROM comparison_verdicts GROUP BY judge, model")
    assert shifts["s"].abs().max() < 1e-9


@pytest.fixture(scope="module")
def with_torn_day(out, tmp_path_factory: pytest.TempPathFactory) -> storage.Store:
    """The landed tables plus an unreadable ``evaluations`` object for 2026-10-31: a query that
    opens it fails, so a query that succeeds never opened it."""
    root = tmp_path_factory.mktemp("torn") / "out"
    shutil.copytree(out.root, root)
    torn = root / storage.legacy_key("evaluations", dt.date(2026, 10, 31))  # a day landed before commit records
    torn.parent.mkdir(parents=True)
    torn.write_bytes(b"PAR1 not parquet at all PAR1")
    return storage.open_store(str(root))


@pytest.mark.parametrize(
    "where, opens_torn_day",
    [
        ("dt = DATE '2026-11-02'", False),
        ("dt = '2026-11-02' AND judge = 'rag'", False),
        ("judge = 'rag' AND dt BETWEEN DATE '2026-11-02' AND DATE '2026-11-30'", False),
        ("dt >= '2026-11-02' AND dt < '2026-11-03'", False),
        ("dt > '2026-11-01'", False),
        ("dt IN ('2026-11-01', '2026-11-03')", False),
        ("(dt = '2026-11-03') AND score IS NOT NULL", False),
        ("dt = '2026-12-25'", False),
        ("dt = '2026-11-01' OR dt = '2026-11-03'", False),
        # Predicates that the torn day can satisfy, or none on dt: every partition is read. So is
        # an OR that mixes dt with other columns (Polars 2.1 prunes on a predicate of dt alone).
        ("dt = '2026-11-01' OR (dt = '2026-11-03' AND judge = 'rag')", True),
        ("dt <= DATE '2026-11-01'", True),
        ("NOT (dt = '2026-11-01')", True),
        ("dt NOT IN ('2026-11-01')", True),
        ("judge = 'dt = ''2026-11-01'''", True),
    ],
)
def test_sql_never_opens_a_partition_the_query_cannot_match(out, with_torn_day, where: str, opens_torn_day: bool) -> None:
    query = f"SELECT dt, count(*) AS n FROM evaluations WHERE {where} GROUP BY dt ORDER BY dt"
    if opens_torn_day:
        with pytest.raises(sql.SqlError, match="query failed"):
            sql.run_sql(with_torn_day, query)
        return
    result = sql.run_sql(with_torn_day, query)
    expected = duckdb.sql(query.replace(
        "FROM evaluations", f"FROM read_parquet('{out.root}/evaluations/*/*.parquet', hive_partitioning = true)"
    )).pl()
    assert result["dt"].to_list() == expected["dt"].to_list()  # pruning never changes the answer
    assert result["n"].to_list() == expected["n"].to_list()


@pytest.mark.parametrize(
    "query",
    [
        "WITH x AS (SELECT * FROM evaluations WHERE dt = '2026-11-02') SELECT count(*) AS n FROM x",
        "SELECT count(*) AS n FROM evaluations e JOIN daily_summary d ON e.dt = d.dt AND e.model = d.model "
        "AND e.judge = d.judge WHERE e.dt = '2026-11-02'",
        "SELECT count(*) AS n FROM (SELECT record_id FROM evaluations WHERE dt BETWEEN '2026-11-02' AND '2026-11-03')",
    ],
)
def test_pruning_reaches_through_subqueries_and_joins(with_torn_day, query: str) -> None:
    assert sql.run_sql(with_torn_day, query)["n"][0] > 0


def test_referenced_tables_skip_literals_and_unknown_names() -> None:
    query = "SELECT 'runs' AS label FROM evaluations JOIN comparisons USING (model) -- rejects"
    assert sql.referenced_tables(query) == ["evaluations", "comparisons"]


def test_a_query_over_an_unknown_table_names_the_tables(out) -> None:
    with pytest.raises(sql.SqlError, match="tables: evaluations"):
        sql.run_sql(out, "SELECT * FROM evaluation")


def test_cli_sql_writes_csv_and_parquet(out, tmp_path: Path, capsys: Any) -> None:
    from evaluation.cli.main import main

    query = "SELECT dt, record_id, judge, hits, clamps_applied FROM evaluations WHERE dt = DATE '2026-11-01' " \
            "AND judge = 'prompt' AND judge_status = 'ok' ORDER BY record_id LIMIT 5"
    assert main(["sql", query, "--output", out.root, "--format", "csv", "--to", str(tmp_path / "r.csv")]) == 0
    csv = pl.read_csv(tmp_path / "r.csv")
    assert csv.height == 5 and csv["hits"][0].startswith("[")  # lists as JSON text
    assert main(["sql", query, "--output", out.root, "--format", "parquet", "--to", str(tmp_path / "r.parquet")]) == 0
    parquet = pl.read_parquet(tmp_path / "r.parquet")
    assert parquet.schema["hits"] == pl.List(pl.String) and parquet["record_id"].to_list() == csv["record_id"].to_list()
    capsys.readouterr()
    assert main(["sql", "SELECT judge, count(*) AS n FROM evaluations GROUP BY judge ORDER BY judge",
                 "--output", out.root]) == 0
    printed = capsys.readouterr().out
    assert "masis" in printed and "prompt" in printed and "rag" in printed


@pytest.mark.parametrize("command", [["sql", "SELECT count(*) AS n FROM evaluations"], ["report", "--date", "latest"]])
def test_the_readers_take_the_output_root_from_the_environment(out, command: list[str], monkeypatch: Any,
                                                                capsys: Any) -> None:
    from evaluation.cli.main import main

    monkeypatch.delenv("EVALUATION_OUTPUT_URI", raising=False)
    with pytest.raises(SystemExit):  # without either, --output is required
        main(command)
    assert "required: --output" in capsys.readouterr().err
    monkeypatch.setenv("EVALUATION_OUTPUT_URI", out.root)
    assert main(command) == 0


DOCS = Path(__file__).resolve().parents[2] / "docs" / "tables.md"
SUMMARY_METRICS = ("score", "faithfulness", "relevance", "completeness", "reasoning_quality", "context_relevance",
                   "answer_relevance", "semantic_similarity")


def _documented_columns(heading: str) -> list[str]:
    """Column names in the first cell of the table under ``heading`` in docs/tables.md."""
    text = DOCS.read_text()
    section = text[text.index(heading) + len(heading):]
    section = section[: section.find("\n#")] if "\n#" in section else section
    names: list[str] = []
    per_metric: list[str] = []  # consecutive `<metric>_x` rows expand metric by metric, as landed
    for cell in [*re.findall(r"^\| `([^`]+)` \|", section, re.M), ""]:
        if "<metric>" in cell:
            per_metric.append(cell)
            continue
        names += [p.replace("<metric>", m) for m in SUMMARY_METRICS for p in per_metric]
        per_metric = []
        names += [cell] if cell else []
    return names


@pytest.mark.parametrize("table", storage.TABLES)
def test_docs_explain_every_landed_column(out, table: str) -> None:
    landed = storage.scan_table(out, table)
    assert landed is not None and _documented_columns(f"## `{table}`") == landed.collect_schema().names()


def test_docs_explain_every_comparison_column() -> None:
    from evaluation.contract.config import EVALUATION_COLUMNS

    assert _documented_columns("### `metrics.parquet`") == list(compare.METRICS_SCHEMA)
    assert _documented_columns("### `verdicts.parquet`") == list(compare.VERDICTS_SCHEMA)
    assert _documented_columns("## `evaluations`") == list(EVALUATION_COLUMNS)
    text = DOCS.read_text()
    ddl = text[text.index("CREATE EXTERNAL TABLE llm_evaluation.evaluations ("):]
    ddl = ddl[: ddl.index("PARTITIONED BY (dt date)")]
    athena = re.findall(r"(\w+) (?:string|double|bigint|boolean|timestamp|array<string>)", ddl)
    assert athena == [c for c in EVALUATION_COLUMNS if c != "dt"]


@pytest.mark.parametrize(("query", "expected"), [
    ("SELECT model, count(*), avg(score), avg(score) AS mean_score FROM t GROUP BY model",
     ["model", "count(*)", "avg(score)", "mean_score"]),
    ("WITH x AS (SELECT model, score FROM t) SELECT DISTINCT model, count(*) n, sum(score) / count(*) FROM x GROUP BY model",
     ["model", "n", "sum(score) / count(*)"]),
    ("SELECT * FROM t", ["model", "score"]),
    ("select model, max(score) as \"best, of all\" from t group by model", ["model", "best, of all"]),
])
def test_columns_keep_the_names_the_sql_wrote(query: str, expected: list[str]) -> None:
    from evaluation.storage.sql import with_sql_names

    context = pl.SQLContext(t=pl.LazyFrame({"model": ["a", "a", "b"], "score": [0.1234567, 0.5, 1.0]}))
    frame = with_sql_names(query, context.execute(query, eager=True))
    assert frame.columns == expected


def test_printed_numbers_are_rounded_and_the_others_formats_are_not() -> None:
    from evaluation.storage.sql import render

    frame = pl.DataFrame({"mean": [0.123456789], "tiny": [0.0000123456], "n": [3]})
    table = render(frame, "table", width=200)
    assert "0.1235" in table and "1.23e-05" in table and "0.123456789" not in table
    assert "0.123456789" in render(frame, "csv") and "0.123456789" in render(frame, "json")
