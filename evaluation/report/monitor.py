"""Monitoring one measure of one unit over days (CONTRACT §7): the test of a day against its
reference, the state a regression leaves, and the smallest drop a day's volume can catch.

A **series** is one measure (a rate or a metric mean) of one unit (a model and judge, or a
segment of one), one :class:`Daily` per landed day. :func:`monitor` replays the days of a window
in order and returns, per day, what each series showed (:class:`Result`); the report takes the
last day, ``make bench`` every day of simulated windows.

The parts: the reference and its day-to-day variance (:func:`reference_of`, :func:`day_variance`;
the prior's ``τ₀`` = :attr:`AlertPolicy.prior_day_sd` weighing ``ν₀`` = :attr:`AlertPolicy.prior_days`
days); the one-sided test of a day (:func:`compare_day`, its degrees of freedom with
:func:`tau2_uncertainty`, a rate's exact tail :func:`exact_rate_p`, so small counts and rates near 0
or 1 keep their level); the alerting family, adjusted by
:func:`evaluation.contract.multiplicity.adjust_p_values`; the state a regression leaves (:func:`step`,
paging again past :data:`WORSE_SES` standard errors); the detectable drop (:func:`detectable_drop`,
:func:`records_needed`). The method and each rule: docs/alerts.md, "Method".
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import special

from evaluation.contract.multiplicity import adjust_p_values


class AlertPolicy(Protocol):
    """What the monitor reads of :class:`evaluation.report.alerts.AlertPolicy`."""

    @property
    def alpha(self) -> float: ...
    @property
    def p_adjust(self) -> str: ...
    @property
    def prior_day_sd(self) -> float: ...
    @property
    def prior_days(self) -> float: ...
    @property
    def accept_baseline(self) -> Mapping[str, dt.date]: ...
    def min_effect(self, kind: str) -> float: ...

#: (model, judge, kind, name): kind is ``rate`` or ``metric``; a segment's unit names it in ``judge``.
SeriesKey = tuple[str, str, str, str]
REFERENCE_DAYS = 7
POWER = 0.8
Z_POWER = 0.8416212335729143  # the standard normal's 0.8 quantile
#: How far a drop or a standard error may fall short of a bound and still meet it (float rounding).
TOLERANCE = 1e-9
#: A regressed series pages again when its drop grew by the minimum effect and this many standard errors.
WORSE_SES = 3.0
#: A rate's exact tail is computed when the t p-value is below this (no alpha reaches it).
EXACT_BELOW = 0.5


@dataclass(frozen=True)
class Daily:
    """One day of a measure: its estimate, rows, the rows' variance (p(1-p) of a rate, s² of a
    mean) and, for a rate, its count."""

    value: float
    n: int
    variance: float
    count: int | None = None


def worse_sign(kind: str, name: str) -> int | None:
    """+1 when a rise is worse (the fail rate), −1 when a fall is (every other rate and every
    mean), None for a measure without a better direction (the borderline rate)."""
    if kind == "rate":
        return {"fail": 1, "borderline": None}.get(name, -1)
    return -1


def pool(days: Sequence[Daily]) -> Daily | None:
    """The days' rows taken together: the n-weighted value, and the variance of all the rows."""
    total = sum(d.n for d in days)
    if not total:
        return None
    value = sum(d.value * d.n for d in days) / total
    if days[0].count is not None:
        count = sum(d.count or 0 for d in days)
        return Daily(count / total, total, value * (1 - value), count)
    within = sum((d.n - 1) * d.variance for d in days) + sum(d.n * (d.value - value) ** 2 for d in days)
    return Daily(value, total, within / (total - 1) if total > 1 else 0.0)


