"""Flags and alerts of the daily report (evaluation.report.alerts, CONTRACT §7): the test's
p-values, the day-to-day variance, the minimum effect, which flags alert, the severity order, the
headline, and the thresholds in force with their source."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.main import main as cli_main
from evaluation.report import AlertPolicy, build_daily_report
from evaluation.report.alerts import severity_key
from evaluation.report.monitor import Daily, compare_day, day_variance, reference_of, t_sf
from evaluation.report.summary import Flag
from tests.unit.report.test_report import DAY, land_day, row

WEEK = [DAY - dt.timedelta(days=i) for i in range(7, -1, -1)]


def scores(rng: random.Random, centre: float, n: int) -> list[float]:
    return [round(min(1.0, max(0.0, rng.gauss(centre, 0.12))), 3) for _ in range(n)]


def land_week(store: storage.Store, centres: dict[str, list[float]], n: int = 120, seed: int = 1) -> None:
    """Eight days of prompt-judge rows per model, the model's daily centre given per day."""
    for index, day in enumerate(WEEK):
        rng = random.Random(f"{seed}-{day}")
        rows = [row(day, model, "prompt", i, score=v)
                for model, days in centres.items() for i, v in enumerate(scores(rng, days[index], n))]
        land_day(store, day, rows)


def test_two_sided_p_matches_the_t_and_normal_distributions() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 5, 29, 30, 120, 5000):
        for t in (0.0, 0.5, 1.96, 3.0, 8.0):
            assert math.isclose(2 * t_sf(abs(t), df), 2 * float(scipy_stats.t.sf(t, df)), rel_tol=1e-8, abs_tol=1e-15)
    assert math.isclose(2 * t_sf(1.959963984540054, None), 0.05, rel_tol=1e-9)


def test_day_to_day_variance_widens_the_test_and_never_collapses() -> None:
    quiet = [Daily(v, 200, 0.0225) for v in (0.70, 0.71, 0.70, 0.69, 0.70, 0.71, 0.70)]
    wobbly = [Daily(v, 200, 0.0225) for v in (0.62, 0.78, 0.66, 0.75, 0.60, 0.80, 0.69)]
    tau_quiet, own_quiet, df = day_variance(quiet, 0.03, 1.0)
    assert own_quiet == 0.0 and df == 7.0 and math.isclose(tau_quiet, 0.03**2 / 7)  # the prior keeps it above 0
    tau_wobbly, own, _ = day_variance(wobbly, 0.03, 1.0)
    assert own is not None and math.isclose(own, statistics.variance(d.value for d in wobbly) - 0.0225 / 200)
    assert math.isclose(tau_wobbly, (0.03**2 + 6 * own) / 7)
    tau_new, own_new, df_new = day_variance(wobbly[:1], 0.03, 1.0)  # a new model: the prior alone
    assert math.isclose(tau_new, 0.03**2) and own_new is None and df_new == 1.0
    policy = AlertPolicy()
    history = {DAY - dt.timedelta(days=i + 1): d for i, d in enumerate(quiet)}
    narrow = compare_day("metric", "score", Daily(0.62, 200, 0.0225), reference_of(history, policy))  # type: ignore[arg-type]
    history = {DAY - dt.timedelta(days=i + 1): d for i, d in enumerate(wobbly)}
    wide = compare_day("metric", "score", Daily(0.62, 200, 0.0225), reference_of(history, policy))  # type: ignore[arg-type]
    assert narrow is not None and wide is not None and narrow.p_worse is not None and wide.p_worse is not None
    assert narrow.p_worse < 0.005 and wide.p_worse > 0.05 and wide.se > 2 * narrow.se


def _drifting_days(rng: random.Random, days: int, n: int, sd: float, p: float = 0.8) -> list[Daily]:
    out = []
    for _ in range(days):
        rate = min(0.99, max(0.01, p + rng.gauss(0.0, sd)))
        count = sum(rng.random() < rate for _ in range(n))
        out.append(Daily(count / n, n, (count / n) * (1 - count / n), count))
    return out


