"""Waiting for a complete day in process (``python -m evaluation run --completion-marker ...``):
the same rule as the daily DAG's deferred ``wait_for_day`` task (plugins/evaluation_wait.py).

A day is complete when its ``completion_marker`` exists under the day's prefix of the input root
(``dt=YYYY-MM-DD/``, or as the run's ``input_layout`` lays days out), or, without one, once no object has been added there for ``quiet_period_s`` (a quiet period
of 0 and no marker: no wait). Past ``wait_deadline_s`` the run fails, its ``runs`` row saying why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from evaluation import storage
from evaluation.contract import RunConfig

if TYPE_CHECKING:
    from evaluation.stages import Stores


def waiting_for(cfg: RunConfig) -> str:
    """What a run waits for, as messages say it."""
    if cfg.completion_marker:
        return f"completion marker {cfg.completion_marker!r}"
    return f"a quiet period of {cfg.quiet_period_s:g}s with no new object"


def incomplete_message(where: str, prefix_uri: str, cfg: RunConfig, waited_s: float) -> str:
    """The failure of a run whose day was still incomplete at its deadline."""
    return (f"{where}: {prefix_uri} was not complete after {waited_s:.0f}s: waited for {waiting_for(cfg)} "
            f"until the deadline (wait_deadline_s={cfg.wait_deadline_s:g})")


def waits(cfg: RunConfig) -> bool:
    """Whether the run waits for its day to be complete (a marker, or a quiet period above 0)."""
    return bool(cfg.completion_marker) or cfg.quiet_period_s > 0


def min_objects(cfg: RunConfig) -> int:
    """Objects a quiet day needs to count as complete (none when an empty day is allowed)."""
    return 0 if cfg.allow_empty else 1


def is_complete(cfg: RunConfig, objects: Mapping[str, float], marker_key: str, quiet_since: float,
                now: float) -> bool:
    """The rule of one look at the day's ``objects`` (key -> modification time): its marker
    (``marker_key``, as the keys are named) is among them, or, without a marker, it holds enough
    objects and nothing has happened since ``quiet_since`` for ``quiet_period_s``."""
    if cfg.completion_marker:
        return marker_key in objects
    return len(objects) >= min_objects(cfg) and now - quiet_since >= cfg.quiet_period_s


def poke_interval(deadline_s: float, quiet_period_s: float = 0.0) -> float:
    """Seconds between two looks: a 120th of the deadline, within [1, 60] s, and at most a fifth
    of the quiet period."""
    interval = min(60.0, max(1.0, deadline_s / 120.0))
    if quiet_period_s > 0:
        interval = min(interval, max(1.0, quiet_period_s / 5.0))
    return interval


def wait_for_day(
    cfg: RunConfig,
    stores: Stores,
    *,
    on_wait: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> float | None:
    """Block until the run's day is complete; returns the seconds waited, None when it was
    complete at the first look. Raises :class:`~evaluation.stages.RunFailed` (after landing the
    run's failed ``runs`` row) at the deadline."""
    # numpy via the stages: only when the wait gives up
    from evaluation.stages import fail_run, where
    from evaluation.stages.ingest import DayInput, missing_input

    raw = stores.raw
    if not waits(cfg):
        return None
    prefix = storage.raw_prefix(cfg.date, cfg.input_layout)
    marker = prefix + cfg.completion_marker
    poke = poke_interval(cfg.wait_deadline_s, cfg.quiet_period_s)
    started, started_at = time.monotonic(), time.time()
    known: set[str] | None = None
    last_new = 0.0
    looks = 0
    while True:
        objects = {info.key: info.modified for info in raw.list(prefix)}
        now = time.time()
        if known is not None and set(objects) - known:
            last_new = now  # a new object: the quiet period starts over
        known = set(objects)
        looks += 1
        quiet_since = max([*objects.values(), last_new]) if objects else started_at
        waited = time.monotonic() - started
        if is_complete(cfg, objects, marker, quiet_since, now):
            return None if looks == 1 else round(waited, 3)
        if waited >= cfg.wait_deadline_s:
            missing = missing_input(raw, cfg.date, DayInput.of(cfg))
            raise fail_run(cfg, stores, incomplete_message(where(cfg), raw.uri(prefix), cfg, waited)
                           + (f"; {missing}" if missing else ""), waited_s=round(waited, 3))
        if looks == 1 and on_wait is not None:
            on_wait(f"{raw.uri(prefix)} is not complete yet: waiting for {waiting_for(cfg)} "
                    f"(at most {cfg.wait_deadline_s:g}s)")
        sleep(min(poke, max(0.0, cfg.wait_deadline_s - waited)))
