"""Stage 4: score, check the run-level rules, land the day."""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from evaluation import storage
from evaluation.contract.config import EVALUATION_COLUMNS, JUDGE_STATUSES, VERDICTS, RunConfig
from evaluation.contract.schemas import CALLS_SCHEMA, evaluation_schema
from evaluation.judges import score_table
from evaluation.stages._run import (
    STAGED,
    DayResult,
    IngestCounts,
    IngestRecord,
    Manifest,
    RunFailed,
    StaleRun,
    Stores,
    check_claim,
    fail_run,
    read_manifest,
    staged_key,
    valid_part_key,
    where,
    write_run_row,
)
from evaluation.stages.cascade.summary import cascade_summary
from evaluation.stages.thresholds import with_calibrated_thresholds
from evaluation.storage import retention
from evaluation.storage.ledger import compact
from evaluation.storage.summary import SummaryBuilder, segment_values

logger = logging.getLogger(__name__)

#: Judged rows scored together when landing (several chunks at once: scoring has a fixed cost per
#: call; the batch bounds the memory).
LAND_BATCH_ROWS = 50_000
#: Rows of a row group of the landed ``judge_calls``: a row holds the rendered prompts (kilobytes),
#: and the writer holds a row group before writing it (Polars' default, 262,144 rows, is about
#: 0.8 GB of calls; 10,000 rows cost about 1 % more bytes).
CALLS_ROW_GROUP_ROWS = 10_000
#: Tries of a landing's commit when other landings of the day commit between its reading of the
#: day's commit record and its conditional write of it.
COMMIT_TRIES = 3


def score_and_land(
    cfg: RunConfig, stores: Stores, *, started_at: dt.datetime | None = None, waited_s: float | None = None
) -> DayResult:
    """Score every staged judgement, check the run-level rules, then land the day whole: its
    ``rejects``, validation result, ``evaluations``, ``judge_calls`` and ``daily_summary`` are built,
    checked, uploaded and committed at once, with the run's ``runs`` row (``waited_s``: how long the
    run waited for its day to be complete). A run that breaks a rule lands nothing of the day: see
    :func:`fail_run`."""
    started = time.monotonic()
    cfg = with_calibrated_thresholds(cfg, stores.out)
    manifest = read_manifest(cfg, stores)
    if manifest.ingest is None or manifest.plan is None:
        raise RunFailed(f"{where(cfg)}: nothing ingested and planned under "
                        f"{stores.out.uri(storage.work_prefix(cfg.date, cfg.run_id))}")
    with tempfile.TemporaryDirectory(prefix="evaluation-land-") as folder:
        day = build_day(cfg, stores, manifest.ingest, manifest.plan.chunks, Path(folder))
        check_day(cfg, stores, day, started_at=started_at, waited_s=waited_s)
        keys = upload_day(cfg, stores, day.tables)
    land_day(cfg, stores, keys, day.result, manifest, started=started, started_at=started_at, waited_s=waited_s)
    return day.result


@dataclass
class BuiltDay:
    """A run's day complete on local disk, before anything is landed: its tables (name -> local
    Parquet file), its result, and what :func:`reconcile` checks."""

    tables: dict[str, Path]
    result: DayResult
    counts: IngestCounts
    tally: DayTally
    scored_paths: list[Path]
    attempted: int  #: rows that needed a judge (not ``skipped``)
    call_error_ratio: float  #: of them, the share whose call failed


@dataclass
class _Scored:
    """The day's chunks scored batch by batch: the scored and call files, the summary and tally."""

    summary: SummaryBuilder = field(default_factory=SummaryBuilder)
    tally: DayTally = field(default_factory=lambda: DayTally())
    scored_paths: list[Path] = field(default_factory=list)
    call_paths: list[Path] = field(default_factory=list)