def day_variance(days: Sequence[Daily], prior_sd: float, prior_days: float) -> tuple[float, float | None, float]:
    """``(τ̃², τ̂², df)``: the shrunk day-to-day variance of ``days`` (never the tested day), the
    days' own estimate (None with fewer than 2 days) and the degrees of freedom τ̃² carries."""
    own: float | None = None
    if len(days) >= 2:
        k = len(days)
        mean = sum(d.value for d in days) / k
        spread = sum((d.value - mean) ** 2 for d in days) / (k - 1)
        own = max(0.0, spread - sum(d.variance / d.n for d in days) / k)
    own_df = len(days) - 1 if own is not None else 0
    df = prior_days + own_df
    if df <= 0:
        return 0.0, own, 0.0
    return (prior_days * prior_sd**2 + own_df * (own or 0.0)) / df, own, df


@dataclass(frozen=True)
class Reference:
    """What a day is tested against: its days, their rows pooled, Σwᵢ² of the days' shares, the
    day-to-day variance (shrunk, the days' own, degrees of freedom), and ``tau2_var``, half the
    variance of the estimate ``τ̃²`` (:func:`tau2_uncertainty`)."""

    days: tuple[dt.date, ...]
    pooled: Daily
    weight: float
    tau2: float
    own_tau2: float | None
    tau_df: float
    tau2_var: float = 0.0


def tau2_uncertainty(tau2: float, prior_days: float, own_df: int, sampling: float) -> float:
    """Half the variance of ``τ̃² = (ν₀ τ₀² + (k − 1) τ̂²) / (ν₀ + k − 1)``, the Satterthwaite
    term of the day-to-day part, at the estimate ``τ̃²``: the prior counts as ``ν₀`` degrees of
    freedom of ``τ̃²``, the days' own ``τ̂²`` (their spread ``s²`` less ``σ̄²``) as ``k − 1`` of
    ``τ̃² + σ̄²``, since ``s²`` estimates the day-to-day and the sampling variance together.
    Counting them on ``τ̃²`` alone, beside a sampling part taken as known, made the degrees of
    freedom grow with the sampling share (about 20 instead of 7 at 150 rows a day) and the
    one-sided tails of rates several times their nominal level at ``alpha / m``."""
    df = prior_days + own_df
    if df <= 0:
        return 0.0
    return (prior_days * tau2**2 + own_df * (tau2 + sampling) ** 2) / (df * df)


def reference_of(days: Mapping[dt.date, Daily], policy: AlertPolicy) -> Reference | None:
    """The reference made of ``days`` (None when none has rows)."""
    kept = {d: v for d, v in sorted(days.items()) if v.n > 0}
    pooled = pool(list(kept.values()))
    if pooled is None:
        return None
    tau2, own, df = day_variance(list(kept.values()), policy.prior_day_sd, policy.prior_days)
    weight = sum((v.n / pooled.n) ** 2 for v in kept.values())
    sampling = sum(v.variance / v.n for v in kept.values()) / len(kept)
    uncertainty = tau2_uncertainty(tau2, policy.prior_days, len(kept) - 1, sampling)
    return Reference(tuple(kept), pooled, weight, tau2, own, df, uncertainty)


@dataclass(frozen=True)
class Test:
    """The test of ``today − reference``: its standard error (day variation included), degrees of
    freedom (None: normal), the one-sided p-value in the worse direction (None without one), the
    two-sided p-value, the 95% interval of the difference and ``drop`` (the change in the worse
    direction, positive when worse; 0 without a worse direction)."""

    delta: float
    se: float
    df: float | None
    p_worse: float | None
    p_two_sided: float
    ci_low: float
    ci_high: float
    drop: float


def _parts(kind: str, today: Daily, ref: Reference) -> tuple[float, float | None]:
    """The variance of the difference and its Welch–Satterthwaite degrees of freedom (the
    day-to-day part's uncertainty: :func:`tau2_uncertainty`)."""
    base = ref.pooled
    day_part = ref.tau2 * (1.0 + ref.weight)
    if kind == "rate":
        p = ((today.count or 0) + (base.count or 0)) / (today.n + base.n)
        parts = [(p * (1 - p) * (1 / today.n + 1 / base.n), math.inf)]
    else:
        parts = [(today.variance / today.n, today.n - 1.0), (base.variance / base.n, base.n - 1.0)]
    variance = sum(v for v, _ in parts) + max(day_part, 0.0)
    # a mean of one value has no variance of its own to estimate (0 degrees of freedom): no term
    denominator = sum(v * v / f for v, f in parts if math.isfinite(f) and f > 0)
    if day_part > 0:
        denominator += (1.0 + ref.weight) ** 2 * ref.tau2_var
    return variance, (variance * variance / denominator if denominator > 0 else None)


