"""Quality flags and alerts of the daily report (CONTRACT §7): which measures moved, by more than
sampling and the model's own day-to-day variation explain, and which of those page someone.

**The test.** Each measure of each (model, judge) group is compared with two baselines, the
previous landed day and the trailing 7 days pooled (days D-7 … D-1). The difference ``today −
baseline`` is tested with a statistic whose variance has three parts:

* today's sampling variance and the baseline's: for a rate (a verdict's share of the ``ok`` rows),
  the two-proportion test's pooled ``p̄(1 − p̄)(1/n₁ + 1/n₀)``; for a mean, Welch's
  ``s₁²/n₁ + s₀²/n₀`` (the trailing baseline's ``s₀`` pooled over its days' rows);
* the day-to-day variation the model's own history shows: ``τ²`` = the variance of the model's
  daily values over the trailing days minus what sampling alone gives them (never below 0), once
  at least :attr:`AlertPolicy.min_history_days` days have the measure (else 0). Today's value
  carries one day's ``τ²``; the previous day another; the pooled trailing days ``τ² Σ wᵢ²``
  (weights: each day's share of the rows).

A rate's statistic is referred to the normal distribution; a mean's to Student's t with the
Welch–Satterthwaite degrees of freedom of the three parts. Two-sided p-values.

**Multiplicity.** All the day's tests (every group, measure and baseline) are adjusted together,
Holm by default (family-wise error) or Benjamini–Hochberg (:data:`evaluation.multiplicity.P_ADJUSTMENTS`, as model comparisons use).

**A flag** is a comparison whose adjusted p-value is below :attr:`AlertPolicy.alpha` *and* whose
difference is at least the minimum practical effect (:attr:`AlertPolicy.min_rate_effect`
percentage points on rates, :attr:`AlertPolicy.min_metric_effect` on means). A flag **alerts**
only when it is ``worse`` on a headline measure (:func:`is_headline`: the pass and fail rates,
the score, and each judge's :data:`HEADLINE_METRICS`); the others are shown, never sent.

**In ``summary.json``** (the structure notifications read):

* ``flags``: the flags, most severe first (adjusted p-value ascending, then ``|delta|`` in units
  of the measure's minimum effect, descending). Each: ``model``, ``judge``, ``measure``
  (``pass_rate``, ``score_mean``, …), ``baseline`` (``previous`` | ``trailing_7d``),
  ``baseline_dt`` (the previous day, or None), ``value``, ``baseline_value``, ``delta``,
  ``delta_ci_low``/``delta_ci_high`` (95% interval of the difference, day variation included),
  ``ci_low``/``ci_high`` (today's interval), ``p_value``, ``p_adjusted``, ``min_effect``,
  ``direction`` (up | down), ``assessment`` (worse | better | changed), ``headline`` (bool),
  ``alerts`` (bool).
* ``headline``: one entry per model of the day, regressed first, then improved, then steady::

      {"model": "assistant-v2", "status": "regressed" | "improved" | "steady",
       "changes": [{"judge", "measure", "baseline", "before", "after", "delta", "p_adjusted",
                    "assessment"}, ...]}

  ``changes`` of a regressed model are its alerting flags, one per (judge, measure), the most
  severe baseline kept, most severe first; of an improved model its ``better`` flags on headline
  measures; of a steady model none. ``other_flags`` counts the model's flags not listed.
* ``alerting``: the regressed models, in headline order (what a notification names).
* ``method["alerts"]``: the policy in force (:meth:`AlertPolicy.describe`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evaluation.multiplicity import P_ADJUSTMENTS, adjust_p_values

#: Per judge, the metrics (besides the score) whose worse flags alert.
HEADLINE_METRICS: dict[str, tuple[str, ...]] = {
    "rag": ("faithfulness", "answer_relevance"),
    "masis": ("faithfulness", "relevance"),
    "prompt": (),
}
#: The rates whose worse flags alert (borderline has no better direction: it never alerts).
HEADLINE_RATES = ("pass", "fail")
_STATUS_ORDER = {"regressed": 0, "improved": 1, "steady": 2}
_TOLERANCE = 1e-9
#: The 0.975 quantile of the standard normal distribution.
Z_95 = 1.959963984540054
#: The 0.975 quantiles of Student's t for 1 … 30 degrees of freedom.
_T_975 = (
    12.7062047362, 4.3026527297, 3.1824463053, 2.7764451052, 2.5705818356, 2.4469118511,
    2.3646242516, 2.3060041352, 2.2621571628, 2.2281388520, 2.2009851601, 2.1788128297,
    2.1603686565, 2.1447866879, 2.1314495456, 2.1199052992, 2.1098155778, 2.1009220402,
    2.0930240544, 2.0859634473, 2.0796138447, 2.0738730679, 2.0686576104, 2.0638985616,
    2.0595385528, 2.0555294386, 2.0518305165, 2.0484071418, 2.0452296421, 2.0422724563,
)

def t_quantile_975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (table up to 30, then a
    Cornish–Fisher expansion, within 5e-8 of the exact value)."""
    if df < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    if df <= len(_T_975):
        return _T_975[df - 1]
    z, v = Z_95, float(df)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4)
    )


