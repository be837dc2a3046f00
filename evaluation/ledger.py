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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import polars as pl

from evaluation import storage
from evaluation.judges import RenderedPrompt
from evaluation.stages.schemas import LEDGER_SCHEMA

logger = logging.getLogger(__name__)


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


#: A ledger object's name that carries its writer's content-key range.
_RANGED = re.compile(r"k(?P<low>[0-9a-f]{16})-(?P<high>[0-9a-f]{16})-")


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
        self._pending: list[dict[str, Any]] = []
        self._last_flush = time.monotonic()
        self._sequence = 0
        self._lock = threading.Lock()
        self._uploader: ThreadPoolExecutor | None = None
        self._uploads: list[Future[None]] = []

    def lookup(self, hashes: set[str]) -> dict[str, dict[str, Any]]:
        """Stored replies for the given hashes; of several replies to one hash the latest
        (``judged_at``) wins, so a reply judged again replaces the one before."""
        if not hashes:
            return {}
        found: dict[str, dict[str, Any]] = {}
        read = skipped = 0
        for info in self.store.list(storage.ledger_prefix(self.day)):
            if not info.key.endswith(".parquet"):
                continue
            if not self._may_hold(info.key):
                skipped += 1
                continue
            read += 1
            try:
                frame = storage.read_parquet(self.store, info.key)
            except Exception as exc:  # a torn or foreign object must not stop the day
                logger.warning("skipping unreadable ledger object %s: %s", self.store.uri(info.key), exc)
                continue
            for row in frame.filter(pl.col("request_hash").is_in(list(hashes))).iter_rows(named=True):
                known = found.get(row["request_hash"])
                if known is None or _later(row["judged_at"], known["judged_at"]):
                    found[row["request_hash"]] = row
        logger.debug("ledger lookup: %d of %d hashes found in %d objects (%d of other key ranges skipped)",
                     len(found), len(hashes), read, skipped)
        return found

    def _may_hold(self, key: str) -> bool:
        """Whether a ledger object may hold replies for this chunk's key range."""
        if self.key_range is None:
            return True
        match = _RANGED.match(key.rsplit("/", 1)[-1])
        if match is None:
            return True
        low, high = self.key_range
        return match["low"] <= high and low <= match["high"]

    def record(self, entry: dict[str, Any]) -> None:
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
