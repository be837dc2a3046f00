"""Golden sets: labelled input records (docs/golden-sets.md), read and validated like a day's logs.

A golden set is a folder (``{golden_uri}/<set name>/``) of ``.jsonl``, ``.jsonl.gz`` or
``.parquet`` objects (``set.json`` beside them describes the set; other files are ignored). Each
record is a CONTRACT §1 input record with one more field, ``labels``::

    {"record_id": "r1", "timestamp": "2026-01-01T00:00:00Z", "model": "assistant-v2",
     "question": "...", "answer": "...", "contexts": [{"id": "ctx-1", "text": "..."}],
     "labels": {"faithful": false, "rating": 1, "scores": {"faithfulness": 0.2}, "verdict": "fail"}}

The records go through the daily ingest and its Great Expectations row suite (every §1 rule but
``on_day``: a set is not a day), then the labels through :func:`label_problems`. A record that
breaks a rule of either is rejected with every reason, never judged; more rejects than
``max_reject_ratio`` of the set fail the calibration after the rejects are landed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.contract.adapters import type_name as _kind
from evaluation.contract.calibration import LABEL_FIELDS, CalibrationSpec
from evaluation.contract.config import VERDICTS
from evaluation.contract.schemas import LABELS_SCHEMA, RECORD_SCHEMA, REJECT_SCHEMA
from evaluation.judges import MASIS_DIMENSIONS, RAG_METRICS, is_number
from evaluation.stages.ingest import raw_sources, validated_batches
from evaluation.storage.ingest import Reject, iter_object
from evaluation.storage.validation import DayValidator

logger = logging.getLogger(__name__)

#: Metrics a per-metric human score may name (``labels.scores``).
SCORED_METRICS: tuple[str, ...] = tuple(dict.fromkeys(("score", *RAG_METRICS, *MASIS_DIMENSIONS)))
#: The day the row suite is given: its ``on_day`` rule is neutralised (a golden set spans any days).
_SUITE_DAY = dt.date(2000, 1, 1)
#: Optional description of a set, beside its records.
SET_INFO = "set.json"


def label_problems(value: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """The ``labels`` of one golden record, checked: ``(labels, [])`` or ``(None, reasons)``.

    ``faithful`` is a boolean, ``rating`` an integer (any ordinal scale, higher is better),
    ``scores`` an object of metric -> number in [0, 1] (metrics of :data:`SCORED_METRICS`; a
    null value is no label), ``verdict`` one of pass / borderline / fail, ``source_label`` a
    string (kept, not used). At least one of the first four is needed; an unknown field is a
    reason too (a misspelt label must not pass as no label)."""
    if value is None:
        return None, ["labels: missing"]
    if not isinstance(value, dict):
        return None, [f"labels: not an object (got {_kind(value)})"]
    problems: list[str] = []
    unknown = sorted(k for k in value if k not in LABEL_FIELDS)
    if unknown:
        problems.append(f"labels: unknown field {', '.join(map(repr, unknown))} (known: {', '.join(LABEL_FIELDS)})")
    faithful, rating, scores, verdict, source_label = (value.get(k) for k in LABEL_FIELDS)
    if faithful is not None and not isinstance(faithful, bool):
        problems.append(f"labels.faithful: not a boolean (got {_kind(faithful)})")
    if rating is not None and not (isinstance(rating, int) and not isinstance(rating, bool)):
        problems.append(f"labels.rating: not an integer (got {_kind(rating)} {rating!r})")
    kept_scores: dict[str, float] = {}
    if scores is not None and not isinstance(scores, dict):
        problems.append(f"labels.scores: not an object (got {_kind(scores)})")
    elif scores is not None:
        for metric, score in scores.items():
            if score is None:
                continue
            if metric not in SCORED_METRICS:
                problems.append(f"labels.scores: unknown metric {metric!r} (known: {', '.join(SCORED_METRICS)})")
            elif not is_number(score):
                problems.append(f"labels.scores.{metric}: not a number (got {_kind(score)})")
            elif not 0.0 <= score <= 1.0:
                problems.append(f"labels.scores.{metric}: {score} is outside [0, 1]")
            else:
                kept_scores[metric] = float(score)
    if verdict is not None and verdict not in VERDICTS:
        problems.append(f"labels.verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
    if source_label is not None and not isinstance(source_label, str):
        problems.append(f"labels.source_label: not a string (got {_kind(source_label)})")
    if problems:
        return None, problems
    if faithful is None and rating is None and not kept_scores and verdict is None:
        return None, ["labels: no label (give faithful, rating, scores or verdict)"]
    return {"faithful": faithful, "rating": rating, "scores": kept_scores or None, "verdict": verdict,
            "source_label": source_label}, []


def good_label(labels: dict[str, Any]) -> bool | None:
    """The binary label the statistics use: ``faithful``, else ``verdict != fail``, else None."""
    if labels["faithful"] is not None:
        return bool(labels["faithful"])
    if labels["verdict"] is not None:
        return labels["verdict"] != "fail"
    return None


def holdout_split(record_ids: list[str], strata: list[Any], seed: int, share: float) -> list[str]:
    """``holdout`` or ``fit`` per record: within each stratum (the binary label) the records with
    the smallest seeded hashes of their id, ``round(share × n)`` of them, are held out. The same
    seed and ids give the same split whatever the order."""
    groups: dict[Any, list[int]] = {}
    for index, stratum in enumerate(strata):
        groups.setdefault(stratum, []).append(index)
    split = ["fit"] * len(record_ids)
    for members in groups.values():
        ranked = sorted(members, key=lambda i: hashlib.sha256(f"{seed}\x1f{record_ids[i]}".encode()).hexdigest())
        for i in ranked[: round(share * len(members))]:
            split[i] = "holdout"
    return split


class _SetValidator(DayValidator):
    """The row suite of CONTRACT §1 for a golden set: every rule but ``on_day``."""

    def validate_batch(self, rows: pl.DataFrame) -> Any:
        day = pl.when(pl.col("timestamp").is_not_null()).then(pl.lit(self.day.isoformat()))
        return super().validate_batch(rows.with_columns(timestamp_day=day))


@dataclass
class GoldenSet:
    """A golden set as read: its valid labelled records, their labels, and every reject."""

    name: str
    records: pl.DataFrame  #: RECORD_SCHEMA
    labels: pl.DataFrame  #: LABELS_SCHEMA
    rejects: pl.DataFrame  #: REJECT_SCHEMA
    validation: dict[str, Any]
    input_records: int
    info: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


def _objects(store: storage.Store) -> list[storage.ObjectInfo]:
    """The set's record objects: internal folders (``_ledger/``...), hidden files and calibrations
    landed into the set's own folder are no records."""
    return [o for o in store.list("") if o.key.endswith(storage.RAW_SUFFIXES)
            and not o.key.startswith("calibrations/")
            and not any(part.startswith(("_", ".")) for part in o.key.split("/"))]