class AlertPolicy(BaseModel):
    """When a comparison is a flag, and the report options that set it (``python -m evaluation
    report --alpha … --p-adjust … --min-rate-effect … --min-metric-effect …``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Adjusted p-values below this are significant.")
    p_adjust: Literal["holm", "bh"] = Field(
        default="holm", description="Multiplicity adjustment across the day's tests: holm (FWER) or bh (FDR).")
    min_rate_effect: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Smallest change of a rate (a share: 0.05 is 5 pp) that can flag.")
    min_metric_effect: float = Field(
        default=0.05, ge=0.0, le=1.0, description="Smallest change of a metric mean that can flag.")
    min_history_days: int = Field(
        default=3, ge=2, description="Trailing days with the measure needed to estimate its day-to-day variance.")

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
            **self.model_dump(),
            "adjustment": names[self.p_adjust],
            "rate_test": "two-proportion z test (pooled), day-to-day variance added",
            "mean_test": "Welch t test, day-to-day variance added (Satterthwaite df)",
            "alerting": "worse flags on pass/fail rate, score and each judge's headline metrics "
                        + ", ".join(f"{j}: {', '.join(m) or '-'}" for j, m in HEADLINE_METRICS.items()),
        }


assert set(P_ADJUSTMENTS) == {"holm", "bh"}, "AlertPolicy.p_adjust lists the adjustments of evaluation.multiplicity"


def is_headline(judge: str, kind: str, name: str) -> bool:
    """Whether a measure's worse flags alert: pass/fail rate, score, the judge's headline metrics."""
    if kind == "rate":
        return name in HEADLINE_RATES
    return name == "score" or name in HEADLINE_METRICS.get(judge, ())


# --------------------------------------------------------------------------------------------
# Distributions


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _beta_regularized(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def two_sided_p(statistic: float, df: float | None = None) -> float:
    """P(|T| ≥ |statistic|) for Student's t with ``df`` degrees of freedom (the normal for None)."""
    if df is None or df > 1e7:
        return math.erfc(abs(statistic) / math.sqrt(2.0))
    return _beta_regularized(df / 2.0, 0.5, df / (df + statistic * statistic))


# --------------------------------------------------------------------------------------------
# One comparison


@dataclass(frozen=True)
class Daily:
    """One side of a comparison: its estimate, rows, the rows' variance (p(1-p) of a rate, s² of a
    mean) and, for a rate, its count."""

    value: float
    n: int
    variance: float
    count: int | None = None


def day_variance(days: Sequence[Daily], min_days: int) -> tuple[float, int]:
    """``τ²``: the variance of the daily values beyond what sampling gives them (0 with fewer than
    ``min_days`` days), and the number of days it is estimated from."""
    usable = [d for d in days if d.n > 0]
    if len(usable) < max(min_days, 2):
        return 0.0, len(usable)
    values = np.array([d.value for d in usable])
    sampling = float(np.mean([d.variance / d.n for d in usable]))
    return max(0.0, float(values.var(ddof=1)) - sampling), len(usable)


def pool(days: Sequence[Daily]) -> Daily | None:
    """The days' rows taken together: the n-weighted value, and the variance of all the rows."""
    usable = [d for d in days if d.n > 0]
    total = sum(d.n for d in usable)
    if not total:
        return None
    value = sum(d.value * d.n for d in usable) / total
    if usable[0].count is not None:
        count = sum(d.count or 0 for d in usable)
        return Daily(count / total, total, value * (1 - value), count)
    within = sum((d.n - 1) * d.variance for d in usable) + sum(d.n * (d.value - value) ** 2 for d in usable)
    return Daily(value, total, within / (total - 1) if total > 1 else 0.0)


@dataclass(frozen=True)
class Test:
    """The test of one difference: its standard error (day variation included), degrees of
    freedom (None: normal), two-sided p-value and 95% interval."""

    delta: float
    se: float
    df: float | None
    p_value: float
    ci_low: float
    ci_high: float


def compare(kind: str, today: Daily, baseline: Daily, tau2: float, tau2_days: int, baseline_weight: float) -> Test | None:
    """Test ``today − baseline``; ``baseline_weight`` is Σwᵢ² of the baseline's days (1 for one
    day). None when a side has fewer than 2 rows."""
    if today.n < 2 or baseline.n < 2:
        return None
    delta = today.value - baseline.value
    day_part = tau2 * (1.0 + baseline_weight)
    if kind == "rate":
        count = (today.count or 0) + (baseline.count or 0)
        p = count / (today.n + baseline.n)
        variance = p * (1 - p) * (1 / today.n + 1 / baseline.n) + day_part
        df = None
    else:
        parts = [(today.variance / today.n, today.n - 1), (baseline.variance / baseline.n, baseline.n - 1)]
        if day_part > 0:
            parts.append((day_part, max(tau2_days - 1, 1)))
        variance = sum(v for v, _ in parts)
        denominator = sum(v * v / f for v, f in parts)
        df = variance * variance / denominator if denominator > 0 else None
    se = math.sqrt(max(variance, 0.0))
    if se <= _TOLERANCE:
        p_value = 1.0 if abs(delta) <= _TOLERANCE else 0.0
        return Test(delta, 0.0, df, p_value, delta, delta)
    quantile = Z_95 if df is None else t_quantile_975(max(1, int(df)))
    return Test(delta, se, df, two_sided_p(delta / se, df), delta - quantile * se, delta + quantile * se)


