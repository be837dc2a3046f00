"""Calibration that follows people's labels: the judges' agreement with ``human_labels`` and the
thresholds that fit them, per judge model and prompt version, from the verdicts the daily runs
landed (no judge is called again).

:func:`calibrate_from_labels` takes the labelled records of a recent window (``labels_days`` days of
labelling, ending at ``day``), joins each record's people's answers (the most given verdict; faithful
when most said the answer is supported) to the ``evaluations`` rows of that judge model and of this
code's prompt versions, and lands the calibration as ``calibrate`` does
(``calibrations/calibration_id=<id>/calibration.parquet``, the set named ``human_labels``), so
``thresholds_from`` and the report take it like any other. Its id hashes the judge model, the prompt
versions and the window: a re-run of the same day replaces it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging

import polars as pl
from pydantic import BaseModel, Field

from evaluation import storage
from evaluation.calibration.compute import calibration_rows
from evaluation.calibration.golden import holdout_split
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.config import EVALUATION_COLUMNS
from evaluation.contract.review import ReviewSpec
from evaluation.contract.schemas import LABELS_SCHEMA
from evaluation.judges import PROMPT_VERSIONS
from evaluation.storage.labels import read_labels

logger = logging.getLogger(__name__)

#: Labelled records a calibration from labels needs (fewer: nothing landed, and the result says so).
MIN_RECORDS = 10


class LabelCalibration(BaseModel):
    """What a calibration from people's labels did."""

    judge_model: str
    calibration_id: str | None = Field(description="The calibration landed; None when too few labels.")
    records: int = Field(description="Labelled records judged by this judge model and prompt versions.")
    labels_from: dt.date
    labels_to: dt.date
    uri: str | None = None


def people_labels(labels: pl.DataFrame) -> pl.DataFrame:
    """One :data:`LABELS_SCHEMA` row per labelled record (``record_id`` as ``<day>/<record id>``):
    the most given verdict, faithful when most of its answers to ``supported`` are yes."""
    key = pl.concat_str(pl.col("record_dt").cast(pl.String), pl.lit("/"), pl.col("record_id")).alias("record_id")
    verdicts = (labels.filter(pl.col("question") == "verdict").group_by(key)
                .agg(pl.col("label").mode().sort().first().alias("verdict")))
    supported = (labels.filter(pl.col("question") == "supported").group_by(key)
                 .agg(((pl.col("label") == "yes").mean() > 0.5).alias("faithful")))
    rows = verdicts.join(supported, on="record_id", how="full", coalesce=True).sort("record_id")
    rows = rows.with_columns(good=pl.coalesce("faithful", pl.col("verdict") != "fail"), rating=pl.lit(None, pl.Int64),
                             scores=pl.lit(None, pl.String), source_label=pl.lit("people"))
    split = holdout_split(rows["record_id"].to_list(), rows["good"].to_list(), 0, 0.5)
    return rows.with_columns(split=pl.Series(split, dtype=pl.String)).select(list(LABELS_SCHEMA))


def _labelled(store: storage.Store, labels: pl.DataFrame) -> pl.LazyFrame | None:
    """The landed ``evaluations`` rows of the records ``labels`` label (None: no label, or none landed)."""
    frame = storage.scan_table(store, "evaluations")
    if frame is None or labels.is_empty():
        return None
    records = labels.select("record_dt", "record_id").unique()
    return (frame.filter(pl.col("dt").is_in(records["record_dt"].unique().to_list()))
            .join(records.lazy(), left_on=["dt", "record_id"], right_on=["record_dt", "record_id"], how="semi"))


def _judged(store: storage.Store, labels: pl.DataFrame, judge_model: str) -> pl.DataFrame:
    labelled = _labelled(store, labels)
    if labelled is None:
        return pl.DataFrame()
    wanted = list(PROMPT_VERSIONS.values())
    rows = labelled.filter((pl.col("judge_model") == judge_model) & pl.col("prompt_version").is_in(wanted)).collect()
    empty = pl.col("clamps_applied").list.contains("empty_answer").fill_null(False)
    forced = ((pl.col("judge_status") == "ok")
              & (((pl.col("judge") == "rag") & (pl.col("faithfulness") == 0.0)) | empty)).fill_null(False)
    key = pl.concat_str(pl.col("dt").cast(pl.String), pl.lit("/"), pl.col("record_id")).alias("record_id")
    return rows.with_columns(key, forced.alias("forced_fail")).select(*[c for c in EVALUATION_COLUMNS if c != "dt"],
                                                                     "forced_fail")


def calibrate_from_labels(store: storage.Store, judge_model: str, day: dt.date, *, labels_days: int,
                          calibrated_at: dt.datetime) -> LabelCalibration:
    """Calibrate ``judge_model``'s judges on the labels of the ``labels_days`` days ending at ``day``."""
    first = day - dt.timedelta(days=labels_days - 1)
    labels = read_labels(store).filter(pl.col("dt").is_between(first, day))
    judged = _judged(store, labels, judge_model)
    result = LabelCalibration(judge_model=judge_model, calibration_id=None, labels_from=first, labels_to=day,
                              records=0 if judged.is_empty() else judged["record_id"].n_unique())
    if result.records < MIN_RECORDS:
        logger.info("calibration from labels of %s: %d labelled records judged with the current prompts, %d needed",
                    judge_model, result.records, MIN_RECORDS)
        return result
    judges = sorted(set(judged["judge"]))
    spec = CalibrationSpec(golden_uri=store.uri("human_labels"), judges=judges, judge_model=judge_model)
    versions = sorted(v for j, v in PROMPT_VERSIONS.items() if j in judges)
    text = f"{judge_model}|{','.join(versions)}|{first}|{day}"
    calibration = f"cal-people-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    table = calibration_rows(judged, people_labels(labels), spec, calibration_id=calibration,
                             calibrated_at=calibrated_at)
    key = storage.calibration_key(calibration, "calibration.parquet")
    storage.write_parquet(store, key, table)
    logger.info("calibration %s of %s on %d labelled records landed at %s", calibration, judge_model, result.records,
                store.uri(key))
    return result.model_copy(update={"calibration_id": calibration, "uri": store.uri(key)})


def calibrate_all(store: storage.Store, spec: ReviewSpec, day: dt.date,
                  calibrated_at: dt.datetime) -> list[LabelCalibration]:
    """:func:`calibrate_from_labels` for every judge model whose verdicts cover labelled records."""
    return [calibrate_from_labels(store, model, day, labels_days=spec.labels_days, calibrated_at=calibrated_at)
            for model in judge_models_labelled(store)]


def judge_models_labelled(store: storage.Store) -> list[str]:
    """The judge models whose landed verdicts cover labelled records."""
    labelled = _labelled(store, read_labels(store))
    if labelled is None:
        return []
    return sorted(labelled.select(pl.col("judge_model").unique()).collect()["judge_model"].drop_nulls().to_list())
