"""The ledger's writes never hold up the judge's event loop: a due flush uploads in a background
thread, the final flush waits for it, and a reply whose upload failed is written by a later flush."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.storage.ledger import Ledger

DAY = dt.date(2026, 11, 20)


def _entry(digest: str) -> dict[str, object]:
    return {"request_hash": digest, "judge": "rag", "judge_model": "m", "prompt_version": "rag@x", "raw_response": "{}",
            "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "latency_ms": 1.0, "attempts": 1,
            "judged_at": dt.datetime(2026, 11, 20, tzinfo=dt.UTC)}


class GatedStore(storage.LocalStore):
    """A directory whose uploads wait until ``gate`` is open, and fail while ``failing`` is set."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.failing = False
        self.threads: set[str] = set()

    def upload_file(self, key: str, path: Path) -> None:
        self.threads.add(threading.current_thread().name)
        self.started.set()
        if not self.gate.wait(timeout=30):
            raise storage.StorageError(f"cannot write {self.uri(key)}: the test never opened the gate")
        if self.failing:
            raise storage.StorageError(f"cannot write {self.uri(key)}: 503 SlowDown")
        super().upload_file(key, path)


def test_record_on_the_event_loop_never_waits_for_an_upload(tmp_path: Path) -> None:
    store = GatedStore(tmp_path)
    store.gate.clear()  # no upload can finish until the replies are recorded
    ledger = Ledger(store, DAY, "w", flush_every=1)

    async def judge() -> None:
        for i in range(5):  # five replies, each one a due flush
            ledger.record(_entry(f"h{i}"))
            await asyncio.sleep(0)

    asyncio.run(judge())  # returns with the uploads still held: recording never waited for one
    assert store.started.wait(timeout=30)  # an upload did start, in another thread
    store.gate.set()
    ledger.flush()  # waits for every upload
    assert store.threads and threading.current_thread().name not in store.threads
    assert set(ledger.lookup({f"h{i}" for i in range(6)})) == {f"h{i}" for i in range(5)}


def test_a_failed_upload_is_written_by_the_final_flush(tmp_path: Path) -> None:
    store = GatedStore(tmp_path)
    store.failing = True
    ledger = Ledger(store, DAY, "w", flush_every=2)
    for i in range(4):
        ledger.record(_entry(f"h{i}"))  # two background uploads, both failing
    with pytest.raises(storage.StorageError, match="503 SlowDown"):
        ledger.flush()  # still failing: the final flush says so, the replies stay queued
    assert not store.list(storage.ledger_prefix(DAY))
    store.failing = False
    ledger.flush()
    assert set(ledger.lookup({f"h{i}" for i in range(4)})) == {f"h{i}" for i in range(4)}
    assert len(store.list(storage.ledger_prefix(DAY))) == 1  # one object with every reply
