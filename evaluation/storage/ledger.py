"""The ledger of judge calls: successful replies kept in the output store for reuse.

A call is keyed by :func:`request_hash` of (judge model, prompt version, rendered messages, call
parameters). Before calling, a chunk looks its hashes up and reuses stored replies, so a retried
chunk, a re-run of the day and a run restarted after a crash pay only for calls not made yet.

Entries are appended as small Parquet objects under ``_ledger/dt=.../`` and flushed every
``flush_every`` replies or ``flush_seconds``, whichever comes first, so a killed run loses at most
the replies of the last few seconds. Failed calls are not stored: they are tried again.
:meth:`Ledger.record` is called as replies arrive, inside the judge's event loop, so it never
waits for storage: a due flush is uploaded by a background thread. :meth:`Ledger.flush`, called
once the calls are done, waits for those uploads and writes what is left; a reply whose upload
failed stays queued until a flush lands it, and the final flush raises if it cannot.

A chunk holds the records of one narrow range of content keys (see
:mod:`evaluation.stages.plan`), the same range on every run of the day, and its ledger
objects carry that range in their names (``k<lo>-<hi>-<writer>-...``). A lookup reads only the
objects whose range overlaps its own, so its cost follows the chunk, not the day's ledger. A
comparison's re-judged sample is chunked in key order too, but a small sample spread over the day
spans most keys, so its few lookups read most objects. Objects without a range in their name are
always read.

Once a day has landed, :func:`compact` merges its small objects into a few objects of at most
about ``max_bytes`` each (``k<lo>-<hi>-compacted-<digest>.parquet``): the objects are taken in
key-range order and packed, so each compacted object covers one contiguous key range and a chunk
still reads only the objects that can hold its keys. Its rows are the packed objects' rows with
superseded replies dropped (latest ``judged_at`` wins per request hash, as a lookup decides),
sorted by request hash. Compacted objects are written first, the objects they replace deleted
after, so a crash in between leaves duplicates that a lookup reads harmlessly and the next
compaction merges. A day with nothing but compacted objects is left as it is, so the number of
objects (and what a lookup lists and reads) follows the size of the day's replies, not the number
of runs that wrote them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypedDict, cast

import polars as pl

from evaluation import storage
from evaluation.contract.schemas import LEDGER_SCHEMA
from evaluation.judges import RenderedPrompt

logger = logging.getLogger(__name__)


class LedgerEntry(TypedDict):
    """One stored reply: a row of ``LEDGER_SCHEMA``."""

    request_hash: str
    judge: str
    judge_model: str
    prompt_version: str
    raw_response: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: float
    attempts: int
    judged_at: dt.datetime | None


def request_hash(judge_model: str, prompt: RenderedPrompt, parameters: dict[str, Any]) -> str:
    """Content address of one judge call."""
    payload = json.dumps(
        {
            "judge_model": judge_model,
            "prompt_version": prompt.prompt_version,
            "messages": prompt.messages,
            "parameters": parameters,
        },
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _later(a: dt.datetime | None, b: dt.datetime | None) -> bool:
    return a is not None and (b is None or a > b)


def _merge_latest(found: dict[str, LedgerEntry], frame: pl.DataFrame) -> None:
    """Add ``frame``'s replies to ``found``, keeping the latest reply to each request hash."""
    for row in frame.iter_rows(named=True):
        known = found.get(row["request_hash"])
        if known is None or _later(row["judged_at"], known["judged_at"]):
            found[row["request_hash"]] = cast(LedgerEntry, row)  # a row of LEDGER_SCHEMA


#: A ledger object's name that carries its writer's content-key range.
_RANGED = re.compile(r"k(?P<low>[0-9a-f]{16})-(?P<high>[0-9a-f]{16})-")
#: The name of an object written by :func:`compact` (a writer's objects end ``-<seq>-<8 hex>``).
_COMPACTED = re.compile(r"(^|-)compacted-[0-9a-f]{16}\.parquet$")
#: Default bound of a compacted object (bytes of the objects packed into it). The compaction holds a
#: group's rows, and a chunk's lookup reads a whole compacted object of its key range: at a million
#: records, compacting the day's ledger took 745 MB of memory with groups of 64 MiB, 343 MB with 16.
COMPACT_MAX_BYTES = 16 * 1024 * 1024


