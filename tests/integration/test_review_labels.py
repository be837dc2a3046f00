"""human_labels: landed once whatever is landed again, every annotator kept; the JSONL / Parquet
export and import on a day the pipeline landed; the report's People section."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from evaluation import storage
from evaluation.calibration.people import calibrate_from_labels
from evaluation.cli.day import run_day
from evaluation.cli.main import main
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import OFFLINE_JUDGE_MODEL, RunConfig
from evaluation.contract.review import ReviewError, ReviewSpec
from evaluation.judges import PROMPT_VERSIONS
from evaluation.report import build_daily_report
from evaluation.report.people import people_summary
from evaluation.stages import Stores
from evaluation.stages.review import export_queue, import_labels, queue_day, read_queues
from evaluation.stages.thresholds import with_calibrated_thresholds
from evaluation.storage.labels import Annotation, land_labels, read_labels
from evaluation.testing import synthetic

DAY = dt.date(2026, 3, 2)
LABELLED = dt.datetime(2026, 3, 4, 9, 30, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReviewSpec, Stores]:
    """A day of 120 records landed by the pipeline (offline judge), and its review queue."""
    folder = tmp_path_factory.mktemp("people")
    synthetic.write_day(storage.LocalStore(folder / "raw"), DAY, 120, bad=False)
    cfg = RunConfig(date=DAY, input_uri=str(folder / "raw"), output_uri=str(folder / "out"), run_id="r1",
                    judges=["rag", "masis"], chunk_size=60)
    stores = Stores.open(cfg)
    run_day(cfg, stores)
    spec = ReviewSpec(input_uri=cfg.input_uri, output_uri=cfg.output_uri, review_size=80, review_uniform_share=0.75)
    queue_day(spec, stores.out, DAY, "q1")
    return spec, stores


def _copy(stores: Stores, tmp_path: Path) -> storage.LocalStore:
    """A copy of the landed output, for a test that lands labels into it."""
    out = storage.LocalStore(tmp_path / "out")
    for info in stores.out.list(""):
        out.write_bytes(info.key, stores.out.read_bytes(info.key))
    return out


def _answers(queue: pl.DataFrame, annotator: str, verdict: str = "pass") -> list[Annotation]:
    return [Annotation(record_dt=row["record_dt"], record_id=row["record_id"], annotator=annotator,
                       labelled_at=LABELLED, supported="yes", answers="partly", verdict=verdict, note="ok")
            for row in queue.iter_rows(named=True)]


def test_labels_land_once_and_every_annotator_is_kept(tmp_path: Path, landed: tuple[ReviewSpec, Stores]) -> None:
    _, stores = landed
    store = storage.LocalStore(tmp_path / "copy")
    queue = read_queues(stores.out).head(5)
    first = land_labels(store, _answers(queue, "ann@x") + _answers(queue, "bea@x", "fail"), queue)
    assert first.landed == 5 * 2 * 3 and first.already == 0
    again = land_labels(store, _answers(queue, "ann@x") + _answers(queue, "bea@x", "fail"), queue)
    assert again.landed == 0 and again.already == 30 and again.objects == []
    labels = read_labels(store)
    assert labels.height == 30 and labels["label_id"].n_unique() == 30
    assert set(labels["annotator"]) == {"ann@x", "bea@x"}
    assert labels["dt"].unique().to_list() == [LABELLED.date()]
    row = labels.filter(pl.col("question") == "verdict").row(0, named=True)
    queued = queue.filter(pl.col("record_id") == row["record_id"]).row(0, named=True)
    assert (row["model"], row["stratum"], row["inclusion_probability"], row["run_id"]) == \
           (queued["model"], queued["stratum"], queued["inclusion_probability"], "r1")


def test_labels_for_records_no_queue_holds_or_answers_out_of_range_are_refused(tmp_path: Path,
                                                                                landed: tuple[ReviewSpec, Stores]) -> None:
    _, stores = landed
    queue = read_queues(stores.out)
    stray = Annotation(record_dt=DAY, record_id="nope", annotator="a", labelled_at=LABELLED, verdict="pass")
    with pytest.raises(ReviewError, match="in no review queue"):
        land_labels(storage.LocalStore(tmp_path), [stray], queue)
    odd = stray.model_copy(update={"record_id": queue["record_id"][0], "verdict": "great"})
    with pytest.raises(ReviewError, match="verdict is 'great'"):
        land_labels(storage.LocalStore(tmp_path), [odd], queue)


def test_export_then_import_lands_the_answers_once_and_a_reexport_leaves_them_out(
        tmp_path: Path, landed: tuple[ReviewSpec, Stores]) -> None:
    spec, stores = landed
    out = _copy(stores, tmp_path)
    exported = tmp_path / "queue.jsonl"
    assert export_queue(spec, out, stores.raw, DAY, exported) == 80
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    first = rows[0]
    assert first["question"] and first["answer"] is not None and json.loads(first["contexts"]) is not None
    for row in rows[:40]:
        row.update(annotator="cy@x", labelled_at="2026-03-05T10:00:00Z", supported="no", answers="yes",
                   verdict="fail")
    exported.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert import_labels(out, exported).landed == 40 * 3
    assert import_labels(out, exported).landed == 0
    parquet = tmp_path / "rest.parquet"
    assert export_queue(spec, out, stores.raw, DAY, parquet) == 40
    assert not set(pl.read_parquet(parquet)["record_id"]) & {r["record_id"] for r in rows[:40]}


def test_the_report_shows_corrected_rates_once_enough_labels_exist(tmp_path: Path,
                                                                   landed: tuple[ReviewSpec, Stores]) -> None:
    _, stores = landed
    out = _copy(stores, tmp_path)
    page, summary = build_daily_report(out, DAY)
    assert summary["people"]["labels"] == 0 and "No labels from people" in page
    queue = read_queues(out).filter(pl.col("stratum") == "uniform")
    land_labels(out, _answers(queue, "ann@x", "fail") + _answers(queue.head(10), "bea@x", "fail"), queue)
    page, summary = build_daily_report(out, DAY)
    people = summary["people"]
    assert people["annotators"] == 2 and people["age_days"] == -2  # labelled after the report's day
    shown = [e for e in people["estimates"] if "corrected" in e and e["rate"] == "fail_rate"]
    withheld = [e for e in people["estimates"] if "corrected" not in e]
    # 60 uniform records over the models: each below the 30 labels needed, so nothing shown
    assert not shown and withheld and all("30 needed" in e["note"] for e in withheld)
    assert "People's labels" in page and "30 needed" in page
    people = people_summary(out, DAY, min_labels=5)
    fail_rates = [e for e in people.estimates or [] if e.rate == "fail_rate"]
    assert len(fail_rates) == 2 * len(synthetic.MODELS)  # rag and masis per model
    for estimate in fail_rates:
        # every person said fail: the corrected rate is the judge's plus the share of the slice it did not fail
        rows = judged_rows(out, estimate.model, estimate.judge)
        sliced = rows.filter(pl.col("record_id").is_in(queue["record_id"].implode()))
        assert estimate.labels == sliced.height >= 5
        assert estimate.judge_rate == pytest.approx(float((rows["verdict"] == "fail").mean() or 0.0))
        missed = float((sliced["verdict"] != "fail").mean() or 0.0)
        assert estimate.corrected == pytest.approx((estimate.judge_rate or 0.0) + missed)
        assert estimate.bias == pytest.approx(-missed)


def judged_rows(store: storage.Store, model: str, judge: str) -> pl.DataFrame:
    """The model's judged rows of the day (ok, with a verdict), read from the landed table."""
    frame = storage.scan_day(store, "evaluations", DAY)
    assert frame is not None
    return frame.filter((pl.col("model") == model) & (pl.col("judge") == judge) & (pl.col("judge_status") == "ok")
                        & pl.col("verdict").is_not_null()).collect()


