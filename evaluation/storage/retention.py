"""Retention of working data (CONTRACT §3): what ``python -m evaluation gc`` and the
``evaluation_maintenance`` DAG delete.

What each folder holds, how long it is kept and under which option, and what is never deleted:
docs/retention.md. A run's folder is as old as its newest object, so a run still writing is never
touched; an uncommitted object of the day tables also waits at least :data:`UNCOMMITTED_MIN_DAYS`,
whatever ``work_days``, since deleting an object a landing is about to commit would break its day.

A collection is a plan: :func:`collect` lists the objects it would delete (nothing is deleted),
and :func:`apply` deletes exactly the listed keys, no prefix, so an object written after the
listing is left alone.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from evaluation import storage
from evaluation.contract.config import Retention

_RUN_FOLDER = re.compile(r"^(?P<area>_work|_failed)/dt=(?P<day>\d{4}-\d{2}-\d{2})/run=(?P<run>[^/]+)/")
_DAY_FOLDER = re.compile(r"^_ledger/dt=(?P<day>\d{4}-\d{2}-\d{2})/")
_CLAIM = re.compile(r"^_claims/dt=(?P<day>\d{4}-\d{2}-\d{2})\.json$")
#: The youngest an uncommitted object may be to go: far above a landing's uploads to its commit.
UNCOMMITTED_MIN_DAYS = 1.0


@dataclass(frozen=True)
class Group:
    """One folder to delete (a run's working data, a day's ledger), or one object (a claim, an
    uncommitted object)."""

    area: str  #: _work, _failed, _ledger, _claims or uncommitted
    prefix: str
    objects: tuple[storage.ObjectInfo, ...]
    age_days: float  #: how old the newest object (or, for the ledger, the day) is

    @property
    def bytes(self) -> int:
        return sum(o.size for o in self.objects)


@dataclass
class Plan:
    """What a collection would delete."""

    root: str
    retention: Retention
    groups: list[Group] = field(default_factory=list)

    @property
    def objects(self) -> int:
        return sum(len(g.objects) for g in self.groups)

    @property
    def bytes(self) -> int:
        return sum(g.bytes for g in self.groups)

    def by_area(self) -> dict[str, dict[str, int]]:
        """Folders, objects and bytes per area."""
        out: dict[str, dict[str, int]] = {}
        for group in self.groups:
            entry = out.setdefault(group.area, {"folders": 0, "objects": 0, "bytes": 0})
            entry["folders"] += 1
            entry["objects"] += len(group.objects)
            entry["bytes"] += group.bytes
        return out

    def keys(self) -> list[str]:
        return [o.key for g in self.groups for o in g.objects]

    def to_dict(self) -> dict[str, object]:
        return {
            "root": self.root,
            "retention": self.retention.model_dump(),
            "objects": self.objects,
            "bytes": self.bytes,
            "areas": self.by_area(),
            "folders": [{"prefix": g.prefix, "objects": len(g.objects), "bytes": g.bytes,
                         "age_days": round(g.age_days, 1)} for g in self.groups],
        }


def _grouped(objects: Iterable[storage.ObjectInfo], pattern: re.Pattern[str]) -> dict[str, list[storage.ObjectInfo]]:
    groups: dict[str, list[storage.ObjectInfo]] = {}
    for info in objects:
        match = pattern.match(info.key)
        if match is not None:
            groups.setdefault(match.group(0), []).append(info)
    return groups


def collect(store: storage.Store, retention: Retention, *, now: dt.datetime) -> Plan:
    """The working data under ``store`` that ``retention`` lets go, as of ``now`` (UTC)."""
    plan = Plan(store.uri(""), retention)
    now_s = now.timestamp()
    for area, days in (("_work", retention.work_days), ("_failed", retention.failed_days)):
        for prefix, objects in sorted(_grouped(store.list(f"{area}/"), _RUN_FOLDER).items()):
            age = (now_s - max(o.modified for o in objects)) / 86400
            if age > days:
                plan.groups.append(Group(area, prefix, tuple(objects), age))
    today = now.astimezone(dt.UTC).date()
    for area, pattern in (("_ledger", _DAY_FOLDER), ("_claims", _CLAIM)):  # a day's ledger folder, its claim
        for prefix, objects in sorted(_grouped(store.list(f"{area}/"), pattern).items()):
            age = (today - dt.date.fromisoformat(prefix.split("dt=")[1][:10])).days
            if age > retention.ledger_days:
                plan.groups.append(Group(area, prefix, tuple(objects), float(age)))
    objects = storage.list_day_objects(store)
    landed = storage.read_landed(store)  # read after the listing: a commit written meanwhile names its objects
    for info in storage.uncommitted(objects, landed):
        age = (now_s - info.modified) / 86400
        if age > max(retention.work_days, UNCOMMITTED_MIN_DAYS):
            plan.groups.append(Group("uncommitted", info.key, (info,), age))
    return plan


def apply(store: storage.Store, plan: Plan) -> int:
    """Delete exactly the objects ``plan`` lists; the number deleted."""
    keys = plan.keys()
    store.delete_keys(keys)
    if isinstance(store, storage.LocalStore):
        folders = {f"{g.area}/" for g in plan.groups if g.area.startswith("_")}
        folders |= {g.prefix.rsplit("/", 1)[0] + "/" for g in plan.groups if g.area == "uncommitted"}
        for folder in sorted(folders):
            store.prune(folder)
    return len(keys)


def describe(plan: Plan, *, applied: bool) -> list[str]:
    """Lines for a person: each folder, then the totals."""
    verb = "deleted" if applied else "would delete"
    lines = [f"{g.prefix}  {_objects(len(g.objects))}, {_size(g.bytes)}, {g.age_days:.1f} days old" for g in plan.groups]
    areas = ", ".join(f"{area} {_objects(e['folders']) if area == 'uncommitted' else str(e['folders']) + ' folders'}"
                      f" / {_size(e['bytes'])}" for area, e in plan.by_area().items())
    lines.append(f"{verb} {_objects(plan.objects)}, {_size(plan.bytes)} under {plan.root}"
                 + (f" ({areas})" if areas else ""))
    if not applied and plan.objects:
        lines.append("dry run: nothing was deleted; run again with --apply to delete these objects")
    return lines


def _objects(n: int) -> str:
    return f"{n} object" if n == 1 else f"{n} objects"


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
