"""The cascade's bands (evaluation.calibration.cascade.fit_bands): a fixed sequence of candidates,
each tested with an exact binomial bound, the cheapest passed kept; and the guarantee it states, held
on judges whose mistakes go together through a record's difficulty."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom

from evaluation.calibration.cascade import (
    STEPS,
    band_at,
    candidate_sequence,
    disagreement_bound,
    fit_bands,
    split_figures,
)
from evaluation.testing.correlated import CorrelatedJudges

CUT = 0.5


def _tables(scores: list[np.ndarray], good: np.ndarray, split: str = "fit") -> tuple[list[pl.DataFrame], pl.DataFrame]:
    ids = [f"r{i:04d}" for i in range(good.size)]
    levels = [pl.DataFrame({"record_id": ids, "judge": "rag", "judge_status": "ok", "score": level,
                            "verdict": np.where(level < CUT, "fail", "pass")}) for level in scores]
    return levels, pl.DataFrame({"record_id": ids, "good": good, "split": split})


def _decided(score: np.ndarray, band: tuple[float, float]) -> np.ndarray:
    return (score < band[0]) | (score > band[1])


@pytest.mark.parametrize("disagreements, records, confidence, bound", [
    (0, 300, 0.9, 1 - 0.1 ** (1 / 300)),  # the exact bound with no event: 1 - (1 - c)^(1/n)
    (0, 1, 0.9, 0.9),
    (3, 3, 0.9, 1.0),
    (0, 0, 0.9, 1.0),
])
def test_disagreement_bound_known_values(disagreements: int, records: int, confidence: float, bound: float) -> None:
    assert disagreement_bound(disagreements, records, confidence) == pytest.approx(bound)


@pytest.mark.parametrize("records, disagreements", [(50, 1), (300, 4), (1000, 15)])
def test_disagreement_bound_covers_at_its_confidence(records: int, disagreements: int) -> None:
    """At the bound, a count as small as the one seen has probability 1 − confidence (Clopper–Pearson)."""
    bound = disagreement_bound(disagreements, records, 0.9)
    assert binom.cdf(disagreements, records, bound) == pytest.approx(0.1, abs=1e-6)


def test_the_sequence_is_fixed_before_the_data_dearest_level_first() -> None:
    sequence = candidate_sequence([None, (0.1, 0.9), None], 0.6)
    assert len(sequence) == 1 + 2 * STEPS
    assert sequence[0] == [(0.0, 1.0), (0.1, 0.9), (0.0, 1.0)]  # every band to fit wide open: nothing decided
    # the dearest level to fit (the last before the judge model) narrows first, to nothing at the cut
    assert [bands[2] for bands in sequence[1:STEPS + 1]] == [band_at(step, 0.6) for step in range(1, STEPS + 1)]
    assert sequence[STEPS][2] == (0.6, 0.6) and all(bands[0] == (0.0, 1.0) for bands in sequence[:STEPS + 1])
    # then the next cheaper one, the dearer kept at its narrowest; a given band never moves
    assert all(bands[2] == (0.6, 0.6) and bands[1] == (0.1, 0.9) for bands in sequence[STEPS + 1:])
    assert sequence[-1][0] == (0.6, 0.6)


def test_the_sequence_stops_at_its_first_failure_and_keeps_the_cheapest_passed() -> None:
    """The cheap model agrees with the judge model everywhere, sure, but on 10 records it scores 0.3
    or 0.7 with the other verdict; the offline judge is unsure (0.5) everywhere but on those 10, where
    it is sure and agrees with the judge model. The cheap model's band passes its steps until it
    decides the 10 (step 13: 10 of 600, bound 2.7%), and the sequence stops there: the later
    candidates, where the offline judge takes the 10 and nothing disagrees, would pass and be cheaper,
    but testing on past a failure would void the guarantee. The cheapest passed: the first band of
    the cheap model that decides all its sure records (step 10), the offline judge's wide open."""
    rng = np.random.default_rng(0)
    good = rng.random(600) < 0.5
    judge = np.where(good, 0.9, 0.1)
    cheap = np.where(good, rng.uniform(0.75, 1.0, good.size), rng.uniform(0.0, 0.25, good.size))
    cheap[:10] = np.where(good[:10], 0.3, 0.7)  # sure enough, and the other verdict
    free = np.full(good.size, 0.5)
    free[:10] = np.where(good[:10], 1.0, 0.0)
    levels, labels = _tables([free, cheap, judge], good)
    bands = fit_bands(levels, labels, ["rag"], [None, None], 0.02, cut=CUT, confidence=0.9, costs=[0.0, 1.0, 10.0])
    assert bands[1]["rag"] == band_at(10, CUT) == (0.25, 0.75) and bands[0]["rag"] == (0.0, 1.0)
    assert not _decided(cheap, bands[1]["rag"])[:10].any() and _decided(cheap, bands[1]["rag"])[10:].all()
    assert disagreement_bound(10, 600, 0.9) > 0.02