@pytest.mark.parametrize(("history_days", "sd"), [(2, 0.03), (4, 0.03)])
def test_a_rate_test_keeps_its_level_under_drift_with_few_days(history_days: int, sd: float) -> None:
    """Steady days whose pass rate drifts by ``sd`` from day to day, few days of history, 600
    records a day: the one-sided test rejects at about its nominal 5% (a test that ignored the
    drift, or took its variance as 0 with few days, rejects several times as often)."""
    rng = random.Random(f"drift-{history_days}-{sd}")
    policy = AlertPolicy()
    trials, rejected = 1500, 0
    for _ in range(trials):
        *past, today = _drifting_days(rng, history_days + 1, 600, sd)
        ref = reference_of({DAY - dt.timedelta(days=i + 1): d for i, d in enumerate(reversed(past))}, policy)
        test = compare_day("rate", "pass", today, ref)  # type: ignore[arg-type]
        assert test is not None and test.p_worse is not None
        rejected += test.p_worse < 0.05
    assert rejected / trials <= 0.065  # nominal 5%; the binomial sd of 1,500 trials is 0.6 pp


def test_a_rate_tests_tail_keeps_its_level_under_5_pp_drift_at_150_records() -> None:
    """A week of history at 150 records a day whose pass rate drifts by 5 pp: the one-sided test's
    tail at 1% holds, with about 7 degrees of freedom (the days' spread estimates the drift and
    their sampling noise together; counting the degrees of freedom on the drift alone gave about
    20 and rejected at twice the level)."""
    rng = random.Random("tail-150-5pp")
    policy = AlertPolicy()
    trials, rejected, dfs = 3000, 0, []
    for _ in range(trials):
        *past, today = _drifting_days(rng, 8, 150, 0.05, p=0.7)
        ref = reference_of({DAY - dt.timedelta(days=i + 1): d for i, d in enumerate(reversed(past))}, policy)
        test = compare_day("rate", "pass", today, ref)  # type: ignore[arg-type]
        assert test is not None and test.p_worse is not None and test.df is not None
        rejected += test.p_worse < 0.01
        dfs.append(test.df)
    assert rejected / trials <= 0.015  # nominal 1%; the binomial sd of 3,000 trials is 0.18 pp
    assert 5.0 <= statistics.median(dfs) <= 10.0


def test_small_counts_use_the_exact_tail() -> None:
    """20 records at a 97% pass rate: one failure more than usual is no evidence (the normal
    approximation would call 18 of 20 significant)."""
    policy = AlertPolicy()
    history = {DAY - dt.timedelta(days=i + 1): Daily(0.97, 20, 0.97 * 0.03, 19 if i % 3 else 20) for i in range(7)}
    ref = reference_of(history, policy)
    assert ref is not None
    test = compare_day("rate", "pass", Daily(0.9, 20, 0.09, 18), ref)
    assert test is not None and test.p_worse is not None and test.p_worse > 0.1


def test_the_day_to_day_variance_excludes_the_tested_day(tmp_path: Path) -> None:
    """Seven alike days and a collapse today: the variance the test uses comes from the seven
    days alone (today's outlier does not widen its own test)."""
    store = storage.open_store(str(tmp_path / "out"))
    land_week(store, {"m": [0.75] * 7 + [0.40]})
    _, summary = build_daily_report(store, DAY)
    score = summary["groups"][0]["metrics"]["score"]
    assert score["reference"]["days"] == [d.isoformat() for d in WEEK[:-1]]
    assert score["day_to_day"]["own_sd"] < 0.02 and score["day_to_day"]["days"] == 7
    assert summary["headline"][0]["status"] == "regressed" and summary["headline"][0]["pages"]


def test_a_model_varying_day_to_day_does_not_flag_within_its_usual_range(tmp_path: Path) -> None:
    """The same drop today: flagged for a model whose days are alike, not for one whose days swing
    as much every week."""
    store = storage.open_store(str(tmp_path / "out"))
    land_week(store, {"quiet": [0.75] * 7 + [0.66], "wobbly": [0.65, 0.85, 0.68, 0.84, 0.64, 0.86, 0.75, 0.66]})
    _, summary = build_daily_report(store, DAY)
    flagged = {(f["model"], f["measure"]) for f in summary["flags"]}
    assert ("quiet", "score_mean") in flagged and ("wobbly", "score_mean") not in flagged
    wobbly = next(g for g in summary["groups"] if g["model"] == "wobbly")["metrics"]["score"]
    assert wobbly["day_to_day"]["days"] == 7 and wobbly["day_to_day"]["sd"] > 0.05
    assert [line["model"] for line in summary["headline"] if line["status"] == "regressed"] == ["quiet"]


