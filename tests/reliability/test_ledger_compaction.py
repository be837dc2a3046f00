"""Compaction of a landed day's ledger: few objects, each a contiguous key range, and every reply a
re-run needs still found (no call), also after ``rejudge_parse_errors`` and after a compaction
that died between writing its objects and deleting the ones they replace."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.storage import ledger
from evaluation.storage.ledger import Ledger, compact
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import DAY, config, judge_reply, runs, table
from tests.reliability.test_ledger_locality import _read_counter
from tests.reliability.test_rejudge import GlitchOnce

RECORDS = 60
RANGES = [(f"{i:x}" + "0" * 15, f"{i:x}" + "f" * 15) for i in range(8)]


def _entry(digest: str, when: dt.datetime, reply: str = "{}") -> dict[str, object]:
    return {"request_hash": digest, "judge": "rag", "judge_model": "m", "prompt_version": "rag@x",
            "raw_response": reply * 40, "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "latency_ms": 1.0,
            "attempts": 1, "judged_at": when}


def _objects(store: storage.Store) -> list[storage.ObjectInfo]:
    return [o for o in store.list(storage.ledger_prefix(DAY)) if o.key.endswith(".parquet")]


def _names(store: storage.Store) -> list[str]:
    return sorted(o.key.rsplit("/", 1)[-1] for o in _objects(store))


def _write_run(store: storage.Store, run: int) -> None:
    """One run of the day: per key range, 30 replies in three objects; runs after the first judge
    the first 10 of each range again (a newer reply)."""
    when = dt.datetime(2026, 11, 20, tzinfo=dt.UTC) + dt.timedelta(hours=run)
    for index, key_range in enumerate(RANGES):
        writer = Ledger(store, DAY, f"run{run}-chunk{index:05d}", key_range=key_range, flush_every=1000,
                        flush_seconds=3600)
        for n in range(30 if run == 0 else 10):
            writer.record(_entry(f"h{index}-{n}", when, reply=f"run{run}"))
            if n % 10 == 9:
                writer.flush()


def _stored_rows(store: storage.Store) -> pl.DataFrame:
    return pl.concat([storage.read_parquet(store, o.key) for o in _objects(store)])


def test_compaction_packs_key_ranges_into_bounded_objects_and_is_idempotent(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = storage.LocalStore(tmp_path)
    _write_run(store, 0)
    small = _objects(store)
    assert len(small) == 3 * len(RANGES)
    bound = sum(o.size for o in small) // 3
    done = compact(store, DAY, max_bytes=bound)
    assert (done.objects_before, done.replaced) == (len(small), len(small))
    names = _names(store)
    assert len(names) == done.objects_after == done.written <= math.ceil(done.bytes_before / bound) + 1
    assert all("-compacted-" in n for n in names)
    # contiguous, ordered key ranges: each range's replies in exactly one compacted object
    spans = [(n[1:17], n[18:34]) for n in names]
    assert spans[0][0] == RANGES[0][0] and spans[-1][1] == RANGES[-1][1]
    for (_, high), (low, _) in zip(spans, spans[1:], strict=False):
        assert high < low
    assert _stored_rows(store).height == 30 * len(RANGES)
    again = compact(store, DAY, max_bytes=bound)
    assert (again.written, again.replaced) == (0, 0) and _names(store) == names

    reads = _read_counter(monkeypatch)
    found = Ledger(store, DAY, "lookup", key_range=RANGES[3]).lookup({f"h3-{n}" for n in range(30)})
    assert len(found) == 30 and len(reads) == 1


def test_after_many_runs_the_objects_stay_few_and_a_lookup_reads_one_or_two(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = storage.LocalStore(tmp_path)
    _write_run(store, 0)
    bound = sum(o.size for o in _objects(store)) // 3
    compact(store, DAY, max_bytes=bound)
    first = len(_objects(store))
    reads = _read_counter(monkeypatch)
    for run in range(1, 7):
        count = len(_objects(store))
        _write_run(store, run)  # 8 new small objects, each superseding a third of its range's replies
        assert len(_objects(store)) == count + len(RANGES)
        compact(store, DAY, max_bytes=bound)
        assert len(_objects(store)) <= first + 1
        rows = _stored_rows(store)  # superseded replies are dropped, not piled up
        assert rows.height == rows["request_hash"].n_unique() == 30 * len(RANGES)
        for index, key_range in enumerate(RANGES):
            reads.clear()
            found = Ledger(store, DAY, "lookup", key_range=key_range).lookup({f"h{index}-{n}" for n in range(30)})
            assert len(found) == 30 and 1 <= len(reads) <= 2
            assert found[f"h{index}-0"]["raw_response"] == f"run{run}" * 40
            assert found[f"h{index}-29"]["raw_response"] == "run0" * 40


# ---------------------------------------------------------------------------------------------- real runs


def _cfg(tmp_path: Path, server: OpenAIServer, run_id: str, **options: Any) -> Any:
    return config(tmp_path, run_id=run_id, judge_model="openai/mock-judge", api_base=server.base_url,
                  chunk_size=10, **options)


def _run(tmp_path: Path, server: OpenAIServer, run_id: str, **options: Any) -> dict[str, Any]:
    cfg = _cfg(tmp_path, server, run_id, **options)
    return run_day(cfg, stages.Stores.open(cfg), api_key="k")


def _evaluations(out: Path) -> pl.DataFrame:
    """The landed evaluations without what says how a row's reply was got (called, or reused)."""
    return table(out, "evaluations").drop("run_id", "latency_ms", "attempts", "cached").sort("record_id", "judge")


