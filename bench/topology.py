"""The deployed topology (child of :mod:`bench.run`): ``daily_evaluation`` run by the Celery
worker of the docker-compose stack started natively (:class:`scripts.deployment.LocalDeployment`:
Postgres, Redis, scheduler, dag-processor, api-server, triggerer, Celery worker), triggered over
the REST API, on a generated day with the offline judge; then the same day again.

A run's time is the DAG run's own (``start_date`` to ``end_date`` as Airflow recorded them), so
start-up and the time a run waits in the queue are not counted.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from bench.common import child_main


def _seconds(run: dict[str, Any]) -> float:
    start = dt.datetime.fromisoformat(run["start_date"])
    end = dt.datetime.fromisoformat(run["end_date"])
    return round((end - start).total_seconds(), 2)


def daily(params: dict[str, Any]) -> dict[str, Any]:
    """First run and re-run of a day under Celery and Postgres."""
    import polars as pl

    from bench import data
    from evaluation import storage
    from scripts.deployment import LocalDeployment

    records = int(params["records"])
    raw_root = data.raw_day(records, unique=True, bad=False)
    day = data.DAY

    def write_day(deployment: LocalDeployment) -> None:
        raw = storage.open_store(deployment.compose_env["EVALUATION_INPUT_URI"], deployment.s3_access())
        for path in sorted(raw_root.rglob("part-*")):
            raw.write_bytes(str(path.relative_to(raw_root)), path.read_bytes())

    conf = {"date": day.isoformat(), "chunk_size": 250, "quiet_period_s": 0}
    started = time.monotonic()
    # Unpausing starts the schedule's own run of its latest day, which has no logs here: with no
    # quiet period it fails at once instead of waiting, ahead of the measured runs, for its deadline.
    variables = {"AIRFLOW_DAGS_PAUSED_AT_CREATION": "true", "EVALUATION_QUIET_PERIOD_S": "0"}
    with LocalDeployment(variables, prepare=write_day, stop_grace=5.0) as running:
        api = running.api
        assert api is not None
        setup_s = time.monotonic() - started
        api.unpause("daily_evaluation")
        out = storage.open_store(running.compose_env["EVALUATION_OUTPUT_URI"], running.s3_access())
        results = []
        for _ in ("first", "rerun"):
            run = api.wait_for_run("daily_evaluation", api.trigger("daily_evaluation", conf)["dag_run_id"], timeout=900)
            row = storage.read_parquet(out, storage.run_key(day, run["dag_run_id"])).row(0, named=True)
            states = api.task_states("daily_evaluation", run["dag_run_id"])
            results.append({
                "state": run["state"], "seconds": _seconds(run) if run["end_date"] else None,
                "tasks": len(states), "calls_made": int(row["calls_made"]), "calls_reused": int(row["calls_reused"]),
                "rows": int(row["rows"]), "status": row["status"], "message": row["message"],
                "failed_tasks": sorted(t for t, s in states.items() if s != "success"),
            })
        landed = storage.landed_key(out, "evaluations", day)
        rows = storage.read_parquet(out, landed).select(pl.len()).item() if landed is not None else 0
    return {"records": records, "conf": conf, "setup_s": round(setup_s, 1), "first": results[0],
            "rerun": results[1], "landed_rows": rows}


if __name__ == "__main__":
    child_main({"daily": daily})
