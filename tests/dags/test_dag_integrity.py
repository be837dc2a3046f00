"""DAG integrity and policy: the DAG files import cleanly, fast, and follow the house rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import airflow_local

REPO = Path(__file__).resolve().parents[2]
DAG_FILES = sorted((REPO / "dags").glob("*.py"))


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))


def test_no_import_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert {p.stem for p in DAG_FILES} <= set(dagbag.dag_ids)


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda p: p.stem)
def test_dag_id_is_file_stem_with_policy(dagbag, path: Path) -> None:
    dag = dagbag.dags[path.stem]
    assert dag is not None, f"{path.name} defines no DAG named {path.stem}"
    assert dag.tags, "every DAG has tags"
    assert dag.doc_md and len(dag.doc_md) > 100, "every DAG documents itself"
    # The daily DAG's run waiting for a late day must not hold a manual trigger (nor the next day).
    assert dag.max_active_runs == (4 if path.stem == "daily_evaluation" else 1)
    assert dag.catchup is False
    for task in dag.tasks:
        assert task.retries >= 1, f"{task.task_id} has no retries"


def test_daily_schedule_pool_and_params(dagbag) -> None:
    dag = dagbag.dags["daily_evaluation"]
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression == "0 2 * * *"
    judge = dag.get_task("judge")
    assert judge.pool == airflow_local.POOL
    assert judge.retries >= 2
    from evaluation.contract.options import RUN_OPTIONS

    assert {o.name for o in RUN_OPTIONS} | {"date"} == set(dag.params.keys())


@pytest.mark.parametrize(
    "conf, fragment",
    [
        ({"chunk_size": 0}, "chunk_size"),
        ({"judges": ["rag", "bogus"]}, "judges"),
        ({"pass_threshold": 1.5}, "pass_threshold"),
        ({"date": "25/11/2026"}, "date"),
        ({"concurrency": "many"}, "concurrency"),
    ],
)
def test_params_refuse_a_bad_conf_with_a_clear_error(dagbag, conf: dict, fragment: str) -> None:
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    dag = dagbag.dags["daily_evaluation"]
    params = ParamsDict(dag.params)
    with pytest.raises(ParamValidationError) as error:
        for key, value in conf.items():
            params[key] = value
        params.validate()
    assert fragment in str(error.value)


def test_good_conf_validates(dagbag) -> None:
    from airflow.sdk.definitions.param import ParamsDict

    params = ParamsDict(dagbag.dags["daily_evaluation"].params)
    params["judges"] = ["rag"]
    params["sample"] = "0.5"
    params["budget_usd"] = 2.5
    assert params.validate()["judges"] == ["rag"]


def test_dag_files_parse_without_heavy_imports() -> None:
    """What keeps a DAG file quick to parse is what it imports at parse time: none of the heavy
    modules (its parse time, a figure of the machine's load, is not asserted here). Every file is
    parsed in one fresh process, each blamed for the heavy modules that appear while it parses."""
    # airflow.sdk first: every DAG file imports it, and the DAG processor has it loaded already
    code = (
        "import importlib.util, json, sys, airflow.sdk\n"
        "HEAVY = ('litellm', 'polars', 'great_expectations', 'pandas', 'boto3')\n"
        "found = {}\n"
        f"for path in {[str(p) for p in DAG_FILES]!r}:\n"
        "    before = {m for m in HEAVY if m in sys.modules}\n"
        "    spec = importlib.util.spec_from_file_location('dagfile_' + str(len(found)), path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "    found[path] = sorted(m for m in HEAVY if m in sys.modules and m not in before)\n"
        "print(json.dumps(found))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(found) == [str(p) for p in DAG_FILES]
    assert {Path(path).name: heavy for path, heavy in found.items() if heavy} == {}, "imported at parse time"


def test_library_never_imports_airflow() -> None:
    code = (
        "import importlib, pkgutil, sys, evaluation\n"
        "for m in pkgutil.walk_packages(evaluation.__path__, 'evaluation.'):\n"
        "    if m.name != 'evaluation.__main__': importlib.import_module(m.name)\n"
        "print(sorted(k for k in sys.modules if k == 'airflow' or k.startswith('airflow.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    offenders = [
        str(p) for p in (REPO / "evaluation").rglob("*.py")
        if any(line.lstrip().startswith(("import airflow", "from airflow")) for line in p.read_text().splitlines())
    ]
    assert offenders == []
