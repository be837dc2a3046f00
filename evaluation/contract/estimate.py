"""Rates that stay valid when the judge is biased: prediction-powered inference (Angelopoulos et
al., *Prediction-powered inference*, Science 2023), and agreement between annotators.

For a rate θ (the share of a model's records that pass, say), the judge gives a verdict ``f`` on
all ``N`` records and people give ``h`` on ``n`` of them drawn at random (the queue's uniform
slice, inclusion probability ``π`` per record). The estimate

    θ̂ = mean(f over the N records) + Σ w·(h − f) / Σ w      (w = 1/π over the n labelled records)

is the judge's rate corrected by its measured error (the rectifier); its variance is
``var(f)/N + Σ w²·(Δ − Δ̄)² / (Σ w)²``, the two parts independent, and its interval
``θ̂ ± z·√variance`` is valid whatever the judge's bias: a biased judge widens the interval,
never moves it off the truth. With equal π (one day, or days of equal sampling fractions) this
is the paper's estimator exactly. The judge's estimated bias is ``−Σ w·(h − f) / Σ w``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

#: The normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054


class Estimate(BaseModel):
    """A rate, judged and corrected by people's labels."""

    judge_rate: float = Field(description="The judge's rate over all its records.")
    judge_low: float = Field(description="The judge-only interval's lower end (its sampling error only).")
    judge_high: float
    corrected: float = Field(description="The prediction-powered estimate.")
    low: float = Field(description="The corrected interval's lower end (clipped to [0, 1]).")
    high: float
    bias: float = Field(description="The judge's estimated bias: judge minus people on the labelled records.")
    records: int = Field(description="Records the judge gave a verdict on (N).")
    labels: int = Field(description="Labelled records used (n).")


def judge_interval(judged: np.ndarray) -> tuple[float, float]:
    """The judge-only rate's normal interval (what the judge-only figure claims)."""
    rate = float(judged.mean())
    half = Z_95 * math.sqrt(rate * (1 - rate) / judged.size)
    return max(0.0, rate - half), min(1.0, rate + half)


def ppi_rate(judged: np.ndarray, labelled_judge: np.ndarray, labelled_human: np.ndarray,
             inclusion: np.ndarray | None = None) -> Estimate:
    """The prediction-powered estimate of a rate: ``judged`` the judge's 0/1 on all records,
    ``labelled_judge`` and ``labelled_human`` the judge's and people's (a share when several
    people labelled a record) on the labelled ones, ``inclusion`` their inclusion probabilities
    (equal when None)."""
    if judged.size < 2 or labelled_human.size < 2:
        raise ValueError("a prediction-powered estimate needs at least 2 judged and 2 labelled records")
    weights = np.ones(labelled_human.size) if inclusion is None else 1.0 / np.asarray(inclusion, float)
    delta = labelled_human.astype(float) - labelled_judge.astype(float)
    rectifier = float(np.sum(weights * delta) / weights.sum())
    rate = float(judged.mean())
    n_eff_var = float(np.sum(weights**2 * (delta - rectifier) ** 2) / weights.sum() ** 2)
    n = delta.size
    variance = float(judged.var(ddof=1)) / judged.size + n_eff_var * n / (n - 1)
    corrected = rate + rectifier
    half = Z_95 * math.sqrt(variance)
    low, high = judge_interval(judged)
    return Estimate(judge_rate=rate, judge_low=low, judge_high=high, corrected=corrected,
                    low=max(0.0, corrected - half), high=min(1.0, corrected + half), bias=-rectifier,
                    records=int(judged.size), labels=n)


def fleiss_kappa(ratings: Sequence[Sequence[str]]) -> float | None:
    """Fleiss' κ of the answers several people gave the same items (each item's answers, two or
    more); None with fewer than two such items or when every answer is the same."""
    items = [list(r) for r in ratings if len(r) >= 2]
    if len(items) < 2:
        return None
    categories = sorted({a for item in items for a in item})
    counts = np.array([[item.count(c) for c in categories] for item in items], dtype=float)
    raters = counts.sum(axis=1)
    agreement = ((counts * (counts - 1)).sum(axis=1) / (raters * (raters - 1))).mean()
    shares = counts.sum(axis=0) / raters.sum()
    chance = float((shares**2).sum())
    if chance >= 1.0:
        return None
    return float((agreement - chance) / (1 - chance))
