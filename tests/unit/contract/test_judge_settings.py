"""The judge's settings are declared once (JudgeSettings), built on by every model that configures a
judge, and build the client and the request-hash parameters wherever a judge is called."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from evaluation.calibration.run import level_configs
from evaluation.calling.client import call_parameters, judge_client
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import CascadeLevel, InputRecord, RunConfig
from evaluation.contract.judge_settings import JUDGE_SETTINGS, JudgeEndpoint, JudgeSettings
from evaluation.judges import RenderedPrompt, route
from evaluation.storage.ledger import request_hash

REPO = Path(__file__).resolve().parents[3]
DAY = dt.date(2026, 11, 25)
#: Where a judge is configured: the contract's models, the command line, the DAGs and their glue.
CONFIGURING = [REPO / "evaluation" / "contract", REPO / "evaluation" / "cli", REPO / "dags", REPO / "plugins"]
#: Models of the contract that record what a call used (a column), not a setting of the judge.
RECORDS = {"CallRecord"}


def _declarations() -> list[tuple[str, str, str]]:
    """(file, class, field) for each class-level annotation named like a judge setting."""
    found = []
    for folder in CONFIGURING:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    found += [(path.relative_to(REPO).as_posix(), node.name, statement.target.id)
                              for statement in node.body if isinstance(statement, ast.AnnAssign)
                              and isinstance(statement.target, ast.Name) and statement.target.id in JUDGE_SETTINGS]
    return found


def test_each_judge_setting_is_declared_once() -> None:
    declared = [(path, cls, name) for path, cls, name in _declarations() if cls not in RECORDS]
    assert {(path, cls) for path, cls, _ in declared} == {
        ("evaluation/contract/judge_settings.py", "JudgeEndpoint"), ("evaluation/contract/judge_settings.py",
                                                                      "JudgeSettings")}
    names = [name for _, _, name in declared]
    assert sorted(names) == sorted(JUDGE_SETTINGS) and len(names) == len(set(names))


@pytest.mark.parametrize("model", [RunConfig, ComparisonSpec, CalibrationSpec, CascadeLevel])
def test_every_model_that_configures_a_judge_inherits_its_settings(model: type[BaseModel]) -> None:
    base = JudgeEndpoint if model is CascadeLevel else JudgeSettings
    assert issubclass(model, base)
    for cls in model.__mro__:  # no class between them declares a setting again
        own = set(cls.__dict__.get("__annotations__", {})) & set(JUDGE_SETTINGS)
        assert not own or cls in (JudgeEndpoint, JudgeSettings), (cls, own)


def test_a_cascade_level_derives_its_settings_validated() -> None:
    cfg = RunConfig(date=DAY, input_uri="/in", output_uri="/out", judge_model="openai/big", api_base="http://big",
                    concurrency=24, cascade="offline/lexical@0.2:0.8", judge_rpm=600)
    level = cfg.level_config(0)
    assert (level.judge_model, level.api_base, level.concurrency, level.judge_rpm, level.cascade) == (
        "offline/lexical", "http://big", 24, 600, [])
    assert cfg.level_config(1).judge_model == "openai/big" and cfg.level_config(1).cascade == []
    with pytest.raises(ValidationError, match="concurrency"):  # validated, not copied
        cfg.for_level(cfg.cascade[0], concurrency=0)
    with pytest.raises(ValidationError, match="judge model is blank"):
        CascadeLevel(judge_model=" ", band=(0.2, 0.8))


def test_the_settings_build_the_client() -> None:
    cfg = RunConfig(date=DAY, input_uri="/in", output_uri="/out", judge_model="openai/m", api_base="http://judge",
                    concurrency=24, timeout_s=5.0, max_attempts=2, retry_budget_s=9.0, judge_rpm=600.0)
    client = judge_client(cfg, "key")
    assert (client.model, client.api_base, client.concurrency, client.timeout_s, client.max_attempts,
            client.retry_budget_s, client.temperature) == ("openai/m", "http://judge", 24, 5.0, 2, 9.0, 0.0)
    assert client.budget is not None  # the rpm given
    assert client.call_parameters() == call_parameters(cfg)


@pytest.mark.parametrize(("structured_output", "temperature"), [("on", 0.0), ("off", 0.7), ("auto", 0.3)])
def test_a_calibrations_request_hash_is_a_runs_for_the_same_settings(structured_output: str,
                                                                     temperature: float) -> None:
    settings = {"judge_model": "openai/gpt-4o-mini", "api_base": "http://judge", "temperature": temperature,
                "structured_output": structured_output}
    run = RunConfig(date=DAY, input_uri="/in", output_uri="/out", cascade="openai/mock-cheap@0.2:0.8", **settings)
    spec = CalibrationSpec(golden_uri="/golden/set", cascade="openai/mock-cheap", **settings)
    levels = level_configs(spec, date=DAY, input_uri="/golden/set", output_uri="/out", run_id="calibration-x")
    record = InputRecord(record_id="r1", timestamp=dt.datetime(2026, 11, 25, tzinfo=dt.UTC), model="m",
                         question="Where is Paris?", answer="In France [ctx-1].",
                         contexts=[{"text": "Paris is in France."}])
    prompt = route("rag", record)
    assert isinstance(prompt, RenderedPrompt)
    for level, calibrated in enumerate(levels):
        parameters = call_parameters(calibrated)
        assert parameters == call_parameters(run.level_config(level))
        assert parameters["temperature"] == temperature
        # auto: litellm knows gpt-4o-mini enforces a schema, not the mock model
        enforced = structured_output == "on" or (structured_output == "auto" and calibrated.judge_model == "openai/gpt-4o-mini")
        assert ("response_format" in parameters) == enforced
        assert request_hash(calibrated.judge_model, prompt, parameters) == request_hash(
            run.level_config(level).judge_model, prompt, call_parameters(run.level_config(level)))


def test_calibration_ids_named_before_the_judge_settings_stay() -> None:
    """The ids the spec had when it declared only judge_model, api_base and concurrency (computed
    with that code); a reply-shaping setting off its default changes the id."""
    versions = {"rag": "v1"}
    assert CalibrationSpec(golden_uri="/g/set").default_id(versions) == "cal-5b943f31a17065c5"
    cascaded = CalibrationSpec(golden_uri="/g/set", judge_model="openai/x", api_base="http://h", concurrency=3,
                               cascade="offline/lexical")
    assert cascaded.default_id(versions) == "cal-478f94035105cefd"
    assert cascaded.model_copy(update={"judge_tpm": 1e6}).default_id(versions) == "cal-478f94035105cefd"
    assert cascaded.model_copy(update={"temperature": 0.5}).default_id(versions) != "cal-478f94035105cefd"
