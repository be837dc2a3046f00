"""``python -m evaluation run`` waits in process for a complete day when asked to, like the DAG."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.main import main
from evaluation.stages import wait
from evaluation.testing import synthetic

DAY = dt.date(2026, 9, 10)
RECORDS = 30


def _cli(capsys: pytest.CaptureFixture[str], root: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    code = main(["run", "--date", DAY.isoformat(), "--input", str(root / "raw"), "--output", str(root / "out"),
                 "--judge-model", "offline/lexical", "--no-progress", *flags])
    return code, json.loads(capsys.readouterr().out)


def _runs(root: Path) -> pl.DataFrame:
    return storage.scan_table(storage.open_store(str(root / "out")), "runs").collect()  # type: ignore[union-attr]


class FakeClock:
    """A clock that moves only when the wait sleeps; ``at`` runs an action once that much time passed."""

    def __init__(self) -> None:
        self.now = time.time()  # the objects' modification times are the machine's
        self.started = self.now
        self.actions: list[tuple[float, Callable[[], object]]] = []

    def at(self, after_s: float, action: Callable[[], object]) -> None:
        self.actions.append((after_s, action))

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        for due in [a for a in self.actions if a[0] <= self.now - self.started]:
            self.actions.remove(due)
            due[1]()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(wait, "CLOCK", fake)
    return fake


@pytest.fixture
def root(tmp_path: Path) -> Path:
    synthetic.write_day(storage.open_store(str(tmp_path / "raw")), DAY, RECORDS, bad=False)
    return tmp_path


def test_it_waits_for_the_marker_then_runs(root: Path, clock: FakeClock,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    marker = root / "raw" / storage.raw_prefix(DAY) / "_SUCCESS"
    clock.at(1.5, lambda: marker.write_bytes(b""))
    code, result = _cli(capsys, root, "--completion-marker", "_SUCCESS", "--wait-deadline-s", "60")
    assert code == 0 and result["status"] == "success" and result["valid"] == RECORDS
    waited = _runs(root)["waited_s"].to_list()
    assert waited == [2.0]  # looks a second apart: the marker, written at 1.5 s, is seen at the third

    # Complete at the first look: no wait, and null in runs.
    code, _ = _cli(capsys, root, "--completion-marker", "_SUCCESS", "--run-id", "again")
    assert code == 0
    assert _runs(root).filter(pl.col("run_id") == "again")["waited_s"].to_list() == [None]


def test_it_waits_out_the_quiet_period(root: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    clock.now = clock.started = max(p.stat().st_mtime for p in (root / "raw").rglob("*") if p.is_file())
    code, result = _cli(capsys, root, "--quiet-period-s", "2")
    assert code == 0 and result["status"] == "success"
    assert _runs(root)["waited_s"].to_list() == [2.0]  # the day was written just now: 2 s of quiet from then


def test_it_fails_at_the_deadline_naming_the_prefix(root: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    code, result = _cli(capsys, root, "--completion-marker", "_SUCCESS", "--wait-deadline-s", "2")
    assert code == 1 and result["status"] == "failed"
    prefix = str(root / "raw" / storage.raw_prefix(DAY))
    assert (f"{prefix} was not complete after 2s: waited for completion marker '_SUCCESS' until the deadline "
            "(wait_deadline_s=2)") in result["error"]
    row = _runs(root).row(0, named=True)
    assert row["status"] == "failed" and row["waited_s"] >= 2 and "_SUCCESS" in row["message"]
    assert storage.landed_key(storage.open_store(str(root / "out")), "evaluations", DAY) is None


def test_without_the_options_it_does_not_wait(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _cli(capsys, root)
    assert code == 0 and _runs(root)["waited_s"].to_list() == [None]
