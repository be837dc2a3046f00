"""Honest labels of the daily report: a day whose latest run failed says so, with its cause and
evidence, and a large change that did not flag is marked "not significant at n = …" rather than
shown like any other number.

In ``summary.json``:

* ``latest_run_failed``: None, or the day's latest run when it did not succeed
  (:func:`latest_failure`). The page's tables are still the last landed run's.
* ``source.landed_root``: the output root the day's run landed under (:func:`landed_root`);
  ``source.root``, where it was read, is in the page's footer when it differs.
* ``not_significant``: the large changes of headline measures that did not flag
  (:func:`large_unflagged`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import polars as pl

from evaluation.report.alerts import AlertPolicy, assess, is_headline, measures_of
from evaluation.report.summary import Group, NotSignificant, SegmentGroup


def latest_failure(runs: pl.DataFrame | None) -> dict[str, Any] | None:
    """The day's latest run (by when it finished: a run has its row once it ends) when it did not succeed: its id, status, cause
    (``message``) and where its evidence is (``evidence_uri``, the run's ``_failed/`` objects);
    None when the latest run succeeded or no run row is landed."""
    if runs is None or not runs.height or "status" not in runs.columns:
        return None
    order = [c for c in ("finished_at", "started_at", "run_id") if c in runs.columns]
    latest = runs.sort(order, nulls_last=False).row(-1, named=True)
    if latest.get("status") == "success":
        return None
    return {key: latest.get(key) for key in ("run_id", "status", "message", "evidence_uri", "started_at", "finished_at")}


def large_unflagged(groups: Sequence[Group], policy: AlertPolicy) -> list[NotSignificant]:
    """Changes of headline measures at least the minimum practical effect that did not flag (not
    significant after the adjustment): the page marks them "not significant at n = …" rather than
    leaving them unmarked. Worse ones first, then by size."""
    found = []
    for group, kind, name, measure in measures_of(groups):
        # only the reference is tested: the previous day, shown beside it, has no p-value and never flags
        comparison = measure.reference
        if (comparison is None or comparison.flagged or comparison.delta is None or comparison.p_adjusted is None
                or not is_headline(group.judge, kind, name)
                or not abs(comparison.delta) >= policy.min_effect(kind) - 1e-9):
            continue
        delta = comparison.delta
        found.append(NotSignificant(
            model=group.model, judge=group.judge, segment=group.segment if isinstance(group, SegmentGroup) else None,
            measure=f"{name}_rate" if kind == "rate" else f"{name}_mean", baseline=comparison.baseline,
            before=comparison.value, after=measure.value, delta=delta, n=measure.n, baseline_n=comparison.n,
            p_adjusted=comparison.p_adjusted, assessment=assess(kind, name, delta)[1]))
    return sorted(found, key=lambda c: (c.assessment != "worse", -abs(c.delta), c.model, c.judge, c.measure))


def landed_root(run: dict[str, Any] | None) -> str | None:
    """The output root the day's run landed its tables under (its config's ``output_uri``): the
    page names it, so a report built again from a copy of the tables, or with another ``--date``
    form, has the same header; None without a run row."""
    root = run_object(run, "config").get("output_uri")
    return str(root) if root else None


def run_object(run: dict[str, Any] | None, column: str) -> dict[str, Any]:
    """The JSON object a column of the day's run holds (its ``config``, its ``cascade``); empty
    without one."""
    try:
        found = json.loads((run or {}).get(column) or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