def test_a_calibration_follows_the_labels_per_judge_model_and_prompt_version(
        tmp_path: Path, landed: tuple[ReviewSpec, Stores]) -> None:
    _, stores = landed
    out = _copy(stores, tmp_path)
    queue = read_queues(out)
    judged = storage.scan_day(out, "evaluations", DAY)
    assert judged is not None
    rag = dict(judged.filter(pl.col("judge") == "rag").select("record_id", "verdict").collect().iter_rows())
    # people agree with rag's verdict on every queued record
    people = [a.model_copy(update={"verdict": rag[a.record_id] or "fail"}) for a in _answers(queue, "ann@x")]
    land_labels(out, people, queue)
    at = dt.datetime(2026, 3, 5, tzinfo=dt.UTC)
    assert calibrate_from_labels(out, "openai/other", LABELLED.date(), labels_days=7, calibrated_at=at).records == 0
    result = calibrate_from_labels(out, OFFLINE_JUDGE_MODEL, LABELLED.date(), labels_days=7, calibrated_at=at)
    assert result.records == 80 and result.calibration_id is not None
    table = storage.read_parquet(out, storage.calibration_key(result.calibration_id, "calibration.parquet"))
    score = table.filter((pl.col("judge") == "rag") & (pl.col("metric") == "score")).row(0, named=True)
    assert (score["set_name"], score["judge_model"], score["prompt_version"], score["n"]) == \
           ("human_labels", OFFLINE_JUDGE_MODEL, PROMPT_VERSIONS["rag"], 80)
    assert score["verdict_kappa"] == pytest.approx(1.0)  # people said exactly what rag said
    assert calibrate_from_labels(out, OFFLINE_JUDGE_MODEL, LABELLED.date(), labels_days=7,
                                 calibrated_at=at).calibration_id == result.calibration_id  # a re-run replaces it
    # too old for the window: nothing
    assert calibrate_from_labels(out, OFFLINE_JUDGE_MODEL, LABELLED.date() + dt.timedelta(days=10), labels_days=7,
                                 calibrated_at=at).calibration_id is None
    # the report's agreement section shows it, for the day's judge model and prompt versions
    _, summary = build_daily_report(out, DAY)
    assert result.calibration_id in {c["calibration_id"] for c in summary["calibration"]["calibrations"]}
    # the same calibration made with an earlier prompt: the report calls it stale, thresholds_from refuses it
    older = table.with_columns(prompt_version=pl.lit("rag@0000000000"), calibration_id=pl.lit("cal-people-old"),
                               calibrated_at=pl.lit(at + dt.timedelta(hours=1)).cast(table["calibrated_at"].dtype))
    storage.write_parquet(out, storage.calibration_key("cal-people-old", "calibration.parquet"), older)
    page, summary = build_daily_report(out, DAY)
    stale = [s for s in summary["calibration"]["stale"] if s["judge"] == "rag"]
    assert [s["calibration_id"] for s in stale] == ["cal-people-old"] and "<b>stale</b>" in page
    cfg = RunConfig(date=DAY, input_uri="/in", output_uri=str(tmp_path / "out"), judges=["rag"],
                    thresholds_from="cal-people-old/rag")
    with pytest.raises(CalibrationError, match="the prompt changed since"):
        with_calibrated_thresholds(cfg, out)


