"""Judges whose mistakes go together, as a cascade's level tables: what the cascade fit's guarantee is
tested with (a unit test, and ``make bench``'s cascade item).

Each record has a binary label (bad with probability ``bad_share``) and a **difficulty** ``h`` drawn
from N(0, 1), shared by every level. Level ``j`` (the judge models of a cascade, cheapest first, the
judge model last) errs when its noise ``e = √ρ·h + √(1−ρ)·ε`` (ε its own N(0, 1)) exceeds
``Φ⁻¹(accuracy_j)``: its fail verdict agrees with the label with probability ``accuracy_j`` on any
record, and the noises of two levels are correlated ``ρ`` through the record's difficulty, so a
record hard for the cheap model is hard for the strong one too (ρ = 0: independent mistakes, the
test server's judges). The score is the one :class:`~evaluation.testing.labelled.LabelledJudges`
gives the same latent (a probit model: ``cut`` at latent 0, a score below it a ``fail``), so the
mistakes are mostly close to the cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import polars as pl

from evaluation.testing.labelled import scores_of


@dataclass(frozen=True)
class CorrelatedJudges:
    """The levels' accuracies (cheapest first, the judge model's last), the correlation ``rho`` of
    their noises through a record's difficulty, the fail ``cut`` and the share of bad records."""

    accuracies: tuple[float, ...]
    rho: float
    cut: float = 0.6
    bad_share: float = 0.5

    def draw(self, records: int, rng: np.random.Generator, *, split: str = "fit",
             prefix: str = "r") -> tuple[list[pl.DataFrame], pl.DataFrame]:
        """``records`` records judged by every level: each level's rows (``record_id``, ``judge``,
        ``judge_status`` ok, ``score``, ``verdict``), and the labels (``record_id``, ``good``, ``split``)."""
        ids = [f"{prefix}{i:07d}" for i in range(records)]
        good = rng.random(records) >= self.bad_share
        difficulty = rng.standard_normal(records)
        levels = []
        for accuracy in self.accuracies:
            noise = np.sqrt(self.rho) * difficulty + np.sqrt(1.0 - self.rho) * rng.standard_normal(records)
            latent = NormalDist().inv_cdf(accuracy) - noise  # >= 0: right
            score = scores_of(np.where(good, latent, -latent), self.cut)
            levels.append(pl.DataFrame({"record_id": ids, "judge": "rag", "judge_status": "ok", "score": score,
                                        "verdict": np.where(score < self.cut, "fail", "pass")}))
        return levels, pl.DataFrame({"record_id": ids, "good": good, "split": split})
