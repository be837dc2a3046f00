"""End to end (child of :mod:`bench.run`): ``daily_evaluation`` under ``dag.test()`` on embedded S3
with the offline judge, then the same day again.

Set-up (imports, the Airflow metadata DB in a fresh temporary ``AIRFLOW_HOME``, S3, the generated
day) is not timed. ``dag.test()`` runs every task in this process, so wrapping
``JudgeClient.call_many`` measures the time spent in judge calls and counts the calls made.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import child_main, cpu_seconds, timed

INPUT_URI = "s3://bench-logs/raw"
OUTPUT_URI = "s3://bench-evaluation/curated"


def _run(airflow_local: Any, day: dt.date, conf: dict[str, Any], timer: Any, out: Any) -> dict[str, Any]:
    import polars as pl

    from evaluation import storage

    seconds_before, calls_before = timer.seconds, timer.calls
    cpu_before = cpu_seconds()
    dag_run, wall = timed(airflow_local.run_dag, "daily_evaluation", day, conf)
    states = airflow_local.task_states(dag_run)
    # Each task instance's own duration (start to end, as Airflow recorded it).
    durations = airflow_local.task_instances(dag_run, lambda ti: round(float(ti.duration or 0.0), 2))
    runs = storage.read_parquet(out, storage.run_key(day, dag_run.run_id))
    row = runs.row(0, named=True)
    evaluations = storage.read_day(out, "evaluations", day)
    in_calls = timer.seconds - seconds_before
    return {
        "state": str(dag_run.state),
        "failed_tasks": sorted(t for t, s in states.items() if s != "success"),
        "tasks": len(states),
        "seconds": round(wall, 2),
        "cpu_seconds": round(cpu_seconds() - cpu_before, 2),
        "judge_calls_s": round(in_calls, 2),
        "outside_judge_calls_s": round(wall - in_calls, 2),
        "outside_share": round((wall - in_calls) / wall, 3),
        "llm_calls": timer.calls - calls_before,
        "calls_made": int(row["calls_made"]),
        "calls_reused": int(row["calls_reused"]),
        "rows": evaluations.height,
        "ok_rows": int(evaluations.filter(pl.col("judge_status") == "ok").height),
        "timings": row["timings"],
        "task_seconds": durations,
        "in_tasks_s": round(sum(durations.values()), 2),
    }


def daily(params: dict[str, Any]) -> dict[str, Any]:
    """Items 4 and 5: the day, then the unchanged day again."""
    setup_started = time.monotonic()
    from scripts import airflow_local

    home = Path(tempfile.mkdtemp(prefix="bench-airflow-"))
    airflow_local.configure(home)
    from bench import data
    from bench.judge import CallTimer
    from evaluation import storage
    from evaluation.testing.s3 import local_s3_environment

    records = int(params["records"])
    raw_root = data.raw_day(records, unique=True, bad=False)
    with local_s3_environment("bench-logs", "bench-evaluation") as s3:
        s3_access = s3.access()
        raw = storage.open_store(INPUT_URI, s3_access)
        out = storage.open_store(OUTPUT_URI, s3_access)
        for path in sorted(raw_root.rglob("part-*")):
            raw.write_bytes(str(path.relative_to(raw_root)), path.read_bytes())
        airflow_local.migrate()
        airflow_local.ensure_pool()
        airflow_local.load_dag("daily_evaluation")  # parse once before timing (the DagBag import)
        import evaluation_airflow  # noqa: F401
        import great_expectations  # noqa: F401

        import evaluation.calling.client  # noqa: F401

        timer = CallTimer()
        setup_s = time.monotonic() - setup_started
        # The generated day is complete once written: no quiet period to wait out.
        conf = {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judge_model": "offline/lexical", "quiet_period_s": 0}
        first = _run(airflow_local, data.DAY, conf, timer, out)
        second = _run(airflow_local, data.DAY, conf, timer, out)
    return {"records": records, "conf": conf, "setup_s": round(setup_s, 2), "first": first, "rerun": second}


if __name__ == "__main__":
    child_main({"daily": daily})