def t_sf(statistic: float, df: float | None) -> float:
    """P(T ≥ statistic) for Student's t with ``df`` degrees of freedom (the normal for None)."""
    return float(special.ndtr(-statistic) if df is None else special.stdtr(df, -statistic))


def t_isf(prob: float, df: float | None) -> float:
    """The upper ``prob`` quantile of Student's t (the normal for None)."""
    return float(-special.ndtri(prob) if df is None else -special.stdtrit(df, prob))


def exact_rate_p(today: Daily, ref: Reference, sign: int) -> float:
    """P(a count at least as bad as today's) under a beta-binomial: today's rate drawn around the
    reference rate with the reference's sampling variance plus ``τ̃² (1 + Σwᵢ²)``."""
    base = ref.pooled
    mu = ((base.count or 0) + 0.5) / (base.n + 1.0)
    spread = mu * (1 - mu) / base.n + ref.tau2 * (1.0 + ref.weight)
    concentration = min(1e8, max(mu * (1 - mu) / max(spread, 1e-12) - 1.0, 1e-3))
    a, b, n, count = mu * concentration, (1 - mu) * concentration, today.n, today.count or 0
    k = np.arange(0, count + 1) if sign < 0 else np.arange(count, n + 1)
    log_pmf = (special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
               + special.betaln(k + a, n - k + b) - special.betaln(a, b))
    return min(1.0, float(np.exp(log_pmf).sum()))


def compare_day(kind: str, name: str, today: Daily, ref: Reference) -> Test | None:
    """Test ``today`` against ``ref`` (None when either side has fewer than 2 rows)."""
    if today.n < 2 or ref.pooled.n < 2:
        return None
    delta = today.value - ref.pooled.value
    sign = worse_sign(kind, name)
    variance, df = _parts(kind, today, ref)
    se = math.sqrt(max(variance, 0.0))
    drop = sign * delta if sign is not None else 0.0
    if se <= TOLERANCE:
        worse = (1.0 if drop <= TOLERANCE else 0.0) if sign is not None else None
        return Test(delta, 0.0, df, worse, 1.0 if abs(delta) <= TOLERANCE else 0.0, delta, delta, drop)
    p_worse = None
    if sign is not None:
        p_worse = t_sf(drop / se, df)
        if kind == "rate" and p_worse < EXACT_BELOW:  # above, neither p can flag: the larger is not needed
            p_worse = max(p_worse, exact_rate_p(today, ref, sign))
    half = t_isf(0.025, df) * se
    return Test(delta, se, df, p_worse, min(1.0, 2 * t_sf(abs(delta) / se, df)), delta - half, delta + half, drop)


def detectable_drop(kind: str, today: Daily, ref: Reference, level: float, min_effect: float) -> float:
    """The drop caught with 80% power at one-sided ``level`` (and at least ``min_effect``)."""
    value = ref.pooled.value
    steady = (Daily(value, today.n, value * (1 - value), round(value * today.n)) if kind == "rate"
              else Daily(value, today.n, today.variance))
    variance, df = _parts(kind, steady, ref)
    se = math.sqrt(max(variance, 0.0))
    return max(t_isf(level, df) * se, min_effect) + Z_POWER * se


def records_needed(ref: Reference, level: float, min_effect: float, drop: float, tau2_cap: float) -> int | None:
    """About how many rows a day (with a reference week of such days) needs for 80% power against
    ``drop`` (a rate), at the reference's day-to-day variance capped at ``tau2_cap`` (a small
    unit's own days mostly show sampling noise): None when day-to-day variation alone, or the
    minimum effect, prevents it."""
    if drop <= min_effect:
        return None
    tau2 = min(ref.tau2, tau2_cap)
    quantile = t_isf(level, ref.tau_df if tau2 > 0 else None)
    se_max = min(drop / (quantile + Z_POWER), (drop - min_effect) / Z_POWER)
    weight = 1.0 + 1.0 / REFERENCE_DAYS
    room = se_max**2 - tau2 * weight
    p = min(max(ref.pooled.value, 0.05), 0.95)
    return None if room <= 0 else math.ceil(p * (1 - p) * weight / room)


