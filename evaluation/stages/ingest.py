"""Stage 1: ingest and validate the day's raw objects."""

from __future__ import annotations

import collections
import datetime as dt
import logging
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.contract.adapters import FORMAT_SUFFIXES, InputAdapter, adapter_for, layout_of
from evaluation.contract.config import RunConfig
from evaluation.contract.reject_summary import reason_lines, summarise_rejects
from evaluation.contract.review import ReviewSpec
from evaluation.contract.schemas import RECORD_SCHEMA, REJECT_SCHEMA
from evaluation.stages._run import (
    IngestCounts,
    IngestRecord,
    Stores,
    check_claim,
    claim_day,
    fail_run,
    read_manifest,
    staged_key,
    valid_part_key,
    where,
    write_record,
)
from evaluation.storage.ingest import BATCH_ROWS, Assembler, ingest_batches
from evaluation.storage.otel import assemble_traces

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DayInput:
    """Where a day's raw logs lie, which objects are logs and how they become records: the run's
    layout and format."""

    input_format: str = "own"
    layout: str = "hive"

    @classmethod
    def of(cls, options: RunConfig | ReviewSpec) -> DayInput:
        """The input a run reads (or, for the review queue's texts, read)."""
        return cls(options.input_format, layout_of(options.input_format, options.input_layout))

    @property
    def assemble(self) -> Assembler | None:
        """What turns the parsed objects into records first: OpenTelemetry's spans into one record per answer."""
        return assemble_traces if self.input_format == "otel" else None

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The suffixes of the format's log objects."""
        return FORMAT_SUFFIXES[self.input_format]

    def prefix(self, day: dt.date) -> str:
        """The day's prefix under the input root."""
        return storage.raw_prefix(day, self.layout)


def raw_objects(store: storage.Store, day: dt.date, source: DayInput = DayInput()) -> list[storage.ObjectInfo]:
    """The day's raw log objects: those under the day's prefix (in the input's layout) with a
    suffix of its format (``.jsonl``, ``.jsonl.gz``, ``.parquet``; ``.json`` for LiteLLM's and
    OpenTelemetry's), listed once."""
    return [o for o in store.list(source.prefix(day)) if o.key.endswith(source.suffixes)]


#: Days before a missing day that :func:`missing_input` looks at, to tell a wrong root from a missing day.
NEIGHBOUR_DAYS = 7


def _kind(key: str) -> str:
    """What a found object is, for messages: its suffix (``.csv``, ``.jsonl.bz2``), else its name."""
    name = key.rsplit("/", 1)[-1]
    return name[name.index("."):] if "." in name.lstrip(".") else name


def missing_input(store: storage.Store, day: dt.date, source: DayInput = DayInput()) -> str | None:
    """None when the day has raw log objects; else what was found instead, naming the URI read:
    objects of other kinds (which suffixes), an existing but empty prefix, or no prefix at all
    (and then whether the days before it exist, which tells a missing day from a wrong root)."""
    prefix = source.prefix(day)
    uri = store.uri(prefix)
    found = [o for o in store.list(prefix) if not o.key.endswith("/")]  # "folder/" markers are not objects
    if any(o.key.endswith(source.suffixes) for o in found):
        return None
    logs = ", ".join(source.suffixes)
    if found:
        kinds = collections.Counter(_kind(info.key) for info in found)
        listed = ", ".join(f"{kind} ×{n}" if n > 1 else kind for kind, n in sorted(kinds.items()))
        return f"no input objects: {uri} holds {len(found)} object(s), none of them logs ({logs}): found {listed}"
    if isinstance(store, storage.LocalStore) and (store.path / prefix).is_dir():
        return f"no input objects: {uri} exists but holds no objects"
    if isinstance(store, storage.LocalStore) and not store.path.is_dir():
        return f"no input objects: {uri} does not exist, nor does the input root {store.root}"
    earlier = [day - dt.timedelta(days=n) for n in range(1, NEIGHBOUR_DAYS + 1)]
    present = [d for d in earlier if store.list(source.prefix(d))]
    if present:
        days = ", ".join(source.prefix(d).rstrip("/") for d in present[:3]) + (", ..." if len(present) > 3 else "")
        return f"no input objects: {uri} does not exist (the input root holds earlier days: {days})"
    return (f"no input objects: {uri} does not exist, nor do the {NEIGHBOUR_DAYS} days before it under "
            f"{store.uri('')} (is the input URI right? input_layout {source.layout} reads {source.prefix(day)})")


