"""Stale runs and crashes while landing: readers always see a whole version of every table-day.

A newer run of a day takes the day's claim; an older run still going may then not land anything.
A run that dies between two tables leaves every table-day whole: the ones it replaced are its own,
the others still the previous version, each one object, each readable.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from evaluation import stages, storage, synthetic
from evaluation.contract import RunConfig
from evaluation.day import run_day
from tests.reliability.helpers import DAY, config, runs, table

OFFLINE = {"judge_model": "offline/lexical", "max_reject_ratio": 0.5}  # the planted bad records land as rejects
LANDED = ("evaluations", "judge_calls", "daily_summary", "rejects")


def _day_files(out: Path, day: dt.date) -> dict[str, list[str]]:
    """Every file under each table's partition of the day (temporary files included)."""
    return {t: sorted(p.name for p in (out / t / f"dt={day}").glob("*")) for t in (*LANDED, "runs")
            if (out / t / f"dt={day}").exists()}


def _stage(cfg: RunConfig, stores: stages.Stores) -> None:
    stages.ingest_and_validate(cfg, stores)
    for chunk in stages.plan_chunks(cfg, stores):
        stages.judge_chunk(cfg, stores, chunk["index"])


def test_an_older_run_may_not_land_once_a_newer_one_claimed_the_day(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 24)
    out = tmp_path / "out"
    run_a = config(tmp_path, run_id="run-a", chunk_size=10, **OFFLINE)
    run_b = config(tmp_path, run_id="run-b", chunk_size=10, **OFFLINE)
    stores_a, stores_b = stages.Stores.open(run_a), stages.Stores.open(run_b)

    _stage(run_a, stores_a)  # A ingested (claimed the day) and judged everything...
    stages.ingest_and_validate(run_b, stores_b)  # ...then B ingested: B owns the day now.
    with pytest.raises(stages.StaleRun, match="run run-a of 2026-11-20: run run-b has claimed the day"):
        stages.score_and_land(run_a, stores_a)
    assert not any((out / t).exists() for t in ("evaluations", "judge_calls", "daily_summary", "runs"))

    for chunk in stages.plan_chunks(run_b, stores_b):
        stages.judge_chunk(run_b, stores_b, chunk["index"])
    landed = stages.score_and_land(run_b, stores_b)
    assert landed["rows"] == 24 * 3 and landed["run_id"] == "run-b"
    evaluations = table(out, "evaluations")
    assert evaluations["run_id"].unique().to_list() == ["run-b"] and evaluations.height == 24 * 3
    assert runs(out)["run_id"].to_list() == ["run-b"]
    b_bytes = {t: (out / storage.table_key(t, DAY)).read_bytes() for t in LANDED}

    # A, still around, tries again after B landed: refused, and B's tables are untouched.
    with pytest.raises(stages.StaleRun):
        stages.score_and_land(run_a, stores_a)
    assert {t: (out / storage.table_key(t, DAY)).read_bytes() for t in LANDED} == b_bytes
    assert runs(out)["run_id"].to_list() == ["run-b"]


def test_a_crash_between_two_tables_leaves_every_table_day_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    previous_day = DAY - dt.timedelta(days=1)
    raw = storage.LocalStore(tmp_path / "raw")
    synthetic.write_day(raw, previous_day, 18)
    synthetic.write_day(raw, DAY, 18)
    out = tmp_path / "out"
    for day in (previous_day, DAY):
        cfg = config(tmp_path, run_id=f"first-{day}", day=day, **OFFLINE)
        run_day(cfg, stages.Stores.open(cfg))
    before = {(t, d): table(out, t, d) for t in LANDED for d in (previous_day, DAY)}
    files_before = {d: _day_files(out, d) for d in (previous_day, DAY)}
    assert all(names == ["part-0.parquet"] for t, names in files_before[DAY].items() if t != "runs")

    # The re-run's landing dies on its second table: the process is gone mid-copy, leaving a torn
    # temporary file behind, as a crash would.
    original = storage.LocalStore.upload_file
    landed: list[str] = []

    def crashing_upload(self: storage.LocalStore, key: str, path: Path) -> None:
        if key.split("/")[0] in ("evaluations", "judge_calls", "daily_summary"):
            landed.append(key)
            if len(landed) == 2:
                target = self.path / key
                (target.parent / ".tmp-crashed").write_bytes(path.read_bytes()[: path.stat().st_size // 2])
                raise OSError("simulated crash while landing")
        original(self, key, path)

    monkeypatch.setattr(storage.LocalStore, "upload_file", crashing_upload)
    rerun = config(tmp_path, run_id="second", **OFFLINE)
    with pytest.raises(OSError, match="simulated crash"):
        run_day(rerun, stages.Stores.open(rerun))
    monkeypatch.setattr(storage.LocalStore, "upload_file", original)
    assert landed == [storage.table_key("evaluations", DAY), storage.table_key("judge_calls", DAY)]

    # The other day is untouched; on the day, evaluations is the new version, the rest the old one.
    for name in LANDED:
        assert table(out, name, previous_day).equals(before[(name, previous_day)])
        assert table(out, name, DAY).height == before[(name, DAY)].height
    assert _day_files(out, previous_day) == files_before[previous_day]
    assert table(out, "evaluations")["run_id"].unique().to_list() == ["second"]
    assert table(out, "judge_calls").equals(before[("judge_calls", DAY)])
    assert table(out, "daily_summary").equals(before[("daily_summary", DAY)])
    # One object per table-day for every reader that lists objects or scans parquet files.
    for name in LANDED:
        objects = [o.key for o in storage.LocalStore(out).list(f"{name}/dt={DAY}/")]
        assert objects == [storage.table_key(name, DAY)]
        assert pl.scan_parquet(out / name / "**" / "*.parquet").select(pl.len()).collect().item() == sum(
            before[(name, d)].height for d in (previous_day, DAY))
    assert "second" not in runs(out)["run_id"].to_list()

    # Run again: the day lands whole, from the ledger, with no call made twice.
    again = config(tmp_path, run_id="third", **OFFLINE)
    result = run_day(again, stages.Stores.open(again))
    assert result["calls_made"] == 0 and result["rows"] == 18 * 3
    for name in ("evaluations", "judge_calls", "daily_summary"):
        assert set(table(out, name)["run_id"]) == {"third"}