class Ledger:
    """Reads and appends the ledger of one day."""

    def __init__(
        self,
        store: storage.Store,
        day: dt.date,
        writer: str,
        *,
        flush_every: int = 200,
        flush_seconds: float = 2.0,
        key_range: tuple[str, str] | None = None,
    ) -> None:
        self.store = store
        self.key_range = key_range
        self.day = day
        self.writer = storage.safe_id(writer)
        self.flush_every = flush_every
        self.flush_seconds = flush_seconds
        self._pending: list[LedgerEntry] = []
        self._last_flush = time.monotonic()
        self._sequence = 0
        self._lock = threading.Lock()
        self._uploader: ThreadPoolExecutor | None = None
        self._uploads: list[Future[None]] = []

    def lookup(self, hashes: set[str]) -> dict[str, LedgerEntry]:
        """Stored replies for the given hashes; of several replies to one hash the latest
        (``judged_at``) wins, so a reply judged again replaces the one before. An object that
        vanished since the listing (compacted meanwhile) makes the lookup list once more and read
        the objects that replaced it."""
        if not hashes:
            return {}
        found: dict[str, LedgerEntry] = {}
        seen: set[str] = set()
        read = skipped = 0
        wanted = list(hashes)
        for attempt in range(2):
            vanished = False
            for info in self.store.list(storage.ledger_prefix(self.day)):
                if not info.key.endswith(".parquet") or info.key in seen:
                    continue
                seen.add(info.key)
                if not self._may_hold(info.key):
                    skipped += 1
                    continue
                read += 1
                try:
                    frame = storage.read_parquet(self.store, info.key)
                except Exception as exc:  # a torn or foreign object must not stop the day
                    if attempt == 0 and not self.store.exists(info.key):
                        vanished = True
                        continue
                    logger.warning("skipping unreadable ledger object %s: %s", self.store.uri(info.key), exc)
                    continue
                _merge_latest(found, frame.filter(pl.col("request_hash").is_in(wanted)))
            if not vanished:
                break
        logger.debug("ledger lookup: %d of %d hashes found in %d objects (%d of other key ranges skipped)",
                     len(found), len(hashes), read, skipped)
        return found

    def _may_hold(self, key: str) -> bool:
        """Whether a ledger object may hold replies for this chunk's key range."""
        theirs = _key_range_of(key)
        if self.key_range is None or theirs is None:
            return True
        low, high = self.key_range
        return theirs[0] <= high and low <= theirs[1]

    def record(self, entry: LedgerEntry) -> None:
        """Queue one successful reply; when a flush is due, a background thread uploads the queued
        replies, so the caller (an event loop) never waits for storage."""
        with self._lock:
            self._pending.append(entry)
            due = len(self._pending) >= self.flush_every or time.monotonic() - self._last_flush >= self.flush_seconds
            if due:
                self._last_flush = time.monotonic()
        if due:
            self._uploader = self._uploader or ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-flush")
            self._uploads.append(self._uploader.submit(self._write_pending))

    def flush(self) -> None:
        """Wait for the background uploads, then write every reply still queued as one ledger
        object (raises StorageError when that fails; the replies stay queued). Call it off the
        event loop, once the calls are done."""
        for upload in self._uploads:
            if upload.exception() is not None:  # its replies went back to the queue: written below
                logger.warning("ledger upload failed, retried by the final flush: %s", upload.exception())
        if self._uploader is not None:
            self._uploader.shutdown()
        self._uploads, self._uploader = [], None
        self._write_pending()

    def _write_pending(self) -> None:
        """Land the queued replies as one ledger object; on failure they go back to the queue."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = time.monotonic()
            self._sequence += 1
            sequence = self._sequence
        if not batch:
            return
        ranged = f"k{self.key_range[0]}-{self.key_range[1]}-" if self.key_range else ""
        key = f"{storage.ledger_prefix(self.day)}{ranged}{self.writer}-{sequence:05d}-{uuid.uuid4().hex[:8]}.parquet"
        try:
            storage.write_parquet(self.store, key, pl.DataFrame(batch, schema=LEDGER_SCHEMA))
        except BaseException:
            with self._lock:
                self._pending[:0] = batch
            raise


@dataclass(frozen=True)
class Compaction:
    """What :func:`compact` found and left in a day's ledger."""

    objects_before: int
    bytes_before: int
    objects_after: int
    bytes_after: int
    written: int  #: compacted objects written
    replaced: int  #: objects deleted once their rows were in a compacted object