#: Objects up to this size are read into memory, several at a time; larger ones go through a file.
SMALL_OBJECT_BYTES = 1 << 20
#: Bytes of small objects held read ahead at most (beyond the one that crosses it).
READ_AHEAD_BYTES = 64 << 20


def raw_sources(store: storage.Store, objects: list[storage.ObjectInfo]) -> Iterator[tuple[str, bytes | Path]]:
    """Each raw object in key order: a directory store's own file, or an S3 object read while
    the objects before it are parsed. As many reads are in flight as the S3 client has connections
    (:attr:`~evaluation.storage.S3Store.connections`, 64 unless configured: each read in flight
    holds one) and at most twice as many objects, and :data:`READ_AHEAD_BYTES`, are held read
    ahead: a small object (one LiteLLM call) as its bytes, a larger one as a file downloaded when
    its turn comes and deleted after. Memory follows the window, not the day."""
    if isinstance(store, storage.LocalStore):
        for info in objects:
            yield store.uri(info.key), store.path / info.key
        return
    concurrency = store.connections if isinstance(store, storage.S3Store) else 1
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="raw-read") as pool:
        window: collections.deque[tuple[storage.ObjectInfo, Future[bytes] | None]] = collections.deque()
        pending = iter(objects)
        held = 0  # bytes of the small objects in the window
        while True:
            while (len(window) < 2 * concurrency and held < READ_AHEAD_BYTES
                   and (ahead := next(pending, None)) is not None):
                small = ahead.size <= SMALL_OBJECT_BYTES
                held += ahead.size if small else 0
                window.append((ahead, pool.submit(store.read_bytes, ahead.key) if small else None))
            if not window:
                return
            info, future = window.popleft()
            if future is not None:
                held -= info.size
                yield store.uri(info.key), future.result()
                continue
            with tempfile.TemporaryDirectory(prefix="evaluation-raw-") as folder:
                path = Path(folder) / "raw-object"
                store.download_file(info.key, path)
                yield store.uri(info.key), path


@dataclass
class ValidatedBatch:
    """One bounded batch of the day's input after the row rules."""

    valid: pl.DataFrame  #: valid records at RECORD_SCHEMA
    ingest_rejects: list[Any]  #: lines that did not parse as records
    rule_rejects: list[Any]  #: records that broke a row rule of the suite
    skipped: dict[str, int]  #: parsed objects that are not records to judge, by why


def validated_batches(
    store: storage.Store,
    objects: list[storage.ObjectInfo],
    validator: Any,
    *,
    batch_rows: int = BATCH_ROWS,
    adapter: InputAdapter | None = None,
    assemble: Assembler | None = None,
) -> Iterator[ValidatedBatch]:
    """The raw objects read one at a time, in batches of at most ``batch_rows`` input records, each
    checked by ``validator`` (a :class:`~evaluation.storage.validation.DayValidator`, which also counts
    the day's totals for its table rules). Memory follows the batch, not the day.

    With an ``adapter``, the suite validates the mapped records and each reject's reasons name
    the fields as the log spells them."""
    sources = raw_sources(store, objects)
    for batch in ingest_batches(sources, validator.day, batch_rows=batch_rows, adapter=adapter, assemble=assemble):
        validator.add_ingest_rejects(len(batch.rejects), batch.damaged)
        if batch.rows.height == 0:
            yield ValidatedBatch(pl.DataFrame(schema=RECORD_SCHEMA), batch.rejects, [], batch.skipped)
            continue
        checked = validator.validate_batch(batch.rows)
        valid = checked.valid.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()])
        rejects = checked.rejects
        if adapter is not None:
            rejects = [r.model_copy(update={"reasons": adapter.name_reasons(r.reasons, r.raw)}) for r in rejects]
        yield ValidatedBatch(valid, batch.rejects, rejects, batch.skipped)


def _write_rejects(cfg: RunConfig, rejects: list[Any], path: Path) -> Path:
    pl.DataFrame([{"run_id": cfg.run_id, **r.model_dump()} for r in rejects], schema=REJECT_SCHEMA).write_parquet(path)
    return path