def build_day(cfg: RunConfig, stores: Stores, ingest: IngestRecord, chunk_count: int, folder: Path) -> BuiltDay:
    """Score the run's judged chunks and write every table of its day into ``folder``, with the
    run's result (its counts, statuses, tokens and cost; a cascade's summary). Raises
    :class:`RunFailed` when a chunk was not judged."""
    judged_keys = [storage.chunk_key(cfg.date, cfg.run_id, "judged", i) for i in range(chunk_count)]
    missing = [k for k in judged_keys if not stores.out.exists(k)]
    if missing:
        raise RunFailed(f"{where(cfg)}: {len(missing)} of {chunk_count} chunks were not judged "
                        f"(first missing: {stores.out.uri(missing[0])})")
    scored = _score_chunks(cfg, stores, judged_keys, folder)
    tables = {name: folder / f"{name}.parquet" for name in ("evaluations", "judge_calls", "daily_summary")}
    evaluations = (
        pl.scan_parquet(scored.scored_paths) if scored.scored_paths
        else pl.DataFrame(schema=evaluation_schema()).lazy()
    )
    evaluations.sink_parquet(tables["evaluations"], compression=storage.PARQUET_COMPRESSION)
    calls = pl.scan_parquet(scored.call_paths) if scored.call_paths else pl.DataFrame(schema=CALLS_SCHEMA).lazy()
    calls.sink_parquet(tables["judge_calls"], compression=storage.PARQUET_COMPRESSION,
                       row_group_size=CALLS_ROW_GROUP_ROWS)
    summary = scored.summary.finish(cfg.run_id, day_segments(cfg, stores, ingest.valid_parts))
    summary.write_parquet(tables["daily_summary"], compression=storage.PARQUET_COMPRESSION, statistics=True)
    result, attempted, call_error_ratio = _day_result(cfg, stores, ingest.counts, summary, scored.tally)
    if cfg.cascade:
        result.cascade = cascade_summary(cfg, pl.scan_parquet(tables["evaluations"]),
                                         pl.scan_parquet(tables["judge_calls"]))
    return BuiltDay(tables, result, ingest.counts, scored.tally, scored.scored_paths, attempted, call_error_ratio)


def _score_chunks(cfg: RunConfig, stores: Stores, judged_keys: list[str], folder: Path) -> _Scored:
    """Scoring is row-wise, so the day is scored in batches of chunks (at most
    :data:`LAND_BATCH_ROWS` rows) and every day-level figure (summary, totals, reconciliation) is
    accumulated batch by batch; the landed tables are streamed from the scored files. Memory
    follows the batch, not the day."""
    scored = _Scored()
    batch: list[pl.DataFrame] = []

    def score_batch() -> None:
        frame = (  # each judge's verdicts at its own thresholds (its calibration's, or the run's)
            score_table(pl.concat(batch), cfg.thresholds, per_judge=cfg.thresholds_in_force)
            .with_columns(run_id=pl.lit(cfg.run_id))
            .select([pl.col(c) for c in EVALUATION_COLUMNS if c != "dt"])
        )
        path = folder / f"scored-{len(scored.scored_paths):05d}.parquet"
        frame.write_parquet(path)
        scored.scored_paths.append(path)
        scored.summary.add(pl.scan_parquet(path))  # the batch's own file: nothing written twice
        scored.tally.add_evaluations(frame)
        batch.clear()

    for index, judged_key in enumerate(judged_keys):
        batch.append(storage.read_parquet(stores.out, judged_key))
        if sum(frame.height for frame in batch) >= LAND_BATCH_ROWS:
            score_batch()
        call_path = folder / f"calls-{index:05d}.parquet"
        stores.out.download_file(storage.chunk_key(cfg.date, cfg.run_id, "calls", index), call_path)
        scored.call_paths.append(call_path)
        scored.tally.add_calls(pl.read_parquet(call_path, columns=["attempts", "cached"]))
    if batch:
        score_batch()
    return scored


