"""Stage 2: sample, order by content key, cut into chunks, estimate the cost."""

from __future__ import annotations

import hashlib
import logging
import math
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from evaluation import storage
from evaluation.calling.batch import BATCH_PROVIDERS, batch_prices, provider_of
from evaluation.calling.client import call_parameters, count_tokens, price_per_token
from evaluation.calling.cost import output_tokens, tokens_cost
from evaluation.contract.config import RunConfig, Sample
from evaluation.contract.schemas import RECORD_SCHEMA, record_from_row
from evaluation.judges import RenderedPrompt, route
from evaluation.stages._run import (
    ChunkPlan,
    CostEstimate,
    IngestRecord,
    PlanRecord,
    RunFailed,
    Stores,
    read_manifest,
    valid_part_key,
    where,
    write_record,
)

logger = logging.getLogger(__name__)


def sample_mask(frame: pl.DataFrame, cfg: RunConfig) -> pl.Series:
    """True for records the run judges: all, or a deterministic sample stratified by model."""
    if cfg.sample is None or frame.height == 0:
        return pl.Series("sampled", [True] * frame.height, dtype=pl.Boolean)
    return _sampled(frame["model"], _fractions(frame), cfg.sample)


def _fractions(frame: pl.DataFrame) -> pl.Series:
    """Each record's place in its model's sample: a stable fraction of (model, record_id)."""
    pairs = zip(frame["model"], frame["record_id"], strict=True)
    digests = (hashlib.sha256(f"{m}\x1f{r}".encode()).digest() for m, r in pairs)
    return pl.Series("_u", [int.from_bytes(d[:8], "big") / 2**64 for d in digests], dtype=pl.Float64)


def _sampled(models: pl.Series, fractions: pl.Series, sample: Sample) -> pl.Series:
    """The sample of :func:`sample_mask` from each record's model and fraction, in input order."""
    ranked = pl.DataFrame({"model": models, "_u": fractions})
    rank = ranked.select(pl.col("_u").rank("ordinal").over("model")).to_series()
    if sample.fraction is not None:  # the same share of every model (at least one record each)
        keep = rank <= ranked.select((pl.len().over("model") * sample.fraction).round(9).ceil()).to_series()
    else:
        keep = rank <= sample.max_per_model
    return keep.alias("sampled")


def _staged_valid_parts(cfg: RunConfig, stores: Stores, ingest: IngestRecord) -> Iterator[Path]:
    """The valid parts ingest staged, in input order, each as a local file while it is read: the
    store's own file for a directory store, else downloaded when its turn comes and deleted after."""
    for index in range(ingest.valid_parts):
        key = valid_part_key(cfg, index)
        if isinstance(stores.out, storage.LocalStore):
            yield stores.out.path / key
            continue
        with tempfile.TemporaryDirectory(prefix="evaluation-part-") as folder:
            path = Path(folder) / "valid-part.parquet"
            stores.out.download_file(key, path)
            yield path


#: The record fields of the content key. Every judge's prompt holds the question and the answer,
#: so records with the same prompt for any judge share a key (and therefore a chunk).
KEY_FIELDS = ("question", "answer")


#: Records per bucket of the plan's shuffle (see :func:`_record_chunks`).
SHUFFLE_BUCKET_ROWS = 20_000


def content_keys(frame: pl.DataFrame) -> pl.Series:
    """A stable 64-bit key per record (16 hex digits) of its question and answer."""
    joined = frame.select(
        pl.concat_str([pl.col(c).cast(pl.String).fill_null("\x00") for c in KEY_FIELDS], separator="\x1f")
    ).to_series()
    return pl.Series("_key", [hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
                              for text in joined], dtype=pl.String)


def key_range(frame: pl.DataFrame) -> tuple[str, str] | None:
    """The smallest and largest content key of a chunk's records (None when it has none)."""
    keys = content_keys(frame)
    return (str(keys.min()), str(keys.max())) if keys.len() else None


