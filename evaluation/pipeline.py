"""The stages of a day's evaluation, shared by the Airflow DAG and ``python -m evaluation run``.

    ingest_and_validate -> plan_chunks -> judge_chunk (one per chunk) -> score_and_land

    check_run -> ingest_and_validate -> plan_chunks -> judge_chunk (one per chunk) -> score_and_land

Each stage reads what the previous one staged under ``_work/dt=.../run=.../`` and returns only
counts and keys (what the DAG passes through XCom). Every stage is idempotent for its run: a
retried stage rewrites the same keys. Run-level problems raise :class:`RunFailed` naming the run,
the day and the cause; per-record problems are rows with a status.

Nothing replaces the day's landed tables before every run-level rule has passed: ingest stages
the rejects and the validation result with the run, and :func:`score_and_land` lands every table
of the day only after the counts reconcile and the call-error ceiling holds. A run that breaks a
rule lands its evidence under ``_failed/`` (see :func:`~evaluation.storage.failed_prefix`) and its
``runs`` row with status ``failed`` and the cause; the day's tables and report stay as they were.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.contract import (
    EVALUATION_COLUMNS,
    JUDGE_STATUSES,
    RULES_VERSION,
    VERDICTS,
    InputRecord,
    JudgeName,
    RunConfig,
)
from evaluation.judges import (
    PROMPT_VERSIONS,
    RenderedPrompt,
    call_error_row,
    not_applicable_row,
    parse_reply,
    render,
)
from evaluation.scoring import score_table
from evaluation.summary import SummaryBuilder

logger = logging.getLogger(__name__)


class RunFailed(RuntimeError):
    """A run-level failure: the message names the run, the day and the cause."""


class StaleRun(RunFailed):
    """Another, newer run owns the day: this one may not land."""


class JudgeUnreachable(RuntimeError):
    """The judge model's endpoint did not answer the probe call (a transient failure: retry)."""


class JudgeUnusable(ValueError):
    """The judge model cannot be used: litellm cannot resolve it, or its endpoint refused the
    probe call for good (unknown model, bad key, quota)."""


# --------------------------------------------------------------------------------------------
# Schemas

RECORD_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "timestamp": pl.Datetime("us", "UTC"),
    "model": pl.String,
    "question": pl.String,
    "answer": pl.String,
    "contexts": pl.String,
    "reference": pl.String,
    "expected_outcome": pl.String,
    "rubrics": pl.String,
    "evaluation_goal": pl.String,
    "metadata": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
}

_LIST = pl.List(pl.String)
PARSED_SCHEMA: dict[str, Any] = {
    "record_id": pl.String,
    "conversation_id": pl.String,
    "model": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "rules_version": pl.String,
    "judge_status": pl.String,
    "score": pl.Float64,
    "faithfulness": pl.Float64,
    "relevance": pl.Float64,
    "completeness": pl.Float64,
    "reasoning_quality": pl.Float64,
    "context_relevance": pl.Float64,
    "answer_relevance": pl.Float64,
    "semantic_similarity": pl.Float64,
    "evaluation_goal": pl.String,
    "hits": _LIST,
    "misses": _LIST,
    "reasoning": pl.String,
    "explanations": pl.String,
    "improvement_suggestions": _LIST,
    "citations": _LIST,
    "invalid_citations": _LIST,
    "uncited_claim_count": pl.Int64,
    "hallucination_detected": pl.Boolean,
    "reason": pl.String,
    "error": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "attempts": pl.Int64,
    "cached": pl.Boolean,
    "judged_at": pl.Datetime("us", "UTC"),
    "reference_missing": pl.Boolean,
    "rubric_mode": pl.Boolean,
    "required_unsatisfied": pl.Boolean,
}

CALLS_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "record_id": pl.String,
    "judge": pl.String,
    "judge_model": pl.String,
    "prompt_version": pl.String,
    "request_hash": pl.String,
    "system_prompt": pl.String,
    "user_prompt": pl.String,
    "raw_response": pl.String,
    "error": pl.String,
    "error_class": pl.String,
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "attempts": pl.Int64,
    "cached": pl.Boolean,
    "judged_at": pl.Datetime("us", "UTC"),
    "redactions": pl.Int64,
}

REJECT_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "source_uri": pl.String,
    "line_no": pl.Int64,
    "record_id": pl.String,
    "raw": pl.String,
    "reasons": _LIST,
}


# --------------------------------------------------------------------------------------------
# Stores and claims


@dataclass
class Stores:
    """The input and output stores of a run."""

    raw: storage.Store
    out: storage.Store

    @classmethod
    def open(cls, cfg: RunConfig, client: Any | None = None) -> Stores:
        """Stores for the config's URIs (one boto3 client shared when both are on S3)."""
        needs_s3 = cfg.input_uri.startswith("s3://") or cfg.output_uri.startswith("s3://")
        if needs_s3 and client is None:
            client = storage.s3_client()
        return cls(storage.open_store(cfg.input_uri, client), storage.open_store(cfg.output_uri, client))


def _where(cfg: RunConfig) -> str:
    return f"run {cfg.run_id} of {cfg.date.isoformat()}"


def claim_day(cfg: RunConfig, stores: Stores) -> None:
    """Make this run the owner of the day's landing (a newer run takes the claim over)."""
    storage.write_json(stores.out, storage.claim_key(cfg.date), {"run_id": cfg.run_id, "trigger": cfg.trigger})


def check_claim(cfg: RunConfig, stores: Stores) -> None:
    """Refuse to land when a newer run has claimed the day since this one started."""
    key = storage.claim_key(cfg.date)
    owner = storage.read_json(stores.out, key).get("run_id") if stores.out.exists(key) else None
    if owner not in (None, cfg.run_id):
        raise StaleRun(f"{_where(cfg)}: run {owner} has claimed the day since; this run may not land")


def _manifest_key(cfg: RunConfig) -> str:
    return storage.work_key(cfg.date, cfg.run_id, "manifest.json")


def _read_manifest(cfg: RunConfig, stores: Stores) -> dict[str, Any]:
    key = _manifest_key(cfg)
    return storage.read_json(stores.out, key) if stores.out.exists(key) else {}


def _update_manifest(cfg: RunConfig, stores: Stores, **values: Any) -> dict[str, Any]:
    manifest = _read_manifest(cfg, stores)
    manifest.update(values)
    storage.write_json(stores.out, _manifest_key(cfg), manifest)
    return manifest