def _day_result(cfg: RunConfig, stores: Stores, counts: IngestCounts, summary: pl.DataFrame,
                tally: DayTally) -> tuple[DayResult, int, float]:
    """The run's result, the rows that needed a judge and the share of them whose call failed. The day's status counts, tokens and cost
    are the summary's, summed over its groups."""
    totals = summary.filter(pl.col("segment_key").is_null()).select(
        *[pl.col(f"n_{s}").sum().alias(s) for s in JUDGE_STATUSES],
        pl.col("input_tokens").sum(), pl.col("output_tokens").sum(), pl.col("cost_usd").sum(),
    ).row(0, named=True)
    statuses: dict[str, int] = {s: int(totals[s] or 0) for s in JUDGE_STATUSES}
    attempted = tally.rows - statuses["skipped"]
    call_error_ratio = statuses["call_error"] / attempted if attempted else 0.0
    result = DayResult(
        run_id=cfg.run_id,
        dt=cfg.date.isoformat(),
        **counts.model_dump(),
        judges=list(cfg.judges),
        rows=tally.rows,
        statuses=statuses,
        verdicts=dict(tally.verdicts),
        calls_made=tally.call_totals["made"],
        calls_reused=tally.call_totals["reused"],
        input_tokens=int(totals["input_tokens"] or 0),
        output_tokens=int(totals["output_tokens"] or 0),
        cost_usd=round(float(totals["cost_usd"] or 0.0), 6),
        call_error_ratio=round(call_error_ratio, 4),
        output_uri=stores.out.root,
    )
    return result, attempted, call_error_ratio


def check_day(cfg: RunConfig, stores: Stores, day: BuiltDay, *, started_at: dt.datetime | None,
              waited_s: float | None) -> None:
    """The run-level rules over a built day: its counts reconcile (:func:`reconcile`, which sets
    ``reconciled`` on its result) and its call errors are within ``max_call_error_ratio``; else the
    run fails (:func:`fail_run`, its rows kept as evidence) and nothing of the day lands."""
    result, statuses = day.result, day.result.statuses
    evidence = stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id))
    try:
        result.reconciled = reconcile(cfg, day.counts, day.tally, day.scored_paths)
        if day.call_error_ratio > cfg.max_call_error_ratio:
            raise RunFailed(f"{where(cfg)}: {statuses['call_error']} of {day.attempted} judge calls failed "
                            f"({day.call_error_ratio:.1%}), above max_call_error_ratio {cfg.max_call_error_ratio:.1%}")
    except RunFailed as exc:
        raise fail_run(cfg, stores, f"{exc}; the day's landed tables were kept, this run's rows are at {evidence}",
                       scored=day.tables, result=result.model_dump(), started_at=started_at, waited_s=waited_s) from exc


def land_day(cfg: RunConfig, stores: Stores, keys: dict[str, str], result: DayResult, manifest: Manifest, *,
             started: float, started_at: dt.datetime | None, waited_s: float | None) -> None:
    """Land the uploaded day: commit its objects (:func:`commit_or_withdraw`), write the run's
    ``runs`` row, delete what the commit superseded and the run's work files, and compact the
    day's ledger."""
    commit, replaced = commit_or_withdraw(cfg, stores, keys)
    timings = {**manifest.timings, "score_land_s": round(time.monotonic() - started, 3)}
    write_run_row(cfg, stores, result.model_dump(), manifest, timings, "success", None, started_at, waited_s=waited_s)
    delete_superseded(cfg, stores, commit, replaced)
    stores.out.delete_prefix(storage.work_prefix(cfg.date, cfg.run_id))
    logger.info("%s landed: %s", where(cfg), result)
    compact_ledger(cfg, stores)


def day_segments(cfg: RunConfig, stores: Stores, parts: int) -> pl.DataFrame | None:
    """Each valid record's value of each of the run's ``segments`` (metadata paths), read from the
    staged valid records (their ids and metadata only); None for a run without segments."""
    if not cfg.segments or not parts:
        return None
    records = pl.concat([storage.read_parquet(stores.out, valid_part_key(cfg, i)).select("record_id", "metadata")
                         for i in range(parts)])
    return segment_values(records.lazy(), cfg.segments)


def upload_day(cfg: RunConfig, stores: Stores, tables: dict[str, Path]) -> dict[str, str]:
    """Write every object of the run's day under the run's own names (the staged rejects and
    validation result, and ``tables``, name -> local Parquet file); returns name -> key. Nothing a
    reader sees changes: the day's commit record still names the previous run's objects. A run
    whose objects are the landed day already (it lands again under the same run id: a cleared
    DAG run) writes under its other names, so no object a reader may be reading is overwritten;
    a retry before the commit writes over the names its dead attempt used (no reader reads them)."""
    check_claim(cfg, stores)
    landed = storage.read_landed(stores.out, [cfg.date]).commits.get(cfg.date)
    again = landed is not None and storage.landing_key("evaluations", cfg.date, cfg.run_id) in landed.objects.values()
    keys = {name: storage.landing_key(name, cfg.date, cfg.run_id, again=again) for name in storage.DAY_OBJECTS}
    for name in STAGED:
        stores.out.copy(staged_key(cfg, name), keys[name])
    for name, path in tables.items():
        stores.out.upload_file(keys[name], path)
    return keys


