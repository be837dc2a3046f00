"""Agreement statistics, as pure functions over numpy arrays (no I/O, no Polars).

Conventions, everywhere in the calibration:

* ``good`` is the human binary label: True for a faithful (acceptable) answer. The positive class
  of *detection* is its complement, a hallucinated answer, which a ``fail`` verdict should catch.
* AUROC is the probability that a good record's value is higher than a bad record's, ties
  counting one half (the Mann–Whitney U statistic over ``n_good × n_bad``). It is the same number
  as the AUROC of ``-value`` as a detector of bad records.
* A cut ``t`` flags a record as ``fail`` when its value is below ``t`` (CONTRACT §2.5: ``score >=
  borderline`` is not ``fail``), so a suggested threshold is the lowest value that is not flagged.
* Undefined statistics (a class with no record, a constant input, Cohen's κ with chance agreement
  of 1) are ``None``, never NaN or a made-up 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.compare.stats import batches, percentile_interval
from evaluation.contract.config import VERDICTS

#: Cells (resamples × score levels) drawn at once by the bootstrap; bounds memory on large sets.
_BATCH_CELLS = 4_000_000
#: Candidate cuts searched at most per threshold (every distinct value up to this many, else quantiles).
MAX_CUTS = 1001


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (``scipy.stats.rankdata``)."""
    from scipy.stats import rankdata  # scipy's import is heavy: only the statistics that rank need it

    return np.asarray(rankdata(values), dtype=np.float64)


def _classes(values: np.ndarray, good: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``values`` and ``good`` as float and bool arrays, and the number of good and of bad records."""
    good = np.asarray(good, dtype=bool)
    return np.asarray(values, dtype=np.float64), good, int(good.sum()), int((~good).sum())


def auroc(values: np.ndarray, good: np.ndarray) -> float | None:
    """P(value of a good record > value of a bad one) + ½ P(equal); None without both classes."""
    values, good, n_good, n_bad = _classes(values, good)
    if not n_good or not n_bad:
        return None
    ranks = average_ranks(values)
    u = ranks[good].sum() - n_good * (n_good + 1) / 2.0
    return float(u / (n_good * n_bad))


def auroc_interval(
    values: np.ndarray, good: np.ndarray, rng: np.random.Generator, resamples: int = 2000
) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of :func:`auroc`, resampling records within each class
    (a stratified bootstrap: every resample keeps the set's class sizes, so none lacks a class).

    A resample is drawn as counts per distinct value (multinomial over the class's empirical
    distribution), which is exactly a resample of the records and costs O(distinct values)."""
    values, good, n_good, n_bad = _classes(values, good)
    if not n_good or not n_bad:
        return None
    _, level = np.unique(values, return_inverse=True)
    width = int(level.max()) + 1
    good_share = np.bincount(level[good], minlength=width) / n_good
    bad_share = np.bincount(level[~good], minlength=width) / n_bad
    draws = []
    for count in batches(resamples, width, _BATCH_CELLS):
        good_counts = rng.multinomial(n_good, good_share, size=count)
        bad_counts = rng.multinomial(n_bad, bad_share, size=count)
        below = np.cumsum(bad_counts, axis=1) - bad_counts
        draws.append((good_counts * (below + 0.5 * bad_counts)).sum(axis=1) / (n_good * n_bad))
    return percentile_interval(np.concatenate(draws))


def spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    """Spearman's rank correlation (Pearson's r of the average ranks); None for fewer than two
    pairs or a constant input."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    rx -= rx.mean()
    ry -= ry.mean()
    denominator = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    if denominator == 0.0:
        return None
    return float(np.clip((rx * ry).sum() / denominator, -1.0, 1.0))


def confusion(predicted: Sequence[str], actual: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts ``[i, j]`` of records predicted ``labels[i]`` whose actual class is ``labels[j]``;
    values outside ``labels`` are not counted."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for p, a in zip(predicted, actual, strict=True):
        if p in index and a in index:
            matrix[index[p], index[a]] += 1
    return matrix


def _kappas(matrices: np.ndarray) -> np.ndarray:
    """Cohen's κ, (p_o − p_e) / (1 − p_e), of square confusion matrices stacked on the leading axes
    (``[..., predicted, actual]``); NaN where a matrix is empty or p_e is 1."""
    matrices = np.asarray(matrices, dtype=np.float64)
    n = matrices.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.trace(matrices, axis1=-2, axis2=-1) / n
        expected = (matrices.sum(axis=-1) * matrices.sum(axis=-2)).sum(axis=-1) / (n * n)
        return np.where(expected < 1.0, (observed - expected) / (1.0 - expected), np.nan)


def kappa_from_confusion(matrix: np.ndarray) -> float | None:
    """Cohen's κ of a square confusion matrix; None when it is undefined (both raters constant on
    one class) or the matrix is empty."""
    kappa = float(_kappas(matrix))
    return None if np.isnan(kappa) else kappa


@dataclass(frozen=True)
class Detection:
    """A binary detector against a binary truth: flagged records against bad records."""

    tp: int  #: bad records flagged
    fp: int  #: good records flagged
    fn: int  #: bad records not flagged
    tn: int  #: good records not flagged

    @classmethod
    def of(cls, flagged: np.ndarray, bad: np.ndarray) -> Detection:
        flagged = np.asarray(flagged, dtype=bool)
        bad = np.asarray(bad, dtype=bool)
        return cls(int((flagged & bad).sum()), int((flagged & ~bad).sum()), int((~flagged & bad).sum()),
                   int((~flagged & ~bad).sum()))

    @property
    def kappa(self) -> float | None:
        """Cohen's κ of flagged vs bad."""
        return kappa_from_confusion(np.array([[self.tp, self.fp], [self.fn, self.tn]]))

    @property
    def f1(self) -> float | None:
        """F1 of the bad class: 2TP / (2TP + FP + FN); None when nothing is bad or flagged."""
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else None

    @property
    def precision(self) -> float | None:
        """Share of flagged records that are bad."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        """Share of bad records flagged."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None


