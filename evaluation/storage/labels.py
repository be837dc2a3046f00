"""The ``human_labels`` table (CONTRACT §3): people's answers to the review questions, one row per
(record, annotator, question), every annotator of a record kept.

Landing: :func:`land_labels` turns annotations (from Label Studio or an imported file) into rows,
joined to the queue for the record's run, model, stratum and inclusion probability, drops the
label ids already landed, and writes the rest as one object per labelling day under a name of
its own (the hash of its label ids), whole (one PUT; locally a file renamed into place). A
landing that dies leaves either nothing or a whole object; landing the same annotations again
lands nothing; readers (:func:`read_labels`) keep one row per label id, so even two landings
racing each other are never counted twice.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Iterable, Sequence

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from evaluation import storage
from evaluation.contract.review import QUESTIONS, ReviewError

logger = logging.getLogger(__name__)

#: The columns of ``human_labels`` (``dt``, the day labelled, is the hive partition).
HUMAN_LABELS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "label_id": pl.String,
    "record_dt": pl.Date,
    "run_id": pl.String,
    "record_id": pl.String,
    "model": pl.String,
    "question": pl.String,
    "label": pl.String,
    "note": pl.String,
    "annotator": pl.String,
    "labelled_at": pl.Datetime("us", "UTC"),
    "source": pl.String,
    "task_id": pl.String,
    "annotation_id": pl.String,
    "queue_id": pl.String,
    "stratum": pl.String,
    "inclusion_probability": pl.Float64,
}

#: The answers each question takes.
ANSWERS: dict[str, tuple[str, ...]] = {
    "supported": ("yes", "partly", "no"),
    "answers": ("yes", "partly", "no"),
    "verdict": ("pass", "borderline", "fail"),
}


class Annotation(BaseModel):
    """One person's answers about one queued record: from a Label Studio annotation, or a row of
    an imported labels file."""

    model_config = ConfigDict(extra="ignore")

    record_dt: dt.date = Field(description="The day of the record (its `dt`).")
    record_id: str = Field(description="The record, as in `evaluations`.")
    annotator: str = Field(min_length=1, description="Who labelled it (an e-mail or a name).")
    labelled_at: dt.datetime = Field(description="When the answers were given (UTC when no zone is given).")
    supported: str | None = Field(default=None, description="Is the answer supported by the contexts: yes, partly, no.")
    answers: str | None = Field(default=None, description="Does it answer the question: yes, partly, no.")
    verdict: str | None = Field(default=None, description="pass, borderline or fail.")
    note: str | None = Field(default=None, description="Free text.")
    source: str = Field(default="import", description="Where it came from: `label-studio:<project>` or `import`.")
    task_id: str | None = Field(default=None, description="The Label Studio task, when from Label Studio.")
    annotation_id: str | None = Field(
        default=None, description="The source's id of the annotation; for an import, derived from the record and "
        "the annotator (one set of answers per annotator and record).")

    def key(self) -> str:
        """The annotation's id within its source."""
        if self.annotation_id:
            return self.annotation_id
        text = f"{self.record_dt.isoformat()}|{self.record_id}|{self.annotator}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def answered(self) -> dict[str, str]:
        """The questions answered, question -> answer (lower case); an answer outside
        :data:`ANSWERS` raises :class:`ReviewError` naming the record."""
        found = {}
        for question in QUESTIONS:
            value = getattr(self, question)
            if value is None or not str(value).strip():
                continue
            answer = str(value).strip().lower()
            if answer not in ANSWERS[question]:
                raise ReviewError(f"record {self.record_id} ({self.record_dt}) labelled by {self.annotator}: "
                                  f"{question} is {value!r}, not one of {', '.join(ANSWERS[question])}")
            found[question] = answer
        return found