def _read_labels(store: storage.Store, objects: list[storage.ObjectInfo]) -> dict[tuple[str, int], tuple[Any, ...]]:
    """``(source_uri, line_no) -> (labels or None, problems, raw)`` for every parsed record."""

    found: dict[tuple[str, int], tuple[Any, ...]] = {}
    for source_uri, path in raw_sources(store, objects):
        for item in iter_object(source_uri, path):
            if isinstance(item, tuple):
                line_no, obj, raw = item
                labels, problems = label_problems(obj.get("labels"))
                found[(source_uri, line_no)] = (labels, problems, raw)
    return found


def read_golden_set(store: storage.Store, spec: CalibrationSpec, *, run_id: str) -> GoldenSet:
    """Read and validate the golden set under ``store`` (its folder). Rejects carry every reason
    (CONTRACT §1's and the labels'); ``failures`` holds the set-level rules that broke (no objects,
    no valid labelled record, too many rejects) for the caller to raise once the rejects are landed."""

    name = spec.set_name
    objects = _objects(store)
    info = storage.read_json(store, SET_INFO) if store.exists(SET_INFO) else {}
    validator = _SetValidator(_SUITE_DAY, max_record_chars=spec.max_record_chars, max_reject_ratio=1.0,
                              allow_empty=True)
    valid_parts: list[pl.DataFrame] = []
    rejects: list[Reject] = []
    for batch in validated_batches(store, objects, validator):
        rejects.extend(batch.ingest_rejects)
        rejects.extend(batch.rule_rejects)
        if batch.valid.height:
            valid_parts.append(batch.valid)
    outcome = validator.finish(input_objects=len(objects))
    labels = _read_labels(store, objects)
    # CONTRACT §1's rejects also get the reasons their labels break
    rejects = [r.model_copy(update={"reasons": [*r.reasons, *labels[(r.source_uri, r.line_no)][1]]})
               if r.line_no is not None and (r.source_uri, r.line_no) in labels else r for r in rejects]
    valid = pl.concat(valid_parts) if valid_parts else pl.DataFrame(schema=RECORD_SCHEMA)
    keep: list[bool] = []
    label_rows: list[dict[str, Any]] = []
    for uri, line_no, record_id in valid.select("source_uri", "line_no", "record_id").iter_rows():
        found, problems, raw = labels[(uri, line_no)]
        keep.append(not problems)
        if problems:
            rejects.append(Reject.of(uri, line_no, raw, *problems, record_id=record_id))
        else:
            label_rows.append({"record_id": record_id, **found,
                               "scores": None if found["scores"] is None else json.dumps(found["scores"], sort_keys=True),
                               "good": good_label(found)})
    records = valid.filter(pl.Series(keep, dtype=pl.Boolean)) if keep else valid
    split = holdout_split([r["record_id"] for r in label_rows], [r["good"] for r in label_rows], spec.seed,
                          spec.holdout_share)
    label_frame = pl.DataFrame([{**r, "split": s} for r, s in zip(label_rows, split, strict=True)],
                               schema=LABELS_SCHEMA)
    rejects.sort(key=lambda r: (r.source_uri, r.line_no if r.line_no is not None else -1))
    reject_frame = pl.DataFrame([{"run_id": run_id, **r.model_dump()} for r in rejects], schema=REJECT_SCHEMA)
    input_records = outcome.input_records
    failures = []
    where = f"golden set {name} ({store.root})"
    if not objects:
        failures.append(f"{where}: no records (no .jsonl, .jsonl.gz or .parquet object in the folder)")
    elif records.height == 0:
        failures.append(f"{where}: no valid labelled record among {input_records}")
    elif input_records and len(rejects) / input_records > spec.max_reject_ratio:
        failures.append(f"{where}: {len(rejects)} of {input_records} records rejected "
                        f"({len(rejects) / input_records:.1%}), above max_reject_ratio {spec.max_reject_ratio:.1%}")
    validation = {k: v for k, v in outcome.result_json.items() if k != "day"}
    validation.update(set=name, uri=store.root, rejected=len(rejects), label_rejects=len(rejects) - outcome.rejected_records)
    logger.info("%s: %d input records, %d valid and labelled, %d rejected", where, input_records, records.height,
                len(rejects))
    return GoldenSet(name=name, records=records.select(list(RECORD_SCHEMA)), labels=label_frame,
                     rejects=reject_frame, validation=validation, input_records=input_records, info=info,
                     failures=failures)
