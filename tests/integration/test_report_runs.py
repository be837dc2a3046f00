"""The daily report on days the pipeline itself landed (run_day with the offline judge): its
figures are the landed tables', and a failed latest run is on the page while the tables stay the
landed run's. The report's figures on hand-built rows are tests/unit/report/."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.report import build_daily_report
from evaluation.stages import RunFailed, Stores
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 20)


def test_report_on_a_real_pipeline_run(tmp_path: Path) -> None:
    raw = storage.open_store(str(tmp_path / "raw"))
    for day in (DAY - dt.timedelta(days=1), DAY):
        synthetic.write_day(raw, day, 40, seed=day.day)
        cfg = RunConfig(date=day, input_uri=str(tmp_path / "raw"), output_uri=str(tmp_path / "out"), run_id=f"t-{day}",
                        max_reject_ratio=0.5)
        run_day(cfg, Stores.open(cfg))
    out = storage.open_store(str(tmp_path / "out"))
    page, summary = build_daily_report(out, DAY)
    evaluations = storage.read_day(out, "evaluations", DAY)
    assert summary["totals"]["rows"] == evaluations.height
    assert summary["rejects"]["total"] == storage.read_day(out, "rejects", DAY).height
    assert len(summary["source"]["days_with_summary"]) == 2 and "<script" not in page


def test_a_failed_latest_run_is_on_the_page(tmp_path: Path) -> None:
    raw_uri, out_uri = str(tmp_path / "raw"), str(tmp_path / "out")
    synthetic.write_day(storage.open_store(raw_uri), DAY, 30)
    landed = RunConfig(date=DAY, input_uri=raw_uri, output_uri=out_uri, run_id="landed", judge_model="offline/lexical",
                       max_reject_ratio=0.5)
    run_day(landed, Stores.open(landed))
    failing = landed.model_copy(update={"run_id": "strict", "max_reject_ratio": 0.01})
    with pytest.raises(RunFailed):
        run_day(failing, Stores.open(failing))
    page, summary = build_daily_report(storage.open_store(out_uri), DAY)
    failed = summary["latest_run_failed"]
    assert failed["run_id"] == "strict" and failed["status"] == "failed"
    assert "max_reject_ratio" in failed["message"] and failed["evidence_uri"].endswith("run=strict")
    banner = page.split('<section id="latest-run"', 1)[1].split("</section>", 1)[0]
    assert "strict" in banner and "max_reject_ratio" in banner and failed["evidence_uri"] in banner
    assert page.index('id="latest-run"') < page.index('id="headline"')
    assert summary["run"]["run_ids"] == ["landed"]  # the tables are still the landed run's