def commit_or_withdraw(
    cfg: RunConfig, stores: Stores, keys: dict[str, str]
) -> tuple[storage.DayCommit, storage.DayCommit | None]:
    """Commit the run's objects as the day (one conditional PUT: every reader goes from the
    previous run's day to this one's at once), unless a newer run claimed the day during the
    uploads: then it alone may commit, and this run's objects are deleted before :class:`StaleRun`
    is raised. Returns the commit and the one it replaced (None for a first landing).

    The PUT succeeds only over the record this landing read (S3's ``If-Match``, or
    ``If-None-Match: *`` where it read none): a landing that another one overtook fails the write,
    reads the day again (the claim, then the record) and tries again, at most
    :data:`COMMIT_TRIES` times; it never overwrites a commit it did not see."""
    out, uri = stores.out, stores.out.uri(storage.commit_key(cfg.date))
    for attempt in range(1, COMMIT_TRIES + 1):
        try:
            check_claim(cfg, stores)
        except StaleRun:
            out.delete_keys(list(keys.values()))
            raise
        version = storage.commit_version(out, cfg.date)  # before the record: see commit_version
        replaced = storage.read_landed(out, [cfg.date]).commits.get(cfg.date)
        try:
            return storage.commit_day_if(out, cfg.date, cfg.run_id, keys, version), replaced
        except storage.StaleWrite as exc:
            logger.warning("%s: another landing committed the day after this one read %s (%s): reading the day "
                           "again (try %d of %d)", where(cfg), uri, exc, attempt, COMMIT_TRIES)
    raise RunFailed(f"{where(cfg)}: the day's commit record {uri} changed under each of {COMMIT_TRIES} tries to "
                    "commit: other landings of the day keep committing; nothing of this run was committed "
                    "(its objects are left to gc)")


def delete_superseded(cfg: RunConfig, stores: Stores, commit: storage.DayCommit,
                      replaced: storage.DayCommit | None) -> None:
    """Delete the objects of the day's commit ``replaced`` that ``commit`` does not name, and those
    of landings that died (named by no commit, and older than
    :data:`~evaluation.storage.retention.UNCOMMITTED_MIN_DAYS`, as ``gc`` takes them): never a younger
    uncommitted object, which may be another landing's under way, nor one a newer commit names.
    The day has landed already: a failure here is logged, never the run's; the next landing of the
    day or ``gc`` deletes them (meanwhile engines that glob the folders see them)."""
    ours = set(commit.objects.values())
    superseded = set(replaced.objects.values()) - ours if replaced is not None else set()
    dead_before = time.time() - retention.UNCOMMITTED_MIN_DAYS * 86_400
    try:
        objects = storage.list_day_objects(stores.out, [cfg.date])
        stale = [info.key for info in storage.uncommitted(objects, storage.Landed({cfg.date: commit}))
                 if info.key in superseded or info.modified < dead_before]
        stores.out.delete_keys(stale)
    except Exception as exc:  # readers of the project read through the commit: nothing they see is wrong
        logger.warning("%s: the objects the landing superseded were not deleted (the next landing or gc "
                       "deletes them): %s", where(cfg), exc)
        return
    logger.info("%s: deleted %d superseded objects of the day", where(cfg), len(stale))


def compact_ledger(cfg: RunConfig, stores: Stores) -> None:
    """Compact the landed day's ledger (:func:`evaluation.storage.ledger.compact`). The day has landed
    already: a failure here is logged, never the run's, and the next landing compacts."""
    try:
        compact(stores.out, cfg.date)
    except Exception as exc:  # the ledger stays readable as it is: only smaller objects are lost
        logger.warning("%s: the day's ledger was not compacted (the next landing tries again): %s", where(cfg), exc)


