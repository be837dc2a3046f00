"""The options are generated from the specs: the CLI's flags and the DAG forms take each field's
title, description, default, range and variable from RunConfig, ComparisonSpec and CalibrationSpec."""

from __future__ import annotations

import argparse
import datetime as dt
import json

import jsonschema
import pytest
from pydantic import ValidationError

from evaluation.cli.support import add_options
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.config import RUN_INTERNALS, RunConfig, Sample
from evaluation.contract.options import COMPARE_OPTIONS, RUN_OPTIONS, build_config, model_input, options

DAY = dt.date(2026, 11, 25)
BASE = {"input_uri": "/in", "output_uri": "/out"}


def test_every_run_config_field_is_an_option_or_set_by_the_run() -> None:
    fields = {o.path[0] for o in RUN_OPTIONS}
    assert fields | set(RUN_INTERNALS) == set(RunConfig.model_fields)
    assert not fields & set(RUN_INTERNALS)
    names = [o.name for o in RUN_OPTIONS]
    assert names[names.index("thresholds_from") - 2:][:2] == ["pass_threshold", "borderline_threshold"]


def test_cli_takes_every_option(cli_help) -> None:
    out = cli_help("run")
    for option in RUN_OPTIONS:
        assert option.flags[0] in out, option.name


def _cli(option_name: str, value: str) -> object:
    """The value as the generated flag of a run option parses it (SystemExit when refused)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser, [o for o in RUN_OPTIONS if o.name == option_name])
    (flag,) = [o.flags[0] for o in RUN_OPTIONS if o.name == option_name]
    return getattr(parser.parse_args([flag, value]), option_name)


@pytest.mark.parametrize(("name", "refused", "accepted"), [
    ("timeout_s", "0", "0.5"),  # > 0: the model's range, not the old table's minimum of 1
    ("probe_timeout_s", "0", "0.05"),
    ("concurrency", "1025", "1024"),
    ("max_attempts", "0", "20"),
    ("pass_threshold", "1.5", "1"),
    ("quiet_period_s", "-1", "0"),
    ("budget_usd", "-0.01", "0"),
])
def test_the_form_the_flag_and_the_model_share_one_range(name: str, refused: str, accepted: str) -> None:
    (option,) = [o for o in RUN_OPTIONS if o.name == name]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(float(refused), option.schema)
    with pytest.raises(argparse.ArgumentError):
        _cli(name, refused)
    with pytest.raises(ValidationError):
        build_config({**BASE, name: float(refused)}, date=DAY, run_id="r", trigger="cli")
    jsonschema.validate(float(accepted), option.schema)
    assert _cli(name, accepted) == float(accepted)
    build_config({**BASE, name: float(accepted)}, date=DAY, run_id="r", trigger="cli")


def test_empty_options_with_a_variable_take_it_when_the_run_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALUATION_JUDGE_MODEL", "EVALUATION_QUIET_PERIOD_S", "EVALUATION_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    defaults = build_config({**BASE, "judge_model": "", "quiet_period_s": None}, date=DAY, run_id="r", trigger="t")
    assert (defaults.judge_model, defaults.quiet_period_s, defaults.api_base) == ("offline/lexical", 300.0, None)
    monkeypatch.setenv("EVALUATION_JUDGE_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("EVALUATION_QUIET_PERIOD_S", "0")
    monkeypatch.setenv("EVALUATION_INPUT_URI", "/from-env")
    cfg = build_config({"output_uri": "/out", "input_uri": ""}, date=DAY, run_id="r", trigger="t")
    assert (cfg.judge_model, cfg.quiet_period_s, cfg.input_uri) == ("openai/gpt-4o-mini", 0.0, "/from-env")
    given = build_config({**BASE, "judge_model": "anthropic/x", "quiet_period_s": 5}, date=DAY, run_id="r", trigger="t")
    assert (given.judge_model, given.quiet_period_s) == ("anthropic/x", 5.0)
    (option,) = [o for o in RUN_OPTIONS if o.name == "quiet_period_s"]
    assert option.default is None and option.help.endswith("Empty: $EVALUATION_QUIET_PERIOD_S, else 300.")


def test_a_nested_models_options_fold_back_into_it() -> None:
    found = options(CalibrationSpec)
    assert {"pass_threshold", "borderline_threshold"} <= {o.name for o in found}
    spec = CalibrationSpec.model_validate(model_input(found, {"golden_uri": "/g/set", "pass_threshold": 0.9}))
    assert (spec.thresholds.pass_, spec.thresholds.borderline) == (0.9, 0.6)
    assert [o.flags for o in found if o.name == "golden_uri"] == [("--golden", "--golden-uri")]


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


@pytest.mark.parametrize("found", [RUN_OPTIONS, COMPARE_OPTIONS, options(CalibrationSpec)],
                         ids=["run", "compare", "calibrate"])
def test_form_schemas_are_json_schema_and_take_their_defaults(found) -> None:
    for option in found:
        jsonschema.Draft7Validator.check_schema(option.schema)
        if not option.required:
            jsonschema.validate(option.default, option.schema)


def test_cli_bad_option_exits_2_with_a_message(tmp_path, capsys) -> None:
    from evaluation.cli.main import main

    try:
        code = main(["run", "--date", "2026-11-25", "--input", str(tmp_path), "--output", str(tmp_path),
                     "--judges", "rag,bogus"])
    except SystemExit as exc:  # argparse ends there
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    assert "judges" in err and "Traceback" not in err


def test_cli_run_prints_a_line_per_stage_on_stderr_and_json_on_stdout(tmp_path, capsys) -> None:
    from evaluation import storage
    from evaluation.cli import main as cli
    from evaluation.testing import synthetic

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
