"""The states of a model in the daily report's headline (CONTRACT §7): a regression stays one until
the model is back at its earlier level and pages once; an accepted baseline ends it; a model with
too few records or no earlier day says so instead of "steady"."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

from evaluation_notifications import regression_message

from evaluation import storage
from evaluation.report import AlertPolicy, build_daily_report
from scripts.demo import print_flags
from tests.unit.report.test_report import land_day, row

START = dt.date(2026, 6, 1)


def day(index: int) -> dt.date:
    return START + dt.timedelta(days=index)


def land(store: storage.Store, centres: dict[str, list[float]], n: dict[str, int] | None = None) -> None:
    """One day per centre: each model's prompt-judge scores around its centre that day."""
    days = len(next(iter(centres.values())))
    for index in range(days):
        rng = random.Random(f"states-{index}")
        rows = [row(day(index), model, "prompt", i, score=round(min(1.0, max(0.0, rng.gauss(c[index], 0.12))), 3))
                for model, c in centres.items() for i in range((n or {}).get(model, 150))]
        land_day(store, day(index), rows)


def line_of(summary: dict[str, Any], model: str) -> dict[str, Any]:
    return next(line for line in summary["headline"] if line["model"] == model)


def test_a_sustained_drop_stays_regressed_pages_once_and_recovers(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land(store, {"drops": [0.75] * 7 + [0.45] * 5 + [0.75] * 2, "steady": [0.75] * 14}, n={"drops": 150, "steady": 400})
    summaries = [build_daily_report(store, day(i))[1] for i in range(7, 14)]
    drops = [line_of(s, "drops") for s in summaries]
    assert [d["status"] for d in drops[:5]] == ["regressed"] * 5
    assert [d["since"] for d in drops[:5]] == [day(7).isoformat()] * 5 and [d["day"] for d in drops[:5]] == [1, 2, 3, 4, 5]
    assert [d["pages"] for d in drops[:5]] == [True, False, False, False, False]
    assert drops[4]["text"] == f"still regressed since {day(7).isoformat()} (day 5)"
    assert all(c["baseline"] == "before_regression" for c in drops[4]["changes"])
    score = next(c for c in drops[4]["changes"] if c["measure"] == "score_mean")
    assert score["before"] > 0.7 and score["after"] < 0.5  # against its level before the drop, not the drop's days
    assert [d["status"] for d in drops[5:]] == ["steady", "steady"]  # back at its level
    assert all(line_of(s, "steady")["status"] == "steady" for s in summaries)
    messages = [regression_message(s, "file:///report.html") for s in summaries]
    assert messages[0] is not None and "drops" in messages[0].subject
    assert messages[1:] == [None] * 6  # no page while it only stays regressed


def test_the_page_and_the_demo_name_the_baseline_each_flag_was_tested_against(tmp_path: Path, capsys) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land(store, {"drops": [0.75] * 7 + [0.45] * 3}, n={"drops": 400})
    pages = {i: build_daily_report(store, day(i)) for i in (7, 9)}
    for index, (baseline, words) in {7: ("trailing_7d", "trailing 7 days"), 9: ("before_regression", "before the regression")}.items():
        page, summary = pages[index]
        assert summary["flags"] and {f["baseline"] for f in summary["flags"]} == {baseline}
        flags_table = page[page.index('<section id="flags">'):].split("</section>", 1)[0]
        assert flags_table.count(f'<td class="nowrap">{words}</td>') == len(summary["flags"])
        print_flags(summary["flags"])
        assert capsys.readouterr().out.count(f"({words}, delta") == len(summary["flags"])


def test_a_large_change_that_is_not_significant_names_the_reference_it_was_tested_against(tmp_path: Path) -> None:
    """A model still regressed, back part of the way on a day of few records: its large changes are
    not significant, each against its measure's reference (the level before the regression while
    that measure is regressed)."""
    store = storage.open_store(str(tmp_path / "out"))
    for index, (centre, n) in enumerate([(0.75, 400)] * 7 + [(0.45, 400)] * 2 + [(0.66, 8)]):
        rng = random.Random(f"partial-{index}")
        land_day(store, day(index), [row(day(index), "m", "prompt", i, score=round(min(1.0, max(0.0, rng.gauss(centre, 0.12))), 3))
                                     for i in range(n)])
    _, summary = build_daily_report(store, day(9))
    assert line_of(summary, "m")["status"] == "regressed"
    references = {m: g["metrics" if m == "score" else "rates"][m]["reference"]
                  for g in summary["groups"] for m in ("score", "pass", "fail")}
    changes = summary["not_significant"]
    assert "before_regression" in {c["baseline"] for c in changes}  # each measure's own state decides
    for change in changes:
        reference = references[change["measure"].rsplit("_", 1)[0]]
        assert (change["baseline"], change["before"]) == (reference["baseline"], reference["value"])


def test_a_drop_that_gets_worse_pages_again(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land(store, {"m": [0.75] * 7 + [0.6, 0.6, 0.3]}, n={"m": 400})
    pages = [line_of(build_daily_report(store, day(i))[1], "m")["pages"] for i in (7, 8, 9)]
    assert pages == [True, False, True]


def test_an_accepted_baseline_ends_the_regression(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land(store, {"m": [0.75] * 7 + [0.5] * 5})
    _, before = build_daily_report(store, day(11))
    assert line_of(before, "m")["status"] == "regressed"
    _, accepted = build_daily_report(store, day(11), policy=AlertPolicy(accept_baseline={"m": day(9)}))
    line = line_of(accepted, "m")
    assert line["status"] == "steady" and not line["pages"]
    score = next(g for g in accepted["groups"] if g["model"] == "m")["metrics"]["score"]
    assert score["reference"]["days"] == [day(9).isoformat(), day(10).isoformat()]


def test_a_small_model_is_too_few_to_monitor_and_a_first_day_has_no_baseline(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path / "out"))
    land(store, {"small": [0.75] * 8, "large": [0.75] * 8}, n={"small": 20, "large": 1500})
    page, summary = build_daily_report(store, day(7))
    small, large = line_of(summary, "small"), line_of(summary, "large")
    assert small["status"] == "too_few" and large["status"] == "steady"
    assert small["text"].startswith("too few records to monitor (20; needs ~") and "for a 20 pp drop" in small["text"]
    assert small["needs"]["0.2"] > 20 and small["detectable_drop"] > 0.2 > large["detectable_drop"]
    assert "too few records to monitor (20; needs ~" in page
    _, first = build_daily_report(store, day(0))
    assert {line["status"] for line in first["headline"]} == {"no_baseline"}
    assert line_of(first, "small")["text"] == "no baseline"
