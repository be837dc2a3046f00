"""The review step over the landed tables: queue a day's records (:func:`queue_day`), read every
queue (:func:`read_queues`), the queued records' texts as people read them (:func:`queued_records`),
and the JSONL / Parquet export and import for teams without Label Studio."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import polars as pl
from pydantic import BaseModel, Field

from evaluation import storage
from evaluation.contract.adapters import adapter_for
from evaluation.contract.review import QUESTIONS, ReviewError, ReviewSpec
from evaluation.contract.review_queue import QUEUE_SCHEMA, draw_seed, record_strata, select_queue
from evaluation.stages.ingest import DayInput, raw_objects, raw_sources
from evaluation.storage.ingest import ingest_batches
from evaluation.storage.labels import LandedLabels, annotations_from_rows, labelled_records, land_labels

logger = logging.getLogger(__name__)

#: The record fields a person reads (and an export carries) beside the queue's columns.
RECORD_FIELDS = ("question", "answer", "contexts", "reference")


class QueueResult(BaseModel):
    """A day's review queue."""

    day: dt.date
    queue_id: str
    uri: str = Field(description="Where the queue landed.")
    queued: int = Field(description="Records queued.")
    by_stratum: dict[str, int] = Field(description="Records queued per stratum.")
    eligible: int = Field(description="The day's records never queued nor labelled before.")
    reused: bool = Field(description="The queue had landed already (a re-run): returned as it was.")


def read_queues(store: storage.Store) -> pl.DataFrame:
    """Every landed queue's rows (:data:`~evaluation.contract.review_queue.QUEUE_SCHEMA`)."""
    frame = storage.scan_table(store, "review_queue")
    if frame is None:
        return pl.DataFrame(schema=QUEUE_SCHEMA)
    return frame.select(list(QUEUE_SCHEMA)).collect()


def _result(day: dt.date, queue_id: str, uri: str, queue: pl.DataFrame, *, reused: bool) -> QueueResult:
    counts = dict(queue.group_by("stratum").len().iter_rows())
    eligible = int(queue.select(pl.col("eligible").max()).item() or 0) if queue.height else 0
    return QueueResult(day=day, queue_id=queue_id, uri=uri, queued=queue.height, by_stratum=counts,
                       eligible=eligible, reused=reused)


def regressed_models(store: storage.Store, day: dt.date) -> list[str]:
    """The models the day's report says regressed (its ``summary.json``'s ``alerting``, segments
    included); none before the report is built."""
    key = storage.report_key(day, "summary.json")
    if not store.exists(key):
        return []
    return [str(model) for model in storage.read_json(store, key).get("alerting") or []]


def queue_day(spec: ReviewSpec, store: storage.Store, day: dt.date, queue_id: str) -> QueueResult:
    """Queue ``day``'s landed records for people (:func:`~evaluation.contract.review_queue.select_queue`),
    leaving out every record queued or labelled before; lands ``review_queue/dt=D/queue-<id>``.
    A queue of the same id that landed already is returned as it is (a re-run queues nothing new)."""
    key = storage.review_queue_key(day, queue_id)
    if store.exists(key):
        return _result(day, queue_id, store.uri(key), storage.read_parquet(store, key), reused=True)
    evaluations = storage.scan_day(store, "evaluations", day)
    if evaluations is None:
        raise ReviewError(f"review queue of {day}: the day has not landed under {store.uri('evaluations/')}")
    frame = evaluations.select("run_id", "record_id", "model", "judge", "verdict", "cascade_calls").collect()
    run_id = frame["run_id"].first() if frame.height else ""
    queues = read_queues(store).filter(pl.col("record_dt") == day)
    exclude = set(queues["record_id"].to_list()) | {r for d, r in labelled_records(store) if d == day}
    flagged = spec.flagged_models or regressed_models(store, day)
    picked = select_queue(record_strata(frame, flagged), size=spec.review_size,
                          uniform_share=spec.review_uniform_share, exclude=exclude,
                          seed=draw_seed(day, queue_id, spec.review_seed))
    queue = picked.with_columns(queue_id=pl.lit(queue_id), record_dt=pl.lit(day, pl.Date),
                                run_id=pl.lit(run_id)).select(list(QUEUE_SCHEMA))
    storage.write_parquet(store, key, queue)
    result = _result(day, queue_id, store.uri(key), queue, reused=False)
    logger.info("review queue %s of %s: %d records (%s) of %d eligible", queue_id, day, result.queued,
                result.by_stratum, result.eligible)
    return result