#: What ingest stages for the landing: the day's rejects and its validation result.
_STAGED = {"rejects": "rejects.parquet", "validation": "validation.json"}


def staged_key(cfg: RunConfig, name: str) -> str:
    """Where ingest stages ``name`` (rejects, validation) of the run until the landing."""
    return storage.work_key(cfg.date, cfg.run_id, _STAGED[name])


def _landed_key(cfg: RunConfig, name: str) -> str:
    return storage.validation_key(cfg.date) if name == "validation" else storage.table_key(name, cfg.date)


def fail_run(
    cfg: RunConfig,
    stores: Stores,
    message: str,
    *,
    counts: dict[str, Any] | None = None,
    scored: dict[str, Path] | None = None,
    result: dict[str, Any] | None = None,
    started_at: dt.datetime | None = None,
) -> RunFailed:
    """Record a run that broke a run-level rule and return the error to raise: its staged rejects
    and validation result, and any ``scored`` tables (name -> local Parquet file), go under
    ``_failed/``; its ``runs`` row says ``failed`` with the cause. The day's landed tables are not
    touched."""
    for name in _STAGED:
        if stores.out.exists(staged_key(cfg, name)):
            stores.out.copy(staged_key(cfg, name), storage.failed_key(cfg.date, cfg.run_id, _STAGED[name]))
    for name, path in (scored or {}).items():
        stores.out.upload_file(storage.failed_key(cfg.date, cfg.run_id, f"{name}.parquet"), path)
    manifest = _read_manifest(cfg, stores)
    write_run_row(cfg, stores, {**(counts or manifest.get("counts") or {}), **(result or {})}, manifest,
                  manifest.get("timings", {}), "failed", message, started_at,
                  evidence_uri=stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id)))
    logger.error("%s", message)
    return RunFailed(message)


# --------------------------------------------------------------------------------------------
# Stage 0: check the run before paying for anything


def _judge_client(cfg: RunConfig, api_key: str | None) -> Any:
    from evaluation.client import JudgeClient

    return JudgeClient(
        cfg.judge_model,
        api_base=cfg.api_base,
        api_key=api_key,
        concurrency=cfg.concurrency,
        timeout_s=cfg.timeout_s,
        max_attempts=cfg.max_attempts,
        retry_budget_s=cfg.retry_budget_s,
        temperature=cfg.temperature,
    )


def check_run(cfg: RunConfig, stores: Stores, *, api_key: str | None = None) -> dict[str, Any]:
    """Fail before paying: send the judge model one probe call of a few tokens before anything is
    ingested or judged. A model litellm cannot resolve, or an endpoint that refuses the call for
    good (unknown model, bad key, quota), fails the run with the provider's message and a
    ``runs`` row; an endpoint that does not answer (timeouts, 429, 5xx after the client's retries)
    raises :class:`JudgeUnreachable`, which the scheduler retries."""
    client = _judge_client(cfg, api_key)
    try:
        latency_ms = probe_judge(client, _where(cfg))
    except JudgeUnusable as exc:
        raise fail_run(cfg, stores, f"{exc}; nothing was ingested or judged") from exc
    return {"judge_model": cfg.judge_model, "probe_latency_ms": latency_ms, "call_parameters": client.call_parameters()}


def probe_judge(client: Any, where: str) -> float:
    """Send ``client``'s judge model its probe call; returns the latency (ms). Raises
    :class:`JudgeUnusable` when it is refused for good, :class:`JudgeUnreachable` when the endpoint
    does not answer after the client's retries."""
    from evaluation.client import RETRYABLE

    outcome = asyncio.run(client.probe())
    if outcome.ok:
        logger.info("%s: judge model %s answered the probe in %.0f ms", where, client.model, outcome.latency_ms)
        return float(outcome.latency_ms)
    if outcome.error_class in RETRYABLE:
        raise JudgeUnreachable(f"{where}: judge model {client.model!r} did not answer a probe call: {outcome.error}")
    raise JudgeUnusable(f"{where}: judge model {client.model!r} cannot be used: the probe call failed with "
                        f"{outcome.error}")


# --------------------------------------------------------------------------------------------
# Stage 1: ingest and validate


#: Input records per ingest batch (parsed rows plus ingest rejects): what ingest holds in memory.
INGEST_BATCH_ROWS = 50_000


def _valid_part_key(cfg: RunConfig, index: int) -> str:
    return storage.work_key(cfg.date, cfg.run_id, f"valid/part-{index:05d}.parquet")


def _raw_sources(store: storage.Store, objects: list[storage.ObjectInfo], folder: Path) -> Iterator[tuple[str, Path]]:
    """Each raw object as a local file, one at a time: a directory store's own file, or an S3
    object downloaded when its turn comes and deleted after. No object is held in memory whole."""
    for info in objects:
        if isinstance(store, storage.LocalStore):
            yield store.uri(info.key), store.path / info.key
            continue
        path = folder / "raw-object"
        store.download_file(info.key, path)
        try:
            yield store.uri(info.key), path
        finally:
            path.unlink(missing_ok=True)


def _write_rejects(cfg: RunConfig, rejects: list[Any], path: Path) -> Path:
    pl.DataFrame([{"run_id": cfg.run_id, **r.model_dump()} for r in rejects], schema=REJECT_SCHEMA).write_parquet(path)
    return path


