"""Waiting for a complete day in process (``python -m evaluation run --completion-marker ...``):
the same rule as the daily DAG's deferred ``wait_for_day`` task (plugins/evaluation_wait.py).

A day is complete when its ``completion_marker`` exists under the day's prefix of the input root
(``dt=YYYY-MM-DD/``, or as the run's ``input_layout`` lays days out), or, without one, once no object has been added there for ``quiet_period_s`` (a quiet period
of 0 and no marker: no wait). Past ``wait_deadline_s`` the run fails, its ``runs`` row saying why.
A day whose prefix has held no object at all fails sooner, at ``absent_deadline_s`` (a wrong input
root, or an export that did not run, shows within the hour): once an object is there, the run waits
for late ones up to ``wait_deadline_s``. An empty day that is allowed (``allow_empty``) has no
absent deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NoReturn, Protocol

from evaluation import storage
from evaluation.contract.config import RunConfig

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


class Clock(Protocol):
    """The time a wait reads and the sleep between its looks."""

    def time(self) -> float:
        """Seconds since the epoch (compared with the objects' modification times)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (the time waited)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` before the next look."""
        ...


#: The clock :func:`wait_for_day` uses unless it is given one: the machine's (the :mod:`time` module).
CLOCK: Clock = time


def absent_after(cfg: RunConfig) -> float | None:
    """Seconds after which a day whose prefix has held no object fails (None: never sooner than
    the wait's deadline, as when an empty day is allowed)."""
    return None if cfg.allow_empty or cfg.absent_deadline_s >= cfg.wait_deadline_s else cfg.absent_deadline_s


def absent_message(where: str, prefix_uri: str, cfg: RunConfig, waited_s: float) -> str:
    """The failure of a run whose day's prefix held no object at its absent deadline."""
    return (f"{where}: {prefix_uri} held no object after {waited_s:.0f}s (absent_deadline_s={cfg.absent_deadline_s:g}): "
            "check that input_uri is the root the day's dt=YYYY-MM-DD/ folder is written under and that the day's "
            f"export ran; a day with objects waits for late ones up to wait_deadline_s={cfg.wait_deadline_s:g}")


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
    clock: Clock | None = None,
) -> float | None:
    """Block until the run's day is complete; returns the seconds waited (on ``clock``, default
    :data:`CLOCK`), None when it was complete at the first look. Raises :class:`~evaluation.stages.RunFailed` (after
    landing the run's failed ``runs`` row) at the deadline, or at the absent deadline when the
    day's prefix has held no object."""
    raw = stores.raw
    if not waits(cfg):
        return None
    prefix = storage.raw_prefix(cfg.date, cfg.input_layout)
    marker = prefix + cfg.completion_marker
    poke = poke_interval(cfg.wait_deadline_s, cfg.quiet_period_s)
    clock = clock or CLOCK
    started, started_at = clock.monotonic(), clock.time()
    absent = absent_after(cfg)
    known: set[str] | None = None
    last_new = 0.0
    looks = 0
    while True:
        objects = {info.key: info.modified for info in raw.list(prefix)}
        now = clock.time()
        if known is not None and set(objects) - known:
            last_new = now  # a new object: the quiet period starts over
        known = set(objects)
        absent = None if objects else absent  # an object once seen: the day is late, not absent
        looks += 1
        quiet_since = max([*objects.values(), last_new]) if objects else started_at
        waited = clock.monotonic() - started
        if is_complete(cfg, objects, marker, quiet_since, now):
            return None if looks == 1 else round(waited, 3)
        if waited >= cfg.wait_deadline_s or (absent is not None and waited >= absent):
            _give_up(cfg, stores, waited, absent=absent is not None and waited < cfg.wait_deadline_s)
        if looks == 1 and on_wait is not None:
            on_wait(f"{raw.uri(prefix)} is not complete yet: waiting for {waiting_for(cfg)} "
                    f"(at most {cfg.wait_deadline_s:g}s" + (f", {absent:g}s while it holds no object)"
                                                             if absent is not None else ")"))
        clock.sleep(min(poke, max(0.0, (cfg.wait_deadline_s if absent is None else absent) - waited)))


def _give_up(cfg: RunConfig, stores: Stores, waited: float, *, absent: bool) -> NoReturn:
    """Fail the run at its deadline (``absent``: its absent deadline), naming the day's prefix and
    what it holds instead of logs."""
    # numpy via the stages: only when the wait gives up
    from evaluation.stages import fail_run, where
    from evaluation.stages.ingest import DayInput, missing_input

    uri = stores.raw.uri(storage.raw_prefix(cfg.date, cfg.input_layout))
    message = (absent_message if absent else incomplete_message)(where(cfg), uri, cfg, waited)
    missing = missing_input(stores.raw, cfg.date, DayInput.of(cfg))
    raise fail_run(cfg, stores, message + (f"; {missing}" if missing else ""), waited_s=round(waited, 3))