# --------------------------------------------------------------------------------------------
# The day's flags and headline


def assess(kind: str, name: str, delta: float) -> tuple[str, str]:
    """The direction of a change and whether it is ``better``, ``worse`` or, for a measure with
    no better direction (the borderline rate), only ``changed``; the fail rate is better down,
    every other rate and every mean better up."""
    direction = "up" if delta > 0 else "down"
    better = {"pass": "up", "borderline": None, "fail": "down"}.get(name, "up") if kind == "rate" else "up"
    return direction, "changed" if better is None else ("better" if direction == better else "worse")


def severity_key(flag: dict[str, Any]) -> tuple[float, float, str, str, str, str]:
    """Most severe first: adjusted p-value, then the change in units of its minimum effect."""
    effect = abs(flag["delta"]) / flag["min_effect"] if flag["min_effect"] > 0 else abs(flag["delta"])
    return flag["p_adjusted"], -effect, flag["model"], flag["judge"], flag["measure"], flag["baseline"]


def decide_flags(groups: list[dict[str, Any]], policy: AlertPolicy) -> list[dict[str, Any]]:
    """Adjust every comparison's p-value across the day (``p_adjusted`` and ``flagged`` are set
    on each comparison of ``groups``), and return the flags, most severe first."""
    tested: list[tuple[dict[str, Any], str, str, dict[str, Any], dict[str, Any], str]] = []
    for group in groups:
        for kind, section in (("rate", "rates"), ("metric", "metrics")):
            for name, measure in group[section].items():
                for baseline in ("previous", "trailing_7d"):
                    comparison = measure.get(baseline)
                    if comparison and comparison.get("p_value") is not None:
                        tested.append((group, kind, name, measure, comparison, baseline))
    adjusted = adjust_p_values(np.array([c["p_value"] for *_, c, _ in tested], dtype=np.float64), policy.p_adjust)
    flags = []
    for (group, kind, name, measure, comparison, baseline), p_adjusted in zip(tested, adjusted, strict=True):
        minimum = policy.min_effect(kind)
        comparison["p_adjusted"] = float(p_adjusted)
        comparison["flagged"] = bool(p_adjusted < policy.alpha and abs(comparison["delta"]) >= minimum - _TOLERANCE)
        if not comparison["flagged"]:
            continue
        direction, assessment = assess(kind, name, comparison["delta"])
        headline = is_headline(group["judge"], kind, name)
        flags.append({
            "model": group["model"], "judge": group["judge"],
            "measure": f"{name}_rate" if kind == "rate" else f"{name}_mean",
            "baseline": baseline, "baseline_dt": comparison.get("dt"),
            "value": measure["value"], "baseline_value": comparison["value"], "delta": comparison["delta"],
            "delta_ci_low": comparison["delta_ci_low"], "delta_ci_high": comparison["delta_ci_high"],
            "ci_low": measure["ci_low"], "ci_high": measure["ci_high"],
            "p_value": comparison["p_value"], "p_adjusted": float(p_adjusted), "min_effect": minimum,
            "direction": direction, "assessment": assessment, "headline": headline,
            "alerts": headline and assessment == "worse",
        })
    return sorted(flags, key=severity_key)


def _change(flag: dict[str, Any]) -> dict[str, Any]:
    return {"judge": flag["judge"], "measure": flag["measure"], "baseline": flag["baseline"],
            "before": flag["baseline_value"], "after": flag["value"], "delta": flag["delta"],
            "p_adjusted": flag["p_adjusted"], "assessment": flag["assessment"]}


def _one_per_measure(flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The most severe flag of each (judge, measure); ``flags`` come most severe first."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for flag in flags:
        if (flag["judge"], flag["measure"]) not in seen:
            seen.add((flag["judge"], flag["measure"]))
            kept.append(flag)
    return kept


def build_headline(models: list[str], flags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per model: regressed (its alerting flags), improved (better flags on headline
    measures) or steady; regressed first, then by the most severe change, then by name."""
    lines = []
    for model in models:
        mine = [f for f in flags if f["model"] == model]
        alerting = _one_per_measure([f for f in mine if f["alerts"]])
        better = _one_per_measure([f for f in mine if f["headline"] and f["assessment"] == "better"])
        status, listed = ("regressed", alerting) if alerting else ("improved", better) if better else ("steady", [])
        lines.append({"model": model, "status": status, "changes": [_change(f) for f in listed],
                      "other_flags": len(mine) - sum(1 for f in mine if f in listed)})
    def order(line: dict[str, Any]) -> tuple[int, float, str]:
        changes: list[dict[str, Any]] = line["changes"]
        return _STATUS_ORDER[line["status"]], changes[0]["p_adjusted"] if changes else 1.0, line["model"]

    return sorted(lines, key=order)
