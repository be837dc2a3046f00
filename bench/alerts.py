"""The alert simulation (a child of :mod:`bench.run`, item 9): how often the daily report raises
an alert on a steady day, and how often it catches a planted regression, by size and volume.

Every simulated day goes through the real pipeline: generated logs (:mod:`evaluation.synthetic`,
the three assistants drawn from fixed mixtures of grounded, hallucinated and refusing answers),
:func:`evaluation.day.run_day` with the offline judge (ingest, validation, judging, scoring,
landing, ``daily_summary``) and the daily report it writes (``summary.json``), whose
``headline``/``alerting`` are counted. For each volume (records per model per day):

* a timeline of steady days; from the eighth day on (a full trailing week behind it) each is a
  steady test day: a **false-alarm day** is one whose report alerts on any model;
* planted regressions: on a steady day's date, :data:`REGRESSED_MODEL`'s grounded share drops by
  ``size / gap`` (``gap``: how much more often a grounded answer passes the rag judge than a
  hallucinated one, measured first on two calibration days), so its expected rag pass rate drops
  by ``size``; that day is evaluated in an output root of its own that holds the timeline's
  previous seven ``daily_summary`` partitions. **Detected**: the report alerts on the regressed
  model; the other two models alerting that day are counted too.
"""

from __future__ import annotations

import datetime as dt
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import child_main

REGRESSED_MODEL = "assistant-v2"
FIRST_DAY = dt.date(2026, 3, 1)
HISTORY = 7
RUN: dict[str, Any] = {"judge_model": "offline/lexical", "chunk_size": 2000, "concurrency": 32}


def _run(raw: Path, out: Path, day: dt.date, records: int, behaviour: dict[str, tuple[float, float, float]] | None,
         run_id: str) -> dict[str, Any]:
    """Generate ``day`` (``records`` valid records over the three models), run every stage on it,
    and return the report's ``summary.json``."""
    from evaluation import storage, synthetic
    from evaluation.contract import RunConfig
    from evaluation.day import run_day
    from evaluation.stages import Stores

    synthetic.write_day(storage.open_store(str(raw)), day, records, behaviour=behaviour)
    cfg = RunConfig(date=day, input_uri=str(raw), output_uri=str(out), run_id=run_id, **RUN)
    run_day(cfg, Stores.open(cfg))
    summary: dict[str, Any] = storage.read_json(storage.open_store(str(out)), storage.report_key(day, "summary.json"))
    return summary


def _rag_pass_rate(summary: dict[str, Any], model: str) -> float:
    group = next(g for g in summary["groups"] if g["model"] == model and g["judge"] == "rag")
    value: float = group["rates"]["pass"]["value"]
    return value


def _gap(root: Path, records: int) -> dict[str, float]:
    """The rag pass rate of all-grounded and all-hallucinated answers, and their difference."""
    from evaluation import synthetic

    rates = {}
    for name, mixture in (("grounded", (1.0, 0.0, 0.0)), ("hallucinated", (0.0, 1.0, 0.0))):
        summary = _run(root / name / "raw", root / name / "out", FIRST_DAY, 3 * records,
                       dict.fromkeys(synthetic.MODELS, mixture), f"calibration-{name}")
        rates[name] = sum(_rag_pass_rate(summary, m) for m in synthetic.MODELS) / len(synthetic.MODELS)
    return {**rates, "gap": rates["grounded"] - rates["hallucinated"]}


def _regressed(size: float, gap: float) -> tuple[float, float, float]:
    """:data:`REGRESSED_MODEL`'s mixture with ``size / gap`` of its grounded share hallucinating."""
    from evaluation import synthetic

    grounded, hallucinated, refusing = synthetic.MODEL_BEHAVIOUR[REGRESSED_MODEL]
    shift = size / gap
    if shift > grounded:
        raise ValueError(f"a {size:.0%} drop needs more than {REGRESSED_MODEL}'s grounded share {grounded}")
    return grounded - shift, hallucinated + shift, refusing


def _copy_history(out: Path, target: Path, day: dt.date) -> None:
    """The steady timeline's ``daily_summary`` partitions of the seven days before ``day``, each
    committed in ``target`` as its day."""
    from evaluation import storage

    past_days = [day - dt.timedelta(days=back) for back in range(1, HISTORY + 1)]
    landed = storage.read_landed(storage.LocalStore(out), past_days)
    for past in past_days:
        key = landed.key("daily_summary", past)
        if key is None:
            raise ValueError(f"the steady timeline has no daily_summary of {past}")
        (target / key).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / key, target / key)
        storage.commit_day(storage.LocalStore(target), past, landed.commits[past].run_id or "history",
                           {"daily_summary": key})


def simulate(params: dict[str, Any]) -> dict[str, Any]:
    """Steady days and planted regressions per volume; see the module docstring."""
    volumes = [int(v) for v in params["volumes"]]
    sizes = [float(s) for s in params["sizes"]]
    steady_days, trials = int(params["steady_days"]), int(params["trials"])
    if trials > steady_days:
        raise ValueError("trials must not exceed steady_days (each trial takes a steady day's date)")
    root = Path(tempfile.mkdtemp(prefix="bench-alerts-"))
    started = time.monotonic()
    try:
        gap = _gap(root / "calibration", int(params.get("calibration_records", 300)))
        steady: list[dict[str, Any]] = []
        regressions: list[dict[str, Any]] = []
        for volume in volumes:
            raw, out = root / f"steady-{volume}" / "raw", root / f"steady-{volume}" / "out"
            days = [FIRST_DAY + dt.timedelta(days=i) for i in range(HISTORY + steady_days)]
            alerted, flagged, flags = 0, 0, 0
            for index, day in enumerate(days):
                summary = _run(raw, out, day, 3 * volume, None, f"steady-{day}")
                if index >= HISTORY:
                    alerted += bool(summary["alerting"])
                    flagged += bool(summary["flags"])
                    flags += len(summary["flags"])
            steady.append({"volume": volume, "days": steady_days, "alert_days": alerted, "flag_days": flagged,
                           "flags": flags})
            for size in sizes:
                mixture = _regressed(size, gap["gap"])
                caught, others, drops = 0, 0, []
                for trial in range(trials):
                    day = days[HISTORY + trial]
                    scratch = root / f"regression-{volume}-{size}-{trial}"
                    _copy_history(out, scratch / "out", day)
                    summary = _run(scratch / "raw", scratch / "out", day, 3 * volume, {REGRESSED_MODEL: mixture},
                                   f"regression-{day}")
                    caught += REGRESSED_MODEL in summary["alerting"]
                    others += any(m != REGRESSED_MODEL for m in summary["alerting"])
                    group = next(g for g in summary["groups"] if g["model"] == REGRESSED_MODEL and g["judge"] == "rag")
                    trailing = group["rates"]["pass"]["trailing_7d"]
                    drops.append(-trailing["delta"])
                    shutil.rmtree(scratch)
                regressions.append({"volume": volume, "size": size, "trials": trials, "detected": caught,
                                    "other_models_alerted": others, "mixture": mixture,
                                    "mean_observed_drop": sum(drops) / len(drops)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"gap": gap, "steady": steady, "regressions": regressions, "model": REGRESSED_MODEL,
            "seconds": round(time.monotonic() - started, 1)}


if __name__ == "__main__":
    child_main({"simulate": simulate})
