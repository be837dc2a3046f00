"""Model comparisons, the statistics: pure functions over numpy arrays (seeded generators, the
bootstrap, the paired and unpaired tests); the judge calibration draws its bootstrap with them too."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Differences smaller than this count as a tie.
TIE_TOLERANCE = 1e-9
#: Cells (resamples x sample size) drawn at once; bounds memory on large samples.
_BATCH_CELLS = 2_000_000


@dataclass(frozen=True)
class DeltaEstimate:
    """A difference of means with its 95% bootstrap interval and two-sided p-value, and the
    standardised effect size (Cohen's d; d_z for a paired test) with its 95% bootstrap interval
    (None when the spread is zero)."""

    test: str
    delta: float
    ci_low: float
    ci_high: float
    p_value: float
    effect_size: float | None = None
    effect_ci_low: float | None = None
    effect_ci_high: float | None = None


def rng_for(seed: int, *parts: str) -> np.random.Generator:
    """A Generator seeded by ``seed`` and the names of what it draws for (order independent)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "big") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *words]))


def batches(total: int, width: int, cells: int = _BATCH_CELLS) -> Iterator[int]:
    """Sizes of the batches of ``total`` draws of ``width`` values each, at most ``cells`` values a batch."""
    step = max(1, cells // max(width, 1))
    for start in range(0, total, step):
        yield min(step, total - start)


def bootstrap_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    return _bootstrap_moments(values, rng, resamples)[0]


def _bootstrap_moments(values: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """Means and sample variances (ddof 1; 0 for one value) of bootstrap resamples."""
    n = values.size
    means, variances = [], []
    for k in batches(resamples, n):
        drawn = values[rng.integers(0, n, size=(k, n))]
        means.append(drawn.mean(axis=1))
        variances.append(drawn.var(axis=1, ddof=1) if n > 1 else np.zeros(k))
    return np.concatenate(means), np.concatenate(variances)


def percentile_interval(draws: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap draws."""
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def _standardised(delta: np.ndarray, spread: np.ndarray) -> np.ndarray:
    return np.divide(delta, spread, out=np.full(delta.shape, np.nan), where=spread > TIE_TOLERANCE)


def _effect(observed: float, spread: float, draws: np.ndarray) -> tuple[float | None, float | None, float | None]:
    """The effect size and the percentile interval of its finite bootstrap draws."""
    if not spread > TIE_TOLERANCE:
        return None, None, None
    finite = draws[np.isfinite(draws)]
    low, high = percentile_interval(finite) if finite.size else (None, None)
    return observed / spread, low, high


def _as_extreme(statistics: np.ndarray, observed: float) -> int:
    tolerance = 1e-12 * max(1.0, abs(observed))
    return int(np.count_nonzero(np.abs(statistics) >= abs(observed) - tolerance))


def mean_interval(values: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean."""
    return percentile_interval(bootstrap_means(values, rng, resamples))


def _sd(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if values.size > 1 else 0.0


def paired_test(differences: np.ndarray, rng: np.random.Generator, resamples: int,
                permutations: int | None = None) -> DeltaEstimate:
    """Mean of per-question differences: bootstrap over questions (``resamples``), sign-flip
    permutation p-value (``permutations``, default ``resamples``); effect size d_z = mean / standard
    deviation of the differences."""
    n = differences.size
    permutations = permutations or resamples
    observed = float(differences.mean())
    means, variances = _bootstrap_moments(differences, rng, resamples)
    low, high = percentile_interval(means)
    extreme = 0
    for k in batches(permutations, n):
        signs = rng.integers(0, 2, size=(k, n)) * 2 - 1
        extreme += _as_extreme((signs * differences).mean(axis=1), observed)
    effect = _effect(observed, _sd(differences), _standardised(means, np.sqrt(variances)))
    return DeltaEstimate("paired", observed, low, high, (extreme + 1) / (permutations + 1), *effect)


def _pooled_sd(n_a: int, var_a: Any, n_b: int, var_b: Any) -> Any:
    """Pooled standard deviation of two samples (Cohen's d denominator)."""
    dof = max(n_a + n_b - 2, 1)
    return np.sqrt(((n_a - 1) * var_a + (n_b - 1) * var_b) / dof)


def unpaired_test(sample: np.ndarray, baseline: np.ndarray, rng: np.random.Generator, resamples: int,
                  permutations: int | None = None) -> DeltaEstimate:
    """Difference of two means: bootstrap of each sample (``resamples``), two-sample permutation
    p-value (``permutations``, default ``resamples``); effect size Cohen's d = difference / pooled
    standard deviation."""
    permutations = permutations or resamples
    observed = float(sample.mean() - baseline.mean())
    mine, mine_var = _bootstrap_moments(sample, rng, resamples)
    base, base_var = _bootstrap_moments(baseline, rng, resamples)
    draws = mine - base
    low, high = percentile_interval(draws)
    pooled = np.concatenate([sample, baseline])
    size = sample.size
    extreme = 0
    for k in batches(permutations, pooled.size):
        shuffled = rng.permuted(np.broadcast_to(pooled, (k, pooled.size)), axis=1)
        extreme += _as_extreme(shuffled[:, :size].mean(axis=1) - shuffled[:, size:].mean(axis=1), observed)
    spread = float(_pooled_sd(sample.size, _sd(sample) ** 2, baseline.size, _sd(baseline) ** 2))
    effect = _effect(observed, spread, _standardised(draws, _pooled_sd(sample.size, mine_var, baseline.size, base_var)))
    return DeltaEstimate("unpaired", observed, low, high, (extreme + 1) / (permutations + 1), *effect)


#: Adjusted p-values below this mark a delta significant.
ALPHA = 0.05
#: How far below the strictest threshold of the family's adjustment (``ALPHA / tests``: Holm's first
#: step, and Benjamini–Hochberg's) the permutation p-value's floor ``1 / (permutations + 1)`` sits.
#: At the threshold itself only a delta none of whose permutations is as extreme could be
#: significant; a tenth of it leaves room for the count of such permutations to be estimated.
FLOOR_MARGIN = 10


def permutations_for(tests: int) -> int:
    """The fewest permutations whose p-value floor ``1 / (permutations + 1)`` is at most
    ``ALPHA / tests / FLOOR_MARGIN``: below the threshold the first of ``tests`` adjusted tests
    must meet, so that the floor cannot hide an effect however many deltas are compared."""
    return max(1, math.ceil(FLOOR_MARGIN * max(tests, 1) / ALPHA) - 1)