# --------------------------------------------------------------------------------------------
# Days in order


@dataclass
class State:
    """A series' regression: since when, against which reference, the drop it last paged with."""

    since: dt.date | None = None
    reference: Reference | None = None
    paged_drop: float = 0.0


@dataclass
class Result:
    """One series on one day: its value, reference, test, adjusted p (alerting family), whether
    it alerts and pages, and the regression it is in (``since`` None: none)."""

    today: Daily
    reference: Reference | None
    test: Test | None
    headline: bool
    p_adjusted: float | None = None
    alerts: bool = False
    pages: bool = False
    since: dt.date | None = None
    recovered: bool = False


def step(states: dict[SeriesKey, State], day: dt.date, series: Mapping[SeriesKey, Mapping[dt.date, Daily]],
         policy: AlertPolicy, headline: Mapping[SeriesKey, bool]) -> dict[SeriesKey, Result]:
    """One day: test every series with a value that day, adjust the alerting family, move the
    ``states`` carried from day to day."""
    results: dict[SeriesKey, Result] = {}
    for key, days in series.items():
        today = days.get(day)
        if today is None or today.n <= 0:
            continue
        state = states.setdefault(key, State())
        accepted = policy.accept_baseline.get(key[0])
        if state.since is not None and accepted is not None and state.since < accepted <= day:
            states[key] = state = State()
        ref = state.reference if state.since is not None else None  # regressed: the reference of that day
        if ref is None:
            start = max(day - dt.timedelta(days=REFERENCE_DAYS), accepted or dt.date.min)
            ref = reference_of({d: v for d, v in days.items() if start <= d < day}, policy)
        test = compare_day(key[2], key[3], today, ref) if ref is not None else None
        results[key] = Result(today, ref, test, bool(headline.get(key)))
    family = [k for k, r in results.items() if r.headline and r.test is not None and r.test.p_worse is not None]
    adjusted = adjust_p_values(np.array([results[k].test.p_worse for k in family], dtype=np.float64),  # type: ignore[union-attr]
                               policy.p_adjust)
    for key, p_adjusted in zip(family, adjusted, strict=True):
        result, test = results[key], results[key].test
        assert test is not None
        effect = policy.min_effect(key[2])
        result.p_adjusted = float(p_adjusted)
        result.alerts = bool(p_adjusted < policy.alpha and test.drop >= effect - TOLERANCE)
        _move(states[key], result, day, effect, policy.alpha)
    for key, result in results.items():
        result.since = states[key].since
    return results


def _move(state: State, result: Result, day: dt.date, effect: float, alpha: float) -> None:
    """A series' state after its day's test (docs/alerts.md, "A regression stays a regression")."""
    test = result.test
    assert test is not None
    if state.since is None:
        if result.alerts:
            state.since, state.reference, state.paged_drop = day, result.reference, test.drop
            result.pages = True
    elif test.drop < effect and (test.p_worse is None or test.p_worse >= alpha):
        state.since, state.reference, state.paged_drop = None, None, 0.0
        result.recovered = True
    elif result.alerts and test.drop - state.paged_drop >= max(effect, WORSE_SES * test.se) - TOLERANCE:
        state.paged_drop, result.pages = test.drop, True


def monitor(series: Mapping[SeriesKey, Mapping[dt.date, Daily]], days: Sequence[dt.date], policy: AlertPolicy,
            headline: Mapping[SeriesKey, bool]) -> list[dict[SeriesKey, Result]]:
    """Replay ``days`` in order (states start clear on the first): each day's results."""
    states: dict[SeriesKey, State] = {}
    return [step(states, day, series, policy, headline) for day in sorted(days)]