def ingest_and_validate(cfg: RunConfig, stores: Stores, *, batch_rows: int = INGEST_BATCH_ROWS) -> dict[str, Any]:
    """Read the day's raw objects, validate them (Great Expectations), land rejects and the
    validation result, stage the valid records. Raises RunFailed on a table rule, after landing.

    The day streams through in batches of at most ``batch_rows`` input records, so memory follows
    the batch, not the day: objects are read one at a time, the row suite runs on every batch
    (a record_id repeated in a later batch or object is still a repeat), each batch's valid rows
    are staged as one part (``valid/part-NNNNN.parquet``, listed in the manifest as
    ``valid_parts``), and its rejects go to local parts streamed into the landed ``rejects``
    table at the end (ingest rejects first, then row-rule rejects, each in input order). The
    table rules run once, over the day's totals."""
    from evaluation.ingest import ingest_batches
    from evaluation.validation import DayValidator

    started = time.monotonic()
    if stores.out.exists(_manifest_key(cfg)):
        check_claim(cfg, stores)  # a retry must not take the day back from a newer run
    claim_day(cfg, stores)
    objects = [o for o in stores.raw.list(storage.raw_prefix(cfg.date)) if o.key.endswith(storage.RAW_SUFFIXES)]
    logger.info("%s: %d input objects under %s", _where(cfg), len(objects), stores.raw.uri(storage.raw_prefix(cfg.date)))
    validator = DayValidator(
        cfg.date,
        max_record_chars=cfg.max_record_chars,
        max_reject_ratio=cfg.max_reject_ratio,
        allow_empty=cfg.allow_empty,
    )
    stores.out.delete_prefix(storage.work_key(cfg.date, cfg.run_id, "valid/"))
    valid_parts = valid_records = 0
    with tempfile.TemporaryDirectory(prefix="evaluation-ingest-") as folder:
        ingest_parts: list[Path] = []
        rule_parts: list[Path] = []
        batches = ingest_batches(
            _raw_sources(stores.raw, objects, Path(folder)),
            cfg.date,
            batch_rows=batch_rows,
            max_record_chars=cfg.max_record_chars,
        )
        for index, batch in enumerate(batches):
            validator.add_ingest_rejects(len(batch.rejects))
            if batch.rejects:
                ingest_parts.append(_write_rejects(cfg, batch.rejects, Path(folder) / f"ingest-{index:05d}.parquet"))
            if batch.rows.height == 0:
                continue
            checked = validator.validate_batch(batch.rows)
            if checked.rejects:
                rule_parts.append(_write_rejects(cfg, checked.rejects, Path(folder) / f"rules-{index:05d}.parquet"))
            if checked.valid.height:
                valid = checked.valid.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()])
                storage.write_parquet(stores.out, _valid_part_key(cfg, valid_parts), valid)
                valid_parts += 1
                valid_records += valid.height
            del batch, checked
        outcome = validator.finish(input_objects=len(objects))
        parts = [*ingest_parts, *rule_parts]
        rejects = pl.scan_parquet(parts) if parts else pl.DataFrame(schema=REJECT_SCHEMA).lazy()
        rejected = storage.sink_parquet(stores.out, staged_key(cfg, "rejects"), rejects)
    storage.write_json(stores.out, staged_key(cfg, "validation"), outcome.result_json)
    if (valid_records, rejected) != (outcome.valid_records, outcome.rejected_records):
        raise fail_run(cfg, stores, f"{_where(cfg)}: counts do not reconcile after validation: staged {valid_records} "
                       f"valid and {rejected} rejects, the suites counted {outcome.valid_records} and "
                       f"{outcome.rejected_records}")
    counts = {
        "objects": len(objects),
        "input": valid_records + rejected,
        "valid": valid_records,
        "rejected": rejected,
    }
    _update_manifest(cfg, stores, counts=counts, valid_parts=valid_parts,
                     timings={"ingest_validate_s": round(time.monotonic() - started, 3)})
    logger.info("%s: %s in %d batches", _where(cfg), counts, validator.batches)
    if outcome.table_failures:
        evidence = stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id))
        raise fail_run(cfg, stores, f"{_where(cfg)} failed validation: " + "; ".join(outcome.table_failures)
                       + f" (its rejects and validation result are at {evidence}; the day's landed tables"
                       " were kept)", counts=counts)
    return counts

# --------------------------------------------------------------------------------------------
# Stage 2: plan