def _bucket_files(parts: Iterable[Path], total: int, sample: Sample | None,
                  folder: Path) -> tuple[dict[int, list[Path]], pl.Series | None]:
    """The shuffle's first half (see :func:`key_ordered_chunks`): each part read once and split by
    content key into bucket files under ``folder``; returns each bucket's files, in part order,
    and the ``sampled`` flag of every record in input order (``None`` without a sample)."""
    buckets = max(1, math.ceil(total / SHUFFLE_BUCKET_ROWS))
    files: dict[int, list[Path]] = {}
    models: list[pl.Series] = []
    fractions: list[pl.Series] = []
    offset = 0
    for number, path in enumerate(parts):
        part = pl.read_parquet(path)
        keys = content_keys(part)
        part = part.with_columns(
            keys,
            _bucket=pl.Series([(int(k[:8], 16) * buckets) >> 32 for k in keys], dtype=pl.Int64),
        )
        if sample is not None:  # the sample is drawn over the whole day, once every part is read
            models.append(part["model"].cast(pl.Categorical))
            fractions.append(_fractions(part))
            part = part.with_columns(_pos=pl.int_range(offset, offset + part.height, dtype=pl.Int64))
        offset += part.height
        for (bucket,), group in part.partition_by("_bucket", as_dict=True, include_key=False, maintain_order=True).items():
            file = folder / f"bucket-{bucket:06d}-{number:05d}.arrow"
            group.write_ipc(file, compression="lz4")
            files.setdefault(int(bucket), []).append(file)
        del part
    return files, _sampled(pl.concat(models), pl.concat(fractions), sample) if sample is not None and offset else None


def key_ordered_chunks(
    parts: Iterable[Path], total: int, sample: Sample | None, chunk_size: int, folder: Path
) -> Iterator[pl.DataFrame]:
    """The ``total`` valid records of ``parts`` (local Parquet files, in input order, each read
    once) with their ``sampled`` flag (:func:`sample_mask` over the whole day), in content-key
    order, ties in input order, cut into chunks of ``chunk_size`` records (the last may be shorter).

    Ordering by content key gives every chunk its own narrow range of keys, the same range on
    every run of the day: the ledger is looked up only in the objects of overlapping ranges
    (:class:`~evaluation.storage.ledger.Ledger`), so a chunk reads what earlier attempts at its own
    records stored, not the whole day's ledger. Records with the same question and answer sit
    together (at most split by a chunk boundary), so a prompt repeated in the day is judged once.
    The order is made with a bounded shuffle: each part is split by key into buckets of about
    :data:`SHUFFLE_BUCKET_ROWS` records written as local files (LZ4-compressed Arrow, the day's
    records once on local disk), then the buckets are read back in key order one at a time.
    Memory follows a part and a bucket, not the day; a sample adds 12 bytes a record (each
    record's model code and sample fraction, from which the sample is drawn before the buckets are
    read back) and the flag, a bit a record."""
    files, sampled = _bucket_files(parts, total, sample, folder)
    pending: list[pl.DataFrame] = []
    pending_rows = 0
    for bucket in sorted(files):
        ordered = pl.concat([pl.read_ipc(f) for f in files[bucket]]).sort("_key", maintain_order=True)
        for file in files.pop(bucket):
            file.unlink()
        if sampled is None:
            ordered = ordered.drop("_key").with_columns(sampled=pl.lit(True))
        else:
            ordered = ordered.with_columns(sampled=sampled.gather(ordered["_pos"])).drop("_key", "_pos")
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


def stage_chunks(cfg: RunConfig, stores: Stores, chunks: Iterable[pl.DataFrame]) -> list[ChunkPlan]:
    """Stage each chunk of records (RECORD_SCHEMA plus ``sampled``) for the judge stage."""
    stores.out.delete_prefix(storage.work_key(cfg.date, cfg.run_id, "records/"))
    planned = []
    for index, part in enumerate(chunks):
        key = storage.chunk_key(cfg.date, cfg.run_id, "records", index)
        storage.write_parquet(stores.out, key, part)
        planned.append(ChunkPlan(index=index, records=part.height, key=key))
    return planned


def in_key_order(records: pl.DataFrame, chunk_size: int) -> Iterator[pl.DataFrame]:
    """Records held in memory (a comparison's sample) cut into chunks in content-key order, as
    :func:`key_ordered_chunks` does with a day."""
    ordered = records.with_columns(content_keys(records)).sort("_key", maintain_order=True).drop("_key")
    for offset in range(0, ordered.height, chunk_size):
        yield ordered.slice(offset, chunk_size)