def _all_reused(out: Path) -> bool:
    rows = table(out, "evaluations").filter(pl.col("judge_status") != "skipped")
    return rows.height > 0 and bool(rows["cached"].all())


def _judge_chunks_and_land(tmp_path: Path, server: OpenAIServer,
                           run_id: str) -> tuple[list[storage.ObjectInfo], dict[str, Any]]:
    """A run's stages one by one: (the ledger's objects before the landing, the landed day)."""
    cfg = _cfg(tmp_path, server, run_id)
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    for chunk in stages.plan_chunks(cfg, stores):
        stages.judge_chunk(cfg, stores, chunk["index"], api_key="k")
    before = _objects(stores.out)
    return before, stages.score_and_land(cfg, stores)


def _no_duplicates(out: Path) -> None:
    for name in ("evaluations", "judge_calls"):
        landed = table(out, name)
        assert landed.height == landed.select("record_id", "judge").n_unique(), name


def test_a_compacted_day_is_judged_again_without_a_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    out = storage.LocalStore(tmp_path / "out")
    monkeypatch.setattr(ledger, "COMPACT_MAX_BYTES", 15_000)  # a few compacted objects from a small day
    with OpenAIServer(responder=judge_reply) as server:
        before, first = _judge_chunks_and_land(tmp_path, server, "first")
        asked = server.request_count
        assert first["calls_made"] == asked > 0
        names = _names(out)
        assert len(before) >= math.ceil(RECORDS / 10)  # an object per chunk at least
        assert 1 < len(names) <= math.ceil(sum(o.size for o in before) / 15_000) < len(before)
        assert all("-compacted-" in n and n.startswith("k") for n in names)
        landed = _evaluations(tmp_path / "out")

        reads = _read_counter(monkeypatch)
        again = _run(tmp_path, server, "again")
        assert server.request_count == asked and again["calls_made"] == 0
        assert again["calls_reused"] == first["calls_reused"] + first["calls_made"]
        assert _evaluations(tmp_path / "out").equals(landed) and _all_reused(tmp_path / "out")
        chunks = math.ceil(RECORDS / 10)
        assert len(reads) <= 2 * chunks  # each chunk read its one or two compacted objects
        assert _names(out) == names  # nothing new to compact: left as it was
    _no_duplicates(tmp_path / "out")


def test_rejudge_parse_errors_supersedes_replies_after_compaction(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    out = storage.LocalStore(tmp_path / "out")
    with OpenAIServer(responder=GlitchOnce()) as server:
        first = _run(tmp_path, server, "first")
        glitched = first["statuses"]["parse_error"]
        assert glitched > 0 and all("-compacted-" in n for n in _names(out))
        asked = server.request_count

        fixed = _run(tmp_path, server, "rejudge", rejudge_parse_errors=True)
        assert 0 < fixed["calls_made"] == server.request_count - asked
        assert fixed["statuses"]["parse_error"] == 0 and fixed["statuses"]["ok"] == first["statuses"]["ok"] + glitched
        assert all("-compacted-" in n for n in _names(out))
        rows = _stored_rows(out)  # the superseded (malformed) replies are gone from the ledger
        assert rows.height == rows["request_hash"].n_unique() == first["calls_made"]

        later = _run(tmp_path, server, "later")
        assert server.request_count == asked + fixed["calls_made"] and later["calls_made"] == 0
        assert later["statuses"] == fixed["statuses"]
    _no_duplicates(tmp_path / "out")


def test_a_compaction_killed_before_deleting_leaves_duplicates_a_rerun_reads_harmlessly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    out = storage.LocalStore(tmp_path / "out")
    original = storage.LocalStore.delete_keys

    def killed(self: storage.LocalStore, keys: Sequence[str]) -> None:
        if any(k.startswith("_ledger/") for k in keys):
            raise SystemExit("killed")  # the process dies between the write and the delete
        original(self, keys)

    with OpenAIServer(responder=judge_reply) as server:
        monkeypatch.setattr(storage.LocalStore, "delete_keys", killed)
        with pytest.raises(SystemExit):
            _judge_chunks_and_land(tmp_path, server, "first")
        monkeypatch.setattr(storage.LocalStore, "delete_keys", original)
        asked = server.request_count
        names = _names(out)
        compacted = [n for n in names if "-compacted-" in n]
        assert len(compacted) == 1 and len(names) > 1  # the compacted object beside every original
        assert runs(tmp_path / "out")["status"].to_list() == ["success"]  # the day had landed before
        landed = _evaluations(tmp_path / "out")

        again = _run(tmp_path, server, "again")
        assert server.request_count == asked and again["calls_made"] == 0
        assert _evaluations(tmp_path / "out").equals(landed) and _all_reused(tmp_path / "out")
        assert len(_names(out)) == 1 and "-compacted-" in _names(out)[0]  # merged by the re-run's landing
        rows = _stored_rows(out)
        assert rows.height == rows["request_hash"].n_unique() == asked
    _no_duplicates(tmp_path / "out")