def _stage_batches(cfg: RunConfig, stores: Stores, batches: Iterator[ValidatedBatch],
                   folder: Path) -> tuple[list[Path], collections.Counter[str], int, int]:
    """Stage each batch's valid rows as a part and write its rejects to local parts under ``folder``:
    the reject parts (ingest rejects first, then row-rule rejects), the objects skipped by why, the
    valid parts staged and their records."""
    ingest_parts: list[Path] = []
    rule_parts: list[Path] = []
    skipped: collections.Counter[str] = collections.Counter()
    valid_parts = valid_records = 0
    for index, batch in enumerate(batches):
        skipped.update(batch.skipped)
        if batch.ingest_rejects:
            ingest_parts.append(_write_rejects(cfg, batch.ingest_rejects, folder / f"ingest-{index:05d}.parquet"))
        if batch.rule_rejects:
            rule_parts.append(_write_rejects(cfg, batch.rule_rejects, folder / f"rules-{index:05d}.parquet"))
        if batch.valid.height:
            storage.write_parquet(stores.out, valid_part_key(cfg, valid_parts), batch.valid)
            valid_parts += 1
            valid_records += batch.valid.height
        del batch
    return [*ingest_parts, *rule_parts], skipped, valid_parts, valid_records


def ingest_and_validate(cfg: RunConfig, stores: Stores, *, batch_rows: int = BATCH_ROWS) -> IngestCounts:
    """Read the day's raw objects, validate them (Great Expectations), stage the valid records,
    the rejects and the validation result. Raises RunFailed on a table rule, with the evidence
    under ``_failed/``. The day streams through in bounded batches (:func:`_stage_batches`)."""
    # pandas via validation (Great Expectations on use): only when a day is ingested
    from evaluation.storage.validation import DayValidator

    started = time.monotonic()
    if read_manifest(cfg, stores).ingest is not None:
        check_claim(cfg, stores)  # a retry must not take the day back from a newer run
    claim_day(cfg, stores)
    source = DayInput.of(cfg)
    objects = raw_objects(stores.raw, cfg.date, source)
    logger.info("%s: %d input objects under %s", where(cfg), len(objects), stores.raw.uri(source.prefix(cfg.date)))
    validator = DayValidator(
        cfg.date,
        max_record_chars=cfg.max_record_chars,
        max_reject_ratio=cfg.max_reject_ratio,
        allow_empty=cfg.allow_empty,
    )
    stores.out.delete_prefix(storage.work_key(cfg.date, cfg.run_id, "valid/"))
    with tempfile.TemporaryDirectory(prefix="evaluation-rejects-") as folder:
        batches = validated_batches(stores.raw, objects, validator, batch_rows=batch_rows,
                                    adapter=adapter_for(cfg.input_format, cfg.input_mapping),
                                    assemble=source.assemble)
        parts, skipped, valid_parts, valid_records = _stage_batches(cfg, stores, batches, Path(folder))
        outcome = validator.finish(input_objects=len(objects),
                                   missing=None if objects else missing_input(stores.raw, cfg.date, source))
        rejects = pl.scan_parquet(parts) if parts else pl.DataFrame(schema=REJECT_SCHEMA).lazy()
        rejected = storage.sink_parquet(stores.out, staged_key(cfg, "rejects"), rejects)
        # why, when the rejects fail the day: counts by reason with examples, for the error and runs
        reasons = summarise_rejects(pl.scan_parquet(parts)) if outcome.table_failures and parts else []
    storage.write_json(stores.out, staged_key(cfg, "validation"), outcome.result_json)
    if (valid_records, rejected) != (outcome.valid_records, outcome.rejected_records):
        raise fail_run(cfg, stores, f"{where(cfg)}: counts do not reconcile after validation: staged {valid_records} "
                       f"valid and {rejected} rejects, the suites counted {outcome.valid_records} and "
                       f"{outcome.rejected_records}")
    counts = IngestCounts(objects=len(objects), input=valid_records + rejected, valid=valid_records, rejected=rejected,
                          skipped=skipped)
    write_record(cfg, stores, "ingest", IngestRecord(counts=counts, valid_parts=valid_parts,
                                                     seconds=round(time.monotonic() - started, 3)))
    logger.info("%s: %s in %d batches", where(cfg), counts, validator.batches)
    if outcome.table_failures:
        evidence = stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id))
        raise fail_run(cfg, stores, f"{where(cfg)} failed validation: " + "; ".join(outcome.table_failures)
                       + (f"; rejects by reason: {reason_lines(reasons)}" if reasons else "")
                       + f" (its rejects and validation result are at {evidence}, in sql as failed_rejects; "
                       "the day's landed tables were kept)", reject_reasons=reasons)
    return counts
