"""Cascade judging (a child of :mod:`bench.run`): on a labelled set, the cost and κ of the strong
judge model alone, the cheap one alone and the cascade (the offline judge, then the cheap model,
then the strong one).

The set is the repository's two shipped golden sets together (HaluEval QA and BEGIN, 300 records
each). The local server answers as two judge models of known accuracy
(:class:`evaluation.testing.labelled.LabelledJudges`): ``gpt-4o-mini`` agrees with the labels 80% of
the time, ``gpt-4o`` 95%, their scores closer to the verdict's cut where they err; litellm prices
their tokens at its online prices for those two models. ``calibrate --cascade`` fits the bands on
the calibration's fit split (half of each label class), once with ``band_loss`` 0.02 and once with
0.01; then the set, as a day of logs, is judged through ``run`` — strong alone, cheap alone, the
cascade with each calibration's bands — each into its own output root, so each pays for its own
calls. The whole is repeated over ``trials`` seeds (the models' draws and the fit / held-out split
both change with the seed), and averaged: one split of 600 records leaves κ a few hundredths of
noise either way. κ is that of ``fail``
against not faithful, per judge (rag, masis), on the held-out split (the records the bands were not
fitted to) and on the whole set; cost is what each run paid (``runs.cost_usd``).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import REPO, child_main
from evaluation import storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.metrics import Detection
from evaluation.calibration.run import run_calibration
from evaluation.contract import RunConfig
from evaluation.day import run_day
from evaluation.stages import Stores
from evaluation.testing.labelled import LabelledJudges
from evaluation.testing.openai_server import OpenAIServer

SETS = ("halueval-qa", "begin-wow")
ACCURACY = {"gpt-4o-mini": 0.8, "gpt-4o": 0.95}
CHEAP, STRONG = "openai/gpt-4o-mini", "openai/gpt-4o"
JUDGES = ["rag", "masis"]
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


def _trial(work: Path, records: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """One trial: the server's models drawn with ``seed``, the calibration's split seeded by it."""
    golden = work / "golden" / "labelled"
    golden.mkdir(parents=True)
    (golden / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    day = work / "logs" / f"dt={DAY}"
    day.mkdir(parents=True)
    (day / "records.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "labels"}) + "\n"
                                               for r in records), encoding="utf-8")
    result: dict[str, Any] = {"seed": seed}
    judges = LabelledJudges.from_records(records, ACCURACY, seed=seed)
    with OpenAIServer(judges, models=("gpt-4o", "gpt-4o-mini")) as server:
        calibrated = work / "calibrated"
        for loss in LOSSES:  # the second calibration finds every reply in the ledger
            spec = CalibrationSpec.model_validate({
                "golden_uri": str(golden), "judges": JUDGES, "judge_model": STRONG, "api_base": server.base_url,
                "cascade": f"offline/lexical,{CHEAP}", "band_loss": loss, "seed": seed, "concurrency": 32})
            started = time.monotonic()
            calibration = run_calibration(storage.LocalStore(calibrated), storage.LocalStore(golden), spec,
                                          calibration=_calibration(loss), api_key="bench-key")
            result[f"calibration_{loss:g}"] = {"seconds": round(time.monotonic() - started, 1),
                                               "cascade": calibration["cascade"]}
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
            started = time.monotonic()
            day_result = run_day(cfg, Stores.open(cfg), api_key="bench-key")
            result[name] = {
                "cost_usd": day_result.cost_usd, "requests": server.request_count - before,
                "seconds": round(time.monotonic() - started, 1),
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
    """The child task: ``trials`` trials (seeds 0, 1, ...), each calibrating the cascade twice and
    judging the set through the runs; their costs and κ, and the averages."""
    records = _records(int(params["per_set"]) if params.get("per_set") else None)
    trials = []
    for seed in range(int(params.get("trials", 3))):
        work = Path(tempfile.mkdtemp(prefix=f"bench-cascade-{seed}-"))
        try:
            trials.append(_trial(work, records, seed))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {"records": len(records), "sets": list(SETS), "accuracy": ACCURACY, "judges": JUDGES,
            "losses": list(LOSSES), "trials": trials, "summary": summary(trials)}


if __name__ == "__main__":
    child_main({"measure": measure})
