"""Where every object lives: the keys and prefixes of the raw logs, the landed tables, commit
records, reports, comparisons, calibrations, the review queue, the ledger, claims and working data."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

TABLES = ("evaluations", "judge_calls", "rejects", "daily_summary", "runs")


#: The tables a landing replaces for its day, all at once (``runs`` keeps one object per run).
DAY_TABLES = ("evaluations", "judge_calls", "rejects", "daily_summary")


#: What a day's commit names: its tables and its validation result.
DAY_OBJECTS = (*DAY_TABLES, "validation")


RAW_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")


PARQUET_COMPRESSION: Literal["zstd"] = "zstd"


def day_partition(day: dt.date) -> str:
    """``dt=YYYY-MM-DD``."""
    return f"dt={day.isoformat()}"


def safe_id(value: str) -> str:
    """A run or comparison id made safe for a path segment (Airflow run ids hold ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", value).strip("_") or "run"


def raw_prefix(day: dt.date, layout: str = "hive") -> str:
    """Where the day's raw logs live under the input root, in the input's ``layout``
    (:data:`evaluation.contract.adapters.INPUT_LAYOUTS`): ``dt=YYYY-MM-DD/``, ``YYYY-MM-DD/`` (hour
    folders below it, if any) or ``year=YYYY/month=MM/day=DD/`` (hour and minute folders below)."""
    if layout == "date":
        return f"{day.isoformat()}/"
    if layout == "ymd":
        return f"year={day.year:04d}/month={day.month:02d}/day={day.day:02d}/"
    if layout != "hive":
        raise ValueError(f"unknown input layout {layout!r}")
    return f"{day_partition(day)}/"


def landing_key(name: str, day: dt.date, run_id: str, *, again: bool = False) -> str:
    """Where run ``run_id`` lands ``name`` (a table of :data:`DAY_TABLES`, or ``validation``) for
    ``day``: an object of the run's own, so a landing never overwrites what readers see; the day's
    commit record (:func:`commit_day`) makes it part of the day. ``again`` gives the other name of
    the same run (``run-<id>~1``), for a run that lands its day again while its first objects are
    the landed day."""
    suffix = ".json" if name == "validation" else ".parquet"
    return f"{name}/{day_partition(day)}/run-{safe_id(run_id)}{'~1' if again else ''}{suffix}"


def legacy_key(name: str, day: dt.date) -> str:
    """The one object of ``name`` of a day landed before commit records."""
    return f"{name}/{day_partition(day)}/" + ("result.json" if name == "validation" else "part-0.parquet")


def commit_key(day: dt.date) -> str:
    """The day's commit record: which run's objects are the day (:class:`DayCommit`)."""
    return f"_landed/{day_partition(day)}.json"


def run_key(day: dt.date, run_id: str) -> str:
    """The object holding the ``runs`` row of one run."""
    return f"runs/{day_partition(day)}/run-{safe_id(run_id)}.parquet"


def report_key(day: dt.date, name: str = "index.html") -> str:
    return f"reports/{day_partition(day)}/{name}"


def comparison_key(comparison_id: str, name: str) -> str:
    return f"comparisons/comparison_id={safe_id(comparison_id)}/{name}"


def calibration_key(calibration_id: str, name: str) -> str:
    return f"calibrations/calibration_id={safe_id(calibration_id)}/{name}"


def work_prefix(day: dt.date, run_id: str) -> str:
    """Staging area of one run of one day."""
    return f"_work/{day_partition(day)}/run={safe_id(run_id)}/"


def work_key(day: dt.date, run_id: str, name: str) -> str:
    return work_prefix(day, run_id) + name


def chunk_key(day: dt.date, run_id: str, kind: str, index: int) -> str:
    """A staged chunk: ``kind`` is records, judged or calls."""
    return work_key(day, run_id, f"{kind}/chunk-{index:05d}.parquet")


def failed_prefix(day: dt.date, run_id: str) -> str:
    """Evidence of a failed run (its rejects, validation and scored rows): outside every table's
    folder, under a name that Hive-style readers (Athena, Trino, Spark) skip, so a failed run never
    shows up in analysts' queries nor replaces the day's landed tables."""
    return f"_failed/{day_partition(day)}/run={safe_id(run_id)}/"


def failed_key(day: dt.date, run_id: str, name: str) -> str:
    return failed_prefix(day, run_id) + name


def ledger_prefix(day: dt.date) -> str:
    """The ledger of judge calls made for the day."""
    return f"_ledger/{day_partition(day)}/"


def review_queue_key(day: dt.date, queue_id: str) -> str:
    """A review queue of ``day``'s records (:mod:`evaluation.contract.review_queue`): one object per queue."""
    return f"review_queue/{day_partition(day)}/queue-{safe_id(queue_id)}.parquet"


def human_labels_key(day: dt.date, batch: str) -> str:
    """A batch of people's labels landed for ``day`` (the day they were labelled), named by the
    hash of its label ids (:mod:`evaluation.storage.labels`)."""
    return f"human_labels/{day_partition(day)}/labels-{safe_id(batch)}.parquet"


def review_state_key(source: str) -> str:
    """Where a label source (a Label Studio project) keeps how far its labels were pulled."""
    return f"_review/{safe_id(source)}.json"


def claim_key(day: dt.date) -> str:
    """Names the run that owns the day's landing."""
    return f"_claims/{day_partition(day)}.json"
