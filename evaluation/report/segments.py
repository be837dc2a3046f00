"""Segments of the daily report (CONTRACT §7): the day's measures per model, judge and segment
value (a run's ``segments`` option, ``daily_summary`` rows with a ``segment_key``), flagged with the
same method as whole models, and the headline line that says which segment moved.

**Multiplicity.** The segment tests are their own family: every comparison of every monitored
segment value (all models, judges, keys, values, measures and both baselines) goes through
:func:`evaluation.report.alerts.decide_flags` together, so the family-wise error (Holm) or false
discovery rate (BH) holds across all of them: adding segment keys or values makes each test
stricter instead of adding false alarms, and the whole-model flags are untouched by them.

**Too few to monitor.** A segment value with fewer than :data:`SEGMENT_MIN_ROWS` ``ok`` rows of a
judge today is not tested (its tests would only dilute the family: at 30 rows a pass-rate drop
must exceed about 25 pp to be seen even before the correction); it is listed as such, with the
volume needed.

**States.** A segment's regression follows the same states as a model's
(:mod:`evaluation.report.monitor` replays the segment's days as it replays a model's, and
:func:`evaluation.report.alerts.model_states` and :func:`~evaluation.report.alerts.build_headline`
make its line): *regressed since D* against its level before the change, *still regressed since D
(day N)* on the days after, paging on the day it regressed and again only when it gets worse, until
it is back at that level (then it has no line). A line whose ``pages`` is false is shown, not sent.

In ``summary.json``, ``segments`` is a :class:`~evaluation.report.summary.Segments`: the keys, the
groups (a segment's, without trend), the flags (most severe first), the regressed segments'
headline lines and the values too few to monitor.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import polars as pl

from evaluation.report.alerts import AlertPolicy, build_headline, decide_flags, model_states
from evaluation.report.summary import (
    HeadlineLine,
    SegmentFlag,
    SegmentGroup,
    SegmentLine,
    SegmentRegression,
    Segments,
    TooFew,
)

SEP = "\x1f"
#: ``ok`` rows a segment value needs today (per model and judge) to be tested.
SEGMENT_MIN_ROWS = 30


def segment_of(row: dict[str, Any]) -> dict[str, str]:
    """``{"key", "value"}`` of a ``daily_summary`` row of a segment; ``{}`` of a whole-model row."""
    key = row.get("segment_key")
    return {} if key is None else {"key": str(key), "value": str(row.get("segment_value"))}


def split_segments(history: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The whole-model rows of ``daily_summary`` and its segment rows (none for days landed before
    segments, whose rows have no ``segment_key``)."""
    if history.is_empty() or "segment_key" not in history.columns:
        return history, history.clear()
    return history.filter(pl.col("segment_key").is_null()), history.filter(pl.col("segment_key").is_not_null())


def key_name(key: str) -> str:
    """A segment key as the page says it: ``metadata.locale`` → ``locale``."""
    return key.removeprefix("metadata.")


def _unit(group: SegmentGroup) -> str:
    """The name a (model, segment) is tested under: model, key and value joined by :data:`SEP`."""
    return SEP.join((group.model, group.segment.key, group.segment.value))


def _headline(lines: list[HeadlineLine], tagged: dict[str, SegmentGroup]) -> list[SegmentLine]:
    """The regressed (model, segment) units' headline lines (:func:`evaluation.report.alerts.build_headline`),
    named by model and segment again; ``others_steady`` when no other value of that key is
    regressed for the model."""
    regressed = [(line, tagged[line.model]) for line in lines if line.status == "regressed"]
    per_key = Counter((group.model, group.segment.key) for _, group in regressed)
    return [SegmentLine(**{**dict(line), "model": group.model, "segment": group.segment,
                           "changes": [SegmentRegression(**dict(c), segment=group.segment) for c in line.changes],
                           "others_steady": per_key[(group.model, group.segment.key)] == 1})
            for line, group in regressed]


def segment_report(groups: list[SegmentGroup], policy: AlertPolicy, keys: list[str], day: dt.date) -> Segments:
    """The segments' part of ``summary.json`` (see the module docstring) from their measured groups
    of ``day`` (their measures carry the replayed states: :func:`evaluation.report.compute.assess_days`)."""
    monitored = [g for g in groups if g.status_counts["ok"] >= SEGMENT_MIN_ROWS]
    too_few = [TooFew(model=g.model, judge=g.judge, segment=g.segment, n_ok=g.status_counts["ok"], needed=SEGMENT_MIN_ROWS)
               for g in groups if g.status_counts["ok"] < SEGMENT_MIN_ROWS]
    # the groups go to the flag rule and the model states under a name that carries their segment
    # (a shallow copy: their measures are the same objects, so each comparison gets its adjusted
    # p-value), then the name is split back
    tagged = {_unit(g): g for g in monitored}
    units = [g.model_copy(update={"model": _unit(g)}) for g in monitored]
    flags = decide_flags(units, policy)
    lines = build_headline(sorted(tagged), flags, model_states(day, units, policy))
    segment_flags = [SegmentFlag(**{**dict(flag), "model": tagged[flag.model].model,  # one tag, one model and segment
                                    "segment": tagged[flag.model].segment}) for flag in flags]
    return Segments(keys=keys, min_rows=SEGMENT_MIN_ROWS, groups=groups, flags=segment_flags,
                    headline=_headline(lines, tagged), too_few=too_few)
