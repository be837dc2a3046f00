"""Retention (``python -m evaluation gc``): a dry run lists, ``--apply`` deletes exactly what it
listed, and nothing a landed day needs goes.

Real runs make the working data: a landed day (its ledger and claim), a failed day (its evidence
under ``_failed/``) and a run that died after staging (its ``_work/``). The clock is not waited
for: the collection is asked "as of" a later ``now``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import Retention
from evaluation.storage import retention
from evaluation.testing import synthetic
from tests.reliability.helpers import DAY, REPO, cli_env, config, table

RECORDS = 30


def _landed_and_failed(tmp_path: Path) -> storage.LocalStore:
    raw = storage.LocalStore(tmp_path / "raw")
    synthetic.write_day(raw, DAY, RECORDS, bad=False)
    cfg = config(tmp_path, run_id="good")
    result = run_day(cfg, stages.Stores.open(cfg))
    assert result.rows == RECORDS * 3
    failed_day = DAY - dt.timedelta(days=1)
    synthetic.write_day(raw, failed_day, RECORDS, bad=True)
    cfg = config(tmp_path, run_id="bad", day=failed_day, max_reject_ratio=0.0)
    with pytest.raises(stages.RunFailed):
        run_day(cfg, stages.Stores.open(cfg))
    out = storage.LocalStore(tmp_path / "out")
    # a run that died after staging: its chunks stay under _work/
    out.write_bytes(storage.chunk_key(DAY, "dead", "records", 0), b"staged records")
    return out


def _keys(store: storage.LocalStore, prefix: str = "") -> set[str]:
    return {o.key for o in store.list(prefix)}


def test_dry_run_lists_and_apply_deletes_exactly_that(tmp_path: Path) -> None:
    out = _landed_and_failed(tmp_path)
    before = _keys(out)
    assert any(k.startswith("_ledger/") for k in before) and any(k.startswith("_failed/") for k in before)
    assert any(k.startswith("_work/") for k in before)

    # Today nothing is old enough: nothing is listed.
    assert retention.collect(out, Retention(), now=dt.datetime.now(dt.UTC)).objects == 0

    later = dt.datetime.combine(DAY, dt.time(), dt.UTC) + dt.timedelta(days=400)
    plan = retention.collect(out, Retention(), now=later)
    listed = set(plan.keys())
    assert {g.area for g in plan.groups} == {"_work", "_failed", "_ledger", "_claims"}
    assert listed == {k for k in before if k.startswith(("_work/", "_failed/", "_ledger/", "_claims/"))}
    assert plan.bytes == sum(o.size for o in out.list("") if o.key in listed)
    assert _keys(out) == before, "a dry run deletes nothing"

    out.write_bytes("_work/dt=2026-01-01/run=new/chunk.parquet", b"written after the listing")
    assert retention.apply(out, plan) == len(listed)
    after = _keys(out)
    assert after == (before - listed) | {"_work/dt=2026-01-01/run=new/chunk.parquet"}
    # the landed day is whole and readable
    assert table(tmp_path / "out", "evaluations").height == RECORDS * 3
    for name in ("judge_calls", "rejects", "daily_summary"):
        table(tmp_path / "out", name)
    assert not (tmp_path / "out" / "_ledger").exists(), "empty folders of a directory store are removed"


def test_each_area_keeps_its_own_days(tmp_path: Path) -> None:
    out = _landed_and_failed(tmp_path)
    now = dt.datetime.now(dt.UTC)
    # Working data written just now: old enough only for a retention of 0 days... seen a day later.
    tomorrow = now + dt.timedelta(days=1, hours=1)
    work_only = retention.collect(out, Retention(work_days=0, failed_days=30, ledger_days=10_000), now=tomorrow)
    assert {g.area for g in work_only.groups} == {"_work"}
    # the failed run's staging and the dead run's chunks
    assert [g.prefix for g in work_only.groups] == [storage.work_prefix(DAY - dt.timedelta(days=1), "bad"),
                                                   storage.work_prefix(DAY, "dead")]
    failed = retention.collect(out, Retention(work_days=30, failed_days=0, ledger_days=10_000), now=tomorrow)
    assert [g.prefix for g in failed.groups] == [storage.failed_prefix(DAY - dt.timedelta(days=1), "bad")]
    # The ledger goes by the day it serves, not by when it was written.
    at_day = dt.datetime.combine(DAY + dt.timedelta(days=35), dt.time(12), dt.UTC)
    assert not [g for g in retention.collect(out, Retention(ledger_days=35), now=at_day).groups if g.area == "_ledger"]
    one_more = at_day + dt.timedelta(days=1)
    ledger = [g for g in retention.collect(out, Retention(ledger_days=35), now=one_more).groups if g.area == "_ledger"]
    assert [g.prefix for g in ledger] == [storage.ledger_prefix(DAY)]


def test_a_rerun_after_gc_of_the_ledger_pays_again_but_lands(tmp_path: Path) -> None:
    out = _landed_and_failed(tmp_path)
    later = dt.datetime.combine(DAY, dt.time(), dt.UTC) + dt.timedelta(days=400)
    retention.apply(out, retention.collect(out, Retention(), now=later))
    cfg = config(tmp_path, run_id="again")
    result = run_day(cfg, stages.Stores.open(cfg))
    assert result.rows == RECORDS * 3
    assert table(tmp_path / "out", "evaluations").height == RECORDS * 3


def test_cli_gc_is_a_dry_run_unless_applied(tmp_path: Path) -> None:
    out = _landed_and_failed(tmp_path)
    for path in (tmp_path / "out").rglob("*"):  # age everything by a year
        if path.is_file():
            os.utime(path, (path.stat().st_atime - 366 * 86400,) * 2)
    before = _keys(out)

    def gc(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "evaluation", "gc", "--output", str(tmp_path / "out"),
                               "--ledger-days", "100000", *extra],
                              cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120, check=True)

    dry = gc()
    assert "would delete" in dry.stdout and "--apply" in dry.stdout
    assert storage.work_prefix(DAY, "dead") in dry.stdout
    assert _keys(out) == before
    plan = json.loads(gc("--json").stdout)
    assert plan["applied"] is False
    assert set(plan["areas"]) == {"_work", "_failed"}
    applied = json.loads(gc("--apply", "--json").stdout)
    assert applied["objects"] == plan["objects"] and applied["bytes"] == plan["bytes"]
    remaining = _keys(out)
    assert not any(k.startswith(("_work/", "_failed/")) for k in remaining)
    assert {k for k in before if k.startswith(("_ledger/", "evaluations/", "runs/"))} <= remaining
    assert storage.read_day(storage.LocalStore(tmp_path / "out"), "evaluations", DAY).height == RECORDS * 3


def test_s3_store_deletes_exactly_the_listed_keys(local_s3: object) -> None:
    from evaluation.testing.s3 import LocalS3

    assert isinstance(local_s3, LocalS3)
    store = storage.S3Store("s3://llm-evaluation/gc-test", local_s3.access())
    keys = [f"_work/dt=2026-01-0{d}/run=r{d}/part-{i}.parquet" for d in range(1, 4) for i in range(3)]
    for key in keys:
        store.write_bytes(key, b"x" * 10)
    store.write_bytes("evaluations/dt=2026-01-01/part-0.parquet", b"landed")
    plan = retention.collect(store, Retention(work_days=0), now=dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
    assert sorted(plan.keys()) == sorted(keys) and plan.bytes == 90
    retention.apply(store, plan)
    assert [o.key for o in store.list("")] == ["evaluations/dt=2026-01-01/part-0.parquet"]
