"""Calibrated thresholds, judge by judge: ``thresholds_from`` gives a calibration's fitted thresholds
to the judge they were fitted for and leaves every other judge at the run's own; a judge with too
few labelled rows to fit is refused; the borderline band stays unless the calibration fitted one;
the ``runs`` row's config records each judge's thresholds and their source (``thresholds_in_force``)."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import polars as pl
import pytest

from evaluation import storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.run import run_calibration
from evaluation.cli.day import run_day
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import RunConfig, Thresholds
from evaluation.contract.options import build_config
from evaluation.contract.schemas import CALIBRATIONS_SCHEMA
from evaluation.judges import PROMPT_VERSIONS
from evaluation.stages import RunFailed, Stores
from evaluation.stages.thresholds import MIN_FIT_ROWS, calibrated_thresholds, with_calibrated_thresholds
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 25)
N = 150  # records of the day: enough that some rag scores fall between the default and the fitted pass cut
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "golden" / "halueval-qa" / "records.jsonl"
OPTIONS = Thresholds(**{"pass": 0.8, "borderline": 0.6})


# --------------------------------------------------------------------------------------------
# What a calibration's score row gives a judge (hand-written calibrations)

def _calibration(tmp_path: Path, rows: list[dict[str, Any]], calibration: str = "cal-test") -> storage.LocalStore:
    store = storage.LocalStore(tmp_path / "out")
    base = {"calibration_id": calibration, "metric": "score", "n_records": 60, "n_ok": 60, "n": 60}
    frame = pl.DataFrame([{**base, **row} for row in rows], schema=CALIBRATIONS_SCHEMA)
    storage.write_parquet(store, storage.calibration_key(calibration, "calibration.parquet"), frame)
    return store


@pytest.mark.parametrize(("suggested_by", "borderline", "passing", "expected"), [
    # a binary label fits the pass cut only: the configured borderline stays below it
    ("faithful", 0.905, 0.905, (0.905, 0.6)),
    ("faithful", 0.7, 0.72, (0.72, 0.6)),
    # a pass cut at or under the configured borderline: the configured band's width under it
    ("faithful", 0.5, 0.55, (0.55, 0.35)),
    ("faithful", 0.1, 0.1, (0.1, 0.0)),
    # expected verdicts fit the band itself, even a collapsed one
    ("verdict", 0.55, 0.85, (0.85, 0.55)),
    ("verdict", 0.7, 0.7, (0.7, 0.7)),
], ids=["binary-high", "binary-mid", "binary-low", "binary-floor", "verdict-band", "verdict-collapsed"])
def test_the_borderline_band_stays_unless_the_calibration_fitted_one(
        tmp_path: Path, suggested_by: str, borderline: float, passing: float, expected: tuple[float, float]) -> None:
    store = _calibration(tmp_path, [{"judge": "rag", "n_fit": 40, "suggested_by": suggested_by,
                                     "suggested_borderline": borderline, "suggested_pass": passing}])
    found = calibrated_thresholds(store, "cal-test/rag", OPTIONS)
    assert (found.pass_, found.borderline, found.source) == (*expected, "cal-test/rag")


@pytest.mark.parametrize(("row", "message"), [
    ({"n_fit": MIN_FIT_ROWS - 1, "suggested_by": "faithful", "suggested_borderline": 0.7, "suggested_pass": 0.7},
     f"judge rag had {MIN_FIT_ROWS - 1} labelled rows to fit thresholds on .*at least {MIN_FIT_ROWS} are needed"),
    ({"n_ok": 0, "n": 0, "n_fit": None},
     f"judge rag had 0 labelled rows to fit thresholds on \\(0 ok rows of 60 records\\); at least {MIN_FIT_ROWS}"),
    ({"n_fit": 50, "suggested_by": "faithful"}, "fitted no thresholds for judge rag"),
], ids=["too-few", "none", "not-fitted"])
def test_a_judge_with_too_few_labelled_rows_is_refused(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    store = _calibration(tmp_path, [{"judge": "rag", **row}])
    with pytest.raises(CalibrationError, match=message):
        calibrated_thresholds(store, "cal-test/rag", OPTIONS)


def test_a_reference_names_a_judge_of_the_calibration(tmp_path: Path) -> None:
    fitted = {"n_fit": 40, "suggested_by": "faithful", "suggested_borderline": 0.7, "suggested_pass": 0.7}
    store = _calibration(tmp_path, [{"judge": "rag", **fitted}, {"judge": "masis", **fitted}])
    with pytest.raises(CalibrationError, match=r"name one judge of calibration cal-test .*its judges: rag, masis"):
        calibrated_thresholds(store, "cal-test", OPTIONS)
    with pytest.raises(CalibrationError, match="its judges: rag, masis"):
        calibrated_thresholds(store, "cal-test/prompt", OPTIONS)


@pytest.mark.parametrize(("row", "message"), [
    ({"judge_model": "openai/gpt-4o-mini", "prompt_version": PROMPT_VERSIONS["rag"]},
     r"judged with openai/gpt-4o-mini, this run with offline/lexical"),
    ({"judge_model": "offline/lexical", "prompt_version": "rag@0000000000"},
     r"judged with prompt rag@0000000000, this run with rag@.*the prompt changed since"),
], ids=["another-judge-model", "another-prompt-version"])
def test_a_calibration_of_another_judge_model_or_prompt_version_is_refused(
        tmp_path: Path, row: dict[str, Any], message: str) -> None:
    fitted = {"n_fit": 40, "suggested_by": "faithful", "suggested_borderline": 0.7, "suggested_pass": 0.7}
    store = _calibration(tmp_path, [{"judge": "rag", **fitted, **row}])
    cfg = RunConfig(date=DAY, input_uri="/in", output_uri=str(tmp_path / "out"), judges=["rag"],
                    thresholds_from="cal-test/rag")
    with pytest.raises(CalibrationError, match=message):
        with_calibrated_thresholds(cfg, store)
    same = {"judge_model": "offline/lexical", "prompt_version": PROMPT_VERSIONS["rag"]}
    store = _calibration(tmp_path, [{"judge": "rag", **fitted, **same}])
    assert with_calibrated_thresholds(cfg, store).thresholds_in_force["rag"].source == "cal-test/rag"


@pytest.mark.parametrize(("value", "message"), [
    ("cal-1/judge", "expected <calibration id>/<judge>"),
    ("/rag", "expected <calibration id>/<judge>"),
    ("cal-1/rag,cal-2/rag", "names judge rag twice"),
])
def test_thresholds_from_is_checked_when_the_run_is_configured(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_config({"input_uri": "/in", "output_uri": "/out", "thresholds_from": value}, date=DAY, run_id="r",
                     trigger="test")
    cfg = build_config({"input_uri": "/in", "output_uri": "/out", "thresholds_from": " cal-1/rag , cal-2/masis "},
                       date=DAY, run_id="r", trigger="test")
    assert cfg.thresholds_from == "cal-1/rag,cal-2/masis"


# --------------------------------------------------------------------------------------------
# Runs of a day (offline judge) with thresholds from a real calibration of the shipped HaluEval set

def _golden(tmp_path: Path, records: int) -> Path:
    folder = tmp_path / f"golden-{records}" / "halueval-small"
    folder.mkdir(parents=True)
    lines = SHIPPED.read_text(encoding="utf-8").splitlines()[:records]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _calibrate(tmp_path: Path, records: int, judges: list[str]) -> str:
    golden = _golden(tmp_path, records)
    result = run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(golden),
                             CalibrationSpec(golden_uri=str(golden), judges=judges))
    return str(result["calibration_id"])


def _run(tmp_path: Path, run_id: str, **options: Any) -> tuple[pl.DataFrame, dict[str, Any]]:
    """One run of the day: its evaluations and the ``thresholds_in_force`` its runs row records."""
    raw = tmp_path / "raw"
    if not raw.exists():
        synthetic.write_day(storage.LocalStore(raw), DAY, N, bad=False)
    cfg = RunConfig(date=DAY, input_uri=str(raw), output_uri=str(tmp_path / "out"), run_id=run_id, chunk_size=30,
                    **options)
    run_day(cfg, Stores.open(cfg))
    evaluations = storage.read_day(storage.LocalStore(tmp_path / "out"), "evaluations", DAY)
    row = pl.read_parquet(tmp_path / "out" / storage.run_key(DAY, run_id)).row(0, named=True)
    return evaluations.sort("record_id", "judge"), json.loads(row["config"])["thresholds_in_force"]


def _verdicts(evaluations: pl.DataFrame, judge: str) -> list[str | None]:
    return evaluations.filter(pl.col("judge") == judge)["verdict"].to_list()


def _expected_verdicts(evaluations: pl.DataFrame, judge: str, thresholds: dict[str, Any]) -> list[str | None]:
    """CONTRACT §2.5 at ``thresholds``, with the rules that force ``fail`` whatever the thresholds."""
    out: list[str | None] = []
    for row in evaluations.filter(pl.col("judge") == judge).iter_rows(named=True):
        score = row["score"]
        forced = bool(row["clamps_applied"]) and any(c.endswith(":verdict") or c == "empty_answer"
                                                     for c in row["clamps_applied"])
        forced = forced or (judge == "rag" and row["faithfulness"] == 0.0) or row["judge_status"] == "parse_error"
        if score is None:
            out.append(None)
        elif forced:
            out.append("fail")
        else:
            out.append("pass" if score >= thresholds["pass"] else
                       "borderline" if score >= thresholds["borderline"] else "fail")
    return out


def test_thresholds_from_one_judge_leave_the_others_alone(tmp_path: Path) -> None:
    calibration = _calibrate(tmp_path, 80, ["rag", "masis"])
    own, own_in_force = _run(tmp_path, "r-own")
    options = {"pass": 0.8, "borderline": 0.6, "source": "options"}
    assert own_in_force == {"rag": options, "masis": options, "prompt": options}

    rag_only, in_force = _run(tmp_path, "r-rag", thresholds_from=f"{calibration}/rag")
    fitted = calibrated_thresholds(storage.LocalStore(tmp_path / "out"), f"{calibration}/rag", OPTIONS)
    assert in_force == {"rag": {"pass": fitted.pass_, "borderline": fitted.borderline, "source": f"{calibration}/rag"},
                        "masis": options, "prompt": options}
    assert (fitted.pass_, fitted.borderline) != (0.8, 0.6)
    # masis and prompt: the same verdicts as without the calibration; rag: its fitted thresholds'
    assert own.select("record_id", "judge", "score").equals(rag_only.select("record_id", "judge", "score"))
    for judge in ("masis", "prompt"):
        assert _verdicts(rag_only, judge) == _verdicts(own, judge)
    assert _verdicts(rag_only, "rag") == _expected_verdicts(rag_only, "rag", in_force["rag"])
    assert _verdicts(own, "rag") == _expected_verdicts(own, "rag", options)
    assert _verdicts(rag_only, "rag") != _verdicts(own, "rag"), "the day must hold rag scores the cut moves"

    both, in_force = _run(tmp_path, "r-both", thresholds_from=f"{calibration}/rag, {calibration}/masis")
    assert in_force["masis"]["source"] == f"{calibration}/masis" and in_force["prompt"] == options
    assert in_force["rag"] == {"pass": fitted.pass_, "borderline": fitted.borderline, "source": f"{calibration}/rag"}
    for judge in ("rag", "masis"):
        assert _verdicts(both, judge) == _expected_verdicts(both, judge, in_force[judge])
    assert _verdicts(both, "prompt") == _verdicts(own, "prompt")


@pytest.mark.parametrize(("records", "judges", "judge", "message"), [
    (40, ["rag"], "rag", r"judge rag had 20 labelled rows to fit thresholds on \(40 ok rows of 40 records\); "
                         f"at least {MIN_FIT_ROWS} are needed"),
    (20, ["rag", "prompt"], "prompt", f"judge prompt had 0 labelled rows .*at least {MIN_FIT_ROWS} are needed"),
], ids=["too-few", "prompt-none"])
def test_a_run_refuses_a_calibration_with_too_few_labelled_rows_before_paying(
        tmp_path: Path, records: int, judges: list[str], judge: str, message: str) -> None:
    calibration = _calibrate(tmp_path, records, judges)
    with pytest.raises(RunFailed, match=message):
        _run(tmp_path, "r-refused", thresholds_from=f"{calibration}/{judge}")
    runs = pl.read_parquet(tmp_path / "out" / storage.run_key(DAY, "r-refused")).row(0, named=True)
    assert runs["status"] == "failed" and "nothing was ingested or judged" in runs["message"]
    assert storage.landed_key(storage.LocalStore(tmp_path / "out"), "evaluations", DAY) is None


def test_a_calibration_of_a_judge_the_run_does_not_select_is_refused(tmp_path: Path) -> None:
    calibration = _calibrate(tmp_path, 80, ["rag"])
    with pytest.raises(RunFailed, match=r"the run does not select judge rag \(judges: masis, prompt\)"):
        _run(tmp_path, "r-unselected", judges=["masis", "prompt"], thresholds_from=f"{calibration}/rag")
