"""The trigger the daily DAG's wait defers to, run as the triggerer runs it (its first event),
against a directory and an S3 API on loopback."""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
from pathlib import Path
from typing import Any

import pytest
from evaluation_wait import DayCompleteTrigger, DayPrefix

from evaluation.stages.wait import poke_interval

DAY = dt.date(2026, 9, 1)


def _first_event(trigger: DayCompleteTrigger) -> dict[str, Any]:
    async def first() -> Any:
        return await anext(trigger.run())

    return asyncio.run(first()).payload


def _trigger(prefix: DayPrefix, *, deadline_s: float, **kwargs: Any) -> DayCompleteTrigger:
    now = dt.datetime.now(dt.UTC)
    values: dict[str, Any] = {"bucket": prefix.bucket, "prefix": prefix.prefix, "marker": "", "quiet_period_s": 0.0,
                              "min_objects": 1, "started": now.isoformat(),
                              "deadline": (now + dt.timedelta(seconds=deadline_s)).isoformat(), "poke_interval": 0.2}
    values.update(kwargs)
    return DayCompleteTrigger(**values)


class _OnLook:
    """``action`` done by the trigger's ``look``-th look at the day's prefix, just before it lists
    the prefix (so that look sees it, and none before it does); ``at`` is when (UTC). Events, not
    delays, order the writes and the looks, whatever the machine's load."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, look: int, action: Any) -> None:
        import evaluation_wait

        self.at = dt.datetime.max.replace(tzinfo=dt.UTC)
        self.looks = 0
        listing = evaluation_wait._day_objects

        def looking(*args: Any) -> dict[str, float]:
            self.looks += 1
            if self.looks == look:
                self.at = dt.datetime.now(dt.UTC)
                action()
            return listing(*args)

        monkeypatch.setattr(evaluation_wait, "_day_objects", looking)


def _ended(event: dict[str, Any]) -> dt.datetime:
    """When the trigger fired, by its own account (``started`` + ``waited_s``, rounded to the ms)."""
    return dt.datetime.fromisoformat(event["started"]) + dt.timedelta(seconds=event["waited_s"] + 0.001)


def test_the_days_prefix_on_s3_and_in_a_directory(tmp_path: Path) -> None:
    assert DayPrefix.of("s3://logs/raw/", DAY) == DayPrefix("s3://logs/raw/dt=2026-09-01/", "logs", "raw/dt=2026-09-01/")
    assert DayPrefix.of("s3://logs", DAY) == DayPrefix("s3://logs/dt=2026-09-01/", "logs", "dt=2026-09-01/")
    local = DayPrefix.of(str(tmp_path), DAY)
    assert local.bucket is None and local.prefix == f"{tmp_path / 'dt=2026-09-01'}/"


def test_poke_interval_follows_the_deadline_and_the_quiet_period() -> None:
    assert poke_interval(21600) == 60 and poke_interval(30) == 1 and poke_interval(1200) == 10
    assert poke_interval(21600, quiet_period_s=20) == 4


def test_it_serializes_to_an_importable_class_and_back(tmp_path: Path) -> None:
    trigger = _trigger(DayPrefix.of(str(tmp_path), DAY), deadline_s=5, marker="_SUCCESS", known=["a"],
                       last_activity="2026-09-02T00:00:00+00:00")
    classpath, kwargs = trigger.serialize()
    module, name = classpath.rsplit(".", 1)
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (classpath, kwargs)


def test_a_directory_marker_fires_when_it_appears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = DayPrefix.of(str(tmp_path), DAY)
    Path(prefix.prefix).mkdir(parents=True)
    write = _OnLook(monkeypatch, 3, lambda: (Path(prefix.prefix) / "_SUCCESS").write_bytes(b""))
    event = _first_event(_trigger(prefix, deadline_s=20, marker="_SUCCESS"))
    assert event["status"] == "success" and write.looks == 3  # not before the marker was written
    assert _ended(event) >= write.at


def test_a_directory_quiet_period_restarts_with_each_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = DayPrefix.of(str(tmp_path), DAY)
    Path(prefix.prefix).mkdir(parents=True)
    (Path(prefix.prefix) / "part-000.jsonl").write_text("{}\n")
    write = _OnLook(monkeypatch, 2, lambda: (Path(prefix.prefix) / "part-001.jsonl").write_text("{}\n"))
    event = _first_event(_trigger(prefix, deadline_s=20, quiet_period_s=1.5))
    assert event["status"] == "success"
    assert _ended(event) >= write.at + dt.timedelta(seconds=1.5)  # 1.5 s quiet after the new file


def test_the_deadline_is_an_event_of_its_own(tmp_path: Path) -> None:
    prefix = DayPrefix.of(str(tmp_path), DAY)
    event = _first_event(_trigger(prefix, deadline_s=1.0, marker="_SUCCESS"))
    assert event["status"] == "deadline" and event["waited_s"] >= 1.0  # not before the deadline


@pytest.mark.parametrize("kind", ["marker", "quiet"])
def test_s3_marker_and_quiet_period_through_boto3(local_s3: Any, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluation import storage

    prefix = DayPrefix.of(f"s3://llm-logs/trigger-{kind}", DAY)
    raw = storage.open_store(f"s3://llm-logs/trigger-{kind}", local_s3.access())
    raw.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl", b"{}\n")
    if kind == "marker":
        write = _OnLook(monkeypatch, 2, lambda: raw.write_bytes(f"{storage.raw_prefix(DAY)}_SUCCESS", b""))
        trigger = _trigger(prefix, deadline_s=20, marker="_SUCCESS")
    else:
        write = _OnLook(monkeypatch, 2, lambda: raw.write_bytes(f"{storage.raw_prefix(DAY)}part-001.jsonl", b"{}\n"))
        trigger = _trigger(prefix, deadline_s=20, quiet_period_s=2, known=[f"{prefix.prefix}part-000.jsonl"],
                           last_activity=dt.datetime.now(dt.UTC).isoformat())
    event = _first_event(trigger)
    monkeypatch.undo()  # the deadline below lists as it is
    assert event["status"] == "success" and write.looks >= 2, event
    assert _ended(event) >= write.at + dt.timedelta(seconds=0.0 if kind == "marker" else 2.0)
    # The deadline, on S3 too.
    late = _first_event(_trigger(DayPrefix.of("s3://llm-logs/trigger-none", DAY), deadline_s=1.0, marker="_SUCCESS"))
    assert late["status"] == "deadline"


def test_on_s3_the_trigger_uses_the_runs_connection_as_the_tasks_do(local_s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trigger builds its session from the connection it was given, through the provider's
    hook: a connection with role_arn assumes the role (moto's STS records it)."""
    import json

    from evaluation import storage

    role_arn = local_s3.create_role("trigger-role")
    monkeypatch.setenv("AIRFLOW_CONN_EVALUATION_TRIGGER_S3", json.dumps(local_s3.connection(role_arn=role_arn)))
    prefix = DayPrefix.of("s3://llm-logs/trigger-role", DAY)
    storage.open_store("s3://llm-logs/trigger-role", local_s3.access()).write_bytes(
        f"{storage.raw_prefix(DAY)}_SUCCESS", b"")
    before = len(local_s3.assumed_roles())
    event = _first_event(_trigger(prefix, deadline_s=20, marker="_SUCCESS", aws_conn_id="evaluation_trigger_s3"))
    assert event["status"] == "success" and event["message"] == f"{prefix.prefix}_SUCCESS exists"
    assert [role.role_arn for role in local_s3.assumed_roles()[before:]] == [role_arn]


def test_an_s3_error_is_an_error_event_naming_the_prefix(local_s3: Any) -> None:
    event = _first_event(_trigger(DayPrefix.of("s3://no-such-bucket/raw", DAY), deadline_s=20, marker="_SUCCESS"))
    assert event["status"] == "error" and "s3://no-such-bucket/raw/dt=2026-09-01/" in event["message"]
