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

In ``summary.json``, ``segments``::

    {"keys": ["metadata.locale", ...], "min_rows": 30,
     "groups": [<a group of ``groups``, with "segment": {"key", "value"}, without trend>, ...],
     "flags": [<a flag, with "segment">, ...],           # most severe first
     "headline": [{"model", "segment": {"key", "value"}, "changes": [...], "others_steady": bool}, ...],
     "too_few": [{"model", "judge", "segment", "n_ok", "needed"}, ...]}
"""

from __future__ import annotations

from typing import Any

import polars as pl

from evaluation.report.alerts import AlertPolicy, decide_flags
from evaluation.report.summary import SegmentFlag, SegmentGroup, Segments

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


def _change(flag: SegmentFlag) -> dict[str, Any]:
    return {"judge": flag.judge, "measure": flag.measure, "baseline": flag.baseline,
            "before": flag.baseline_value, "after": flag.value, "delta": flag.delta,
            "p_adjusted": flag.p_adjusted, "assessment": flag.assessment, "segment": flag.segment}


def _headline(flags: list[SegmentFlag]) -> list[dict[str, Any]]:
    """One line per (model, segment) with an alerting flag: its alerting changes, one per (judge,
    measure), most severe first; ``others_steady`` when no other value of that key alerts for the model."""
    lines: dict[tuple[str, str, str], dict[str, Any]] = {}
    for flag in flags:  # most severe first
        if not flag.alerts:
            continue
        segment = flag.segment
        line = lines.setdefault((flag.model, segment["key"], segment["value"]),
                                {"model": flag.model, "segment": segment, "changes": []})
        if all((c["judge"], c["measure"]) != (flag.judge, flag.measure) for c in line["changes"]):
            line["changes"].append(_change(flag))
    for (model, key, _), line in lines.items():
        line["others_steady"] = sum(1 for m, k, _ in lines if (m, k) == (model, key)) == 1
    return list(lines.values())


def segment_report(groups: list[SegmentGroup], policy: AlertPolicy, keys: list[str]) -> Segments:
    """The segments' part of ``summary.json`` (see the module docstring) from their measured groups."""
    monitored = [g for g in groups if g.status_counts["ok"] >= SEGMENT_MIN_ROWS]
    too_few = [{"model": g.model, "judge": g.judge, "segment": g.segment, "n_ok": g.status_counts["ok"],
                "needed": SEGMENT_MIN_ROWS} for g in groups if g.status_counts["ok"] < SEGMENT_MIN_ROWS]
    # the groups go to the flag rule under a name that carries their segment (their measures are
    # the same objects: a shallow copy, so each comparison gets its adjusted p-value), then the
    # name is split back
    tagged = {SEP.join((g.model, g.segment["key"], g.segment["value"])): g for g in monitored}
    flags = decide_flags([g.model_copy(update={"model": SEP.join((g.model, g.segment["key"], g.segment["value"]))})
                          for g in monitored], policy)
    segment_flags = [SegmentFlag(**{**dict(flag), "model": tagged[flag.model].model,  # one tag, one model and segment
                                    "segment": tagged[flag.model].segment}) for flag in flags]
    return Segments(keys=keys, min_rows=SEGMENT_MIN_ROWS, groups=groups, flags=segment_flags,
                    headline=_headline(segment_flags), too_few=too_few)
