"""Quality flags and alerts of the daily report (CONTRACT §7): which measures moved, by more than
sampling and the model's own day-to-day variation explain, which of those page someone, and the
state each model is in.

**The test** of a (model, judge) measure is :mod:`evaluation.report.monitor`'s: the day against its
reference (the trailing 7 days pooled, never the tested day; while regressed, the days before the
regression), the day-to-day variance of the reference days shrunk towards a prior
(:attr:`AlertPolicy.prior_day_sd`, weighing :attr:`AlertPolicy.prior_days` days) with its degrees
of freedom in a Student-t reference, and an exact beta-binomial tail for rates.

**Two families.** The *alerting* family is the one-sided (worse) tests of the headline measures
(:func:`is_headline`: the pass and fail rates, the score, each judge's :data:`HEADLINE_METRICS`),
adjusted together, Holm by default or Benjamini–Hochberg (:data:`evaluation.contract.multiplicity.P_ADJUSTMENTS`);
a test alerts when its adjusted p is below :attr:`AlertPolicy.alpha` and its drop is at least the
minimum practical effect (:attr:`AlertPolicy.min_rate_effect` percentage points on rates,
:attr:`AlertPolicy.min_metric_effect` on means). The *shown* family is every measure's two-sided
test against the same reference, adjusted on its own: its flags (better, changed, and worse on
non-headline measures) are shown, never sent. The previous landed day is shown beside the day and
not tested.

**In ``summary.json``** (the structure notifications read; the keys are those of
:class:`~evaluation.report.summary.Flag` and :class:`~evaluation.report.summary.HeadlineLine`):

* ``flags``: the flags, most severe first (adjusted p-value ascending, then ``|delta|`` in units
  of the measure's minimum effect, descending), against ``trailing_7d`` or ``before_regression``.
* ``headline``: one line per model of the day, in the order regressed, improved, too few records
  (``too_few``), no baseline (``no_baseline``), steady. A **regressed** model has a headline
  measure in regression (:mod:`evaluation.report.monitor`: it stays so, against its level before
  the change, until it is back); ``changes`` are those measures, most severe first; ``pages`` is
  true on the day it regressed and on a day a measure regressed before got worse, never on the
  days it only stays regressed. An **improved** model has ``better`` flags on headline measures
  (its ``changes``). **too_few**: its best judge's pass rate cannot catch a drop of
  :attr:`AlertPolicy.useful_drop` at 80% power (``detectable_drop``), and a day needs more rows
  than it had (``needs``: rows a day for a 20 pp and a 10 pp drop, None when out of reach).
  **no_baseline**: no earlier day to compare with.
* ``alerting``: the regressed models, in headline order; ``paging``: those whose line pages.
* ``method["alerts"]``: the policy in force (:meth:`AlertPolicy.describe`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evaluation.contract.multiplicity import P_ADJUSTMENTS, adjust_p_values
from evaluation.report.monitor import POWER, TOLERANCE, Daily, Result, detectable_drop, records_needed, t_isf
from evaluation.report.summary import (
    Change,
    Flag,
    Group,
    HeadlineLine,
    Measure,
    Monitoring,
    Previous,
    RateMeasure,
    RateMonitoring,
    Reference,
    Regression,
)

#: Per judge, the metrics (besides the score) whose worse flags alert.
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("faithfulness", "answer_relevance"),
    "masis": ("faithfulness", "relevance"),
    "prompt": (),
}
#: A flag's (a reference entry's) ``baseline`` in words: the page's flags table and the demo's lines.
FLAG_BASELINES = {"trailing_7d": "trailing 7 days", "before_regression": "before the regression"}
#: The rates whose worse flags alert (borderline has no better direction: it never alerts).
HEADLINE_RATES = ("pass", "fail")


def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    return t_isf(0.025, df)


class AlertPolicy(BaseModel):
    """When a comparison is a flag, and the report options that set it (``python -m evaluation
    report --alpha … --p-adjust … --min-rate-effect … --min-metric-effect … --prior-day-sd …
    --accept-baseline MODEL=DATE``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Adjusted p-values below this are significant.")
    p_adjust: Literal["holm", "bh"] = Field(
        default="holm", description="Multiplicity adjustment across the day's tests: holm (FWER) or bh (FDR).")
    min_rate_effect: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Smallest change of a rate (a share: 0.05 is 5 pp) that can flag.")
    min_metric_effect: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Smallest change of a metric mean that can flag.")
    prior_day_sd: float = Field(
        default=0.03, ge=0.0, le=0.5,
        description="Prior day-to-day sd of a measure (0.03: 3 pp of a rate), shrunk with the model's own days.")
    prior_days: float = Field(
        default=1.0, ge=0.0, description="How many days of history the prior day-to-day sd weighs as.")
    useful_drop: float = Field(
        default=0.20, gt=0.0, le=1.0,
        description="A model whose day cannot catch a pass-rate drop this large is 'too few records to monitor'.")
    accept_baseline: dict[str, dt.date] = Field(
        default_factory=dict,
        description="Per model, the day its new level is accepted from: its baseline uses only days from then on.")

    def min_effect(self, kind: str) -> float:
        """The minimum practical effect of a ``rate`` or a ``metric`` mean."""
        return self.min_rate_effect if kind == "rate" else self.min_metric_effect

    def adjustment_name(self) -> str:
        """The multiplicity adjustment's name, as the page says it."""
        return {"holm": "Holm", "bh": "Benjamini–Hochberg"}[self.p_adjust]

    def describe(self) -> dict[str, Any]:
        """The policy as ``summary.json`` and the page show it."""
        names = {"holm": "Holm (family-wise error)", "bh": "Benjamini–Hochberg (false discovery rate)"}
        return {
            **self.model_dump(mode="json"),
            "adjustment": names[self.p_adjust],
            "rate_test": "one-sided (worse) test against the reference, day-to-day variance added, Student t with "
                         "Satterthwaite df; the larger of that p and an exact beta-binomial tail",
            "mean_test": "one-sided (worse) Welch t test, day-to-day variance added (Satterthwaite df)",
            "day_to_day": f"the reference days' variance beyond sampling, shrunk towards a prior sd of "
                          f"{self.prior_day_sd:g} weighing {self.prior_days:g} days; never the tested day",
            "alerting_family": f"{names[self.p_adjust]} over the one-sided tests of the headline measures only",
            "alerting": "worse flags on pass/fail rate, score and each judge's headline metrics "
                        + ", ".join(f"{j}: {', '.join(m) or '-'}" for j, m in HEADLINE_METRICS.items()),
            "regression": "stays regressed, against the reference fixed on the day it regressed, until a day's drop "
                          "is below the minimum effect and not significant on its own; pages on that day and again only "
                          "when the drop grows by another minimum effect and three standard errors",
        }


assert set(P_ADJUSTMENTS) == {"holm", "bh"}, "AlertPolicy.p_adjust lists the adjustments of evaluation.contract.multiplicity"


def is_headline(judge: str, kind: str, name: str) -> bool:
    """Whether a measure's worse flags alert: pass/fail rate, score, the judge's headline metrics."""
    if kind == "rate":
        return name in HEADLINE_RATES
    return name == "score" or name in HEADLINE_METRICS.get(judge, ())


# --------------------------------------------------------------------------------------------
# The day's flags and headline


def assess(kind: str, name: str, delta: float) -> tuple[str, str]:
    """The direction of a change and whether it is ``better``, ``worse`` or, for a measure with
    no better direction (the borderline rate), only ``changed``; the fail rate is better down,
    every other rate and every mean better up."""
    direction = "up" if delta > 0 else "down"
    better = {"pass": "up", "borderline": None, "fail": "down"}.get(name, "up") if kind == "rate" else "up"
    return direction, "changed" if better is None else ("better" if direction == better else "worse")


#: The drop the headline says a too-small model needs the volume for, beside the useful drop.
TEN_PP = 0.10


def previous_entry(today: Daily | None, interval: tuple[float, float] | None, row: dict[str, Any],
                   base: Daily) -> Previous:
    """Today beside the previous landed day: descriptive (the difference, and whether the previous
    value lies outside today's interval); the test is against the reference (:func:`reference_entry`)."""
    return Previous(dt=row["dt"].isoformat(), n=base.n, value=base.value,
                    delta=None if today is None else today.value - base.value,
                    outside_ci=None if interval is None else bool(base.value < interval[0] or base.value > interval[1]))


def reference_entry(result: Result, interval: tuple[float, float] | None, day: dt.date) -> Reference | None:
    """Today against its reference (:mod:`evaluation.report.monitor`): the difference, the test,
    the alerting family's adjusted p (headline measures), and the regression the series is in."""
    ref, test = result.reference, result.test
    if ref is None:
        return None
    return Reference(
        baseline="before_regression" if result.since is not None and result.since < day else "trailing_7d",
        days=[d.isoformat() for d in ref.days], n=ref.pooled.n, value=ref.pooled.value,
        delta=None if test is None else test.delta,
        outside_ci=None if interval is None else bool(ref.pooled.value < interval[0] or ref.pooled.value > interval[1]),
        se=test.se if test else None, df=test.df if test else None,
        delta_ci_low=test.ci_low if test else None, delta_ci_high=test.ci_high if test else None,
        test="one-sided (worse)" if result.headline and test and test.p_worse is not None else "two-sided",
        p_value=(test.p_worse if result.headline and test.p_worse is not None else test.p_two_sided) if test else None,
        p_worse=test.p_worse if test else None, p_two_sided=test.p_two_sided if test else None,
        p_adjusted=result.p_adjusted, alerts=result.alerts, flagged=result.alerts,
        regressed_since=result.since.isoformat() if result.since else None, pages=result.pages,
        recovered=result.recovered, tested=test is not None,
    )


def monitoring_entry(kind: str, result: Result, level: float, policy: AlertPolicy) -> Monitoring | None:
    """What the day's volume can catch on a headline measure (:func:`evaluation.report.monitor.detectable_drop`;
    a rate also says the rows a day needs for the useful drop and for 10 pp)."""
    ref = result.reference
    if ref is None or not result.headline or result.today.n < 2:
        return None
    effect = policy.min_effect(kind)
    caught = detectable_drop(kind, result.today, ref, level, effect)
    if kind != "rate":
        return Monitoring(detectable_drop=caught, power=POWER, level=level)
    drops = sorted({policy.useful_drop, TEN_PP}, reverse=True)
    needs = {f"{drop:g}": records_needed(ref, level, effect, drop, policy.prior_day_sd**2) for drop in drops}
    return RateMonitoring(detectable_drop=caught, power=POWER, level=level, needs=needs,
                          needs_useful=needs[f"{policy.useful_drop:g}"])


def severity_key(flag: Flag) -> tuple[float, float, str, str, str, str]:
    """Most severe first: adjusted p-value, then the change in units of its minimum effect."""
    effect = abs(flag.delta) / flag.min_effect if flag.min_effect > 0 else abs(flag.delta)
    return flag.p_adjusted, -effect, flag.model, flag.judge, flag.measure, flag.baseline


def measures_of(groups: Sequence[Group]) -> list[tuple[Group, str, str, Measure]]:
    """Every measure of ``groups``: (group, ``rate`` or ``metric``, its name, its entry)."""
    found: list[tuple[Group, str, str, Measure]] = []
    for group in groups:
        found += [(group, "rate", name, measure) for name, measure in group.rates.items()]
        found += [(group, "metric", name, measure) for name, measure in group.metrics.items()]
    return found


def decide_flags(groups: Sequence[Group], policy: AlertPolicy) -> list[Flag]:
    """The day's flags, most severe first. The alerting family (the headline measures' one-sided
    tests) was adjusted and decided day by day (:func:`evaluation.report.monitor.step`); the
    other comparisons (every measure's two-sided test, shown and never sent) are adjusted here
    together. Sets ``p_two_sided_adjusted`` and ``flagged`` on each comparison of ``groups``."""
    tested = [(g, kind, name, m, m.reference) for g, kind, name, m in measures_of(groups)
              if m.reference is not None and m.reference.p_two_sided is not None]
    adjusted = adjust_p_values(np.array([c.p_two_sided for *_, c in tested], dtype=np.float64), policy.p_adjust)
    flags = []
    for (group, kind, name, measure, comparison), p_shown in zip(tested, adjusted, strict=True):
        assert comparison.delta is not None  # a tested comparison has its difference
        minimum = policy.min_effect(kind)
        direction, assessment = assess(kind, name, comparison.delta)
        headline = is_headline(group.judge, kind, name)
        comparison.p_two_sided_adjusted = float(p_shown)
        shown = bool(p_shown < policy.alpha and abs(comparison.delta) >= minimum - TOLERANCE)
        if comparison.alerts and comparison.p_adjusted is not None:
            p_adjusted = comparison.p_adjusted
        elif shown and not (headline and assessment == "worse"):  # a headline drop alerts or is no flag
            p_adjusted = float(p_shown)
        else:
            comparison.flagged = False
            continue
        comparison.flagged = True
        flags.append(Flag(
            model=group.model, judge=group.judge, measure=f"{name}_rate" if kind == "rate" else f"{name}_mean",
            baseline=comparison.baseline, baseline_dt=None, baseline_days=comparison.days,
            value=measure.value, baseline_value=comparison.value, delta=comparison.delta,
            delta_ci_low=comparison.delta_ci_low, delta_ci_high=comparison.delta_ci_high,
            ci_low=measure.ci_low, ci_high=measure.ci_high,
            p_value=comparison.p_value, p_adjusted=p_adjusted, min_effect=minimum,
            direction=direction, assessment=assessment, headline=headline, alerts=comparison.alerts,
        ))
    return sorted(flags, key=severity_key)


def _change(judge: str, kind: str, name: str, comparison: Reference, after: float | None) -> Regression:
    assert comparison.delta is not None  # a regressed measure was tested
    _, assessment = assess(kind, name, comparison.delta)
    return Regression(judge=judge, measure=f"{name}_rate" if kind == "rate" else f"{name}_mean",
                      baseline=comparison.baseline, before=comparison.value, after=after, delta=comparison.delta,
                      p_adjusted=comparison.p_adjusted, assessment=assessment, since=comparison.regressed_since,
                      pages=comparison.pages)


@dataclass
class ModelState:
    """A model's state on the day (:func:`model_states`): its regressed headline measures (most
    severe first), since when and whether it pages, whether it has a baseline, and what its volume
    can catch (its judges' pass rates: the most sensitive one's monitoring, the most rows)."""

    changes: list[Regression] = field(default_factory=list)
    baseline: bool = False
    records: int = 0
    monitoring: RateMonitoring | None = None
    since: str | None = None
    day: int | None = None
    pages: bool = False
    too_few: bool = False


def model_states(day: dt.date, groups: Sequence[Group], policy: AlertPolicy) -> dict[str, ModelState]:
    """Per model: its regression (the headline measures regressed today, since when, whether it
    pages), whether it has a baseline, and what its volume can catch (the judges' smallest
    detectable pass-rate drop, and the rows a day needs for :attr:`AlertPolicy.useful_drop` and
    for 10 pp)."""
    states: dict[str, ModelState] = {}
    for group, kind, name, measure in measures_of(groups):
        state = states.setdefault(group.model, ModelState())
        comparison = measure.reference
        state.baseline = state.baseline or comparison is not None
        if isinstance(measure, RateMeasure) and name == "pass":
            state.records = max(state.records, measure.n)
            seen, best = measure.monitoring, state.monitoring
            if seen and (best is None or seen.detectable_drop < best.detectable_drop):
                state.monitoring = seen
        if comparison and comparison.regressed_since and is_headline(group.judge, kind, name):
            state.changes.append(_change(group.judge, kind, name, comparison, measure.value))
    for state in states.values():
        state.changes.sort(key=lambda c: (c.p_adjusted if c.p_adjusted is not None else 1.0, -abs(c.delta)))
        state.since = min((c.since for c in state.changes if c.since is not None), default=None)
        state.day = (day - dt.date.fromisoformat(state.since)).days + 1 if state.since else None
        # a model pages on the day it regresses; later only when a measure regressed before got worse
        today = day.isoformat()
        state.pages = any(c.pages and (state.since == today or (c.since or "") < today) for c in state.changes)
        watch = state.monitoring
        state.too_few = bool(watch and watch.detectable_drop > policy.useful_drop
                             and watch.needs_useful is not None and watch.needs_useful > state.records)
    return states


def status_text(line: HeadlineLine) -> str:
    """The headline's words for a model's state: ``regressed since D``, ``still regressed since D
    (day N)``, ``too few records to monitor (N; needs ~M for a 20 pp drop, ~K for 10 pp)``, …"""
    status = line.status
    if status == "regressed":
        return f"regressed since {line.since}" if line.day in (None, 1) else (
            f"still regressed since {line.since} (day {line.day})")
    if status == "too_few":
        needs = line.needs or {}
        parts = [f"~{v:,} for a {float(k) * 100:g} pp drop" for k, v in needs.items() if v is not None]
        out = [f"needs {', '.join(parts)}"] if parts else []
        out += [f"{float(k) * 100:g} pp is out of reach at this day-to-day variation" for k, v in needs.items() if v is None]
        return f"too few records to monitor ({line.records:,}" + "".join(f"; {part}" for part in out) + ")"
    return {"no_baseline": "no baseline", "improved": "improved", "steady": "steady"}[status]


_STATUS_ORDER = {"regressed": 0, "improved": 1, "too_few": 2, "no_baseline": 3, "steady": 4}


def build_headline(models: list[str], flags: list[Flag], states: dict[str, ModelState] | None = None) -> list[HeadlineLine]:
    """One line per model: regressed (its regressed headline measures; ``pages`` when it is new or
    got worse), improved (better flags on headline measures), too few records to monitor, no
    baseline, or steady; in that order, then by the most severe change, then by name. Without
    ``states`` a model's alerting flags make it regressed (a new regression)."""
    lines = []
    for model in models:
        mine = [f for f in flags if f.model == model]
        state = (states or {}).get(model) or ModelState()
        regressed = state.changes if states is not None else [
            Regression(**dict(flag_change(f)), since=None, pages=True) for f in _one_per_measure([f for f in mine if f.alerts])]
        improving = _one_per_measure([f for f in mine if f.headline and f.assessment == "better"])
        better = [flag_change(f) for f in improving]
        status = ("regressed" if regressed else "improved" if better else "too_few" if state.too_few
                  else "no_baseline" if states is not None and not state.baseline else "steady")
        listed: list[Regression] | list[Change] = regressed if status == "regressed" else better if status == "improved" else []
        watch = state.monitoring
        line = HeadlineLine(
            model=model, status=status, since=state.since, day=state.day,
            pages=status == "regressed" and (state.pages if states is not None else True), changes=listed,
            other_flags=len(mine) - sum(
                1 for f in mine if (f.alerts if status == "regressed" else status == "improved" and f in improving)),
            records=state.records, detectable_drop=watch.detectable_drop if watch else None,
            needs=watch.needs if watch else None)
        line.text = status_text(line)
        lines.append(line)

    def order(line: HeadlineLine) -> tuple[int, float, str]:
        first = line.changes[0].p_adjusted if line.changes else None
        return _STATUS_ORDER[line.status], first if first is not None else 1.0, line.model

    return sorted(lines, key=order)


def flag_change(flag: Flag) -> Change:
    return Change(judge=flag.judge, measure=flag.measure, baseline=flag.baseline, before=flag.baseline_value,
                  after=flag.value, delta=flag.delta, p_adjusted=flag.p_adjusted, assessment=flag.assessment)


def _one_per_measure(flags: list[Flag]) -> list[Flag]:
    """The most severe flag of each (judge, measure); ``flags`` come most severe first."""
    kept: dict[tuple[str, str], Flag] = {}
    for flag in flags:
        kept.setdefault((flag.judge, flag.measure), flag)
    return list(kept.values())
