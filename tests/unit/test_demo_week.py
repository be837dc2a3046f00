"""The week ``make demo`` evaluates (scripts/demo.py): seven generated days, one model losing its
grounding on the last; the steady days' reports alert nobody, the last day's report has seven-day
trends and leads with that regression, on that model alone."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from evaluation import storage, synthetic
from evaluation.contract import RunConfig
from evaluation.day import run_day
from evaluation.stages import Stores
from scripts.demo import REGRESSING_MODEL, RUN_CONF, headline_lines, steady_day_lines

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
            "steady": [storage.read_json(out, storage.report_key(day, "summary.json")) for day in DAYS[:-1]],
            "page": out.read_bytes(storage.report_key(LAST)).decode()}


def test_the_last_day_has_seven_day_trends(week: dict[str, Any]) -> None:
    groups = week["summary"]["groups"]
    assert groups and all([p["dt"] for p in g["trend"]] == [d.isoformat() for d in DAYS] for g in groups)
    assert "No earlier day" not in week["page"]


def test_a_steady_week_raises_no_flag(week: dict[str, Any]) -> None:
    last_steady = week["steady"][-1]
    assert any(m["trailing_7d"] for g in last_steady["groups"] for m in g["rates"].values())  # it was compared
    assert last_steady["flags"] == [] and last_steady["alerting"] == []
    # 50 records a model a day: a model may also be "too few records to monitor", never regressed
    assert all(line["status"] in ("steady", "too_few") and not line["changes"] for line in last_steady["headline"])
    assert all(summary["alerting"] == [] for summary in week["steady"])
    assert steady_day_lines(week["steady"])[-1] == f"  0 of {len(DAYS) - 1} steady day(s) alerted"


def test_the_regression_alerts_on_that_model_alone_and_leads(week: dict[str, Any]) -> None:
    summary = week["summary"]
    assert summary["alerting"] == [REGRESSING_MODEL]
    assert [(line["model"], line["status"]) for line in summary["headline"]][0] == (REGRESSING_MODEL, "regressed")
    assert all(line["status"] != "regressed" for line in summary["headline"][1:])
    changes = {(c["judge"], c["measure"]) for c in summary["headline"][0]["changes"]}
    for judge in ("rag", "masis"):
        assert {(judge, "pass_rate"), (judge, "faithfulness_mean"), (judge, "score_mean")} <= changes
    assert all(c["delta"] < 0 or c["measure"] == "fail_rate" for c in summary["headline"][0]["changes"])
    assert summary["flags"][0]["model"] == REGRESSING_MODEL and summary["flags"][0]["alerts"]
    assert not [f for f in summary["flags"] if f["alerts"] and f["model"] != REGRESSING_MODEL]
    lines = headline_lines(summary)
    assert lines[0].split()[:4] == [REGRESSING_MODEL, "regressed", "since", f"{LAST.isoformat()}:"]
    assert "rag " in lines[0] and "more" in lines[0]  # the other regressed measures, counted
    page = week["page"]
    assert page.index('id="headline"') < page.index('id="overview"') < page.index('id="flags"')
    assert f"1 model(s) regressed: {REGRESSING_MODEL}." in page


def test_a_behaviour_override_keeps_the_days_questions() -> None:
    usual = [json.loads(line) for line in synthetic.generate_day(LAST, 60, bad=False)]
    changed = [json.loads(line) for line in synthetic.generate_day(
        LAST, 60, bad=False, behaviour={REGRESSING_MODEL: synthetic.UNGROUNDED})]
    assert [r["question"] for r in usual] == [r["question"] for r in changed]
    assert [r["answer"] for r in usual if r["model"] != REGRESSING_MODEL] == \
           [r["answer"] for r in changed if r["model"] != REGRESSING_MODEL]
    assert [r["answer"] for r in usual] != [r["answer"] for r in changed]
