"""Agreement in the daily story: the daily report shows the latest calibration of the day's judge
model and prompt versions (or says there is none), and a run that takes its thresholds from a
calibration says so in ``runs``."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import polars as pl
import pytest

from evaluation import storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.daily import calibration_summary
from evaluation.calibration.run import run_calibration
from evaluation.cli.day import run_day
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import RunConfig, Thresholds
from evaluation.report import build_daily_report
from evaluation.stages import RunFailed, Stores
from evaluation.stages.thresholds import calibrated_thresholds
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 25)
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "golden"


def _golden(tmp_path: Path, records: int = 40) -> Path:
    folder = tmp_path / "golden" / "halueval-small"
    folder.mkdir(parents=True)
    lines = (SHIPPED / "halueval-qa" / "records.jsonl").read_text(encoding="utf-8").splitlines()[:records]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _day(tmp_path: Path, **options: Any) -> tuple[RunConfig, Stores]:
    raw = tmp_path / "raw"
    if not raw.exists():
        synthetic.write_day(storage.LocalStore(raw), DAY, 30, bad=False)
    cfg = RunConfig(date=DAY, input_uri=str(raw), output_uri=str(tmp_path / "out"), run_id=f"r-{len(options)}",
                    chunk_size=20, **options)
    return cfg, Stores.open(cfg)


def test_the_daily_report_says_when_no_calibration_exists_then_shows_the_latest(tmp_path: Path) -> None:
    cfg, stores = _day(tmp_path)
    run_day(cfg, stores)
    page, summary = build_daily_report(stores.out, DAY)
    assert summary["calibration"]["calibrations"] == []
    assert {u["judge"] for u in summary["calibration"]["uncalibrated"]} == {"rag", "masis", "prompt"}
    assert "No calibration of <code>rag</code>" in page and 'href="#agreement"' in page

    golden = _golden(tmp_path)
    spec = CalibrationSpec(golden_uri=str(golden), judges=["rag", "masis"], bootstrap=200)
    older = run_calibration(stores.out, storage.LocalStore(golden), spec,
                            calibrated_at=dt.datetime(2026, 11, 1, tzinfo=dt.UTC))
    newer = run_calibration(stores.out, storage.LocalStore(golden), spec.model_copy(update={"seed": 1}),
                            calibrated_at=dt.datetime(2026, 11, 2, tzinfo=dt.UTC))
    assert older["calibration_id"] != newer["calibration_id"]
    page, summary = build_daily_report(stores.out, DAY)
    shown = summary["calibration"]["calibrations"]
    assert [(r["judge"], r["calibration_id"]) for r in shown] == [("masis", newer["calibration_id"]),
                                                                   ("rag", newer["calibration_id"])]
    table = pl.read_parquet(Path(newer["table_uri"])).filter(pl.col("metric") == "score").sort("judge")
    assert [r["auroc"] for r in shown] == table["auroc"].to_list()
    assert [u["judge"] for u in summary["calibration"]["uncalibrated"]] == ["prompt"]
    assert newer["calibration_id"] in page and "Agreement with people" in page
    json.dumps(summary)  # summary.json stays plain JSON


def test_only_the_days_judge_model_and_prompt_versions_count(tmp_path: Path) -> None:
    golden = _golden(tmp_path, 20)
    out = storage.LocalStore(tmp_path / "out")
    run_calibration(out, storage.LocalStore(golden), CalibrationSpec(golden_uri=str(golden), judges=["rag"]))
    found = calibration_summary(out, ["offline/lexical"], ["rag@0000000000"])
    assert found.calibrations == [] and found.uncalibrated[0].prompt_version == "rag@0000000000"
    assert calibration_summary(out, ["openai/gpt-4o"], []).calibrations == []


def test_a_run_with_thresholds_from_a_calibration_records_which(tmp_path: Path) -> None:
    golden = _golden(tmp_path, 80)
    out = storage.LocalStore(tmp_path / "out")
    result = run_calibration(out, storage.LocalStore(golden), CalibrationSpec(golden_uri=str(golden), judges=["rag"]))
    reference = f"{result['calibration_id']}/rag"
    suggested = calibrated_thresholds(out, reference, Thresholds())
    # one judge: the id alone is enough
    assert calibrated_thresholds(out, result["calibration_id"], Thresholds()) == suggested

    cfg, stores = _day(tmp_path, thresholds_from=reference)
    run_day(cfg, stores)
    runs = pl.read_parquet(tmp_path / "out" / storage.run_key(DAY, cfg.run_id))
    row = runs.row(0, named=True)
    assert row["thresholds_from"] == reference
    assert (row["pass_threshold"], row["borderline_threshold"]) == (0.8, 0.6)  # the run's own, for masis and prompt
    assert json.loads(row["config"])["thresholds_in_force"]["rag"] == {
        "pass": suggested.pass_, "borderline": suggested.borderline, "source": reference}
    evaluations = storage.read_day(storage.LocalStore(tmp_path / "out"), "evaluations", DAY)
    rag = evaluations.filter((pl.col("judge") == "rag") & (pl.col("judge_status") == "ok")
                             & (pl.col("faithfulness") > 0))
    expected = [("pass" if s >= suggested.pass_ else "borderline" if s >= suggested.borderline else "fail")
                for s in rag["score"]]
    assert rag["verdict"].to_list() == expected


def test_thresholds_from_a_missing_calibration_fail_the_run_before_paying(tmp_path: Path) -> None:
    cfg, stores = _day(tmp_path, thresholds_from="cal-0000000000000000/rag")
    with pytest.raises(RunFailed, match="no calibration at"):
        run_day(cfg, stores)
    runs = pl.read_parquet(tmp_path / "out" / storage.run_key(DAY, cfg.run_id))
    assert runs["status"].to_list() == ["failed"] and runs["thresholds_from"].to_list() == [cfg.thresholds_from]
    with pytest.raises(CalibrationError, match="name one judge"):
        golden = _golden(tmp_path, 20)
        result = run_calibration(stores.out, storage.LocalStore(golden),
                                 CalibrationSpec(golden_uri=str(golden), judges=["rag", "masis"]))
        calibrated_thresholds(stores.out, result["calibration_id"], Thresholds())
