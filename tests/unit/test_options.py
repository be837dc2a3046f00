"""One option table drives the CLI and the DAG's Params; both map onto RunConfig."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from evaluation.contract import RunConfig, Sample
from evaluation.options import OPTIONS, build_config, param_schema

DAY = dt.date(2026, 11, 25)
BASE = {"input_uri": "/in", "output_uri": "/out"}


def test_every_option_reaches_run_config() -> None:
    config_fields = set(RunConfig.model_fields)
    for option in OPTIONS:
        name = {"pass_threshold": "thresholds", "borderline_threshold": "thresholds"}.get(option.name, option.name)
        assert name in config_fields, option.name


def test_cli_takes_every_option() -> None:
    out = subprocess.run([sys.executable, "-m", "evaluation", "run", "--help"], capture_output=True, text=True, check=True)
    for option in OPTIONS:
        flag = option.flag if option.kind != "boolean" else option.flag
        assert flag.replace("-uri", "") in out.stdout or flag in out.stdout, option.flag


@pytest.mark.parametrize(
    "values, check",
    [
        ({}, lambda c: c.judges == ["rag", "masis", "prompt"] and c.judge_model == "offline/lexical"),
        ({"judges": "rag, masis,rag"}, lambda c: c.judges == ["rag", "masis"]),
        ({"pass_threshold": 0.9, "borderline_threshold": 0.5}, lambda c: (c.thresholds.pass_, c.thresholds.borderline) == (0.9, 0.5)),
        ({"sample": "0.25"}, lambda c: c.sample == Sample(fraction=0.25)),
        ({"sample": "200"}, lambda c: c.sample == Sample(max_per_model=200)),
        ({"sample": ""}, lambda c: c.sample is None),
        ({"api_base": ""}, lambda c: c.api_base is None),
        ({"budget_usd": None}, lambda c: c.budget_usd is None),
    ],
)
def test_build_config(values: dict, check) -> None:
    assert check(build_config({**BASE, **values}, date=DAY, run_id="r", trigger="cli"))


@pytest.mark.parametrize(
    "values, fragment",
    [
        ({"judges": "rag,bogus"}, "judges"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"pass_threshold": 0.5, "borderline_threshold": 0.7}, "borderline threshold"),
        ({"sample": "1.5"}, "fraction"),
        ({"nonsense": 1}, "unknown options"),
        ({"input_uri": ""}, "input_uri"),
    ],
)
def test_bad_values_say_what_is_wrong(values: dict, fragment: str) -> None:
    with pytest.raises((ValueError, ValidationError)) as error:
        build_config({**BASE, **values}, date=DAY, run_id="r", trigger="cli")
    assert fragment in str(error.value)


def test_param_schemas_are_json_schema() -> None:
    import jsonschema

    for option in OPTIONS:
        schema = param_schema(option)
        jsonschema.Draft7Validator.check_schema(schema)
        if option.default is not None:
            jsonschema.validate(option.default, schema)


def test_cli_bad_option_exits_2_with_a_message(tmp_path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "evaluation", "run", "--date", "2026-11-25", "--input", str(tmp_path),
         "--output", str(tmp_path), "--judges", "rag,bogus"],
        capture_output=True, text=True,
    )
    assert out.returncode == 2
    assert "judges" in out.stderr and "Traceback" not in out.stderr


def test_cli_run_prints_a_line_per_stage_on_stderr_and_json_on_stdout(tmp_path, capsys) -> None:
    from evaluation import cli, storage, synthetic

    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30)
    args = ["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--output", str(tmp_path / "out"),
            "--max-reject-ratio", "0.5", "--chunk-size", "20"]
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    lines = [line for line in captured.err.replace("\r", "\n").splitlines() if line.startswith(str(DAY))]
    assert [line.split()[1] for line in lines] == ["check:", "ingest", "plan:", "landed", "report:"]
    assert lines.pop(0).startswith(f"{DAY} check: judge model offline/lexical answered a probe call (")
    assert lines[0].startswith(f"{DAY} ingest + validate: {result['input']} records in 2 objects, "
                               f"{result['valid']} valid, {result['rejected']} rejected (")
    assert f"{result['valid']} records ({result['valid']} to judge) in 2 chunks" in lines[1]
    assert f"landed {result['rows']} rows ({result['statuses']['ok']} ok" in lines[2]
    assert f"{result['calls_made']} calls made, {result['calls_reused']} reused" in lines[2]
    assert lines[3].endswith(")") and result["report"] in lines[3]
    assert "judging" in captured.err  # the progress bar

    assert cli.main([*args, "--no-progress", "--run-id", "quiet"]) == 0
    assert capsys.readouterr().err == ""