def _stable_fraction(record_id: str, model: str) -> float:
    digest = hashlib.sha256(f"{model}\x1f{record_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sample_mask(frame: pl.DataFrame, cfg: RunConfig) -> pl.Series:
    """True for records the run judges: all, or a deterministic sample stratified by model."""
    if cfg.sample is None or frame.height == 0:
        return pl.Series("sampled", [True] * frame.height, dtype=pl.Boolean)
    fractions = pl.Series([_stable_fraction(r, m) for r, m in zip(frame["record_id"], frame["model"], strict=True)])
    ranked = frame.select("model").with_columns(_u=fractions, _i=pl.int_range(pl.len()))
    rank = ranked.select(pl.col("_u").rank("ordinal").over("model")).to_series()
    if cfg.sample.fraction is not None:  # the same share of every model (at least one record each)
        keep = rank <= ranked.select((pl.len().over("model") * cfg.sample.fraction).round(9).ceil()).to_series()
    else:
        keep = rank <= cfg.sample.max_per_model
    return keep.alias("sampled")


def _staged_valid_parts(cfg: RunConfig, stores: Stores, folder: Path) -> list[Path]:
    """The valid parts ingest staged, in input order, as local files (downloaded unless the
    output store is a directory)."""
    manifest = _read_manifest(cfg, stores)
    if "valid_parts" not in manifest:
        raise RunFailed(f"{_where(cfg)}: no valid records staged under "
                        f"{stores.out.uri(storage.work_key(cfg.date, cfg.run_id, 'valid/'))} (ingest has not run)")
    paths = []
    for index in range(int(manifest["valid_parts"])):
        key = _valid_part_key(cfg, index)
        if isinstance(stores.out, storage.LocalStore):
            paths.append(stores.out.path / key)
        else:
            path = folder / f"valid-{index:05d}.parquet"
            stores.out.download_file(key, path)
            paths.append(path)
    return paths


#: The record fields of the content key. Every judge's prompt holds the question and the answer,
#: so records with the same prompt for any judge share a key (and therefore a chunk).
KEY_FIELDS = ("question", "answer")


#: Records per bucket of the plan's shuffle (see :func:`_record_chunks`).
SHUFFLE_BUCKET_ROWS = 20_000


def _content_digests(frame: pl.DataFrame) -> list[bytes]:
    joined = frame.select(
        pl.concat_str([pl.col(c).cast(pl.String).fill_null("\x00") for c in KEY_FIELDS], separator="\x1f")
    ).to_series()
    return [hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest() for text in joined]


def content_keys(frame: pl.DataFrame) -> pl.Series:
    """A stable 64-bit key per record (16 hex digits) of its question and answer."""
    return pl.Series("_key", [d.hex() for d in _content_digests(frame)], dtype=pl.String)


def key_range(frame: pl.DataFrame) -> tuple[str, str] | None:
    """The smallest and largest content key of a chunk's records (None when it has none)."""
    keys = content_keys(frame)
    return (str(keys.min()), str(keys.max())) if keys.len() else None


def _record_chunks(paths: list[Path], sampled: pl.Series, chunk_size: int, folder: Path) -> Iterator[pl.DataFrame]:
    """The staged valid records (with their ``sampled`` flag) in content-key order, ties in input
    order, cut into chunks of ``chunk_size`` records (the last may be shorter).

    Ordering by content key gives every chunk its own narrow range of keys, the same range on
    every run of the day: the ledger is looked up only in the objects of overlapping ranges
    (:class:`~evaluation.ledger.Ledger`), so a chunk reads what earlier attempts at its own
    records stored, not the whole day's ledger. Records with the same question and answer sit
    together (at most split by a chunk boundary), so a prompt repeated in the day is judged once.
    The order is made with a bounded shuffle: each part is split by key
    into buckets of about :data:`SHUFFLE_BUCKET_ROWS` records written as local files, then the
    buckets are read back in key order one at a time. Memory follows a part and a bucket, not the
    day."""
    total = sampled.len()
    buckets = max(1, math.ceil(total / SHUFFLE_BUCKET_ROWS))
    files: dict[int, list[Path]] = {}
    offset = 0
    for number, path in enumerate(paths):
        part = pl.read_parquet(path)
        digests = _content_digests(part)
        part = part.with_columns(
            sampled.slice(offset, part.height),
            _key=pl.Series([d.hex() for d in digests], dtype=pl.String),
            _bucket=pl.Series([(int.from_bytes(d[:4]) * buckets) >> 32 for d in digests], dtype=pl.Int64),
        )
        offset += part.height
        for (bucket,), group in part.partition_by("_bucket", as_dict=True, include_key=False, maintain_order=True).items():
            file = folder / f"bucket-{bucket:06d}-{number:05d}.arrow"
            group.write_ipc(file)
            files.setdefault(int(bucket), []).append(file)
        del part
    pending: list[pl.DataFrame] = []
    pending_rows = 0
    for bucket in sorted(files):
        ordered = pl.concat([pl.read_ipc(f) for f in files[bucket]]).sort("_key", maintain_order=True).drop("_key")
        for file in files.pop(bucket):
            file.unlink()
        start = 0
        while start < ordered.height:
            take = min(chunk_size - pending_rows, ordered.height - start)
            pending.append(ordered.slice(start, take))
            pending_rows += take
            start += take
            if pending_rows == chunk_size:
                yield pl.concat(pending)
                pending, pending_rows = [], 0
    if pending_rows:
        yield pl.concat(pending)


def plan_chunks(cfg: RunConfig, stores: Stores) -> list[dict[str, Any]]:
    """Sample, split the valid records into chunks (never more than ``max_map_length``), stage
    each chunk and estimate the day's tokens and cost. Returns one small dict per chunk.

    The staged valid parts are streamed into chunks in content-key order (:func:`_record_chunks`):
    memory follows a part and a chunk, plus the day's record_id and model columns, which are all
    the sample needs."""
    from evaluation import client as judge_client

    started = time.monotonic()
    stores.out.delete_prefix(storage.work_key(cfg.date, cfg.run_id, "records/"))
    with tempfile.TemporaryDirectory(prefix="evaluation-plan-") as folder:
        paths = _staged_valid_parts(cfg, stores, Path(folder))
        keys = (
            pl.scan_parquet(paths).select("record_id", "model").collect() if paths
            else pl.DataFrame(schema={"record_id": pl.String, "model": pl.String})
        )
        sampled = sample_mask(keys, cfg)
        total = keys.height
        del keys
        chunk_size = max(cfg.chunk_size, math.ceil(total / cfg.max_map_length)) if total else cfg.chunk_size
        chunk_count = math.ceil(total / chunk_size) if total else 0
        if chunk_size != cfg.chunk_size:
            logger.warning("%s: chunk size raised from %d to %d to stay within max_map_length %d",
                           _where(cfg), cfg.chunk_size, chunk_size, cfg.max_map_length)
        chunks: list[dict[str, Any]] = []
        first_sampled: list[pl.DataFrame] = []  # the day's first sampled records, for the estimate
        first_count = 0
        for index, part in enumerate(_record_chunks(paths, sampled, chunk_size, Path(folder))):
            key = storage.chunk_key(cfg.date, cfg.run_id, "records", index)
            storage.write_parquet(stores.out, key, part)
            chunks.append({"index": index, "records": part.height, "key": key})
            if first_count < _ESTIMATE_SAMPLE:
                first_sampled.append(part.filter(pl.col("sampled")).head(_ESTIMATE_SAMPLE - first_count))
                first_count += first_sampled[-1].height
    staged = sum(c["records"] for c in chunks)
    if (len(chunks), staged) != (chunk_count, total):
        raise RunFailed(f"{_where(cfg)}: planned {chunk_count} chunks of {total} records, staged {len(chunks)} of {staged}")
    sampled_count = int(sampled.sum())
    head = (pl.concat(first_sampled) if first_sampled
            else pl.DataFrame(schema={**RECORD_SCHEMA, "sampled": pl.Boolean}))
    estimate = estimate_cost(cfg, head, judge_client, records=sampled_count)
    _update_manifest(
        cfg,
        stores,
        call_parameters=judge_client.call_parameters(cfg.judge_model, api_base=cfg.api_base,
                                                     temperature=cfg.temperature),
        chunks=len(chunks),
        chunk_size=chunk_size,
        sampled=sampled_count,
        estimate=estimate,
        timings={**_read_manifest(cfg, stores).get("timings", {}), "plan_s": round(time.monotonic() - started, 3)},
    )
    logger.info("%s: %d chunks of up to %d records; estimate %s", _where(cfg), len(chunks), chunk_size, estimate)
    return chunks

_ESTIMATE_SAMPLE = 50


def estimate_cost(
    cfg: RunConfig, valid: pl.DataFrame, judge_client: Any, *, records: int | None = None
) -> dict[str, Any]:
    """Prompt tokens and cost for the day, from up to 50 rendered records scaled to the day.

    ``records`` is the day's count when ``valid`` holds only the day's first records."""
    if valid.height == 0:
        return {"records": 0, "prompt_tokens": 0, "cost_usd": 0.0, "sampled_records": 0}
    records = valid.height if records is None else records
    sample = valid.head(_ESTIMATE_SAMPLE)
    tokens = 0
    prompts = 0
    for row in sample.iter_rows(named=True):
        record = record_from_row(row)
        for judge in cfg.judges:
            prompt = render(judge, record)
            if prompt is not None:
                tokens += judge_client.count_tokens(cfg.judge_model, prompt)
                prompts += 1
    scale = records / sample.height
    input_price, output_price = judge_client.price_per_token(cfg.judge_model)
    day_tokens = int(tokens * scale)
    day_calls = int(round(prompts * scale))
    expected_output = 200 * day_calls  # a judge's JSON reply is about 200 tokens
    return {
        "records": records,
        "calls": day_calls,
        "prompt_tokens": day_tokens,
        "output_tokens": expected_output,
        "cost_usd": round(day_tokens * input_price + expected_output * output_price, 6),
        "sampled_records": sample.height,
    }


# --------------------------------------------------------------------------------------------
# Stage 3: judge one chunk


def record_from_row(row: dict[str, Any]) -> InputRecord:
    """A staged record row as the judges' input model."""
    return InputRecord.model_validate(
        {
            **row,
            "contexts": json.loads(row["contexts"]) if row.get("contexts") else [],
            "rubrics": json.loads(row["rubrics"]) if row.get("rubrics") else None,
        }
    )


@dataclass
class _Pending:
    record: InputRecord
    judged_record: InputRecord
    judge: JudgeName
    prompt: RenderedPrompt
    request_hash: str
    redactions: int


def judge_chunk(
    cfg: RunConfig,
    stores: Stores,
    index: int,
    *,
    api_key: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run the selected judges on one staged chunk; stage its parsed rows and judge calls.

    The ledger is asked first what is already paid for: the judge client (and litellm, a few
    seconds to import) is set up only when there are calls to make, so a re-run of a judged day
    costs the reading of its chunks and ledger."""
    from evaluation.ledger import Ledger, request_hash
    from evaluation.redact import redact_record

    started = time.monotonic()
    manifest = _read_manifest(cfg, stores)
    chunk_count = max(1, int(manifest.get("chunks", 1)))
    frame = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "records", index))
    client = None
    parameters = manifest.get("call_parameters")
    if parameters is None:  # planned before plans recorded them
        client = _judge_client(cfg, api_key)
        parameters = client.call_parameters()
    rows: list[dict[str, Any]] = []
    pending: list[_Pending] = []
    for row in frame.iter_rows(named=True):
        record = record_from_row(row)
        judged_record, redactions = redact_record(record) if cfg.redact_pii else (record, 0)
        for judge in cfg.judges:
            if not row["sampled"]:
                rows.append(_finish(not_applicable_row(judge, record, "sampled_out"), cfg, PROMPT_VERSIONS[judge]))
                continue
            prompt = render(judge, judged_record)
            if prompt is None:
                rows.append(_finish(not_applicable_row(judge, record), cfg, PROMPT_VERSIONS[judge]))
                continue
            digest = request_hash(cfg.judge_model, prompt, parameters)
            pending.append(_Pending(record, judged_record, judge, prompt, digest, redactions))

    ledger = Ledger(stores.out, cfg.date, writer=f"{cfg.run_id}-chunk{index:05d}", key_range=key_range(frame))
    cached = ledger.lookup({p.request_hash for p in pending})
    if cfg.rejudge_parse_errors:
        unparsed = _unparsed_replies(pending, cached)
        if unparsed:
            logger.info("%s chunk %d: %d stored replies do not parse: judged again", _where(cfg), index, len(unparsed))
        for digest in unparsed:
            del cached[digest]
    # Identical prompts (same model, template, text, parameters) are called once: a content-addressed
    # judgement is reused within the chunk as it is across runs.
    unique: dict[str, _Pending] = {}
    for item in pending:
        if item.request_hash not in cached:
            unique.setdefault(item.request_hash, item)
    to_call = list(unique.values())
    budget = None if cfg.budget_usd is None else cfg.budget_usd / chunk_count
    if to_call and client is None:
        client = _judge_client(cfg, api_key)
    if budget is not None and client is not None and client.prices() == (0.0, 0.0):
        logger.warning("%s: budget_usd %s has no effect: litellm's price map has no price for %s",
                       _where(cfg), cfg.budget_usd, cfg.judge_model)
    spent = 0.0

    def on_done(position: int, outcome: Any) -> None:
        nonlocal spent
        spent += outcome.cost_usd
        item = to_call[position]
        if outcome.ok:
            ledger.record({
                "request_hash": item.request_hash,
                "judge": item.judge,
                "judge_model": cfg.judge_model,
                "prompt_version": item.prompt.prompt_version,
                "raw_response": outcome.raw_text,
                "input_tokens": outcome.input_tokens,
                "output_tokens": outcome.output_tokens,
                "cost_usd": outcome.cost_usd,
                "latency_ms": outcome.latency_ms,
                "attempts": outcome.attempts,
                "judged_at": outcome.judged_at,
            })
        if progress is not None:
            progress(1)

    def budget_spent() -> bool:
        return budget is not None and spent >= budget

    if progress is not None:
        progress(len(rows) + len(pending) - len(to_call))  # skipped, reused and repeated ones
    logger.info("%s chunk %d: %d records, %d calls to make, %d reused from the ledger",
                _where(cfg), index, frame.height, len(to_call), len(pending) - len(to_call))
    # Without a budget nothing can stop the calls early: no should_stop lets the client share
    # them out over worker processes ($EVALUATION_JUDGE_WORKERS).
    outcomes: list[Any] = []
    if client is not None and to_call:
        outcomes = asyncio.run(client.call_many([p.prompt for p in to_call], on_done=on_done,
                                                should_stop=budget_spent if budget is not None else None))
    ledger.flush()
    by_hash = {p.request_hash: o for p, o in zip(to_call, outcomes, strict=True)}

    calls: list[dict[str, Any]] = []
    for item in pending:
        stored = cached.get(item.request_hash)
        outcome = by_hash.get(item.request_hash)
        if stored is None and outcome is not None and outcome.ok and unique[item.request_hash] is not item:
            stored = _as_stored(outcome)  # a repeat of a prompt judged in this chunk: not paid twice
        elif stored is None and outcome is not None and unique[item.request_hash] is not item:
            outcome = replace(outcome, attempts=0, latency_ms=0.0, cost_usd=0.0)  # its failed call is counted once
        row_out, call = _judged_row(cfg, item, outcome, stored)
        rows.append(row_out)
        if call is not None:
            calls.append(call)
    parsed = pl.DataFrame(rows, schema=PARSED_SCHEMA)
    storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", index), parsed)
    storage.write_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "calls", index),
                          pl.DataFrame(calls, schema=CALLS_SCHEMA))
    counts = parsed.group_by("judge_status").len().to_dict(as_series=False)
    result = {
        "index": index,
        "rows": parsed.height,
        "calls_made": sum(1 for o in outcomes if o is not None),
        "reused": len(pending) - len(to_call),  # from the ledger, or repeats within the chunk
        "statuses": dict(zip(counts["judge_status"], counts["len"], strict=True)),
        "seconds": round(time.monotonic() - started, 3),
    }
    logger.info("%s chunk %d judged: %s", _where(cfg), index, result)
    return result


def _unparsed_replies(pending: list[_Pending], cached: dict[str, dict[str, Any]]) -> set[str]:
    """Request hashes whose stored reply parses to ``parse_error`` (for ``rejudge_parse_errors``)."""
    unparsed = set()
    for item in pending:
        stored = cached.get(item.request_hash)
        if stored is not None and item.request_hash not in unparsed:
            row = parse_reply(item.judge, item.judged_record, stored["raw_response"], item.prompt)
            if row["judge_status"] == "parse_error":
                unparsed.add(item.request_hash)
    return unparsed


def _as_stored(outcome: Any) -> dict[str, Any]:
    return {
        "raw_response": outcome.raw_text,
        "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens,
        "judged_at": outcome.judged_at,
    }


def _finish(row: dict[str, Any], cfg: RunConfig, prompt_version: str) -> dict[str, Any]:
    row.update(
        judge_model=cfg.judge_model,
        prompt_version=prompt_version,
        rules_version=RULES_VERSION,
        input_tokens=row.get("input_tokens", 0),
        output_tokens=row.get("output_tokens", 0),
        cost_usd=row.get("cost_usd", 0.0),
        latency_ms=row.get("latency_ms", 0.0),
        attempts=row.get("attempts", 0),
        cached=row.get("cached", False),
        judged_at=row.get("judged_at"),
    )
    return row


def _judged_row(
    cfg: RunConfig, item: _Pending, outcome: Any, stored: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    call = {
        "run_id": cfg.run_id,
        "record_id": item.record.record_id,
        "judge": item.judge,
        "judge_model": cfg.judge_model,
        "prompt_version": item.prompt.prompt_version,
        "request_hash": item.request_hash,
        "system_prompt": item.prompt.system,
        "user_prompt": item.prompt.user,
        "redactions": item.redactions,
    }
    if stored is not None:
        row = parse_reply(item.judge, item.judged_record, stored["raw_response"], item.prompt)
        row.update(
            input_tokens=stored["input_tokens"], output_tokens=stored["output_tokens"], cost_usd=0.0,
            latency_ms=0.0, attempts=0, cached=True, judged_at=stored["judged_at"],
        )
        call.update(raw_response=stored["raw_response"], input_tokens=stored["input_tokens"],
                    output_tokens=stored["output_tokens"], cost_usd=0.0, latency_ms=0.0, attempts=0,
                    cached=True, judged_at=stored["judged_at"])
        return _finish(row, cfg, item.prompt.prompt_version), call
    if outcome is None:
        row = not_applicable_row(item.judge, item.record, "budget_exhausted")
        return _finish(row, cfg, item.prompt.prompt_version), None
    if not outcome.ok:
        row = call_error_row(item.judge, item.record, outcome.error)
    else:
        row = parse_reply(item.judge, item.judged_record, outcome.raw_text, item.prompt)
    row.update(
        input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens, cost_usd=outcome.cost_usd,
        latency_ms=outcome.latency_ms, attempts=outcome.attempts, cached=False, judged_at=outcome.judged_at,
    )
    call.update(raw_response=outcome.raw_text, error=outcome.error, error_class=outcome.error_class,
                input_tokens=outcome.input_tokens, output_tokens=outcome.output_tokens,
                cost_usd=outcome.cost_usd, latency_ms=outcome.latency_ms, attempts=outcome.attempts,
                cached=False, judged_at=outcome.judged_at)
    return _finish(row, cfg, item.prompt.prompt_version), call


# --------------------------------------------------------------------------------------------
# Stage 4: score, land, summarise


#: Judged rows scored together when landing (several chunks at once: scoring has a fixed cost per
#: call; the batch bounds the memory).
LAND_BATCH_ROWS = 50_000


def score_and_land(cfg: RunConfig, stores: Stores, *, started_at: dt.datetime | None = None) -> dict[str, Any]:
    """Score every staged judgement (Polars), check the run-level rules, then land the day's
    ``rejects``, validation result, ``evaluations``, ``judge_calls`` and ``daily_summary`` and
    the run's ``runs`` row. A run whose counts do not reconcile, or whose call errors exceed
    ``max_call_error_ratio``, lands nothing of the day: see :func:`fail_run`."""
    started = time.monotonic()
    manifest = _read_manifest(cfg, stores)
    counts = manifest.get("counts")
    if counts is None:
        raise RunFailed(f"{_where(cfg)}: no ingest manifest at {stores.out.uri(_manifest_key(cfg))}")
    chunk_count = int(manifest.get("chunks", 0))
    judged_keys = [storage.chunk_key(cfg.date, cfg.run_id, "judged", i) for i in range(chunk_count)]
    call_keys = [storage.chunk_key(cfg.date, cfg.run_id, "calls", i) for i in range(chunk_count)]
    missing = [k for k in judged_keys if not stores.out.exists(k)]
    if missing:
        raise RunFailed(f"{_where(cfg)}: {len(missing)} of {chunk_count} chunks were not judged "
                        f"(first missing: {stores.out.uri(missing[0])})")
    with tempfile.TemporaryDirectory(prefix="evaluation-land-") as folder:
        # Scoring is row-wise, so the day is scored in batches of chunks (at most LAND_BATCH_ROWS
        # rows) and every day-level figure (summary, totals, reconciliation) is accumulated batch
        # by batch; the landed tables are streamed from the scored files. Memory follows the batch,
        # not the day.
        summary_builder = SummaryBuilder()
        tally = _DayTally()
        scored_paths: list[Path] = []
        call_paths: list[Path] = []
        batch: list[pl.DataFrame] = []

        def score_batch() -> None:
            scored = score_table(pl.concat(batch), cfg.thresholds).with_columns(run_id=pl.lit(cfg.run_id)).select(
                [pl.col(c) for c in EVALUATION_COLUMNS if c != "dt"]
            )
            path = Path(folder) / f"scored-{len(scored_paths):05d}.parquet"
            scored.write_parquet(path)
            scored_paths.append(path)
            summary_builder.add(scored)
            tally.add_evaluations(scored)
            batch.clear()

        for index, (judged_key, call_key) in enumerate(zip(judged_keys, call_keys, strict=True)):
            batch.append(storage.read_parquet(stores.out, judged_key))
            if sum(frame.height for frame in batch) >= LAND_BATCH_ROWS:
                score_batch()
            call_path = Path(folder) / f"calls-{index:05d}.parquet"
            stores.out.download_file(call_key, call_path)
            call_paths.append(call_path)
            tally.add_calls(pl.read_parquet(call_path, columns=["attempts", "cached"]))
        if batch:
            score_batch()
        # Every table of the day is complete on local disk before anything is landed.
        tables = {
            "evaluations": Path(folder) / "evaluations.parquet",
            "judge_calls": Path(folder) / "judge_calls.parquet",
            "daily_summary": Path(folder) / "daily_summary.parquet",
        }
        evaluations = (
            pl.scan_parquet(scored_paths) if scored_paths
            else pl.DataFrame(schema=_evaluation_schema()).lazy()
        )
        evaluations.sink_parquet(tables["evaluations"], compression=storage.PARQUET_COMPRESSION)
        calls = pl.scan_parquet(call_paths) if call_paths else pl.DataFrame(schema=CALLS_SCHEMA).lazy()
        calls.sink_parquet(tables["judge_calls"], compression=storage.PARQUET_COMPRESSION)
        summary = summary_builder.finish(cfg.run_id)
        summary.write_parquet(tables["daily_summary"], compression=storage.PARQUET_COMPRESSION, statistics=True)
        # The day's status counts, tokens and cost are the summary's, summed over its groups.
        totals = summary.select(
            *[pl.col(f"n_{s}").sum().alias(s) for s in JUDGE_STATUSES],
            pl.col("input_tokens").sum(), pl.col("output_tokens").sum(), pl.col("cost_usd").sum(),
        ).row(0, named=True)
        rows = tally.rows
        call_totals = tally.call_totals
        statuses = {s: int(totals[s] or 0) for s in JUDGE_STATUSES}
        attempted = rows - statuses["skipped"]
        call_error_ratio = statuses["call_error"] / attempted if attempted else 0.0
        result = {
            "run_id": cfg.run_id,
            "dt": cfg.date.isoformat(),
            **counts,
            "judges": list(cfg.judges),
            "rows": rows,
            "statuses": statuses,
            "verdicts": {v: int(tally.verdicts[v]) for v in ("pass", "borderline", "fail")},
            "calls_made": int(call_totals["made"] or 0),
            "calls_reused": int(call_totals["reused"] or 0),
            "input_tokens": int(totals["input_tokens"] or 0),
            "output_tokens": int(totals["output_tokens"] or 0),
            "cost_usd": round(float(totals["cost_usd"] or 0.0), 6),
            "call_error_ratio": round(call_error_ratio, 4),
            "output_uri": stores.out.root,
        }
        evidence = stores.out.uri(storage.failed_prefix(cfg.date, cfg.run_id))
        try:
            result["reconciled"] = reconcile(cfg, counts, tally, scored_paths)
        except RunFailed as exc:
            raise fail_run(cfg, stores, f"{exc}; the day's landed tables were kept, this run's rows are at {evidence}",
                           scored=tables, result=result, started_at=started_at) from exc
        if call_error_ratio > cfg.max_call_error_ratio:
            raise fail_run(cfg, stores, f"{_where(cfg)}: {statuses['call_error']} of {attempted} judge calls failed "
                           f"({call_error_ratio:.1%}), above max_call_error_ratio {cfg.max_call_error_ratio:.1%}; "
                           f"the day's landed tables were kept, this run's rows are at {evidence}",
                           scored=tables, result=result, started_at=started_at)

        check_claim(cfg, stores)
        for name in _STAGED:
            stores.out.copy(staged_key(cfg, name), _landed_key(cfg, name))
        for name, path in tables.items():
            stores.out.upload_file(storage.table_key(name, cfg.date), path)
    timings = {**manifest.get("timings", {}), "score_land_s": round(time.monotonic() - started, 3)}
    write_run_row(cfg, stores, result, manifest, timings, "success", None, started_at)
    stores.out.delete_prefix(storage.work_prefix(cfg.date, cfg.run_id))
    logger.info("%s landed: %s", _where(cfg), result)
    return result


class _DayTally:
    """What landing needs beyond ``daily_summary``, accumulated batch by batch: verdicts over all
    rows (the summary counts ``ok`` rows' only), calls made and reused, and the inputs of
    :func:`reconcile`.

    Duplicate (record_id, judge) pairs are looked for through a 64-bit hash per row (8 bytes a
    row, not the ids); :func:`reconcile` confirms any hash seen twice on the ids themselves."""

    def __init__(self) -> None:
        self.verdicts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
        self.call_totals: dict[str, int] = {"made": 0, "reused": 0}
        self.rows = 0
        self.bad_status = 0
        self._hashes: list[pl.Series] = []

    def add_evaluations(self, scored: pl.DataFrame) -> None:
        sums = scored.select(
            *[(pl.col("verdict") == v).sum().alias(v) for v in VERDICTS],
            (~pl.col("judge_status").is_in(list(JUDGE_STATUSES))).sum().alias("bad_status"),
        ).row(0, named=True)
        self.bad_status += int(sums.pop("bad_status") or 0)
        for verdict, count in sums.items():
            self.verdicts[verdict] += count or 0
        self.rows += scored.height
        self._hashes.append(_pair_hash(scored))

    def add_calls(self, calls: pl.DataFrame) -> None:
        self.call_totals["made"] += int((calls["attempts"] > 0).sum())
        self.call_totals["reused"] += int(calls["cached"].sum())

    def repeated_hashes(self) -> pl.Series:
        hashes = pl.concat(self._hashes) if self._hashes else pl.Series("h", [], dtype=pl.UInt64)
        return hashes.filter(hashes.is_duplicated()).unique()


def _pair_hash(frame: pl.DataFrame) -> pl.Series:
    return frame.select(pl.struct("record_id", "judge").hash(seed=7).alias("h")).to_series()


def reconcile(cfg: RunConfig, counts: dict[str, Any], tally: _DayTally, scored_paths: list[Path]) -> dict[str, Any]:
    """CONTRACT §4: input = valid + rejected; rows = valid × judges; one status per row."""
    problems = []
    if counts["input"] != counts["valid"] + counts["rejected"]:
        problems.append(f"input {counts['input']} != valid {counts['valid']} + rejected {counts['rejected']}")
    expected = counts["valid"] * len(cfg.judges)
    height = tally.rows
    if height != expected:
        problems.append(f"{height} evaluation rows, expected {counts['valid']} × {len(cfg.judges)} = {expected}")
    suspects = tally.repeated_hashes()
    if suspects.len():  # confirm on the ids: two different pairs may share a hash
        frame = pl.scan_parquet(scored_paths).select("record_id", "judge")
        candidates = frame.filter(pl.struct("record_id", "judge").hash(seed=7).is_in(suspects.implode()))
        duplicates = candidates.group_by("record_id", "judge").len().filter(pl.col("len") > 1).select(pl.len()).collect().item()
        if duplicates:
            problems.append(f"{duplicates} duplicate (record_id, judge) pairs")
    if tally.bad_status:
        problems.append(f"{tally.bad_status} rows without a valid judge_status")
    if problems:
        raise RunFailed(f"{_where(cfg)}: counts do not reconcile: " + "; ".join(problems))
    return {"input": counts["input"], "valid": counts["valid"], "rejected": counts["rejected"],
            "rows": height, "expected_rows": expected}


def _evaluation_schema() -> dict[str, Any]:
    schema = {c: PARSED_SCHEMA[c] for c in EVALUATION_COLUMNS if c in PARSED_SCHEMA}
    schema.update(run_id=pl.String, verdict=pl.String, clamps_applied=_LIST)
    return {c: schema[c] for c in EVALUATION_COLUMNS if c != "dt"}


def write_run_row(
    cfg: RunConfig,
    stores: Stores,
    result: dict[str, Any],
    manifest: dict[str, Any],
    timings: dict[str, Any],
    status: str,
    message: str | None,
    started_at: dt.datetime | None,
    *,
    evidence_uri: str | None = None,
) -> None:
    """Land the run's row of the ``runs`` table (its own object: runs keep their history). A
    failed run's row names where its evidence is (``evidence_uri``)."""
    from evaluation import versions

    row = {
        "run_id": cfg.run_id,
        "trigger": cfg.trigger,
        "status": status,
        "message": message,
        "evidence_uri": evidence_uri,
        "config": cfg.model_dump_json(),
        "input_records": result.get("input", 0),
        "valid_records": result.get("valid", 0),
        "rejected_records": result.get("rejected", 0),
        "rows": result.get("rows", 0),
        **{f"n_{s}": result.get("statuses", {}).get(s, 0) for s in JUDGE_STATUSES},
        "calls_made": result.get("calls_made", 0),
        "calls_reused": result.get("calls_reused", 0),
        "input_tokens": result.get("input_tokens", 0),
        "output_tokens": result.get("output_tokens", 0),
        "cost_usd": result.get("cost_usd", 0.0),
        "estimated_prompt_tokens": manifest.get("estimate", {}).get("prompt_tokens", 0),
        "estimated_cost_usd": manifest.get("estimate", {}).get("cost_usd", 0.0),
        "timings": json.dumps(timings, sort_keys=True),
        "versions": json.dumps(versions.versions(), sort_keys=True),
        "started_at": started_at,
        "finished_at": dt.datetime.now(dt.UTC),
    }
    frame = pl.DataFrame([row]).with_columns(
        pl.col("started_at").cast(pl.Datetime("us", "UTC")),
        pl.col("finished_at").cast(pl.Datetime("us", "UTC")),
        pl.col("message", "evidence_uri").cast(pl.String),  # typed even when null (strict readers)
        pl.col("cost_usd", "estimated_cost_usd").cast(pl.Float64),
    )
    storage.write_parquet(stores.out, storage.run_key(cfg.date, cfg.run_id), frame)


# --------------------------------------------------------------------------------------------
# All stages in one process (the CLI)


def run_day(
    cfg: RunConfig,
    stores: Stores,
    *,
    api_key: str | None = None,
    progress: Callable[[int], None] | None = None,
    on_planned: Callable[[int], None] | None = None,
    on_stage: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Every stage of the day in one process, chunk after chunk. ``on_planned`` receives the
    number of (record, judge) rows to come, for a progress bar fed by ``progress``; ``on_stage``
    receives each finished stage's name (check, ingest, plan, land, report) with its figures and
    ``seconds``."""
    started_at = dt.datetime.now(dt.UTC)

    def stage(name: str, started: float, figures: dict[str, Any]) -> None:
        if on_stage is not None:
            on_stage(name, {**figures, "seconds": round(time.monotonic() - started, 1)})

    started = time.monotonic()
    stage("check", started, check_run(cfg, stores, api_key=api_key))
    started = time.monotonic()
    stage("ingest", started, ingest_and_validate(cfg, stores))
    started = time.monotonic()
    chunks = plan_chunks(cfg, stores)
    manifest = _read_manifest(cfg, stores)
    stage("plan", started, {"chunks": len(chunks), "records": sum(c["records"] for c in chunks),
                            "sampled": manifest.get("sampled"), "estimate": manifest.get("estimate", {})})
    if on_planned is not None:
        on_planned(sum(c["records"] for c in chunks) * len(cfg.judges))
    for chunk in chunks:
        judge_chunk(cfg, stores, chunk["index"], api_key=api_key, progress=progress)
    started = time.monotonic()
    result = score_and_land(cfg, stores, started_at=started_at)
    stage("land", started, result)
    from evaluation.report import write_daily_report

    started = time.monotonic()
    result["report"] = write_daily_report(stores.out, cfg.date)["html"]
    stage("report", started, {"html": result["report"]})
    return result
