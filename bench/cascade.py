"""Cascade judging (a child of :mod:`bench.run`): on a labelled set, the cost and κ of the strong
judge model alone, the cheap one alone and the cascade (the offline judge, then the cheap model,
then the strong one).

The set is the repository's two shipped golden sets together (HaluEval QA and BEGIN, 300 records
each). The local server answers as two judge models of known accuracy
(:class:`evaluation.testing.labelled.LabelledJudges`): ``gpt-4o`` agrees with the labels 95% of the
time, ``gpt-4o-mini`` 80% in one scenario and 90% in the other (:data:`CHEAP_ACCURACIES`), their
scores closer to the verdict's cut where they err; litellm prices their tokens at its online prices
for those two models. ``calibrate --cascade`` fits the bands on the calibration's fit split (half of
each label class), once with ``band_loss`` 0.02 and once with 0.01; then the set, as a day of logs,
is judged through ``run`` — strong alone, cheap alone, the cascade with each calibration's bands —
each into its own output root, so each pays for its own calls. The whole is repeated over ``trials``
seeds (the models' draws and the fit / held-out split both change with the seed), and averaged: one
split of 600 records leaves κ a few hundredths of noise either way. κ is that of ``fail`` against
not faithful, per judge (rag, masis), on the held-out split (the records the bands were not fitted
to) and on the whole set; cost is what each run paid (``runs.cost_usd``).

:func:`guarantee` (the ``guarantee`` task) tests what the fit promises, with the project's own
:func:`~evaluation.calibration.cascade.fit_bands`: many fits, each on a fresh fit split drawn from
judges whose mistakes go together through a record's difficulty
(:class:`~evaluation.testing.correlated.CorrelatedJudges`, correlation ρ 0 — independent —, 0.5 and
0.8), each fitted cascade's disagreement with the strong judge measured on one large population of
new records drawn alike (:func:`~evaluation.calibration.cascade.split_figures`): the share of fits
whose disagreement exceeds ``band_loss``, with its 95% Clopper–Pearson interval, against the
1 − ``band_confidence`` the fit allows; beside it the κ change and the cost saved.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.common import REPO, child_main, timed
from evaluation import storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.cascade import fit_bands, split_figures
from evaluation.calibration.metrics import Detection
from evaluation.calibration.run import run_calibration
from evaluation.cli.day import run_day
from evaluation.contract.config import JudgeName, RunConfig
from evaluation.stages import Stores
from evaluation.testing.correlated import CorrelatedJudges
from evaluation.testing.labelled import LabelledJudges
from evaluation.testing.openai_server import OpenAIServer

SETS = ("halueval-qa", "begin-wow")
#: The strong model's agreement with the labels, and the cheap model's in each scenario.
STRONG_ACCURACY = 0.95
CHEAP_ACCURACIES = (0.8, 0.9)
CHEAP, STRONG = "openai/gpt-4o-mini", "openai/gpt-4o"
MODELS = ("offline/lexical", CHEAP, STRONG)
JUDGES: list[JudgeName] = ["rag", "masis"]
DAY = dt.date(2026, 1, 1)
#: The κ a fitted band may lose against the strong model alone (on the fit split): the aim's, and a
#: tighter one that leaves room for what the fit split does not show.
LOSSES = (0.02, 0.01)


def _calibration(loss: float) -> str:
    return f"cal-bench-{loss:g}".replace(".", "p")


def _records(limit: int | None) -> list[dict[str, Any]]:
    found = []
    for name in SETS:
        lines = (REPO / "data" / "golden" / name / "records.jsonl").read_text(encoding="utf-8").splitlines()
        found += [json.loads(line) for line in lines[:limit]]
    return found


def _kappas(evaluations: pl.DataFrame, labels: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """Per judge, κ of fail against not faithful over ok rows: on the held-out split and on all."""
    joined = evaluations.filter(pl.col("judge_status") == "ok").join(labels, on="record_id")
    out: dict[str, dict[str, float | None]] = {}
    for judge in JUDGES:
        rows = joined.filter(pl.col("judge") == judge)
        held = rows.filter(pl.col("split") == "holdout")
        out[judge] = {name: Detection.of((part["verdict"] == "fail").to_numpy(), (~part["good"]).to_numpy()).kappa
                      for name, part in (("holdout", held), ("all", rows))}
    return out


def _trial(work: Path, records: list[dict[str, Any]], seed: int, cheap_accuracy: float) -> dict[str, Any]:
    """One trial: the server's models drawn with ``seed``, the cheap one agreeing with the labels
    ``cheap_accuracy`` of the time, the calibration's split seeded by ``seed``."""
    golden = work / "golden" / "labelled"
    golden.mkdir(parents=True)
    (golden / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    day = work / "logs" / f"dt={DAY}"
    day.mkdir(parents=True)
    (day / "records.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "labels"}) + "\n"
                                               for r in records), encoding="utf-8")
    result: dict[str, Any] = {"seed": seed}
    judges = LabelledJudges.from_records(records, {CHEAP: cheap_accuracy, STRONG: STRONG_ACCURACY}, seed=seed)
    with OpenAIServer(judges, models=("gpt-4o", "gpt-4o-mini")) as server:
        calibrated = work / "calibrated"
        for loss in LOSSES:  # the second calibration finds every reply in the ledger
            spec = CalibrationSpec.model_validate({
                "golden_uri": str(golden), "judges": JUDGES, "judge_model": STRONG, "api_base": server.base_url,
                "cascade": f"offline/lexical,{CHEAP}", "band_loss": loss, "seed": seed, "concurrency": 32})
            calibration, seconds = timed(run_calibration, storage.LocalStore(calibrated), storage.LocalStore(golden),
                                         spec, calibration=_calibration(loss), api_key="bench-key")
            result[f"calibration_{loss:g}"] = {"seconds": round(seconds, 1), "cascade": calibration["cascade"]}
        labels = pl.read_parquet(calibrated / storage.calibration_key(_calibration(LOSSES[0]), "labels.parquet"))
        runs = {"strong": (STRONG, ""), "cheap": (CHEAP, "")}
        runs.update({f"cascade_{loss:g}": (STRONG, f"offline/lexical@{_calibration(loss)},{CHEAP}@{_calibration(loss)}")
                     for loss in LOSSES})
        for name, (model, cascade) in runs.items():
            root = work / name  # its own output root: the run pays for its own calls
            for loss in LOSSES:
                key = storage.calibration_key(_calibration(loss), "cascade.parquet")
                (root / key).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(calibrated / key, root / key)
            cfg = RunConfig.model_validate({
                "date": DAY, "input_uri": str(work / "logs"), "output_uri": str(root), "run_id": f"bench-{name}",
                "judges": JUDGES, "judge_model": model, "api_base": server.base_url, "cascade": cascade,
                "concurrency": 32})
            before = server.request_count
            day_result, seconds = timed(run_day, cfg, Stores.open(cfg), api_key="bench-key")
            result[name] = {
                "cost_usd": day_result.cost_usd, "requests": server.request_count - before, "seconds": round(seconds, 1),
                "kappa": _kappas(pl.read_parquet(root / "evaluations"), labels), "cascade": day_result.cascade,
            }
    return result


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4)


def summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Per judge model alone and per cascade: cost and κ (held out and whole set) averaged over the
    trials, with each cascade's κ against the strong model's and its cost saved."""
    out: dict[str, Any] = {}
    for name in ["strong", "cheap", *(f"cascade_{loss:g}" for loss in LOSSES)]:
        row: dict[str, Any] = {"cost_usd": _mean([t[name]["cost_usd"] for t in trials])}
        for judge in JUDGES:
            for part in ("holdout", "all"):
                values = [t[name]["kappa"][judge][part] for t in trials]
                deltas = [t[name]["kappa"][judge][part] - t["strong"]["kappa"][judge][part] for t in trials]
                row[f"kappa_{judge}_{part}"] = _mean(values)
                row[f"delta_{judge}_{part}"] = _mean(deltas)
                row[f"delta_{judge}_{part}_range"] = [round(min(deltas), 4), round(max(deltas), 4)]
        row["saved_share"] = _mean([1 - t[name]["cost_usd"] / t["strong"]["cost_usd"] for t in trials])
        if name.startswith("cascade_"):
            shares = [[level["share_decided"] for level in t[name]["cascade"]["levels"]] for t in trials]
            row["share_decided"] = [_mean([s[i] for s in shares]) for i in range(len(shares[0]))]
        out[name] = row
    return out


def measure(params: dict[str, Any]) -> dict[str, Any]:
    """The child task: per cheap model's accuracy, ``trials`` trials (seeds 0, 1, ...), each
    calibrating the cascade twice and judging the set through the runs; their costs and κ, and the
    averages."""
    records = _records(int(params["per_set"]) if params.get("per_set") else None)
    scenarios = []
    for accuracy in params.get("cheap_accuracies", CHEAP_ACCURACIES):
        trials = []
        for seed in range(int(params.get("trials", 3))):
            with tempfile.TemporaryDirectory(prefix=f"bench-cascade-{seed}-", ignore_cleanup_errors=True) as work:
                trials.append(_trial(Path(work), records, seed, float(accuracy)))
        scenarios.append({"cheap_accuracy": float(accuracy), "trials": trials, "summary": summary(trials)})
    return {"records": len(records), "sets": list(SETS), "strong_accuracy": STRONG_ACCURACY, "judges": JUDGES,
            "losses": list(LOSSES), "scenarios": scenarios}


#: The simulated levels' agreement with the labels: the offline judge's, then the cheap model's
#: (each of :data:`CHEAP_ACCURACIES`), then the strong one's.
OFFLINE_ACCURACY = 0.7
#: Correlations of the levels' mistakes through a record's difficulty (0: independent).
RHOS = (0.0, 0.5, 0.8)
#: Each level's cost per row: the offline judge is free, the cheap model at gpt-4o-mini's input price
#: over gpt-4o's (0.15 against 2.50 USD a million tokens).
SIMULATED_COSTS = [0.0, 0.06, 1.0]
BAND_LOSS, BAND_CONFIDENCE, CUT = 0.02, 0.9, 0.6


def _interval(count: int, trials: int) -> list[float]:
    """The two-sided 95% Clopper–Pearson interval of ``count`` in ``trials``."""
    from scipy.stats import beta  # heavy import: this task only

    low = float(beta.ppf(0.025, count, trials - count + 1)) if count else 0.0
    high = float(beta.ppf(0.975, count + 1, trials - count)) if count < trials else 1.0
    return [round(low, 4), round(high, 4)]


def _cell(judges: CorrelatedJudges, fit_records: int, fits: int, population: int, seed: int) -> dict[str, Any]:
    """``fits`` fits on fresh fit splits of ``fit_records``, each fitted cascade measured on one
    population of ``population`` new records: how often its disagreement with the strong judge exceeds
    :data:`BAND_LOSS`, and its κ change and cost saved there."""
    rng = np.random.default_rng(seed)
    future, future_labels = judges.draw(population, rng, split="holdout", prefix="p")
    disagreements, deltas, saved = [], [], []
    for _ in range(fits):
        levels, labels = judges.draw(fit_records, rng)
        bands = fit_bands(levels, labels, ["rag"], [None, None], BAND_LOSS, cut=CUT, confidence=BAND_CONFIDENCE,
                          costs=SIMULATED_COSTS)
        figures = split_figures(future, future_labels, "rag", [band["rag"] for band in bands], SIMULATED_COSTS)
        disagreements.append(float(figures["disagreement"] or 0.0))
        deltas.append(float(figures["kappa"] or 0.0) - float(figures["kappa_alone"] or 0.0))
        saved.append(1 - float(figures["cost"] or 0.0) / float(figures["cost_alone"] or 1.0))
    beyond = sum(d > BAND_LOSS for d in disagreements)
    kappa_beyond = sum(d < -BAND_LOSS for d in deltas)
    return {
        "rho": judges.rho, "cheap_accuracy": judges.accuracies[1], "fit_records": fit_records, "fits": fits,
        "population": population, "seed": seed,
        "violations": beyond, "violation_share": round(beyond / fits, 4), "violation_interval": _interval(beyond, fits),
        "disagreement_mean": round(float(np.mean(disagreements)), 4),
        "disagreement_p90": round(float(np.quantile(disagreements, 0.9)), 4),
        "kappa_delta_mean": round(float(np.mean(deltas)), 4),
        "kappa_delta_p05": round(float(np.quantile(deltas, 0.05)), 4),
        "kappa_loss_beyond_band_loss": round(kappa_beyond / fits, 4),
        "kappa_loss_interval": _interval(kappa_beyond, fits),
        "saved_mean": round(float(np.mean(saved)), 4),
    }


def guarantee(params: dict[str, Any]) -> dict[str, Any]:
    """The child task: per cheap model's accuracy, correlation and fit split's size, one
    :func:`_cell` (seeds 0, 1, ... in that order)."""
    fits, population = int(params.get("fits", 200)), int(params.get("population", 100_000))
    cells, seed = [], 0
    for accuracy in params.get("cheap_accuracies", CHEAP_ACCURACIES):
        for rho in params.get("rhos", RHOS):
            for fit_records in params.get("fit_records", (300, 1000)):
                judges = CorrelatedJudges((OFFLINE_ACCURACY, float(accuracy), STRONG_ACCURACY), rho=float(rho), cut=CUT)
                cells.append(_cell(judges, int(fit_records), fits, population, seed))
                seed += 1
    return {"band_loss": BAND_LOSS, "band_confidence": BAND_CONFIDENCE, "costs": SIMULATED_COSTS,
            "accuracies": {"offline": OFFLINE_ACCURACY, "strong": STRONG_ACCURACY}, "cells": cells}


if __name__ == "__main__":
    child_main({"measure": measure, "guarantee": guarantee})
