"""``summary.json`` is the typed day summary's ``model_dump()``: read back and validated as a
:class:`~evaluation.report.summary.DaySummary`, it dumps to the very same JSON (the same keys in the
same order), flags, segments and all, and draws the same page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluation import storage
from evaluation.calibration.daily import Calibrations
from evaluation.report import compute_summary, render_html, write_daily_report
from evaluation.report.compute import ReportInputs
from evaluation.report.summary import DaySummary, Flag, People, Reference, SegmentFlag
from tests.unit.report.test_report import DAY, write_history
from tests.unit.report.test_report_segments import LAST, fortnight

#: What ``build_daily_report`` adds to the computed summary from other tables.
ADDED = ("calibration", "people")


def _round_trip(found: dict[str, Any]) -> tuple[str, str]:
    computed = {k: v for k, v in found.items() if k not in ADDED}
    again = DaySummary.model_validate(computed).model_dump(mode="json")
    return json.dumps(computed), json.dumps(again)


def test_a_landed_summary_json_reads_back_as_the_model_and_dumps_to_the_same_json(tmp_path: Path) -> None:
    store = storage.LocalStore(tmp_path)
    write_history(store)
    write_daily_report(store, DAY)
    found = storage.read_json(store, storage.report_key(DAY, "summary.json"))
    assert list(found)[-2:] == list(ADDED)
    assert found["flags"] and found["groups"] and found["headline"]  # the day has something to carry
    written, again = _round_trip(found)
    assert again == written
    flag = Flag.model_validate(found["flags"][0])
    assert list(flag.model_dump()) == list(found["flags"][0])
    # the page drawn from summary.json read back is the page landed beside it
    page = store.read_bytes(storage.report_key(DAY, "index.html")).decode()
    summary = DaySummary.model_validate({k: v for k, v in found.items() if k not in ADDED})
    calibration, people = Calibrations.model_validate(found["calibration"]), People.model_validate(found["people"])
    assert list(people.model_dump()) == list(found["people"])
    assert render_html(summary, calibration=calibration, people=people) == page


def test_segment_flags_and_adjusted_p_values_keep_their_keys() -> None:
    history = fortnight(1, regressed=("m2", "metadata.locale", "de"))
    summary = compute_summary(ReportInputs(day=LAST, root="mem://", history_days=14, history=history,
                                           evaluations=None, rejects=None, runs=None, summary_source="daily_summary"))
    assert isinstance(summary, DaySummary)
    segment_flag = summary.segments.flags[0]
    assert isinstance(segment_flag, SegmentFlag)
    assert list(segment_flag.model_dump())[-2:] == ["alerts", "segment"]
    # the reference and its earlier name are one entry: the adjusted p-value the flags set shows in both
    measure = summary.groups[0].rates["pass"]
    assert measure.reference is measure.trailing_7d
    references = [m.reference for g in summary.groups for m in g.rates.values() if m.reference is not None]
    tested = [r for r in references if r.p_two_sided is not None]
    assert tested and all(r.p_two_sided_adjusted is not None for r in tested)
    assert all("p_two_sided_adjusted" in r.model_dump() for r in tested)
    untested = Reference.model_validate({**tested[0].model_dump(), "p_two_sided_adjusted": None})
    assert "p_two_sided_adjusted" not in untested.model_dump()  # absent, as before the flags are decided
    dumped = summary.model_dump(mode="json")
    assert json.dumps(DaySummary.model_validate(dumped).model_dump(mode="json")) == json.dumps(dumped)
