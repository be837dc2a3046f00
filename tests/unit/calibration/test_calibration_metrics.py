"""The calibration's statistics on fixed inputs, against scipy, scikit-learn and plain reference
computations written out here: AUROC, Spearman, Cohen's κ, F1,
the bootstrap interval, the suggested thresholds and the held-out split."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score, f1_score, roc_auc_score

from evaluation.calibration import metrics
from evaluation.calibration.golden import holdout_split

# (values, good) cases: ties within and across classes, one class nearly empty, reversed order
CASES = {
    "separated": ([0.9, 0.8, 0.7, 0.3, 0.2, 0.1], [True, True, True, False, False, False]),
    "reversed": ([0.1, 0.2, 0.3, 0.7, 0.8, 0.9], [True, True, True, False, False, False]),
    "ties": ([0.5, 0.5, 0.5, 0.7, 0.2, 0.5, 1.0, 0.0], [True, False, True, True, False, False, True, False]),
    "one_bad": ([0.2, 0.4, 0.6, 0.8, 0.5], [True, True, True, True, False]),
    "mixed": ([0.91, 0.13, 0.55, 0.55, 0.67, 0.02, 0.78, 0.41, 0.66, 0.3, 0.3, 0.99],
              [True, False, True, False, True, False, False, True, True, False, True, True]),
}


def _random_case(seed: int, n: int = 200, levels: int = 21) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    good = rng.random(n) < 0.45
    values = np.round(np.clip(rng.normal(0.45 + 0.25 * good, 0.2), 0, 1) * (levels - 1)) / (levels - 1)
    return values, good


@pytest.mark.parametrize("case", list(CASES))
def test_auroc_is_mann_whitney_u_over_the_pairs(case: str) -> None:
    values, good = (np.array(x) for x in CASES[case])
    u = stats.mannwhitneyu(values[good], values[~good]).statistic
    assert metrics.auroc(values, good) == pytest.approx(u / (good.sum() * (~good).sum()), abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_auroc_on_random_scores_with_ties(seed: int) -> None:
    values, good = _random_case(seed)
    pairs = [(a > b) + 0.5 * (a == b) for a, b in itertools.product(values[good], values[~good])]
    assert metrics.auroc(values, good) == pytest.approx(np.mean(pairs), abs=1e-12)
    u = stats.mannwhitneyu(values[good], values[~good]).statistic
    assert metrics.auroc(values, good) == pytest.approx(u / (good.sum() * (~good).sum()), abs=1e-12)


def test_auroc_needs_both_classes() -> None:
    assert metrics.auroc(np.array([0.1, 0.9]), np.array([True, True])) is None
    assert metrics.auroc(np.array([]), np.array([], dtype=bool)) is None


def test_a_judge_that_answers_by_the_label_gets_auroc_and_kappa_one() -> None:
    good = np.array([True, False, True, True, False, False, True, False])
    values = good.astype(float)
    assert metrics.auroc(values, good) == 1.0
    assert metrics.Detection.of(values < 0.6, ~good).kappa == 1.0
    assert metrics.auroc_interval(values, good, np.random.default_rng(0), 500) == (1.0, 1.0)


@pytest.mark.parametrize("case", list(CASES))
def test_average_ranks_are_scipy_rankdata(case: str) -> None:
    values = np.array(CASES[case][0])
    assert metrics.average_ranks(values) == pytest.approx(stats.rankdata(values))


@pytest.mark.parametrize("seed", [4, 5])
@pytest.mark.parametrize("case", list(CASES))
def test_spearman_is_scipy_spearmanr(case: str, seed: int) -> None:
    values = np.array(CASES[case][0])
    other = np.random.default_rng(seed).integers(0, 4, values.size).astype(float)  # an ordinal label with ties
    assert metrics.spearman(values, other) == pytest.approx(stats.spearmanr(values, other).statistic, abs=1e-12)


def test_spearman_of_a_constant_is_undefined() -> None:
    assert metrics.spearman(np.array([1.0, 1.0, 1.0]), np.array([0.1, 0.2, 0.3])) is None
    assert metrics.spearman(np.array([1.0]), np.array([2.0])) is None


def _kappa_reference(predicted: list[str], actual: list[str]) -> float:
    """scikit-learn's Cohen's κ (the suggested thresholds below are checked by brute force with it)."""
    return float(cohen_kappa_score(predicted, actual))


def _kappa_formula(predicted: list[str], actual: list[str]) -> float:
    """Cohen (1960), written out: observed agreement against the agreement of the marginals."""
    n = len(predicted)
    categories = sorted(set(predicted) | set(actual))
    observed = sum(p == a for p, a in zip(predicted, actual, strict=True)) / n
    expected = sum((predicted.count(c) / n) * (actual.count(c) / n) for c in categories)
    return (observed - expected) / (1 - expected)


@pytest.mark.parametrize(
    "predicted, actual",
    [
        (["pass", "fail", "fail", "borderline", "pass", "fail"], ["pass", "fail", "pass", "fail", "pass", "fail"]),
        (["a"] * 20 + ["a"] * 5 + ["b"] * 10 + ["b"] * 15, ["a"] * 20 + ["b"] * 5 + ["a"] * 10 + ["b"] * 15),
        (["x", "y", "z", "x", "y", "z", "x"], ["z", "y", "x", "x", "y", "z", "y"]),
    ],
)
def test_cohen_kappa_against_the_formula(predicted: list[str], actual: list[str]) -> None:
    kappa = metrics.kappa_from_confusion(metrics.confusion(predicted, actual, sorted({*predicted, *actual})))
    assert kappa == pytest.approx(_kappa_reference(predicted, actual), abs=1e-12)
    assert kappa == pytest.approx(_kappa_formula(predicted, actual), abs=1e-12)


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_auroc_kappa_and_f1_against_scikit_learn(seed: int) -> None:
    values, good = _random_case(seed)
    assert metrics.auroc(values, good) == pytest.approx(roc_auc_score(good, values), abs=1e-12)
    flagged = values < 0.5
    detection = metrics.Detection.of(flagged, ~good)
    assert detection.kappa == pytest.approx(cohen_kappa_score(flagged, ~good), abs=1e-12)
    assert detection.f1 == pytest.approx(f1_score(~good, flagged), abs=1e-12)


def test_cohen_kappa_textbook_value() -> None:
    # 50 cases: both yes 20, yes/no 5, no/yes 10, both no 15 -> p_o 0.7, p_e 0.5, kappa 0.4
    predicted = ["yes"] * 25 + ["no"] * 25
    actual = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    kappa = metrics.kappa_from_confusion(metrics.confusion(predicted, actual, sorted({*predicted, *actual})))
    assert kappa == pytest.approx(0.4, abs=1e-12)
    detection = metrics.Detection.of(np.array(predicted) == "yes", np.array(actual) == "yes")
    assert detection.kappa == pytest.approx(0.4, abs=1e-12)
    assert (detection.tp, detection.fp, detection.fn, detection.tn) == (20, 5, 10, 15)
    assert detection.f1 == pytest.approx(2 * 20 / (2 * 20 + 5 + 10))
    assert detection.precision == pytest.approx(0.8) and detection.recall == pytest.approx(20 / 30)


def test_kappa_is_undefined_when_both_raters_are_constant() -> None:
    assert metrics.kappa_from_confusion(metrics.confusion(["fail"] * 4, ["fail"] * 4, ["fail"])) is None
    assert metrics.Detection.of(np.zeros(3, bool), np.zeros(3, bool)).f1 is None


def _brute_force_fail_cut(values: np.ndarray, good: np.ndarray, forced: np.ndarray, prefer: float) -> tuple[float, float]:
    """Every distinct value as the cut (flag value < cut, or forced), κ by the formula; the best,
    ties to the cut nearest ``prefer``, then the lower."""
    best: tuple[float, float, float] | None = None
    for cut in sorted(set(values.tolist())):
        flagged = ["bad" if (v < cut or f) else "good" for v, f in zip(values, forced, strict=True)]
        truth = ["good" if g else "bad" for g in good]
        if len(set(flagged) | set(truth)) < 2:
            continue
        kappa = _kappa_reference(flagged, truth)
        key = (-round(kappa, 12), abs(cut - prefer), cut)
        if best is None or key < best:
            best = key
    assert best is not None
    return best[2], -best[0]


@pytest.mark.parametrize("seed", [6, 7, 8, 9])
@pytest.mark.parametrize("with_forced", [False, True])
def test_suggested_borderline_threshold_maximises_kappa(seed: int, with_forced: bool) -> None:
    values, good = _random_case(seed, n=120)
    forced = (np.random.default_rng(seed).random(values.size) < 0.1) if with_forced else np.zeros(values.size, bool)
    cut = metrics.best_cut(values, good, forced=forced, prefer=0.6)
    assert cut is not None
    threshold, kappa = _brute_force_fail_cut(values, good, forced, 0.6)
    assert (cut.threshold, cut.kappa) == pytest.approx((threshold, kappa), abs=1e-12)
    flagged = (values < cut.threshold) | forced
    assert metrics.Detection.of(flagged, ~good).kappa == pytest.approx(cut.kappa, abs=1e-12)


@pytest.mark.parametrize("seed", [10, 11])
def test_suggested_pass_threshold_maximises_kappa_above_the_borderline(seed: int) -> None:
    values, good = _random_case(seed, n=120)
    cut = metrics.best_cut(values, good, prefer=0.8, at_least=0.5)
    assert cut is not None and cut.threshold >= 0.5
    kappas = {c: _kappa_reference(["p" if v >= c else "n" for v in values], ["p" if g else "n" for g in good])
              for c in sorted(set(values.tolist())) if c >= 0.5}
    assert cut.kappa == pytest.approx(max(kappas.values()), abs=1e-12)
    assert kappas[cut.threshold] == pytest.approx(cut.kappa, abs=1e-12)


def test_suggested_verdict_thresholds_maximise_three_class_kappa() -> None:
    rng = np.random.default_rng(12)
    values = np.round(rng.random(90) * 10) / 10
    expected = np.where(values + rng.normal(0, 0.15, 90) >= 0.75, "pass",
                        np.where(values + rng.normal(0, 0.15, 90) >= 0.45, "borderline", "fail")).astype(object)
    found = metrics.best_verdict_cuts(values, expected)
    assert found is not None
    borderline, passing = found
    cuts = sorted(set(values.tolist()))
    best = max(_kappa_reference(list(metrics.verdicts_at(values, b, p)), list(expected))
               for b in cuts for p in cuts if b <= p)
    assert borderline.kappa == pytest.approx(best, abs=1e-12)
    assert _kappa_reference(list(metrics.verdicts_at(values, borderline.threshold, passing.threshold)),
                            list(expected)) == pytest.approx(best, abs=1e-12)


def test_auroc_interval_is_seeded_and_covers_the_estimate() -> None:
    values, good = _random_case(13, n=300)
    first = metrics.auroc_interval(values, good, np.random.default_rng(3), 1000)
    again = metrics.auroc_interval(values, good, np.random.default_rng(3), 1000)
    assert first == again and first is not None
    low, high = first
    point = metrics.auroc(values, good)
    assert point is not None and low < point < high and high - low < 0.2


def test_auroc_interval_agrees_with_a_plain_record_bootstrap() -> None:
    """Drawing counts per value (multinomial) is a resample of the records within each class."""
    values, good = _random_case(14, n=160)
    rng = np.random.default_rng(5)
    plain = []
    good_values, bad_values = values[good], values[~good]
    for _ in range(1500):
        g = rng.choice(good_values, good_values.size)
        b = rng.choice(bad_values, bad_values.size)
        plain.append(stats.mannwhitneyu(g, b).statistic / (g.size * b.size))
    reference = np.quantile(plain, [0.025, 0.975])
    interval = metrics.auroc_interval(values, good, np.random.default_rng(6), 1500)
    assert interval is not None
    assert interval == pytest.approx(tuple(reference), abs=0.02)


def test_roc_points_run_from_nothing_flagged_to_everything() -> None:
    values, good = (np.array(x) for x in CASES["mixed"])
    points = metrics.roc_points(values, good)
    assert points[0][1:] == (0.0, 0.0) and points[-1][1:] == (1.0, 1.0)
    fpr = [p[1] for p in points]
    tpr = [p[2] for p in points]
    assert fpr == sorted(fpr) and tpr == sorted(tpr)
    area = sum((fpr[i + 1] - fpr[i]) * (tpr[i + 1] + tpr[i]) / 2 for i in range(len(points) - 1))
    assert area == pytest.approx(metrics.auroc(values, good))


def test_holdout_split_is_stratified_seeded_and_order_free() -> None:
    ids = [f"r{i}" for i in range(40)]
    strata = [i % 4 == 0 for i in range(40)]  # 10 True, 30 False
    split = holdout_split(ids, strata, seed=1, share=0.5)
    assert sum(s == "holdout" and t for s, t in zip(split, strata, strict=True)) == 5
    assert sum(s == "holdout" and not t for s, t in zip(split, strata, strict=True)) == 15
    reordered = holdout_split(ids[::-1], strata[::-1], seed=1, share=0.5)
    assert dict(zip(ids[::-1], reordered, strict=True)) == dict(zip(ids, split, strict=True))
    assert holdout_split(ids, strata, seed=2, share=0.5) != split
