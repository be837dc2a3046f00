"""``make demo``: the daily DAG end to end on the embedded default.

Starts a real S3 API in-process on loopback (moto's server mode), writes a generated day of
conversation logs to it, runs ``daily_evaluation`` under Airflow (``dag.test()`` with a SQLite
metadata DB in ``.airflow/``) with the built-in offline judge, prints what landed, and copies the
day's tables to ``demo-output/``. No network, no key.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import time
from pathlib import Path

from scripts import airflow_local

INPUT_URI = "s3://llm-logs/raw"
OUTPUT_URI = "s3://llm-evaluation/curated"
DEMO_OUTPUT = airflow_local.REPO / "demo-output"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--date", type=dt.date.fromisoformat,
                        default=dt.date.today() - dt.timedelta(days=1), help="the day to generate and evaluate")
    parser.add_argument("--records", type=int, default=450, help="valid records to generate")
    parser.add_argument("--output", type=Path, default=DEMO_OUTPUT, help="local copy of the landed tables")
    args = parser.parse_args(argv)

    started = time.monotonic()
    airflow_local.configure()
    from evaluation import storage, synthetic
    from evaluation.testing.s3 import local_s3_environment

    with local_s3_environment("llm-logs", "llm-evaluation") as s3:
        print(f"S3 API on {s3.endpoint_url} (moto, in-process)")
        client = s3.client()
        raw = storage.open_store(INPUT_URI, client)
        keys = synthetic.write_day(raw, args.date, args.records)
        print(f"wrote {args.records} generated records (+ planted bad ones) for {args.date}: "
              + ", ".join(raw.uri(k) for k in keys))

        print("preparing Airflow (metadata DB in .airflow/) ...")
        airflow_local.migrate()
        airflow_local.ensure_pool()
        conf = {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judge_model": "offline/lexical",
                "chunk_size": 150, "concurrency": 16}
        print("running daily_evaluation with dag.test() ...")
        dag_run = airflow_local.run_dag("daily_evaluation", args.date, conf)
        states = airflow_local.task_states(dag_run)
        print(f"DAG run {dag_run.run_id}: {dag_run.state}")
        for task, state in sorted(states.items()):
            print(f"  {task:<24} {state}")
        if str(dag_run.state) != "success":
            print("the DAG run failed; see the task logs above", file=sys.stderr)
            return 1

        out = storage.open_store(OUTPUT_URI, client)
        print_summary(out, args.date)
        copy_day(out, args.date, args.output)
        report = args.output / storage.report_key(args.date)
        print(f"daily quality report: {report} (landed at {out.uri(storage.report_key(args.date))})")
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


def print_summary(out: object, day: dt.date) -> None:
    """Counts per model, judge, status and verdict of the landed day."""
    import polars as pl

    from evaluation import storage

    evaluations = storage.read_parquet(out, storage.table_key("evaluations", day))  # type: ignore[arg-type]
    rejects = storage.read_parquet(out, storage.table_key("rejects", day))  # type: ignore[arg-type]
    pl.Config.set_tbl_rows(60)
    pl.Config.set_tbl_hide_dataframe_shape(True)
    counts = (
        evaluations.group_by("model", "judge", "judge_status", "verdict").len("rows")
        .sort("model", "judge", "judge_status", "verdict", nulls_last=True)
    )
    print(f"\nevaluations for {day}: {evaluations.height} rows")
    print(counts)
    print(f"\nrejects: {rejects.height}")
    for row in rejects.iter_rows(named=True):
        print(f"  {row['source_uri'].rsplit('/', 1)[-1]}:{row['line_no']}  {row['record_id']}  {'; '.join(row['reasons'])}")


def copy_day(out: object, day: dt.date, target: Path) -> None:
    """Copy the day's landed objects (tables, validation, report) to a local folder."""
    from evaluation import storage

    if target.exists():
        shutil.rmtree(target)
    partition = storage.day_partition(day)
    copied = 0
    for info in out.list(""):  # type: ignore[attr-defined]
        if info.key.startswith("_") or partition not in info.key:
            continue
        path = target / info.key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(out.read_bytes(info.key))  # type: ignore[attr-defined]
        copied += 1
    print(f"\ncopied {copied} objects of {day} to {target}/ (query them with DuckDB or Polars)")


if __name__ == "__main__":
    raise SystemExit(main())
