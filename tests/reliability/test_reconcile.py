"""Landing checks that counts reconcile, batch by batch, before anything lands.

The day is scored in batches of chunks (``LAND_BATCH_ROWS``), so every day-level check has to
hold across batches: a row judged twice in two different chunks, a lost row and a row with an
unknown status each stop the landing with a message that says so, and nothing is landed.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.testing import synthetic
from tests.reliability.helpers import DAY, config

OFFLINE = {"judge_model": "offline/lexical", "max_reject_ratio": 0.5, "chunk_size": 10}


@pytest.fixture
def staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[stages.RunConfig, stages.Stores, int]:
    """A day of 30 records ingested and judged in 3 chunks, scored in batches of about one chunk."""
    monkeypatch.setattr(stages.land, "LAND_BATCH_ROWS", 25)
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 30)
    cfg = config(tmp_path, run_id="run-r", **OFFLINE)
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    chunks = stages.plan_chunks(cfg, stores)
    for chunk in chunks:
        stages.judge_chunk(cfg, stores, chunk["index"])
    assert len(chunks) == 3
    return cfg, stores, len(chunks)


def _edit_chunk(stores: stages.Stores, cfg: stages.RunConfig, index: int, edit) -> None:  # type: ignore[no-untyped-def]
    key = storage.chunk_key(cfg.date, cfg.run_id, "judged", index)
    storage.write_parquet(stores.out, key, edit(storage.read_parquet(stores.out, key)))


def _nothing_landed(out: Path) -> bool:
    return not any((out / t).exists() for t in ("evaluations", "judge_calls", "daily_summary"))


def test_a_clean_day_reconciles_across_batches(staged) -> None:  # type: ignore[no-untyped-def]
    cfg, stores, _ = staged
    result = stages.score_and_land(cfg, stores)
    assert result["reconciled"]["rows"] == result["reconciled"]["expected_rows"] == result["valid"] * 3
    summary = storage.read_day(stores.out, "daily_summary", DAY)
    assert summary["rows"].sum() == result["rows"]
    assert sum(result["statuses"].values()) == result["rows"]
    assert summary["n_ok"].sum() == result["statuses"]["ok"]


def test_a_pair_judged_in_two_chunks_stops_the_landing(staged) -> None:  # type: ignore[no-untyped-def]
    cfg, stores, _ = staged
    first = storage.read_parquet(stores.out, storage.chunk_key(cfg.date, cfg.run_id, "judged", 0))
    # chunk 2 loses one of its rows and holds a copy of a row of chunk 0 instead: same row count
    _edit_chunk(stores, cfg, 2, lambda frame: pl.concat([frame.slice(1), first.slice(0, 1)]))
    with pytest.raises(stages.RunFailed, match=r"counts do not reconcile: 1 duplicate \(record_id, judge\) pairs"):
        stages.score_and_land(cfg, stores)
    assert _nothing_landed(Path(stores.out.root))


def test_a_lost_row_stops_the_landing(staged) -> None:  # type: ignore[no-untyped-def]
    cfg, stores, _ = staged
    _edit_chunk(stores, cfg, 1, lambda frame: frame.slice(1))
    with pytest.raises(stages.RunFailed, match=r"89 evaluation rows, expected 30 × 3 = 90"):
        stages.score_and_land(cfg, stores)
    assert _nothing_landed(Path(stores.out.root))


def test_a_row_without_a_known_status_stops_the_landing(staged) -> None:  # type: ignore[no-untyped-def]
    cfg, stores, _ = staged
    _edit_chunk(stores, cfg, 0, lambda frame: frame.with_columns(
        judge_status=pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("lost")).otherwise(pl.col("judge_status"))
    ))
    with pytest.raises(stages.RunFailed, match="1 rows without a valid judge_status"):
        stages.score_and_land(cfg, stores)
    assert _nothing_landed(Path(stores.out.root))
