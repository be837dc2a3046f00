"""The week ``make demo`` evaluates (scripts/demo.py): seven generated days, one model losing its
grounding on the last; the last day's report has seven-day trends and flags that regression."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from evaluation import storage, synthetic
from evaluation.contract import RunConfig
from evaluation.stages import Stores, run_day
from scripts.demo import REGRESSING_MODEL, RUN_CONF, report_flags

LAST = dt.date(2026, 11, 7)
DAYS = [LAST - dt.timedelta(days=i) for i in range(6, -1, -1)]


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("demo-week")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        behaviour = {REGRESSING_MODEL: synthetic.UNGROUNDED} if day == LAST else None
        synthetic.write_day(storage.open_store(raw_uri), day, 150, behaviour=behaviour)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"demo-{day}", **RUN_CONF)
        run_day(cfg, Stores.open(cfg))
    out = storage.open_store(out_uri)
    return {"summary": storage.read_json(out, storage.report_key(LAST, "summary.json")),
            "page": out.read_bytes(storage.report_key(LAST)).decode()}


def test_the_last_day_has_seven_day_trends(week: dict[str, Any]) -> None:
    groups = week["summary"]["groups"]
    assert groups and all([p["dt"] for p in g["trend"]] == [d.isoformat() for d in DAYS] for g in groups)
    assert "No earlier day" not in week["page"]


def test_the_regression_is_flagged_worse_against_both_baselines(week: dict[str, Any]) -> None:
    flags = report_flags(week["summary"])
    regressed = {(f["judge"], f["measure"], f["baseline"]) for f in flags
                 if f["model"] == REGRESSING_MODEL and f["assessment"] == "worse"}
    for judge in ("rag", "masis"):
        assert {(judge, "pass_rate", "previous"), (judge, "pass_rate", "trailing_7d"),
                (judge, "faithfulness_mean", "trailing_7d")} <= regressed
    assert flags[0]["assessment"] == "worse"  # worse first: what a notification leads with
    assert not [f for f in flags if f["model"] != REGRESSING_MODEL and f["measure"] == "pass_rate"
                and f["assessment"] == "worse" and f["judge"] == "rag" and f["baseline"] == "trailing_7d"]


def test_a_behaviour_override_keeps_the_days_questions() -> None:
    usual = [json.loads(line) for line in synthetic.generate_day(LAST, 60, bad=False)]
    changed = [json.loads(line) for line in synthetic.generate_day(
        LAST, 60, bad=False, behaviour={REGRESSING_MODEL: synthetic.UNGROUNDED})]
    assert [r["question"] for r in usual] == [r["question"] for r in changed]
    assert [r["answer"] for r in usual if r["model"] != REGRESSING_MODEL] == \
           [r["answer"] for r in changed if r["model"] != REGRESSING_MODEL]
    assert [r["answer"] for r in usual] != [r["answer"] for r in changed]
