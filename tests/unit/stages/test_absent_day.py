"""A day whose input prefix holds no object at all fails at absent_deadline_s, naming the prefix and
what to check; a day with some objects waits for the rest up to wait_deadline_s. The in-process
wait runs on an injected clock (its sleeps move it), the trigger on tiny deadlines."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from evaluation_wait import DayCompleteTrigger, DayPrefix

from evaluation import storage
from evaluation.contract.config import RunConfig
from evaluation.stages import RunFailed, Stores
from evaluation.stages.wait import absent_after, wait_for_day
from evaluation.testing import synthetic
from tests.factories import FakeClock

DAY = dt.date(2026, 9, 1)


def _cfg(tmp_path: Path, **options: Any) -> RunConfig:
    return RunConfig(date=DAY, input_uri=str(tmp_path / "raw"), output_uri=str(tmp_path / "out"), run_id="r",
                     completion_marker="_SUCCESS", **options)


def _runs_message(cfg: RunConfig) -> str:
    frame = storage.read_parquet(storage.LocalStore(Path(cfg.output_uri)), storage.run_key(DAY, cfg.run_id))
    return str(frame["message"][0])


def test_an_absent_day_fails_at_absent_deadline_s_naming_its_prefix(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    cfg = _cfg(tmp_path, absent_deadline_s=600, wait_deadline_s=21600)
    clock = FakeClock()
    with pytest.raises(RunFailed) as failed:
        wait_for_day(cfg, Stores.open(cfg), clock=clock)
    assert 600 <= clock.now < 660  # at the absent deadline (within one look), far before the wait's own
    raw = storage.LocalStore(tmp_path / "raw")
    prefix = raw.uri(storage.raw_prefix(DAY))
    message = str(failed.value)
    assert f"{prefix} held no object after {clock.now:.0f}s (absent_deadline_s=600)" in message
    assert "check that input_uri is the root" in message and "the day's export ran" in message
    assert message.endswith(f"{prefix} does not exist, nor do the 7 days before it under {raw.root} "
                            "(is the input URI right? input_layout hive reads dt=2026-09-01/)")
    assert message in _runs_message(cfg)


def test_a_day_with_objects_waits_past_the_absent_deadline_up_to_the_wait_deadline(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 5, bad=False)  # logs, but no marker yet
    cfg = _cfg(tmp_path, absent_deadline_s=600, wait_deadline_s=7200)
    clock = FakeClock()
    with pytest.raises(RunFailed) as failed:
        wait_for_day(cfg, Stores.open(cfg), clock=clock)
    assert clock.now >= 7200
    assert "was not complete after" in str(failed.value) and "held no object" not in str(failed.value)


def test_an_object_that_comes_before_the_absent_deadline_keeps_the_wait_going(tmp_path: Path) -> None:
    raw = storage.LocalStore(tmp_path / "raw")
    cfg = _cfg(tmp_path, absent_deadline_s=600, wait_deadline_s=7200)

    class LateExport(FakeClock):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            if 300 <= self.now < 360:  # the export starts late
                synthetic.write_day(raw, DAY, 5, bad=False)
            if self.now >= 1800:  # and ends, long after the absent deadline
                raw.write_bytes(f"{storage.raw_prefix(DAY)}_SUCCESS", b"")

    clock = LateExport()
    assert wait_for_day(cfg, Stores.open(cfg), clock=clock) == pytest.approx(clock.now)
    assert clock.now >= 1800


def test_an_allowed_empty_day_or_a_shorter_wait_has_no_absent_deadline(tmp_path: Path) -> None:
    assert absent_after(_cfg(tmp_path)) == 3600.0  # the default: an hour, well under the wait's 6 h
    assert absent_after(_cfg(tmp_path, allow_empty=True)) is None
    assert absent_after(_cfg(tmp_path, wait_deadline_s=1800)) is None  # the wait's own deadline comes first


def _first_event(trigger: DayCompleteTrigger) -> dict[str, Any]:
    async def first() -> Any:
        return await anext(trigger.run())

    return dict(asyncio.run(first()).payload)


def _trigger(prefix: DayPrefix, *, absent_s: float, deadline_s: float, known: list[str]) -> DayCompleteTrigger:
    now = dt.datetime.now(dt.UTC)
    return DayCompleteTrigger(
        bucket=prefix.bucket, prefix=prefix.prefix, marker="_SUCCESS", quiet_period_s=0.0, min_objects=1,
        started=now.isoformat(), deadline=(now + dt.timedelta(seconds=deadline_s)).isoformat(), poke_interval=0.1,
        known=known, absent_deadline=(now + dt.timedelta(seconds=absent_s)).isoformat())


def test_the_trigger_says_absent_at_the_absent_deadline_and_deadline_for_a_late_day(tmp_path: Path) -> None:
    prefix = DayPrefix.of(str(tmp_path), DAY)
    event = _first_event(_trigger(prefix, absent_s=0.3, deadline_s=30, known=[]))
    assert event["status"] == "absent" and 0.3 <= event["waited_s"] < 30
    Path(prefix.prefix).mkdir(parents=True)
    (Path(prefix.prefix) / "part-000.jsonl").write_text("{}\n")  # some objects: late, not absent
    event = _first_event(_trigger(prefix, absent_s=0.3, deadline_s=1.0, known=[]))
    assert event["status"] == "deadline" and event["waited_s"] >= 1.0
