"""The options of a comparison, a calibration and the clean-up fall back to EVALUATION_<OPTION> as a
run's do (one derivation, env_name), shown in their `--help` and their DAG forms; an option of the
same name is one setting wherever it is (one variable, one default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.cli import main as cli
from evaluation.contract.options import (
    CALIBRATE_OPTIONS,
    COMPARE_OPTIONS,
    RETENTION_OPTIONS,
    RUN_OPTIONS,
    Option,
    env_name,
)

DAGS = Path(__file__).resolve().parents[3] / "dags"
#: The options whose variable is not derived from their name, and why (docs/deploy.md says so too).
NOT_DERIVED = {
    ("compare", "judge_model"): "EVALUATION_COMPARE_JUDGE_MODEL",  # empty compares the landed scores
    ("compare", "start_date"): None, ("compare", "end_date"): None, ("compare", "models"): None,  # the question
    ("calibrate", "golden_uri"): None,  # the set; the DAG's EVALUATION_GOLDEN_URI is the sets' root
}
SPECS: dict[str, tuple[Option, ...]] = {"compare": COMPARE_OPTIONS, "calibrate": CALIBRATE_OPTIONS,
                                        "gc": RETENTION_OPTIONS}


@pytest.mark.parametrize("command", list(SPECS))
def test_each_option_has_the_variable_named_after_it(command: str) -> None:
    for option in SPECS[command]:
        expected = NOT_DERIVED.get((command, option.name), env_name(option.name))
        assert option.env == expected, (command, option.name)


def test_an_option_of_the_same_name_is_one_setting() -> None:
    """The same variable has the same default wherever it applies (EVALUATION_CONCURRENCY is 8 for
    runs, re-judging comparisons and calibrations alike)."""
    seen: dict[str, Option] = {}
    for option in (*RUN_OPTIONS, *COMPARE_OPTIONS, *CALIBRATE_OPTIONS, *RETENTION_OPTIONS):
        if option.env is None:
            continue
        first = seen.setdefault(option.env, option)
        assert (first.name, first.fallback) == (option.name, option.fallback), option.env


@pytest.mark.parametrize("command", list(SPECS))
def test_help_names_each_variable(command: str, cli_help) -> None:
    out = cli_help(command)
    text = " ".join(out.split())
    for option in SPECS[command]:
        if option.env is not None:
            assert f"${option.env}" in text, option.name
    shown = {"compare": "(default: $EVALUATION_JUDGE_RPM)", "calibrate": "(default: $EVALUATION_CONCURRENCY, else 8)",
             "gc": "(default: $EVALUATION_WORK_DAYS, else 3)"}[command]
    assert shown in text


@pytest.mark.parametrize(("dag_id", "found"), [("model_comparison", COMPARE_OPTIONS),
                                               ("judge_calibration", CALIBRATE_OPTIONS),
                                               ("evaluation_maintenance", RETENTION_OPTIONS)])
def test_the_dags_form_leaves_each_option_empty_for_its_variable(dag_id: str, found: tuple[Option, ...]) -> None:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS / f"{dag_id}.py")).dags[dag_id]
    for option in found:
        if option.env is None or option.name not in dag.params:
            continue
        param = dag.params.get_param(option.name)
        assert param.value in (None, ""), option.name
        assert f"Empty: ${option.env}" in str(param.description), option.name
        param.resolve(param.value)  # the empty default is valid for its schema


def test_an_empty_gc_option_takes_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EVALUATION_WORK_DAYS", "7")
    monkeypatch.setenv("EVALUATION_LEDGER_DAYS", "90")
    assert cli.main(["gc", "--output", str(tmp_path), "--json", "--ledger-days", "40"]) == 0
    retention = json.loads(capsys.readouterr().out)["retention"]
    assert retention == {"work_days": 7, "failed_days": 30, "ledger_days": 40}  # a flag given wins
    monkeypatch.setenv("EVALUATION_WORK_DAYS", "-1")
    assert cli.main(["gc", "--output", str(tmp_path), "--json"]) == 2  # a bad variable is a usage error
    assert "$EVALUATION_WORK_DAYS (--work-days) '-1'" in capsys.readouterr().err  # named by where it came from