def candidate_cuts(values: np.ndarray) -> np.ndarray:
    """Cuts worth trying: every distinct value (a cut at a value flags everything below it),
    thinned to :data:`MAX_CUTS` quantiles when there are more."""
    distinct = np.unique(np.asarray(values, dtype=np.float64))
    if distinct.size > MAX_CUTS:
        distinct = np.unique(np.quantile(distinct, np.linspace(0.0, 1.0, MAX_CUTS), method="inverted_cdf"))
    return distinct


@dataclass(frozen=True)
class Cut:
    """A threshold and the agreement it gives."""

    threshold: float
    kappa: float


def _best_index(kappas: np.ndarray, tie_break: Callable[[int], Any]) -> int | None:
    """The index of the highest κ, ties broken by the smallest ``tie_break``; None when no κ is defined."""
    if not kappas.size or np.all(np.isnan(kappas)):
        return None
    tied: list[int] = np.flatnonzero(kappas >= np.nanmax(kappas) - 1e-12).tolist()
    return min(tied, key=tie_break)


def best_cut(values: np.ndarray, good: np.ndarray, *, forced: np.ndarray | None = None, prefer: float = 0.6,
             at_least: float | None = None) -> Cut | None:
    """The cut ``t`` (at or above ``at_least`` when given) whose flags (``value < t``, or ``forced``)
    agree best (Cohen's κ) with the bad records; ties go to the cut nearest ``prefer`` (the current
    threshold), then the lower. ``forced`` marks records flagged whatever the cut (a verdict a
    contract rule forces to ``fail``).

    κ does not change when both raters' two classes are swapped, so the same cut is the one whose
    ``pass`` (``value >= t`` and not ``forced``) agrees best with the good records: a fail cut and a
    pass cut are both found by it."""
    values, good, n_good, n_bad = _classes(values, good)
    forced = np.zeros(values.size, dtype=bool) if forced is None else np.asarray(forced, dtype=bool)
    cuts = candidate_cuts(values)
    if at_least is not None:
        cuts = cuts[cuts >= at_least - 1e-12]
    if not values.size or not cuts.size:
        return None
    bad, free = ~good, ~forced
    tp = int((forced & bad).sum()) + np.searchsorted(np.sort(values[free & bad]), cuts, side="left")
    fp = int((forced & good).sum()) + np.searchsorted(np.sort(values[free & good]), cuts, side="left")
    kappas = _kappas(np.stack([np.stack([tp, fp], axis=-1), np.stack([n_bad - tp, n_good - fp], axis=-1)], axis=-2))
    chosen = _best_index(kappas, lambda i: (abs(cuts[i] - prefer), cuts[i]))
    return None if chosen is None else Cut(float(cuts[chosen]), float(kappas[chosen]))