def test_the_review_command_queues_exports_and_imports(tmp_path: Path, landed: tuple[ReviewSpec, Stores],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    spec, stores = landed
    copy = _copy(stores, tmp_path)
    out = tmp_path / "out"
    common = ["--output", str(out), "--input", spec.input_uri, "--date", DAY.isoformat()]
    assert main(["review", "queue", "--review-size", "10", "--queue-id", "cli", *common]) == 0
    queued = json.loads(capsys.readouterr().out)
    assert queued["queued"] == 10 and queued["status"] == "success"
    exported = tmp_path / "more.parquet"
    assert main(["review", "export", "--file", str(exported), *common]) == 0
    rows = pl.read_parquet(exported)
    assert rows.height == 90  # both queues' records, none labelled yet
    filled = rows.head(3).with_columns(annotator=pl.lit("dee@x"), labelled_at=pl.lit("2026-03-06T08:00:00+01:00"),
                                       verdict=pl.lit("borderline"))
    filled.write_parquet(exported)
    capsys.readouterr()
    assert main(["review", "import", "--file", str(exported), "--output", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["landed"] == 3
    assert read_labels(copy)["labelled_at"].dt.hour().to_list() == [7, 7, 7]  # to UTC
    assert main(["review", "calibrate", "--output", str(out)]) == 2  # a usage error: the day is needed
    capsys.readouterr()
    assert main(["sql", "SELECT count(*) AS n FROM human_labels WHERE annotator = 'dee@x'", "--output", str(out),
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 3}]