def test_minimum_effect_and_headline_measures(tmp_path: Path) -> None:
    """A significant change below the minimum effect is no flag; a flag on a non-headline metric
    never alerts; lowering the minimum effect through the policy flags the small change."""
    store = storage.open_store(str(tmp_path / "out"))
    for day in WEEK:
        rng = random.Random(str(day))
        shift = 0.015 if day == DAY else 0.0  # small, on a large day: significant, not practical
        rows = []
        for i in range(1500):
            base = min(1.0, max(0.0, rng.gauss(0.7, 0.1)))
            context = 0.3 if day == DAY else 0.8  # a non-headline rag metric collapses
            rows.append(row(day, "big", "rag", i, score=round(base - shift, 3), faithfulness=round(base - shift, 2),
                            answer_relevance=round(base - shift, 2), context_relevance=context))
        land_day(store, day, rows)
    quiet = AlertPolicy(prior_day_sd=0.0)  # no prior day-to-day variation: the alike days make 0.015 significant
    _, summary = build_daily_report(store, DAY, policy=quiet)
    assert {f["measure"] for f in summary["flags"]} == {"context_relevance_mean"}
    assert all(not f["alerts"] and not f["headline"] and f["assessment"] == "worse" for f in summary["flags"])
    assert summary["alerting"] == [] and summary["headline"][0]["status"] == "steady"
    score = summary["groups"][0]["metrics"]["score"]["trailing_7d"]
    assert score["p_adjusted"] < 0.05 and not score["flagged"]
    _, strict = build_daily_report(store, DAY, policy=AlertPolicy(prior_day_sd=0.0, min_metric_effect=0.01))
    assert strict["alerting"] == ["big"] and ("rag", "score_mean") in {
        (c["judge"], c["measure"]) for c in strict["headline"][0]["changes"]}
    assert strict["method"]["alerts"]["min_metric_effect"] == 0.01


