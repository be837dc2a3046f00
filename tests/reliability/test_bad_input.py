"""Bad input through the pipeline's first stage: rejects with reasons or a clear run failure."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.options import build_config

DAY = dt.date(2026, 11, 25)
GOOD = {"timestamp": "2026-11-25T08:00:00Z", "model": "m", "question": "Why?", "answer": "Because."}


def _config(tmp_path, **values):
    base = {"input_uri": str(tmp_path / "raw"), "output_uri": str(tmp_path / "out")}
    return build_config({**base, **values}, date=DAY, run_id="bad-input", trigger="test")


def _write(tmp_path, lines: list[bytes]) -> None:
    folder = tmp_path / "raw" / f"dt={DAY.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-000.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_a_50_mb_line_and_an_empty_object_are_rejected_with_reasons(tmp_path) -> None:
    huge = json.dumps({**GOOD, "record_id": "huge", "answer": "x" * 50_000_000}).encode()
    good = [json.dumps({**GOOD, "record_id": f"ok-{i}"}).encode() for i in range(60)]
    _write(tmp_path, [*good, huge, b"{}"])
    cfg = _config(tmp_path)
    counts = stages.ingest_and_validate(cfg, stages.Stores.open(cfg))
    assert counts["input"] == 62 and counts["valid"] == 60 and counts["rejected"] == 2
    rejects = storage.read_parquet(storage.open_store(cfg.output_uri), stages.staged_key(cfg, "rejects"))
    by_id = {r["record_id"]: r for r in rejects.iter_rows(named=True)}
    assert any("max_record_chars" in reason for reason in by_id["huge"]["reasons"])
    assert len(by_id["huge"]["raw"]) < 20_000  # the raw text is kept, cut with a count
    empty = next(r for r in rejects.iter_rows(named=True) if r["record_id"] is None)
    assert {"record_id", "question", "model"} <= {reason.split(":")[0] for reason in empty["reasons"]}


def test_a_day_of_only_bad_records_fails_clearly_with_the_rejects_as_evidence(tmp_path) -> None:
    _write(tmp_path, [b"not json", b"[1, 2]", json.dumps({**GOOD, "record_id": "r", "question": " "}).encode()])
    cfg = _config(tmp_path)
    with pytest.raises(stages.RunFailed) as error:
        stages.ingest_and_validate(cfg, stages.Stores.open(cfg))
    message = str(error.value)
    out = storage.open_store(cfg.output_uri)
    evidence = out.uri(storage.failed_prefix(DAY, cfg.run_id))
    assert "2026-11-25" in message and "reject ratio" in message and f"rejects and validation result are at {evidence}" in message
    assert storage.landed_key(out, "rejects", DAY) is None
    rejects = storage.read_parquet(out, storage.failed_key(DAY, cfg.run_id, "rejects.parquet"))
    assert rejects.height == 3 and all(rejects["reasons"].list.len() > 0)


def test_no_input_objects_fails_unless_empty_days_are_allowed(tmp_path) -> None:
    (tmp_path / "raw").mkdir()
    cfg = _config(tmp_path)
    with pytest.raises(stages.RunFailed) as error:
        stages.ingest_and_validate(cfg, stages.Stores.open(cfg))
    assert "2026-11-25" in str(error.value) and "no input" in str(error.value)
    allowed = _config(tmp_path, allow_empty=True)
    result = run_day(allowed, stages.Stores.open(allowed))
    assert result["input"] == 0 and result["rows"] == 0