def plan_chunks(cfg: RunConfig, stores: Stores) -> list[ChunkPlan]:
    """Sample, split the valid records into chunks (never more than ``max_map_length``), stage
    each chunk and estimate the day's tokens and cost. Returns one small record per chunk. The
    staged valid parts are streamed into chunks in content-key order (:func:`key_ordered_chunks`)."""

    started = time.monotonic()
    ingest = read_manifest(cfg, stores).ingest
    if ingest is None:
        raise RunFailed(f"{where(cfg)}: no valid records staged under "
                        f"{stores.out.uri(storage.work_key(cfg.date, cfg.run_id, 'valid/'))} (ingest has not run)")
    total = ingest.counts.valid
    chunk_size, chunk_count = chunk_layout(cfg, total)
    if chunk_size != cfg.chunk_size:
        logger.warning("%s: chunk size raised from %d to %d to stay within max_map_length %d",
                       where(cfg), cfg.chunk_size, chunk_size, cfg.max_map_length)
    first_sampled: list[pl.DataFrame] = []  # the day's first sampled records, for the estimate
    sampled_count = 0

    def counting_the_sampled(parts: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
        nonlocal sampled_count
        for part in parts:
            sampled = part.filter(pl.col("sampled"))
            if sampled_count < _ESTIMATE_SAMPLE:  # the first sampled records are those counted so far
                first_sampled.append(sampled.head(_ESTIMATE_SAMPLE - sampled_count))
            sampled_count += sampled.height
            yield part

    with tempfile.TemporaryDirectory(prefix="evaluation-plan-") as folder:
        parts = _staged_valid_parts(cfg, stores, ingest)
        chunks = stage_chunks(cfg, stores, counting_the_sampled(
            key_ordered_chunks(parts, total, cfg.sample, chunk_size, Path(folder))))
    staged = sum(c.records for c in chunks)
    if (len(chunks), staged) != (chunk_count, total):
        raise RunFailed(f"{where(cfg)}: planned {chunk_count} chunks of {total} records, staged {len(chunks)} of {staged}")
    head = (pl.concat(first_sampled) if first_sampled
            else pl.DataFrame(schema={**RECORD_SCHEMA, "sampled": pl.Boolean}))
    estimate = estimate_cost(cfg, head, records=sampled_count)
    write_record(cfg, stores, "plan", PlanRecord(
        chunks=len(chunks),
        chunk_size=chunk_size,
        sampled=sampled_count,
        estimate=estimate,
        call_parameters=call_parameters(cfg),
        cascade_parameters=[call_parameters(cfg.level_config(level)) for level in range(len(cfg.cascade))],
        seconds=round(time.monotonic() - started, 3),
    ))
    logger.info("%s: %d chunks of up to %d records; estimate %s", where(cfg), len(chunks), chunk_size, estimate)
    return chunks


def chunk_layout(cfg: RunConfig, records: int) -> tuple[int, int]:
    """Records per chunk and chunks of a day of ``records``: ``chunk_size``, raised so that the
    chunks (one mapped judge task each) stay within ``max_map_length``."""
    chunk_size = max(cfg.chunk_size, math.ceil(records / cfg.max_map_length))
    return chunk_size, math.ceil(records / chunk_size)


_ESTIMATE_SAMPLE = 50


def estimate_cost(cfg: RunConfig, sample: pl.DataFrame, *, records: int) -> CostEstimate:
    """Prompt tokens and cost for the day's ``records``, from its first sampled records (at most
    :data:`_ESTIMATE_SAMPLE`) rendered and scaled to the day."""

    if sample.height == 0:
        return CostEstimate(records=0, prompt_tokens=0, cost_usd=0.0, sampled_records=0)
    tokens = 0
    prompts: Counter[str] = Counter()
    for row in sample.iter_rows(named=True):
        record = record_from_row(row)
        for judge in cfg.judges:
            prompt = route(judge, record)
            if isinstance(prompt, RenderedPrompt):  # empty answers and judges that do not apply cost nothing
                tokens += count_tokens(cfg.judge_model, prompt)
                prompts[judge] += 1
    scale = records / sample.height
    day_tokens = int(tokens * scale)
    day_calls = {judge: int(round(n * scale)) for judge, n in prompts.items()}
    expected_output = output_tokens(day_calls)
    return CostEstimate(
        records=records,
        calls=sum(day_calls.values()),
        prompt_tokens=day_tokens,
        output_tokens=expected_output,
        cost_usd=round(tokens_cost(day_tokens, expected_output, price_per_token(cfg.judge_model)), 6),
        batch_cost_usd=batch_cost(cfg.judge_model, day_tokens, expected_output),
        sampled_records=sample.height,
    )


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The same calls at the provider's batch price (None when it has no batch API)."""

    if provider_of(model) not in BATCH_PROVIDERS:
        return None
    return round(tokens_cost(prompt_tokens, completion_tokens, batch_prices(model)[:2]), 6)