def test_flags_are_sorted_by_severity_and_the_worst_regression_leads(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land_week(store, {"a-small": [0.75] * 7 + [0.67], "b-large": [0.75] * 7 + [0.45], "c-steady": [0.75] * 8,
                      "d-better": [0.6] * 7 + [0.72]})
    page, summary = build_daily_report(store, DAY)
    flags = summary["flags"]
    assert flags == sorted(flags, key=lambda flag: severity_key(Flag.model_validate(flag)))
    assert [f["p_adjusted"] for f in flags] == sorted(f["p_adjusted"] for f in flags)
    assert flags[0]["model"] == "b-large"
    statuses = [(line["model"], line["status"]) for line in summary["headline"]]
    # 120 rows a day with a reference week of 7 days (7 degrees of freedom for the day-to-day
    # variance) cannot catch a 20 pp drop at the family's level: too few, not steady
    assert statuses == [("b-large", "regressed"), ("a-small", "regressed"), ("d-better", "improved"),
                        ("c-steady", "too_few")]
    assert summary["alerting"] == ["b-large", "a-small"]
    assert page.index("<code>b-large</code>") < page.index("<code>a-small</code>") < page.index("<code>c-steady</code>")
    assert "Holm" in summary["method"]["flag"] and "Holm" in page
    _, bh = build_daily_report(store, DAY, policy=AlertPolicy(p_adjust="bh"))
    assert len(bh["flags"]) >= len(flags) and "Benjamini" in bh["method"]["flag"]


def land_run(store: storage.Store, config: dict[str, Any], thresholds_from: str | None = None) -> None:
    run = pl.DataFrame([{"run_id": f"run-{DAY.isoformat()}", "trigger": "test", "status": "success",
                         "config": json.dumps(config), "pass_threshold": 0.7, "borderline_threshold": 0.5,
                         "thresholds_from": thresholds_from,
                         "finished_at": dt.datetime(DAY.year, DAY.month, DAY.day, 13, tzinfo=dt.UTC)}])
    storage.write_parquet(store, storage.run_key(DAY, f"run-{DAY.isoformat()}"), run)


def test_thresholds_in_force_and_their_source(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land_day(store, DAY, [row(DAY, "m", judge, i, score=0.5 + i / 40) for judge in ("rag", "prompt") for i in range(20)])
    _, summary = build_daily_report(store, DAY)  # no runs row: the contract's defaults
    assert summary["thresholds"] == {j: {"pass": 0.8, "borderline": 0.6, "source": "options"} for j in ("rag", "prompt")}
    land_run(store, {"thresholds": {"pass_": 0.7, "borderline": 0.5}})  # an older run: one pair for all judges
    _, summary = build_daily_report(store, DAY)
    assert summary["thresholds"] == {j: {"pass": 0.7, "borderline": 0.5, "source": "options"} for j in ("rag", "prompt")}
    land_run(store, {"thresholds": {"pass_": 0.7, "borderline": 0.5}, "thresholds_in_force": {
        "rag": {"pass": 0.905, "borderline": 0.6, "source": "cal-1/rag"},
        "prompt": {"pass": 0.8, "borderline": 0.6, "source": "options"}}})
    page, summary = build_daily_report(store, DAY)
    assert summary["thresholds"] == {"rag": {"pass": 0.905, "borderline": 0.6, "source": "cal-1/rag"},
                                     "prompt": {"pass": 0.8, "borderline": 0.6, "source": "options"}}
    assert "Verdict thresholds in force" in page and "<code>cal-1/rag</code>" in page and "0.905" in page


def test_report_command_takes_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land_week(store, {"m": [0.75] * 7 + [0.71]}, n=400)
    base = ["report", "--date", DAY.isoformat(), "--output", str(tmp_path / "out")]
    assert cli_main([*base, "--min-metric-effect", "0.03", "--p-adjust", "bh"]) == 0
    summary = storage.read_json(store, storage.report_key(DAY, "summary.json"))
    assert summary["method"]["alerts"]["p_adjust"] == "bh" and summary["method"]["alerts"]["min_metric_effect"] == 0.03
    assert cli_main([*base, "--min-rate-effect", "1.5"]) == 2
    assert "--min-rate-effect" in capsys.readouterr().err
    assert cli_main([*base, "--accept-baseline", f"m={WEEK[-2].isoformat()}", "--prior-day-sd", "0.02"]) == 0
    summary = storage.read_json(store, storage.report_key(DAY, "summary.json"))
    assert summary["method"]["alerts"]["accept_baseline"] == {"m": WEEK[-2].isoformat()}
    assert summary["groups"][0]["metrics"]["score"]["reference"]["days"] == [WEEK[-2].isoformat()]
    assert cli_main([*base, "--accept-baseline", "m"]) == 2
    assert "--accept-baseline" in capsys.readouterr().err


def test_report_command_takes_accept_baseline_from_the_run_options_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land_week(store, {"m": [0.75] * 7 + [0.71], "n": [0.75] * 8}, n=200)
    base = ["report", "--date", DAY.isoformat(), "--output", str(tmp_path / "out")]
    monkeypatch.setenv("EVALUATION_ACCEPT_BASELINE", f"m={WEEK[-3].isoformat()}, n={WEEK[-2].isoformat()}")
    assert cli_main(base) == 0
    summary = storage.read_json(store, storage.report_key(DAY, "summary.json"))
    assert summary["method"]["alerts"]["accept_baseline"] == {"m": WEEK[-3].isoformat(), "n": WEEK[-2].isoformat()}
    assert cli_main([*base, "--accept-baseline", f"m={WEEK[-2].isoformat()}"]) == 0  # the flag wins over the variable
    summary = storage.read_json(store, storage.report_key(DAY, "summary.json"))
    assert summary["method"]["alerts"]["accept_baseline"] == {"m": WEEK[-2].isoformat()}
