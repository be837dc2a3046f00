"""Simulated days with a judge of known bias, for the corrected estimates' tests and ``make bench``:
how often the prediction-powered interval (:func:`evaluation.contract.estimate.ppi_rate`) and the
judge-only one cover the true rate, and how wide they are."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from evaluation.contract.estimate import judge_interval, ppi_rate


class Judged(BaseModel, arbitrary_types_allowed=True):
    """One simulated day: people's 0/1 on every record (the truth), the judge's, and the slice labelled."""

    human: np.ndarray
    judge: np.ndarray
    labelled: np.ndarray  #: indices of the uniform slice people labelled


def simulated_day(rng: np.random.Generator, *, records: int, labels: int, true_rate: float, false_pass: float,
                  false_fail: float = 0.05) -> Judged:
    """A day whose judge passes a share ``false_pass`` of the records people fail and fails a share
    ``false_fail`` of those they pass: its rate is off by ``false_pass·(1−rate) − false_fail·rate``."""
    human = (rng.random(records) < true_rate).astype(float)
    draws = rng.random(records)
    judge = np.where(human == 1, draws >= false_fail, draws < false_pass).astype(float)
    return Judged(human=human, judge=judge, labelled=rng.choice(records, size=labels, replace=False))


class Coverage(BaseModel):
    """Coverage and mean width of both intervals over simulated days."""

    days: int
    labels: int
    bias: float  #: the judge's mean bias over the days (judge rate − true rate)
    corrected_coverage: float
    corrected_width: float
    judge_coverage: float
    judge_width: float


def coverage(*, labels: int, false_pass: float, records: int = 5000, days: int = 400, true_rate: float = 0.7,
             seed: int = 20261127) -> Coverage:
    """Both intervals' coverage of the true rate and their width over ``days`` simulated days."""
    rng = np.random.default_rng(seed)
    hits = np.zeros(2)
    widths = np.zeros(2)
    bias = 0.0
    for _ in range(days):
        day = simulated_day(rng, records=records, labels=labels, true_rate=true_rate, false_pass=false_pass)
        truth = float(day.human.mean())
        estimate = ppi_rate(day.judge, day.judge[day.labelled], day.human[day.labelled])
        low, high = judge_interval(day.judge)
        hits += [estimate.low <= truth <= estimate.high, low <= truth <= high]
        widths += [estimate.high - estimate.low, high - low]
        bias += float(day.judge.mean()) - truth
    return Coverage(days=days, labels=labels, bias=bias / days, corrected_coverage=hits[0] / days,
                    corrected_width=widths[0] / days, judge_coverage=hits[1] / days, judge_width=widths[1] / days)