def test_given_bands_stay_and_only_the_free_levels_are_fitted() -> None:
    rng = np.random.default_rng(1)
    good = rng.random(400) < 0.5
    judge = np.where(good, 0.9, 0.1)
    cheap = np.where(good, rng.uniform(0.6, 1.0, good.size), rng.uniform(0.0, 0.4, good.size))
    levels, labels = _tables([cheap, cheap, judge], good)
    bands = fit_bands(levels, labels, ["rag"], [{"rag": (0.2, 0.8)}, None], 0.02, cut=CUT, confidence=0.9)
    assert bands[0]["rag"] == (0.2, 0.8)
    # agrees everywhere: every step passes; the cheapest is the first that decides every row, the tie's earliest
    assert bands[1]["rag"] == band_at(16, CUT) == (0.4, 0.6)
    assert _decided(cheap, bands[1]["rag"]).all() and not _decided(cheap, band_at(15, CUT)).all()


def test_a_level_that_disagrees_everywhere_decides_nothing() -> None:
    good = np.array([True, False] * 100)
    levels, labels = _tables([np.where(good, 0.0, 1.0), np.where(good, 0.9, 0.1)], good)
    assert fit_bands(levels, labels, ["rag"], [None], 0.02, cut=CUT, confidence=0.9)[0]["rag"] == (0.0, 1.0)


def test_split_figures_count_the_disagreement_kappa_and_cost_on_a_split() -> None:
    good = np.array([True] * 50 + [False] * 50)
    judge = np.where(good, 0.9, 0.1)
    cheap = np.where(good, 0.95, 0.05)
    cheap[[0, 50]] = [0.05, 0.95]  # two sure mistakes
    levels, labels = _tables([cheap, judge], good, split="holdout")
    figures = split_figures(levels, labels, "rag", [(0.4, 0.6)], [1.0, 10.0])
    assert figures["disagreement"] == pytest.approx(0.02)
    assert figures["kappa_alone"] == pytest.approx(1.0) and figures["kappa"] == pytest.approx(0.96)
    assert figures["cost"] == 100.0 and figures["cost_alone"] == 1000.0
    assert split_figures(levels, labels, "rag", [(0.4, 0.6)], [1.0, 10.0], split="fit")["kappa"] is None


def test_the_guarantee_holds_on_judges_whose_mistakes_go_together() -> None:
    """150 fits, each on 300 fresh fit records from judges whose noises are correlated 0.5 through a
    record's difficulty (the offline judge at 70%, the cheap model at 80%, the judge model at 95%),
    each fitted cascade's disagreement with the judge model measured on 20,000 new records. The fit
    promises a disagreement within 0.02 with probability 0.9: the share of fits beyond it must not be
    above 0.1 by more than chance allows (a count above the binomial's 0.999 quantile would reject
    it), and the cascade must decide rows (a fit that never narrows keeps its promise for nothing)."""
    judges = CorrelatedJudges((0.7, 0.8, 0.95), rho=0.5, cut=0.6)
    rng = np.random.default_rng(2026)
    future, future_labels = judges.draw(20_000, rng, split="holdout")
    fits, confidence, loss = 150, 0.9, 0.02
    beyond, saved = 0, []
    for _ in range(fits):
        levels, labels = judges.draw(300, rng)
        bands = fit_bands(levels, labels, ["rag"], [None, None], loss, cut=0.6, confidence=confidence,
                          costs=[0.0, 0.06, 1.0])
        figures = split_figures(future, future_labels, "rag", [bands[0]["rag"], bands[1]["rag"]], [0.0, 0.06, 1.0])
        beyond += int(figures["disagreement"] > loss)
        saved.append(1 - figures["cost"] / figures["cost_alone"])
    assert beyond <= binom.ppf(0.999, fits, 1 - confidence), beyond
    assert np.mean(saved) > 0.1, np.mean(saved)


def test_the_calibration_page_states_the_guarantee_and_what_it_assumes() -> None:
    from evaluation.calibration import CalibrationSpec
    from evaluation.calibration.render import _cascade_section
    from evaluation.contract.schemas import CASCADE_SCHEMA

    spec = CalibrationSpec(golden_uri="golden/set", judges=["rag"], judge_model="openai/gpt-4o",
                           cascade="openai/gpt-4o-mini", band_loss=0.03, band_confidence=0.95)
    level = {"judge": "rag", "reached": 100, "decided": 60, "share_decided": 0.6, "cost_usd": 0.01,
             "cost_alone_usd": 0.02, "band_confidence": 0.95, "disagreement_fit": 0.004, "disagreement_bound": 0.021,
             "disagreement_holdout": 0.012, "kappa_cascade": 0.8, "kappa_cascade_holdout": 0.79}
    cascade = pl.DataFrame([{**level, "level": 0, "judge_model": "openai/gpt-4o-mini", "band_low": 0.3, "band_high": 0.7},
                            {**level, "level": 1, "judge_model": "openai/gpt-4o", "decided": 40, "cost_usd": 0.05}],
                           schema=CASCADE_SCHEMA)
    page = _cascade_section(spec, cascade)
    assert "with probability at least 0.95" in page and "on at most 0.03 of new records" in page
    assert "like the fit split" in page and "calibrate again" in page  # the assumption, and what voids it
    assert "not on κ against the labels" in page
    assert "1.2% held out" in page and "upper bound 2.1% at 95.0%" in page
