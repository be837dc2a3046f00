"""Every run option falls back to its own variable, EVALUATION_<OPTION>, read where the run is
configured (the CLI, or the task on the worker): shown in `--help` and in the daily DAG's form
(that a variable reaches what its option drives, a run's concurrency: tests/integration/test_concurrency_variable.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from evaluation.contract.config import RUN_INTERNALS, RunConfig
from evaluation.contract.options import RUN_OPTIONS, build_config

DAY = dt.date(2026, 11, 25)


def test_each_run_option_has_its_own_variable_named_after_it() -> None:
    variables = [o.env for o in RUN_OPTIONS]
    assert variables == [f"EVALUATION_{o.name.upper()}" for o in RUN_OPTIONS]
    assert len(set(variables)) == len(variables)
    assert {o.path[0] for o in RUN_OPTIONS} == set(RunConfig.model_fields) - set(RUN_INTERNALS)
    # the variables documented before every option had one keep their names
    assert {"EVALUATION_INPUT_URI", "EVALUATION_OUTPUT_URI", "EVALUATION_JUDGE_MODEL", "EVALUATION_API_BASE",
            "EVALUATION_QUIET_PERIOD_S"} <= set(variables)


def test_help_names_each_variable_and_the_default_behind_it(cli_help) -> None:
    out = cli_help("run")
    text = " ".join(out.split())
    for option in RUN_OPTIONS:
        assert f"${option.env}" in text, option.name
    assert "(default: $EVALUATION_CONCURRENCY, else 8)" in text
    assert "(default: $EVALUATION_BATCH, else off)" in text


def test_the_daily_dags_form_leaves_each_option_empty_for_its_variable() -> None:
    from airflow.dag_processing.dagbag import DagBag

    dags = Path(__file__).resolve().parents[3] / "dags"
    dag = DagBag(dag_folder=str(dags / "daily_evaluation.py")).dags["daily_evaluation"]
    for option in RUN_OPTIONS:
        param = dag.params.get_param(option.name)
        assert param.value in (None, ""), option.name
        assert f"Empty: ${option.env}" in str(param.description), option.name
        param.resolve(param.value)  # the empty default is valid for its schema (an enum takes "")
    assert str(dag.params.get_param("concurrency").description).endswith("Empty: $EVALUATION_CONCURRENCY, else 8.")


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("concurrency", "24", 24), ("chunk_size", "250", 250), ("judge_rpm", "5000", 5000.0),
    ("batch", "true", True), ("judges", "rag,masis", ["rag", "masis"]), ("structured_output", "off", "off"),
    ("pass_threshold", "0.9", 0.9), ("absent_deadline_s", "600", 600.0),
])
def test_an_empty_option_takes_its_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                            expected: Any) -> None:
    (option,) = [o for o in RUN_OPTIONS if o.name == name]
    base = {"input_uri": "/in", "output_uri": "/out"}
    monkeypatch.setenv(str(option.env), value)
    cfg = build_config({**base, name: option.default}, date=DAY, run_id="r", trigger="scheduled")
    got = cfg.thresholds.pass_ if name == "pass_threshold" else getattr(cfg, name)
    assert got == expected
    monkeypatch.setenv(str(option.env), "")  # empty: the option's own default
    assert build_config(base, date=DAY, run_id="r", trigger="t") == build_config(
        {**base, name: option.fallback}, date=DAY, run_id="r", trigger="t")


def _context(params: dict[str, Any]) -> dict[str, Any]:
    """What run_config reads of a task's context: the Params, the DAG's known keys, the run."""
    run = SimpleNamespace(run_id="scheduled__2026-11-25", run_type="scheduled", conf={})
    dag = SimpleNamespace(dag_id="daily_evaluation", params=dict.fromkeys([*params, "date"]))
    return {"params": {**params, "date": DAY.isoformat()}, "dag_run": run, "dag": dag}


def test_a_rate_limit_is_the_option_else_its_variable_else_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    import evaluation_airflow as glue

    monkeypatch.setenv("AIRFLOW_CONN_LLM_JUDGE", json.dumps({"conn_type": "generic", "extra": {"rpm": "300",
                                                                                                "tpm": "90000"}}))
    monkeypatch.delenv("EVALUATION_JUDGE_RPM", raising=False)
    monkeypatch.delenv("EVALUATION_JUDGE_TPM", raising=False)
    params = {"input_uri": "/in", "output_uri": "/out", "judge_rpm": None, "judge_tpm": None}
    cfg = glue.run_config(_context(params))  # type: ignore[arg-type]
    assert (cfg.judge_rpm, cfg.judge_tpm) == (300.0, 90000.0)
    monkeypatch.setenv("EVALUATION_JUDGE_RPM", "5000")
    cfg = glue.run_config(_context(params))  # type: ignore[arg-type]
    assert (cfg.judge_rpm, cfg.judge_tpm) == (5000.0, 90000.0)
    cfg = glue.run_config(_context({**params, "judge_rpm": 42}))  # type: ignore[arg-type]
    assert cfg.judge_rpm == 42.0




@pytest.mark.parametrize(("command", "variable", "value", "flag"), [
    (["run", "--date", "2026-11-25", "--input", "unused", "--output", "unused"], "EVALUATION_CONCURRENCY", "abc",
     "--concurrency"),
    (["gc", "--output", "unused"], "EVALUATION_WORK_DAYS", "-1", "--work-days"),
])
def test_a_bad_value_of_a_variable_is_named_by_the_variable(command: list[str], variable: str, value: str,
                                                            flag: str, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from evaluation.cli.main import main

    monkeypatch.setenv(variable, value)
    assert main(command) == 2
    assert f"error: ${variable} ({flag}) '{value}':" in capsys.readouterr().err
    monkeypatch.delenv(variable)
    with pytest.raises(SystemExit) as given:  # given as the flag: argparse names it by the flag
        main([*command, flag, value])
    assert given.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and f"${variable}" not in err
