"""Prediction-powered rates (evaluation.contract.estimate): on simulated days with a judge biased by
a known amount, the corrected 95% interval covers the true rate about 95% of the time while the
judge-only interval does not; and Fleiss' κ between annotators."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.contract.estimate import fleiss_kappa, ppi_rate
from evaluation.testing.biased import coverage, simulated_day


@pytest.mark.parametrize("labels", [50, 200])
def test_the_corrected_interval_covers_the_true_rate_whatever_the_judges_bias(labels: int) -> None:
    found = coverage(labels=labels, false_pass=0.4, records=2000)
    assert found.bias == pytest.approx(0.4 * 0.3 - 0.05 * 0.7, abs=0.01)  # the judge's bias is what was planted
    # 400 days: the coverage of a 95% interval falls below 0.92 with probability about 0.3%
    assert found.corrected_coverage >= 0.92
    assert found.judge_coverage <= 0.05
    assert found.corrected_width > found.judge_width  # the price of validity: a wider interval


def test_an_unbiased_judge_keeps_the_corrected_interval_valid_and_the_bias_near_zero() -> None:
    day = simulated_day(np.random.default_rng(5), records=5000, labels=1000, true_rate=0.5, false_pass=0.05)
    estimate = ppi_rate(day.judge, day.judge[day.labelled], day.human[day.labelled])
    assert estimate.low <= day.human.mean() <= estimate.high
    assert estimate.bias == pytest.approx(day.judge.mean() - day.human.mean(), abs=0.03)


def test_the_estimate_is_the_judges_rate_plus_its_measured_error() -> None:
    judged = np.array([1, 1, 1, 1, 0, 0, 1, 1, 0, 1], float)  # rate 0.7
    estimate = ppi_rate(judged, np.array([1, 1, 0, 1.0]), np.array([0, 1, 0, 1.0]))
    assert estimate.judge_rate == pytest.approx(0.7)
    assert estimate.corrected == pytest.approx(0.7 - 0.25) and estimate.bias == pytest.approx(0.25)
    assert estimate.records == 10 and estimate.labels == 4


def test_inclusion_weights_correct_a_slice_drawn_unevenly() -> None:
    # two days: day 1's records labelled 1 in 2, day 2's 1 in 10; the judge errs on day 2 only
    judged = np.array([1.0] * 20 + [1.0] * 100)
    labelled_judge = np.array([1.0] * 10 + [1.0] * 10)
    labelled_human = np.array([1.0] * 10 + [0.0] * 5 + [1.0] * 5)
    weighted = ppi_rate(judged, labelled_judge, labelled_human, np.array([0.5] * 10 + [0.1] * 10))
    truth = (20 + 50) / 120
    assert weighted.corrected == pytest.approx(truth)
    assert ppi_rate(judged, labelled_judge, labelled_human).corrected == pytest.approx(0.75)  # unweighted: off


@pytest.mark.parametrize(("ratings", "expected"), [
    ([["pass", "pass"], ["fail", "fail"], ["pass", "pass"]], 1.0),
    ([["pass", "fail"], ["fail", "pass"]], -1.0),
    ([["pass", "pass"]], None),  # one item
    ([["pass", "pass"], ["pass", "pass"]], None),  # one answer only: κ undefined
])
def test_fleiss_kappa(ratings: list[list[str]], expected: float | None) -> None:
    assert fleiss_kappa(ratings) == (None if expected is None else pytest.approx(expected))


def test_fleiss_kappa_matches_the_textbook_example() -> None:
    # Fleiss (1971)-style check: 4 items, 3 raters, two categories, computed by hand
    ratings = [["a", "a", "a"], ["a", "a", "b"], ["b", "b", "b"], ["a", "b", "b"]]
    # P_i = 1, 1/3, 1, 1/3 -> P̄ = 2/3; p_a = 6/12 -> P_e = 0.5; κ = (2/3 - 1/2) / (1/2) = 1/3
    assert fleiss_kappa(ratings) == pytest.approx(1 / 3)
