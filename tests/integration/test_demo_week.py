"""The week ``make demo`` evaluates (scripts/demo.py): seven generated days, one model losing its
grounding in one locale on the last; the steady days' reports alert nobody (whole models and
segments), the last day's report has seven-day trends and leads with that regression, on that model
alone, names the segment, and shows that model's own failing records beside its earlier answers to
the same questions."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import Stores
from evaluation.testing import synthetic
from scripts.demo import (
    REGRESSING_LOCALE,
    REGRESSING_MODEL,
    RUN_CONF,
    headline_lines,
    last_day_behaviour,
    steady_day_lines,
)

LAST = dt.date(2026, 11, 7)
DAYS = [LAST - dt.timedelta(days=i) for i in range(6, -1, -1)]
#: Records a day: enough for the regressing model's German records to be monitored (30 ok rows).
RECORDS = 360


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("demo-week")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        behaviour = last_day_behaviour() if day == LAST else None
        synthetic.write_day(storage.open_store(raw_uri), day, RECORDS, behaviour=behaviour)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"demo-{day}", **RUN_CONF)
        run_day(cfg, Stores.open(cfg))
    out = storage.open_store(out_uri)
    return {"summary": storage.read_json(out, storage.report_key(LAST, "summary.json")),
            "steady": [storage.read_json(out, storage.report_key(day, "summary.json")) for day in DAYS[:-1]],
            "page": out.read_bytes(storage.report_key(LAST)).decode(),
            "evaluations": storage.scan_table(out, "evaluations").collect()}


def test_the_last_day_has_seven_day_trends(week: dict[str, Any]) -> None:
    groups = week["summary"]["groups"]
    assert groups and all([p["dt"] for p in g["trend"]] == [d.isoformat() for d in DAYS] for g in groups)
    assert "No earlier day" not in week["page"]


def test_a_steady_week_raises_no_flag(week: dict[str, Any]) -> None:
    last_steady = week["steady"][-1]
    assert any(m["trailing_7d"] for g in last_steady["groups"] for m in g["rates"].values())  # it was compared
    assert last_steady["flags"] == [] and last_steady["alerting"] == []
    # a model may also be "too few records to monitor", never regressed
    assert all(line["status"] in ("steady", "too_few") and not line["changes"] for line in last_steady["headline"])
    assert all(summary["alerting"] == [] for summary in week["steady"])
    assert steady_day_lines(week["steady"])[-1] == f"  0 of {len(DAYS) - 1} steady day(s) alerted"


def test_the_regression_alerts_on_that_model_alone_and_names_the_segment(week: dict[str, Any]) -> None:
    summary = week["summary"]
    assert summary["alerting"] == [REGRESSING_MODEL]
    assert all(line["status"] != "regressed" for line in summary["headline"] if line["model"] != REGRESSING_MODEL)
    assert not [f for f in summary["flags"] if f["alerts"] and f["model"] != REGRESSING_MODEL]
    segment_lines = summary["segments"]["headline"]
    assert [(line["model"], line["segment"]["value"]) for line in segment_lines] == [(REGRESSING_MODEL, REGRESSING_LOCALE)]
    assert segment_lines[0]["others_steady"]
    changes = {(c["judge"], c["measure"]) for c in segment_lines[0]["changes"]}
    assert {("rag", "pass_rate"), ("masis", "pass_rate")} <= changes
    assert all(c["delta"] < 0 or c["measure"] == "fail_rate" for c in segment_lines[0]["changes"])
    text = next(line for line in headline_lines(summary) if "regressed in" in line)
    assert text.split()[:4] == [REGRESSING_MODEL, "regressed", "in", f"locale={REGRESSING_LOCALE}:"]
    page = week["page"]
    assert page.index('id="headline"') < page.index('id="overview"') < page.index('id="flags"')
    assert f"1 model(s) regressed: {REGRESSING_MODEL}." in page
    headline = page.split('id="headline"', 1)[1].split("</section>", 1)[0]
    assert f"regressed in locale={REGRESSING_LOCALE}</span>" in headline and "other locale values steady" in headline


def test_the_steady_days_raise_no_segment_flag(week: dict[str, Any]) -> None:
    compared = week["steady"][-1]["segments"]
    assert compared["keys"] == ["metadata.locale"] and compared["groups"]
    assert any(m["trailing_7d"] for g in compared["groups"] for m in g["rates"].values())
    assert all(summary["segments"]["flags"] == [] for summary in week["steady"])


def test_the_evidence_is_the_regressed_models_own_with_its_earlier_answers(week: dict[str, Any]) -> None:
    evidence = week["summary"]["evidence"]
    assert evidence and {item["model"] for item in evidence} == {REGRESSING_MODEL}
    evaluations = week["evaluations"]
    day = evaluations.filter(pl.col("dt") == LAST)
    shown = [r for item in evidence for r in item["records"]]
    # texts come from the judge calls' prompts: an empty answer, which no judge is sent, has none
    assert shown and all(r["question"] and r["answer"] for r in shown if r["reason"] != "empty answer")
    models = dict(day.select("record_id", "model").unique().iter_rows())
    assert {models[r["record_id"]] for r in shown} == {REGRESSING_MODEL}  # every example is the regressed model's
    keys = dict(day.select("record_id", "question_key").unique().iter_rows())
    earlier = [r for r in shown if r["earlier"]]
    assert earlier and all(r["earlier"]["answer"] for r in earlier)
    for record in earlier:  # the same model's answer to the same question on a baseline day
        before = evaluations.filter((pl.col("dt") == dt.date.fromisoformat(record["earlier"]["dt"]))
                                    & (pl.col("record_id") == record["earlier"]["record_id"]))
        assert set(before["model"]) == {REGRESSING_MODEL} and set(before["question_key"]) == {keys[record["record_id"]]}
    masis = next(item for item in evidence if item["judge"] == "masis" and "pass_rate" in item["measures"])
    counts = [reason["count"] for reason in masis["reasons"]]
    assert counts == sorted(counts, reverse=True) and masis["records"][0]["reason"] == masis["reasons"][0]["reason"]
    page = week["page"]
    assert page.index('id="evidence"') < page.index('id="worst"')  # the global worst list stays, below


def test_a_behaviour_override_keeps_the_days_questions() -> None:
    usual = [json.loads(line) for line in synthetic.generate_day(LAST, 60, bad=False)]
    changed = [json.loads(line) for line in synthetic.generate_day(
        LAST, 60, bad=False, behaviour={REGRESSING_MODEL: synthetic.UNGROUNDED})]
    assert [r["question"] for r in usual] == [r["question"] for r in changed]
    assert [r["answer"] for r in usual if r["model"] != REGRESSING_MODEL] == \
           [r["answer"] for r in changed if r["model"] != REGRESSING_MODEL]
    assert [r["answer"] for r in usual] != [r["answer"] for r in changed]
