"""One day's content in every supported shape lands the same evaluations (CONTRACT §1, other log
shapes), through the real stages and the offline judge; and ``python -m evaluation generate``
writes a day that ``run`` lands."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.cli.main import main
from evaluation.contract.adapters import FORMAT_LAYOUTS
from evaluation.contract.options import build_config
from evaluation.stages import Stores
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 25)
RECORDS = 60
#: Columns that differ between two runs of the same content.
RUN_COLUMNS = ("run_id", "judged_at", "latency_ms")
GATEWAY_MAPPING = (
    "record_id=request_id, timestamp=received_at, model=app.version, conversation_id=session.id, "
    "question=request.messages[-1].content, answer=response.output_text, contexts=retrieval.documents[*].body, "
    "reference=labels.reference, expected_outcome=labels.expected, rubrics=labels.rubrics, "
    "evaluation_goal=labels.goal, metadata=request.metadata"
)


def _own(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if type(record) is dict else None


def string_contexts(line: str) -> str:
    """The record with its contexts as plain strings (their ids are positional: ctx-1, ctx-2)."""
    record = _own(line)
    if record is None or not record.get("contexts"):
        return line
    return json.dumps({**record, "contexts": [c.get("text") for c in record["contexts"]]})


def gateway(line: str) -> str:
    """The record as a made-up gateway export, read back through :data:`GATEWAY_MAPPING`."""
    record = _own(line)
    if record is None:
        return line
    return json.dumps({
        "request_id": record.get("record_id"),
        "received_at": record.get("timestamp"),
        "app": {"version": record.get("model"), "region": "eu-west-1"},
        "session": {"id": record.get("conversation_id")},
        "request": {"messages": [{"role": "system", "content": "Cite passages."},
                                 {"role": "user", "content": record.get("question")}],
                    "metadata": record.get("metadata")},
        "response": {"output_text": record.get("answer"), "finish_reason": "stop"},
        "retrieval": {"documents": [{"body": c.get("text"), "rank": i} for i, c in enumerate(record.get("contexts", []))]},
        "labels": {"reference": record.get("reference"), "expected": record.get("expected_outcome"),
                   "rubrics": record.get("rubrics"), "goal": record.get("evaluation_goal")},
    })


SHAPES: dict[str, tuple[Any, dict[str, str]]] = {
    "own": (None, {}),
    "string-contexts": (string_contexts, {}),
    "openai-chat": (synthetic.to_openai_chat, {"input_format": "openai-chat"}),
    "mapped": (gateway, {"input_mapping": GATEWAY_MAPPING}),
}


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, pl.DataFrame]]:
    lines = synthetic.generate_day(DAY, RECORDS)  # the planted bad records included
    tables = {}
    for shape, (convert, options) in SHAPES.items():
        root = tmp_path_factory.mktemp(shape)
        raw = storage.open_store(str(root / "raw"))
        shaped = lines if convert is None else [convert(line) for line in lines]
        raw.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl", ("\n".join(shaped) + "\n").encode())
        cfg = build_config({"input_uri": str(root / "raw"), "output_uri": str(root / "out"),
                            "judge_model": "offline/lexical", "max_reject_ratio": 0.2, **options},
                           date=DAY, run_id=f"shape-{shape}", trigger="test")
        run_day(cfg, Stores.open(cfg))
        out = storage.open_store(str(root / "out"))
        tables[shape] = {name: storage.read_day(out, name, DAY)
                         for name in ("evaluations", "rejects")}
        tables[shape]["runs"] = storage.read_parquet(out, storage.run_key(DAY, cfg.run_id))
    return tables


def comparable(evaluations: pl.DataFrame) -> pl.DataFrame:
    return evaluations.drop(RUN_COLUMNS).sort("record_id", "judge")


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "own"])
def test_every_shape_lands_the_same_evaluations(landed: dict[str, dict[str, pl.DataFrame]], shape: str) -> None:
    own = comparable(landed["own"]["evaluations"])
    # A day worth comparing: every record judged by each judge, some citations invalid, several statuses.
    assert own.height == RECORDS * 3 and own["judge_status"].n_unique() > 1
    assert own.filter(pl.col("invalid_citations").list.len() > 0).height > 0
    assert comparable(landed[shape]["evaluations"]).equals(own)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "own"])
def test_every_shape_rejects_the_same_records(landed: dict[str, dict[str, pl.DataFrame]], shape: str) -> None:
    def rejected(name: str) -> list[tuple[Any, ...]]:
        return sorted(landed[name]["rejects"].select("line_no", "record_id").rows(), key=str)

    assert len(rejected("own")) == len(synthetic.bad_lines(DAY)) + 1
    assert rejected(shape) == rejected("own")


def test_the_runs_row_records_the_input_shape(landed: dict[str, dict[str, pl.DataFrame]]) -> None:
    config = json.loads(landed["mapped"]["runs"]["config"][0])
    assert config["input_format"] == "own"
    assert config["input_mapping"]["question"] == "request.messages[-1].content"
    assert json.loads(landed["openai-chat"]["runs"]["config"][0])["input_format"] == "openai-chat"


def test_rejects_of_a_mapped_shape_name_its_paths(landed: dict[str, dict[str, pl.DataFrame]]) -> None:
    reasons = dict(landed["mapped"]["rejects"].select("record_id", "reasons").rows())
    assert reasons["bad-no-question"] == ["request.messages[-1].content: missing or blank"]
    assert reasons["bad-contexts"] == ["retrieval.documents[*].body: item 1 is not a string or an object"]
    assert reasons["bad-other-day"][0].startswith("received_at: falls outside 2026-11-25")
    chat = dict(landed["openai-chat"]["rejects"].select("record_id", "reasons").rows())
    assert chat["bad-no-question"] == ["messages[1].content: missing or blank"]


@pytest.mark.parametrize("input_format", ["own", "openai-chat", "litellm", "otel"])
def test_generate_writes_a_day_that_run_lands(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              input_format: str) -> None:
    raw, out = tmp_path / "raw", tmp_path / "raw-curated"
    assert main(["generate", "--date", DAY.isoformat(), "--output", str(raw), "--records", "60",
                 "--format", input_format, "--models", "app-a,app-b"]) == 0
    generated = json.loads(capsys.readouterr().out)
    day = raw / storage.raw_prefix(DAY, FORMAT_LAYOUTS[input_format])
    assert generated["objects"][-1] == str(day / "_SUCCESS")
    if input_format in ("own", "openai-chat"):
        assert sorted(p.name for p in day.iterdir()) == ["_SUCCESS", "part-000.jsonl", "part-001.jsonl.gz"]
    # The printed command, as a user would run it (with the marker the demo's DAG waits for), with
    # the default max_reject_ratio: the planted bad records stay under it.
    command = generated["run"].split()[3:] + ["--no-progress", "--completion-marker", "_SUCCESS"]
    assert command[:6] == ["run", "--date", DAY.isoformat(), "--input", str(raw), "--output"]
    assert main(command) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["status"], summary["output_uri"]) == ("success", str(out))
    assert generated["planted_bad_records"] == 2
    assert (summary["reconciled"]["valid"], summary["reconciled"]["rejected"]) == (60, 2)
    assert summary["reconciled"]["skipped"] == (2 if input_format == "litellm" else 0)
    evaluations = storage.read_day(storage.open_store(str(out)), "evaluations", DAY)
    assert sorted(evaluations["model"].unique()) == ["app-a", "app-b"]
    assert evaluations.height == 60 * 3
