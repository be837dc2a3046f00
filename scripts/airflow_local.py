"""Run the project's DAGs under a local Airflow: a project-local ``AIRFLOW_HOME`` with a SQLite
metadata DB, the repository's ``dags/`` and ``plugins/``, and ``dag.test()``.

Call :func:`configure` before anything imports airflow.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_HOME = REPO / ".airflow"
POOL = "llm_judge"


def configure(home: Path = DEFAULT_HOME) -> Path:
    """Point Airflow at a project-local home and the repository's DAGs; returns the home."""
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["AIRFLOW_HOME"] = str(home)
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
    os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{home / 'airflow.db'}"
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    paths = [str(REPO), str(REPO / "plugins")]
    for path in paths:
        if path not in sys.path:
            sys.path.insert(0, path)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (*paths, os.environ.get("PYTHONPATH", "")) if p)
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    return home


def migrate() -> None:
    """``airflow db migrate`` on the local metadata DB (idempotent, a few seconds)."""
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())


def ensure_pool(slots: int = 4) -> None:
    """Create the ``llm_judge`` pool that the judge tasks run in."""
    from airflow.models.pool import Pool

    Pool.create_or_update_pool(POOL, slots, "LLM judge calls across workers", include_deferred=False)


def load_dag(dag_id: str) -> Any:
    """The DAG from the repository's dags/ folder; fails with the import errors when broken."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / f"{dag_id}.py"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    return bag.dags[dag_id]


def run_dag(dag_id: str, day: dt.date, conf: dict[str, Any]) -> Any:
    """``dag.test()`` for the logical date of ``day``; returns the DagRun."""
    dag = load_dag(dag_id)
    logical = dt.datetime.combine(day, dt.time(2, 0), dt.UTC)
    return dag.test(logical_date=logical, run_conf=conf)


def task_states(dag_run: Any) -> dict[str, str]:
    """State of every task instance of a finished DagRun (mapped ones as task_id[index])."""
    return task_instances(dag_run, lambda ti: str(ti.state))


def task_instances(dag_run: Any, value: Callable[[Any], Any]) -> dict[str, Any]:
    """`value` of every task instance of a DagRun, by task_id (mapped ones as task_id[index])."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(TaskInstance).filter(
            TaskInstance.dag_id == dag_run.dag_id, TaskInstance.run_id == dag_run.run_id
        ).all()
        return {(f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id): value(ti) for ti in rows}


def xcom(dag_run: Any, task_id: str) -> Any:
    """The value a task of a finished DagRun returned (its ``return_value`` XCom)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.query(XComModel).filter(
            XComModel.dag_id == dag_run.dag_id, XComModel.run_id == dag_run.run_id,
            XComModel.task_id == task_id, XComModel.key == "return_value",
        ).one()
        return XComModel.deserialize_value(row)
