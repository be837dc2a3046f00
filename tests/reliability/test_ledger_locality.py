"""The ledger is looked up chunk by chunk: a chunk reads the ledger objects of its own content-key
range, not the whole day's, and still finds every reply paid for before.

Chunks hold the day's valid records in content-key order, each a narrow range of keys that is the
same on every run of the day; ledger objects carry their writer's range in their names.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.storage import ledger
from evaluation.storage.ledger import Ledger
from evaluation.testing import synthetic
from tests.reliability.helpers import DAY, config

OFFLINE = {"judge_model": "offline/lexical", "max_reject_ratio": 0.5, "chunk_size": 20}


def _entry(digest: str) -> dict[str, object]:
    return {"request_hash": digest, "judge": "rag", "judge_model": "m", "prompt_version": "rag@x", "raw_response": "{}",
            "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.0, "latency_ms": 1.0, "attempts": 1,
            "judged_at": dt.datetime(2026, 11, 20, tzinfo=dt.UTC)}


def _read_counter(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ledger object read from now on."""
    reads: list[str] = []
    original = storage.read_parquet

    def counting(store: storage.Store, key: str, *args: object, **kwargs: object) -> pl.DataFrame:
        if key.startswith("_ledger/"):
            reads.append(key)
        return original(store, key, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(storage, "read_parquet", counting)
    return reads


def test_a_lookup_reads_only_objects_of_overlapping_ranges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = storage.LocalStore(tmp_path)
    low, middle, high = ("0" * 16, "3" + "f" * 15), ("4" + "0" * 15, "7" + "f" * 15), ("8" + "0" * 15, "f" * 16)
    for writer, key_range, digest in (("a", low, "h-low"), ("b", middle, "h-middle"), ("c", high, "h-high"), ("d", None, "h-any")):
        ledger = Ledger(store, DAY, writer, key_range=key_range)
        ledger.record(_entry(digest))
        ledger.flush()
    names = sorted(o.key.rsplit("/", 1)[-1] for o in store.list(storage.ledger_prefix(DAY)))
    assert [n[:34] for n in names if n.startswith("k")] == [f"k{r[0]}-{r[1]}" for r in (low, middle, high)]

    reads = _read_counter(monkeypatch)
    wanted = {"h-low", "h-middle", "h-high", "h-any"}
    found = Ledger(store, DAY, "e", key_range=("3" + "0" * 15, "4" + "1" * 15)).lookup(wanted)
    assert set(found) == {"h-low", "h-middle", "h-any"}  # the objects whose range overlaps, and the unranged one
    assert len(reads) == 3
    reads.clear()
    assert set(Ledger(store, DAY, "f").lookup(wanted)) == wanted  # no range of its own: reads everything
    assert len(reads) == 4


def test_chunks_hold_disjoint_key_ranges_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 100)
    cfg = config(tmp_path, **OFFLINE)
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores, batch_rows=13)
    chunks = stages.plan_chunks(cfg, stores)  # one shuffle bucket
    assert [c["records"] for c in chunks] == [20] * 5
    frames = [storage.read_parquet(stores.out, c["key"]) for c in chunks]
    monkeypatch.setattr(stages.plan, "SHUFFLE_BUCKET_ROWS", 7)  # 15 buckets from 8 parts: the same chunks
    again = stages.plan_chunks(cfg, stores)
    rebuilt = [storage.read_parquet(stores.out, c["key"]) for c in again]
    assert len(rebuilt) == len(frames) and all(a.equals(b) for a, b in zip(rebuilt, frames, strict=True))
    ranges = [stages.key_range(f) for f in frames]
    assert all(r is not None for r in ranges)
    for (_, high), (low, _) in zip(ranges, ranges[1:], strict=False):  # type: ignore[misc]
        assert high <= low
    # Records with the same question and answer share a key: one chunk (or two at a boundary).
    keys = pl.concat([f.with_columns(stages.content_keys(f), chunk=pl.lit(i)) for i, f in enumerate(frames)])
    spread = keys.group_by("_key").agg(pl.col("chunk").n_unique().alias("chunks"), pl.len())
    assert spread["len"].max() > 1, "the synthetic day repeats questions with their answers"
    assert spread["chunks"].max() <= 2


def test_a_rerun_chunk_reads_its_own_ledger_objects_and_makes_no_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 100)
    first = config(tmp_path, run_id="first", **OFFLINE)
    monkeypatch.setattr(ledger, "COMPACT_MAX_BYTES", 1)  # compacted: an object per chunk's key range
    run_day(first, stages.Stores.open(first))
    objects = [o.key for o in storage.LocalStore(tmp_path / "out").list(storage.ledger_prefix(DAY))]
    assert len(objects) >= 3 and all(k.rsplit("/", 1)[-1].startswith("k") for k in objects)

    second = config(tmp_path, run_id="second", **OFFLINE)
    stores = stages.Stores.open(second)
    stages.ingest_and_validate(second, stores)
    chunks = stages.plan_chunks(second, stores)
    reads = _read_counter(monkeypatch)
    for chunk in chunks:
        reads.clear()
        result = stages.judge_chunk(second, stores, chunk["index"])
        assert result["calls_made"] == 0 and result["reused"] > 0
        # its own range's objects (and at most a neighbour's sharing a boundary key), never the day's
        assert 1 <= len(set(reads)) <= 2 < len(objects)



def test_a_rerun_chunk_with_nothing_to_call_never_imports_litellm(tmp_path: Path) -> None:
    """A judge task of a re-run finds out from the ledger that every reply is paid for before it
    sets up a client: in a fresh process, litellm (seconds to import) is never imported."""
    import json
    import subprocess

    from tests.reliability.helpers import PYTHON, REPO, cli_env

    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 40, bad=False)
    first = config(tmp_path, run_id="r0", **OFFLINE)
    run_day(first, stages.Stores.open(first))
    rerun = config(tmp_path, run_id="r1", **OFFLINE)
    stores = stages.Stores.open(rerun)
    stages.ingest_and_validate(rerun, stores)
    chunks = stages.plan_chunks(rerun, stores)
    script = (
        "import json, sys\n"
        "from evaluation import stages\n"
        "from evaluation.contract.config import RunConfig\n"
        f"cfg = RunConfig.model_validate_json({rerun.model_dump_json()!r})\n"
        "stores = stages.Stores.open(cfg)\n"
        f"results = [stages.judge_chunk(cfg, stores, i) for i in range({len(chunks)})]\n"
        "print(json.dumps({'litellm': 'litellm' in sys.modules, 'calls': sum(r['calls_made'] for r in results),"
        " 'reused': sum(r['reused'] for r in results)}))\n"
    )
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == {"litellm": False, "calls": 0, "reused": outcome["reused"]} and outcome["reused"] > 0
    landed = stages.score_and_land(rerun, stores)
    assert landed["calls_made"] == 0 and landed["statuses"]["ok"] > 0