def _key_range_of(key: str) -> tuple[str, str] | None:
    match = _RANGED.match(key.rsplit("/", 1)[-1])
    return None if match is None else (match["low"], match["high"])


def _is_compacted(key: str) -> bool:
    return _COMPACTED.search(key.rsplit("/", 1)[-1]) is not None


def _pack(objects: Sequence[storage.ObjectInfo], max_bytes: int) -> list[list[storage.ObjectInfo]]:
    """The objects in key-range order (those without a range apart), packed into groups of about
    ``max_bytes``. An object whose range reaches into the group's (beyond a shared boundary key),
    or lies within it, joins it whatever its size: a chunk's replies of every run, and the newer replies that supersede
    a compacted object's, are merged into one object."""
    ranged = sorted((o for o in objects if _key_range_of(o.key) is not None),
                    key=lambda o: (_key_range_of(o.key), o.key))
    groups: list[list[storage.ObjectInfo]] = []
    for series in (ranged, sorted((o for o in objects if _key_range_of(o.key) is None), key=lambda o: o.key)):
        group: list[storage.ObjectInfo] = []
        size, high = 0, ""
        for info in series:
            key_range = _key_range_of(info.key)
            inside = key_range is not None and (key_range[0] < high or key_range[1] <= high)
            if group and size + info.size > max_bytes and not inside:
                groups.append(group)
                group, size, high = [], 0, ""
            group.append(info)
            size += info.size
            high = max(high, key_range[1]) if key_range is not None else high
        if group:
            groups.append(group)
    return groups


def _rewrite(store: storage.Store, day: dt.date, group: Sequence[storage.ObjectInfo]) -> int:
    """Write the group's rows as one compacted object (superseded replies dropped, sorted by
    request hash), then delete the objects read into it; returns how many were deleted. An
    unreadable object is neither merged nor deleted."""
    frames, merged = [], []
    for info in group:
        try:
            frame = storage.read_parquet(store, info.key)
        except Exception as exc:  # torn, foreign or gone since the listing: left as it is
            logger.warning("ledger compaction: skipping unreadable object %s: %s", store.uri(info.key), exc)
            continue
        frames.append(frame.select([pl.col(c).cast(t) for c, t in LEDGER_SCHEMA.items()]))
        merged.append(info.key)
    if not merged:
        return 0
    rows = (
        pl.concat(frames)
        .sort("judged_at", descending=True, nulls_last=True)
        .unique("request_hash", keep="first", maintain_order=True)
        .sort("request_hash")
    )
    ranges = [r for r in map(_key_range_of, merged) if r is not None]
    ranged = f"k{min(r[0] for r in ranges)}-{max(r[1] for r in ranges)}-" if ranges else ""
    digest = hashlib.sha256("\n".join(sorted(merged)).encode()).hexdigest()[:16]
    storage.write_parquet(store, f"{storage.ledger_prefix(day)}{ranged}compacted-{digest}.parquet", rows)
    store.delete_keys(merged)  # only once the compacted object has landed: a crash before leaves duplicates
    return len(merged)


def compact(store: storage.Store, day: dt.date, *, max_bytes: int | None = None) -> Compaction:
    """Merge the day's small ledger objects into compacted objects of about ``max_bytes`` at most
    (default :data:`COMPACT_MAX_BYTES`; see the module's docstring). Idempotent: a ledger holding only compacted objects is left as
    it is. Objects written while it runs are not touched (they are compacted next time)."""
    bound = COMPACT_MAX_BYTES if max_bytes is None else max_bytes
    objects = [o for o in store.list(storage.ledger_prefix(day)) if o.key.endswith(".parquet")]
    written = replaced = 0
    if any(not _is_compacted(o.key) for o in objects):
        for group in _pack(objects, bound):
            if all(_is_compacted(o.key) for o in group):
                continue
            deleted = _rewrite(store, day, group)
            written += deleted > 0
            replaced += deleted
    after = [o for o in store.list(storage.ledger_prefix(day)) if o.key.endswith(".parquet")] if written else objects
    result = Compaction(len(objects), sum(o.size for o in objects), len(after), sum(o.size for o in after),
                        written, replaced)
    if written:
        logger.info("ledger of %s compacted: %d objects (%d bytes) into %d (%d bytes)", day.isoformat(),
                    result.objects_before, result.bytes_before, result.objects_after, result.bytes_after)
    return result