def verdicts_at(values: np.ndarray, borderline: float, passing: float, forced: np.ndarray | None = None) -> np.ndarray:
    """CONTRACT §2.5's verdicts of ``values`` at the given thresholds (``forced`` rows ``fail``)."""
    values = np.asarray(values, dtype=np.float64)
    out = np.where(values >= passing, "pass", np.where(values >= borderline, "borderline", "fail")).astype(object)
    if forced is not None:
        out[np.asarray(forced, dtype=bool)] = "fail"
    return out


def best_verdict_cuts(values: np.ndarray, expected: np.ndarray, *, forced: np.ndarray | None = None,
                      prefer: tuple[float, float] = (0.6, 0.8)) -> tuple[Cut, Cut] | None:
    """The (borderline, pass) thresholds, borderline ≤ pass, whose three verdicts agree best
    (unweighted Cohen's κ) with the expected verdicts. Returns the two cuts, each carrying that κ."""
    values = np.asarray(values, dtype=np.float64)
    expected = np.asarray(expected, dtype=object)
    forced = np.zeros(values.size, dtype=bool) if forced is None else np.asarray(forced, dtype=bool)
    cuts = candidate_cuts(values)
    if not values.size or not cuts.size:
        return None
    classes = np.array([VERDICTS.index(v) for v in expected])  # 0 pass, 1 borderline, 2 fail
    free = ~forced
    # below[k, c]: free records of expected class c with value < cuts[k]
    below = np.stack([np.searchsorted(np.sort(values[free & (classes == c)]), cuts, side="left") for c in range(3)],
                     axis=1).astype(float)
    totals = np.array([float((free & (classes == c)).sum()) for c in range(3)])
    forced_counts = np.array([float((forced & (classes == c)).sum()) for c in range(3)])
    low, high = np.triu_indices(cuts.size)  # borderline cut index <= pass cut index
    fail = below[low] + forced_counts  # predicted fail, per expected class
    border = below[high] - below[low]
    passed = totals - below[high]
    kappas = _kappas(np.stack([passed, border, fail], axis=1))  # [pair, predicted, expected]
    chosen = _best_index(kappas, lambda i: (abs(cuts[low[i]] - prefer[0]) + abs(cuts[high[i]] - prefer[1]),
                                            cuts[low[i]], cuts[high[i]]))
    if chosen is None:
        return None
    kappa = float(kappas[chosen])
    return Cut(float(cuts[low[chosen]]), kappa), Cut(float(cuts[high[chosen]]), kappa)


def roc_points(values: np.ndarray, good: np.ndarray) -> list[tuple[float, float, float]]:
    """The ROC curve of flagging ``value < t`` as a detector of bad records: ``(t, false positive
    rate, true positive rate)`` for every distinct cut, from flagging nothing to flagging all."""
    values, good, n_good, n_bad = _classes(values, good)
    if not n_good or not n_bad:
        return []
    cuts = np.append(np.unique(values), np.inf)
    fpr = np.searchsorted(np.sort(values[good]), cuts, side="left") / n_good
    tpr = np.searchsorted(np.sort(values[~good]), cuts, side="left") / n_bad
    return [(float(t), float(f), float(p)) for t, f, p in zip(cuts, fpr, tpr, strict=True)]
