"""The alert simulation (a child of :mod:`bench.run`, item 9): how often the daily report's flags
page on steady days, and how often (and for how long) they show a planted drop, when days drift.

Each trial is a window of days of three models × three judges (rag, masis, prompt), simulated as
``daily_summary`` rows and fed to the report's own code (:func:`evaluation.report.compute.assess_days`,
which replays the window through :mod:`evaluation.report.monitor`, then
:func:`evaluation.report.alerts.build_headline`): no pipeline run, only the flags.

* A model's day: each judge's verdicts are drawn ``multinomial(n, (pass, borderline, fail))``
  from its usual shares, with a **day effect** ``u ~ N(0, sd)`` added to every judge's pass share
  (taken from the fail share): day-to-day drift shared across a model's judges. Scores are drawn
  per verdict band (pass in [0.8, 1], borderline [0.6, 0.8), fail [0.1, 0.6)); a judge's headline
  metrics follow its score with their own noise.
* **Steady cells** (sd, records a model a day): windows of 7 history days and one test day;
  *paged* when the test day's headline pages on any of the three models. One test day a window,
  so the days are independent.
* **Drop cells**: 7 history days, then 5 days on which one model's pass share drops by the size
  in all judges or in rag alone (its fail share rises as much). Caught on day 1 (it pages on day
  1) and *shown regressed on day 5*; ``other_paged``: another model paged in the window.

Intervals are Wilson 95% intervals of the share of windows.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from bench.common import child_main
from evaluation.report import wilson_interval

if TYPE_CHECKING:
    from evaluation.report.summary import HeadlineLine

FIRST_DAY = dt.date(2026, 3, 1)
HISTORY = 7
DROP_DAYS = 5
MODELS = ("model-a", "model-b", "model-c")
#: Each judge's usual (pass, borderline) shares; fail is the rest.
JUDGE_SHARES = {"rag": (0.70, 0.15), "masis": (0.65, 0.15), "prompt": (0.75, 0.10)}
METRICS_OF = {"rag": ("faithfulness", "answer_relevance", "context_relevance"),
              "masis": ("faithfulness", "relevance", "completeness"), "prompt": ()}
BANDS = ((0.8, 1.0), (0.6, 0.8), (0.1, 0.6))


def _mean_std(rng: np.random.Generator, counts: list[int], noise: float) -> tuple[float, float]:
    """The mean and sd of scores drawn uniformly in each verdict band (each band's sum drawn as a normal)."""
    n = sum(counts)
    centres = [(a + b) / 2 for a, b in BANDS]
    spreads = [(b - a) ** 2 / 12 + noise * noise for a, b in BANDS]
    draws = rng.standard_normal(3)
    total = sum(k * c + z * math.sqrt(max(k, 1) * v) for k, c, v, z in zip(counts, centres, spreads, draws, strict=True))
    mean = total / n
    within = sum(k * (v + (c - mean) ** 2) for k, c, v in zip(counts, centres, spreads, strict=True))
    return min(1.0, max(0.0, mean)), math.sqrt(within / max(n - 1, 1))


def _row(rng: np.random.Generator, day: dt.date, model: str, judge: str, n: int, shift: float) -> dict[str, Any]:
    """One simulated ``daily_summary`` row: ``shift`` added to the judge's pass share."""
    passing, border = JUDGE_SHARES[judge]
    p = min(0.99, max(0.01, passing + shift))
    probs = np.array([p, border, max(0.0, 1.0 - p - border)])
    counts = [int(c) for c in rng.multinomial(n, probs / probs.sum())]
    row: dict[str, Any] = {"dt": day, "model": model, "judge": judge, "rows": n, "n_ok": n,
                           "n_pass": int(counts[0]), "n_borderline": int(counts[1]), "n_fail": int(counts[2])}
    for metric, noise in (("score", 0.0), *((m, 0.05) for m in METRICS_OF[judge])):
        mean, std = _mean_std(rng, counts, noise)
        row.update({f"{metric}_n": n, f"{metric}_mean": mean, f"{metric}_std": std})
    return row


def _window(rng: np.random.Generator, days: int, volume: int, sd: float,
            drop: tuple[str, float, tuple[str, ...]] | None) -> dict[tuple[str, str], dict[dt.date, dict[str, Any]]]:
    """``days`` days of rows; ``drop`` = (model, size, judges) from day :data:`HISTORY` on."""
    rows: dict[tuple[str, str], dict[dt.date, dict[str, Any]]] = {}
    for index in range(days):
        day = FIRST_DAY + dt.timedelta(days=index)
        for model in MODELS:
            effect = rng.normal(0.0, sd) if sd > 0 else 0.0
            for judge in JUDGE_SHARES:
                dropped = drop is not None and index >= HISTORY and model == drop[0] and judge in drop[2]
                shift = effect - (drop[1] if dropped and drop is not None else 0.0)
                rows.setdefault((model, judge), {})[day] = _row(rng, day, model, judge, volume, shift)
    return rows


def _headlines(rows: dict[tuple[str, str], dict[dt.date, dict[str, Any]]], days: list[dt.date]) -> list[list[HeadlineLine]]:
    """The report's headline of each of ``days`` (the project's own flag code)."""
    from evaluation.report.alerts import AlertPolicy, build_headline
    from evaluation.report.compute import assess_days

    assessed = assess_days(rows, days, AlertPolicy())
    return [build_headline(list(MODELS), assessed[day][1], assessed[day][2]) for day in days]


def _cell(hits: int, n: int) -> dict[str, Any]:
    low, high = wilson_interval(hits, n) or (0.0, 1.0)
    return {"hits": hits, "n": n, "rate": hits / n if n else None, "ci95": [low, high]}


def steady(rng: np.random.Generator, volume: int, sd: float, windows: int) -> dict[str, Any]:
    """Windows of 7 history days and a steady test day: days that page, days showing a regression."""
    paged, shown, too_few = 0, 0, 0
    test_day = FIRST_DAY + dt.timedelta(days=HISTORY)
    for _ in range(windows):
        (lines,) = _headlines(_window(rng, HISTORY + 1, volume, sd, None), [test_day])
        paged += any(line.pages for line in lines)
        shown += any(line.status == "regressed" for line in lines)
        too_few += sum(line.status == "too_few" for line in lines)
    return {"volume": volume, "sd": sd, "paged": _cell(paged, windows), "shown_regressed": _cell(shown, windows),
            "too_few_share": too_few / (windows * len(MODELS))}


def drops(rng: np.random.Generator, volume: int, sd: float, size: float, judges: tuple[str, ...],
          windows: int) -> dict[str, Any]:
    """Windows with a sustained drop of ``MODELS[0]``: caught on day 1, shown on day 5, pages."""
    model = MODELS[0]
    days = [FIRST_DAY + dt.timedelta(days=HISTORY + i) for i in range(DROP_DAYS)]
    day1, day5, ever, pages, others = 0, 0, 0, 0, 0
    for _ in range(windows):
        per_day = _headlines(_window(rng, HISTORY + DROP_DAYS, volume, sd, (model, size, judges)), days)
        status = [next(line for line in lines if line.model == model) for lines in per_day]
        day1 += status[0].status == "regressed"
        day5 += status[-1].status == "regressed"
        ever += any(s.status == "regressed" for s in status)
        pages += sum(s.pages for s in status)
        others += any(line.pages for lines in per_day for line in lines if line.model != model)
    return {"volume": volume, "sd": sd, "size": size, "judges": "all" if len(judges) > 1 else judges[0],
            "day1": _cell(day1, windows), "day5": _cell(day5, windows), "caught_by_day5": _cell(ever, windows),
            "pages_per_window": pages / windows, "other_paged": _cell(others, windows)}


def _run_cell(task: tuple[int, str, tuple[Any, ...]]) -> dict[str, Any]:
    """One cell with its own generator (seeded by the run's seed and the cell's index), and the
    seconds it took."""
    seed, kind, args = task
    rng = np.random.default_rng(seed)
    started, cpu = time.monotonic(), time.process_time()
    out = steady(rng, *args) if kind == "steady" else drops(rng, *args)
    out.update(seconds=round(time.monotonic() - started, 1), cpu_seconds=round(time.process_time() - cpu, 1))
    print(f"alerts: {kind} {args}: {out['seconds']} s ({out['cpu_seconds']} s of CPU)", file=sys.stderr, flush=True)
    return out


def simulate(params: dict[str, Any]) -> dict[str, Any]:
    """Steady and drop cells over volumes × day-to-day sds, in this process or on ``workers``
    processes (1: the machine is shared); see the module docstring. Each cell has its own seed, so
    the figures do not depend on the workers."""
    seed = int(params.get("seed", 20261127))
    volumes, sds = [int(v) for v in params["volumes"]], [float(s) for s in params["sds"]]
    sizes = [float(s) for s in params["sizes"]]
    # days without drift are far from the goal (the prior's day-to-day sd is then all excess):
    # fewer windows decide them
    quiet = int(params.get("steady_windows_no_drift", params["steady_windows"]))
    cells: list[tuple[str, tuple[Any, ...]]] = [
        ("steady", (v, sd, quiet if sd == 0 else int(params["steady_windows"]))) for sd in sds for v in volumes]
    cells += [("drop", (v, sd, size, judges, int(params["drop_windows"])))
              for sd in sds for v in volumes for size in sizes for judges in (tuple(JUDGE_SHARES), ("rag",))]
    started = time.monotonic()
    tasks = [(seed * 1000 + index, kind, args) for index, (kind, args) in enumerate(cells)]
    workers = int(params.get("workers", 1))
    if workers <= 1:
        done = [_run_cell(task) for task in tasks]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            done = list(pool.map(_run_cell, tasks))
    return {"steady": [c for c, (kind, _) in zip(done, cells, strict=True) if kind == "steady"],
            "drops": [c for c, (kind, _) in zip(done, cells, strict=True) if kind == "drop"],
            "history_days": HISTORY, "drop_days": DROP_DAYS, "models": len(MODELS), "seed": seed,
            "params": params, "seconds": round(time.monotonic() - started, 1)}


def table(result: dict[str, Any]) -> str:
    """The simulation's two tables as Markdown (what docs/alerts.md quotes)."""
    def pct(cell: dict[str, Any]) -> str:
        low, high = cell["ci95"]
        return f"{cell['hits']}/{cell['n']} = {cell['rate']:.1%} ({low:.1%}–{high:.1%})"

    out = ["| day-to-day sd | records a model a day | steady days that paged (95% CI) | showing a regression | "
           "models 'too few records' |", "|---|---|---|---|---|"]
    out += [f"| {c['sd'] * 100:g} pp | {c['volume']:,} | {pct(c['paged'])} | {pct(c['shown_regressed'])} | "
            f"{c['too_few_share']:.0%} |" for c in result["steady"]]
    out += ["", "| day-to-day sd | records a model a day | drop | in | caught on day 1 (95% CI) | shown regressed on "
            "day 5 | pages a window | another model paged |", "|---|---|---|---|---|---|---|---|"]
    out += [f"| {c['sd'] * 100:g} pp | {c['volume']:,} | {c['size'] * 100:g} pp | {c['judges']} | {pct(c['day1'])} | "
            f"{pct(c['day5'])} | {c['pages_per_window']:.2f} | {pct(c['other_paged'])} |" for c in result["drops"]]
    return "\n".join(out)


if __name__ == "__main__":
    child_main({"simulate": simulate, "table": lambda params: {"table": table(params)}})
