"""Stale runs and crashes while landing: readers always see one run's day, whole.

A newer run of a day takes the day's claim; an older run still going may then not land anything.
A run that dies between two tables changes nothing a reader of the project sees: the day is the
previous run's, every table of it, until a landing commits.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import land
from evaluation.storage import sql
from evaluation.testing import synthetic
from tests.reliability.helpers import DAY, REPO, config, landed_bytes, runs, table

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
    b_bytes = landed_bytes(out, LANDED)

    # A, still around, tries again after B landed: refused, and B's tables are untouched.
    with pytest.raises(stages.StaleRun):
        stages.score_and_land(run_a, stores_a)
    assert landed_bytes(out, LANDED) == b_bytes
    assert runs(out)["run_id"].to_list() == ["run-b"]


def test_a_run_that_loses_the_day_during_its_uploads_does_not_commit(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 12)
    run_a = config(tmp_path, run_id="run-a", **OFFLINE)
    run_b = config(tmp_path, run_id="run-b", **OFFLINE)
    stores_a, stores_b = stages.Stores.open(run_a), stages.Stores.open(run_b)
    _stage(run_a, stores_a)
    keys = land.upload_day(run_a, stores_a, {})  # A's staged rejects and validation result are up...
    store = storage.LocalStore(tmp_path / "out")
    assert {o.key for o in storage.list_day_objects(store, [DAY])} == {keys["rejects"], keys["validation"]}
    stages.ingest_and_validate(run_b, stores_b)  # ...when B claims the day: B alone may commit it.
    with pytest.raises(stages.StaleRun, match="run run-b has claimed the day"):
        land.commit_or_withdraw(run_a, stores_a, keys)
    assert not store.exists(storage.commit_key(DAY)) and storage.list_day_objects(store, [DAY]) == []


def test_a_run_landing_its_day_again_never_overwrites_the_landed_objects(tmp_path: Path) -> None:
    """The same run id landing again (a cleared DAG run) writes under its other names and commits
    them: what readers were reading is replaced whole, never overwritten in place."""
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 12)
    cfg = config(tmp_path, run_id="same", **OFFLINE)
    store = storage.LocalStore(tmp_path / "out")
    names: list[list[str]] = []
    for _ in range(3):
        run_day(cfg, stages.Stores.open(cfg))
        names.append(sorted(o.key.rsplit("/", 1)[1] for o in storage.list_day_objects(store, [DAY])))
        assert set(table(tmp_path / "out", "evaluations")["run_id"]) == {"same"}
    assert names[0] == names[2] == ["run-same.json"] + ["run-same.parquet"] * 4
    assert names[1] == ["run-same~1.json"] + ["run-same~1.parquet"] * 4


def _landed_only_sql(out: Path) -> str:
    """The query docs/tables.md gives engines that glob the folders, over ``out``."""
    text = (REPO / "docs" / "tables.md").read_text(encoding="utf-8")
    block = re.search(r"only the landed run's rows.*?```sql\n(.*?)```", text, re.S | re.I)
    assert block, "docs/tables.md gives no query for the landed run's rows"
    return block.group(1).replace("'out/", f"'{out}/")


def test_a_crash_between_two_tables_leaves_every_reader_on_the_day_landed_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    assert all(names == [f"run-first-{DAY}.parquet"] for t, names in files_before[DAY].items() if t != "runs")

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
    assert landed == [storage.landing_key("evaluations", DAY, "second"), storage.landing_key("judge_calls", DAY, "second")]

    # Every reader of the project sees the day landed before, every table of it; the other day is untouched.
    store = storage.LocalStore(out)
    for name in LANDED:
        for day in (previous_day, DAY):
            assert table(out, name, day).equals(before[(name, day)])
        assert sql.run_sql(store, f"SELECT DISTINCT run_id FROM {name} WHERE dt = DATE '{DAY}'").rows() == [
            (f"first-{DAY}",)]
    assert _day_files(out, previous_day) == files_before[previous_day]
    assert "second" not in runs(out)["run_id"].to_list()
    # Engines that glob the folders see the dead landing's evaluations beside the landed ones...
    everything = pl.scan_parquet(out / "evaluations" / "**" / "*.parquet", hive_partitioning=True).collect()
    assert set(everything.filter(pl.col("dt") == DAY)["run_id"]) == {f"first-{DAY}", "second"}
    # ...and the query docs/tables.md gives them keeps the landed run's rows only.
    kept = duckdb.sql(_landed_only_sql(out)).pl()
    assert kept.height == sum(before[("evaluations", d)].height for d in (previous_day, DAY))
    assert set(kept["run_id"]) == {f"first-{previous_day}", f"first-{DAY}"}

    # Run again: the day lands whole, from the ledger, with no call made twice; the dead landing's
    # objects (younger than a day: a landing may be under way) are left to gc, and no reader sees them.
    dead = {o.key for o in storage.list_day_objects(store, [DAY]) if "run-second" in o.key}
    again = config(tmp_path, run_id="third", **OFFLINE)
    result = run_day(again, stages.Stores.open(again))
    assert result["calls_made"] == 0 and result["rows"] == 18 * 3
    for name in LANDED:
        assert set(table(out, name)["run_id"]) == {"third"}
        assert [o.key for o in store.list(f"{name}/dt={DAY}/")] == sorted(
            [storage.landing_key(name, DAY, "third"), *(key for key in dead if key.startswith(f"{name}/"))])
    assert storage.landing_key("evaluations", DAY, "second") in dead
    assert duckdb.sql(_landed_only_sql(out)).pl().filter(pl.col("dt") == DAY)["run_id"].unique().to_list() == ["third"]