#: Top bits of a pair hash that pick its bucket (see :class:`DayTally`).
_BUCKET_BITS = 4
#: A row's 64-bit hash of its (record_id, judge) pair.
_PAIR_HASH = pl.struct("record_id", "judge").hash(seed=7)


class DayTally:
    """What landing needs beyond ``daily_summary``, accumulated batch by batch: verdicts over all
    rows (the summary counts ``ok`` rows' only), calls made and reused, and the inputs of
    :func:`reconcile`.

    Duplicate (record_id, judge) pairs are looked for through a 64-bit hash per row (8 bytes a
    row, not the ids), kept in buckets by their top :data:`_BUCKET_BITS` bits so that finding the
    repeated ones sorts a bucket at a time (a sixteenth of the day more); :func:`reconcile`
    confirms any hash seen twice on the ids themselves."""

    def __init__(self) -> None:
        self.verdicts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
        self.call_totals: dict[str, int] = {"made": 0, "reused": 0}
        self.rows = 0
        self.bad_status = 0
        self._hashes: list[list[np.ndarray]] = [[] for _ in range(1 << _BUCKET_BITS)]

    def add_evaluations(self, scored: pl.DataFrame) -> None:
        sums = scored.select(
            *[(pl.col("verdict") == v).sum().alias(v) for v in VERDICTS],
            (~pl.col("judge_status").is_in(list(JUDGE_STATUSES))).sum().alias("bad_status"),
        ).row(0, named=True)
        self.bad_status += int(sums.pop("bad_status") or 0)
        for verdict, count in sums.items():
            self.verdicts[verdict] += count or 0
        self.rows += scored.height
        hashes = scored.select(_PAIR_HASH).to_series().to_numpy()
        bucket = hashes >> np.uint64(64 - _BUCKET_BITS)
        for index, parts in enumerate(self._hashes):
            parts.append(hashes[bucket == index])

    def add_calls(self, calls: pl.DataFrame) -> None:
        self.call_totals["made"] += int((calls["attempts"] > 0).sum())
        self.call_totals["reused"] += int(calls["cached"].sum())

    def repeated_hashes(self) -> pl.Series:
        repeated = []
        for parts in self._hashes:
            hashes = np.concatenate(parts) if parts else np.empty(0, np.uint64)
            hashes.sort()
            repeated.append(np.unique(hashes[1:][hashes[1:] == hashes[:-1]]))
        return pl.Series("h", np.concatenate(repeated), dtype=pl.UInt64)


def reconcile(cfg: RunConfig, counts: IngestCounts, tally: DayTally, scored_paths: list[Path]) -> dict[str, int]:
    """CONTRACT §4: input = valid + rejected; rows = valid × judges; one status per row. Logged calls
    that are not records to judge (``skipped``) are counted beside them, not in the input."""
    problems = []
    if counts.input != counts.valid + counts.rejected:
        problems.append(f"input {counts.input} != valid {counts.valid} + rejected {counts.rejected}")
    expected = counts.valid * len(cfg.judges)
    if tally.rows != expected:
        problems.append(f"{tally.rows} evaluation rows, expected {counts.valid} × {len(cfg.judges)} = {expected}")
    suspects = tally.repeated_hashes()
    if suspects.len():  # confirm on the ids: two different pairs may share a hash
        frame = pl.scan_parquet(scored_paths).select("record_id", "judge")
        candidates = frame.filter(_PAIR_HASH.is_in(suspects.implode()))
        duplicates = candidates.group_by("record_id", "judge").len().filter(pl.col("len") > 1).select(pl.len()).collect().item()
        if duplicates:
            problems.append(f"{duplicates} duplicate (record_id, judge) pairs")
    if tally.bad_status:
        problems.append(f"{tally.bad_status} rows without a valid judge_status")
    if problems:
        raise RunFailed(f"{where(cfg)}: counts do not reconcile: " + "; ".join(problems))
    return {"input": counts.input, "valid": counts.valid, "rejected": counts.rejected,
            "skipped": sum(counts.skipped.values()), "rows": tally.rows, "expected_rows": expected}