def queued_records(spec: ReviewSpec, raw: storage.Store, queue: pl.DataFrame) -> pl.DataFrame:
    """``queue``'s rows with the records' texts (:data:`RECORD_FIELDS`, contexts as JSON), read
    from the raw logs of each record's day as the run read them (the first row of a repeated id)."""
    adapter = adapter_for(spec.input_format, spec.input_mapping)
    source = DayInput.of(spec)
    parts = []
    for (day,), rows in queue.group_by(["record_dt"], maintain_order=True):
        assert isinstance(day, dt.date)
        wanted = rows["record_id"].to_list()
        found = []
        sources = raw_sources(raw, raw_objects(raw, day, source))
        for batch in ingest_batches(sources, day, adapter=adapter, assemble=source.assemble):
            found.append(batch.rows.filter(pl.col("record_id").is_in(wanted))
                         .select("record_id", "question", "answer", pl.col("contexts_json").alias("contexts"),
                                 "reference"))
        texts = pl.concat(found).unique("record_id", keep="first", maintain_order=True) if found else None
        if texts is None or texts.height < len(set(wanted)):
            missing = sorted(set(wanted) - set([] if texts is None else texts["record_id"].to_list()))
            raise ReviewError(f"review queue of {day}: {len(missing)} queued records are not in the raw logs under "
                              f"{raw.uri(source.prefix(day))} (first: {missing[0]})")
        parts.append(rows.join(texts, on="record_id", how="left"))
    if not parts:
        return queue.with_columns(*[pl.lit(None, pl.String).alias(f) for f in RECORD_FIELDS])
    return pl.concat(parts)


def export_queue(spec: ReviewSpec, store: storage.Store, raw: storage.Store, day: dt.date, path: Path) -> int:
    """Write ``day``'s queued records not labelled yet, with their texts, to ``path`` (``.jsonl``
    or ``.parquet``): what people label without Label Studio. Returns the rows written."""
    labelled = {r for d, r in labelled_records(store) if d == day}
    queue = read_queues(store).filter((pl.col("record_dt") == day) & ~pl.col("record_id").is_in(list(labelled)))
    rows = queued_records(spec, raw, queue).with_columns(
        pl.lit(None, pl.String).alias(name) for name in (*QUESTIONS, "note", "annotator", "labelled_at"))
    if path.suffix == ".parquet":
        rows.write_parquet(path)
    elif path.suffix == ".jsonl":
        rows.with_columns(pl.col("record_dt").cast(pl.String)).write_ndjson(path)
    else:
        raise ReviewError(f"export to {path}: name a .jsonl or .parquet file")
    return rows.height


def import_labels(store: storage.Store, path: Path) -> LandedLabels:
    """Land the labels of a filled-in export (``.jsonl`` or ``.parquet``: the export's rows with
    ``annotator``, ``labelled_at`` and the answers set; rows without answers are skipped)."""
    if path.suffix == ".parquet":
        rows = pl.read_parquet(path).to_dicts()
    elif path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        raise ReviewError(f"import from {path}: name a .jsonl or .parquet file")
    answered = [r for r in rows if any(r.get(q) not in (None, "") for q in QUESTIONS)]
    return land_labels(store, annotations_from_rows(answered), read_queues(store))