def label_rows(annotations: Sequence[Annotation], queue: pl.DataFrame) -> pl.DataFrame:
    """``human_labels`` rows (with ``dt``) of ``annotations``, each joined to its queued record in
    ``queue`` (the queues' rows); a record no queue holds raises :class:`ReviewError`."""
    rows = []
    for item in annotations:
        labelled_at = item.labelled_at if item.labelled_at.tzinfo else item.labelled_at.replace(tzinfo=dt.UTC)
        labelled_at = labelled_at.astimezone(dt.UTC)
        for question, answer in item.answered().items():
            rows.append({"label_id": f"{item.source}:{item.key()}:{question}", "record_dt": item.record_dt,
                         "record_id": item.record_id, "question": question, "label": answer, "note": item.note,
                         "annotator": item.annotator, "labelled_at": labelled_at, "source": item.source,
                         "task_id": item.task_id, "annotation_id": item.key()})
    from_queue = ("run_id", "model", "queue_id", "stratum", "inclusion_probability")
    frame = pl.DataFrame(rows, schema={k: v for k, v in HUMAN_LABELS_SCHEMA.items() if k not in from_queue})
    queued = queue.select("record_dt", "record_id", *from_queue).unique(["record_dt", "record_id"], keep="first")
    joined = frame.join(queued, on=["record_dt", "record_id"], how="left")
    unknown = joined.filter(pl.col("queue_id").is_null())
    if unknown.height:
        first = unknown.row(0, named=True)
        raise ReviewError(f"{unknown['record_id'].n_unique()} labelled records are in no review queue (first: "
                          f"{first['record_id']} of {first['record_dt']}): labels are taken for queued records only")
    return joined.select(pl.col("labelled_at").dt.date().alias("dt"), *HUMAN_LABELS_SCHEMA)


def scan_labels(store: storage.Store) -> pl.LazyFrame | None:
    """Every landed label, one row per label id (with ``dt``); None when none landed."""
    frame = storage.scan_table(store, "human_labels")
    return None if frame is None else frame.unique("label_id", keep="first", maintain_order=True)


def read_labels(store: storage.Store) -> pl.DataFrame:
    """Every landed label (:func:`scan_labels`), or an empty frame of the schema."""
    frame = scan_labels(store)
    if frame is None:
        return pl.DataFrame(schema={"dt": pl.Date, **HUMAN_LABELS_SCHEMA})
    return frame.collect()


class LandedLabels(BaseModel):
    """What a landing of labels did."""

    landed: int = Field(description="Label rows landed now.")
    already: int = Field(description="Label rows given that had landed before (left out).")
    objects: list[str] = Field(default_factory=list, description="URIs of the objects written.")


def land_labels(store: storage.Store, annotations: Sequence[Annotation], queue: pl.DataFrame) -> LandedLabels:
    """Land the rows of ``annotations`` not landed before (see the module's docstring)."""
    rows = label_rows(annotations, queue).unique("label_id", keep="first", maintain_order=True)
    landed = scan_labels(store)
    seen = set() if landed is None else set(landed.select("label_id").collect()["label_id"].to_list())
    new = rows.filter(~pl.col("label_id").is_in(list(seen)))
    written = []
    for (day,), part in new.sort("label_id").group_by(["dt"], maintain_order=True):
        assert isinstance(day, dt.date)
        digest = hashlib.sha256("\n".join(part["label_id"].to_list()).encode()).hexdigest()[:20]
        key = storage.human_labels_key(day, digest)
        storage.write_parquet(store, key, part.drop("dt"))
        written.append(store.uri(key))
    logger.info("human_labels: %d rows landed in %d objects, %d landed before", new.height, len(written),
                rows.height - new.height)
    return LandedLabels(landed=new.height, already=rows.height - new.height, objects=written)


def labelled_records(store: storage.Store) -> set[tuple[dt.date, str]]:
    """(record day, record id) of every record with a landed label."""
    frame = scan_labels(store)
    if frame is None:
        return set()
    return set(frame.select("record_dt", "record_id").unique().collect().iter_rows())


def annotations_from_rows(rows: Iterable[dict[str, object]]) -> list[Annotation]:
    """Annotations from an imported file's rows (:class:`Annotation`'s fields); a bad row raises
    :class:`ReviewError` naming its line."""
    found = []
    for index, row in enumerate(rows, start=1):
        try:
            found.append(Annotation.model_validate(row))
        except ValueError as exc:
            raise ReviewError(f"labels row {index}: {exc}") from exc
    return found
