"""The day's duplicate check: a record_id repeated anywhere in the day (within a batch, across
batches whose ids were spilled to disk, across objects) is rejected with the first occurrence
named, exactly as one batch holding the whole day decides, whatever the hashes that stand for the
ids in memory."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.contract.config import RunConfig
from evaluation.storage import validation
from evaluation.storage.ingest import ingest_batches, ingest_objects
from evaluation.storage.validation import DayValidator, SeenIds, validate
from tests.factories import jsonl, raw_record

DAY = dt.date(2026, 11, 25)
ROOT = "s3://llm-logs/raw/dt=2026-11-25"
NAMES = ("part-000.jsonl", "part-001.jsonl.gz", "part-002.parquet", "part-003.jsonl")


def _parquet(records: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pl.DataFrame(records).write_parquet(buffer)
    return buffer.getvalue()


def _day() -> tuple[list[tuple[str, bytes]], dict[tuple[str, int], str]]:
    """Four objects of 60 records, ids repeated at every distance (within an object, from the
    first object into the last, twice over), some repeats or first occurrences failing another
    rule too; and the reason each repeat must carry, worked out here in input order."""
    ids = [f"r-{n}" for n in range(240)]
    for repeat, first in ((7, 3), (9, 3), (70, 10), (130, 12), (200, 5), (239, 238), (180, 70), (150, 149),
                          (181, 150), (61, 0)):  # in turn: r-149 at 149, 150 and 181
        ids[repeat] = ids[first]
    broken = {3: {"model": None}, 70: {"answer": None}, 181: {"question": None}, 100: {"model": None}}
    records = [raw_record(record_id=rid, **broken.get(n, {})) for n, rid in enumerate(ids)]
    objects = [
        (f"{ROOT}/{NAMES[0]}", jsonl(*records[:60])),
        (f"{ROOT}/{NAMES[1]}", gzip.compress(jsonl(*records[60:120]))),
        (f"{ROOT}/{NAMES[2]}", _parquet(records[120:180])),
        (f"{ROOT}/{NAMES[3]}", jsonl(*records[180:])),
    ]
    first: dict[str, tuple[str, int]] = {}
    expected = {}
    for n, rid in enumerate(ids):
        place = (f"{ROOT}/{NAMES[n // 60]}", n % 60 + 1)
        if rid in first:
            expected[place] = f"record_id: repeated (first kept: {first[rid][0]} line {first[rid][1]})"
        else:
            first[rid] = place
    return objects, expected


def _streamed(objects: list[tuple[str, bytes]], batch_rows: int) -> tuple[pl.DataFrame, list[Any], Any]:
    validator = DayValidator(DAY, max_reject_ratio=1.0)
    valid, rejects = [], []
    for batch in ingest_batches(objects, DAY, batch_rows=batch_rows):
        validator.add_ingest_rejects(len(batch.rejects))
        checked = validator.validate_batch(batch.rows)
        valid.append(checked.valid)
        rejects += checked.rejects
    return pl.concat(valid), rejects, validator.finish(input_objects=len(objects))


def _repeats(rejects: list[Any]) -> dict[tuple[str, int], str]:
    return {(r.source_uri, r.line_no): reason for r in rejects for reason in r.reasons if "repeated" in reason}


@pytest.mark.parametrize("batch_rows", [4, 13, 60, 1_000])
def test_repeats_across_spilled_batches_and_objects_name_the_first_occurrence(batch_rows: int) -> None:
    objects, expected = _day()
    valid, rejects, outcome = _streamed(objects, batch_rows)
    assert _repeats(rejects) == expected
    whole = ingest_objects(objects, DAY)
    one = validate(whole.rows, day=DAY, max_reject_ratio=1.0)
    assert rejects == one.rejects  # every reason of every reject, in input order
    assert valid.equals(one.valid)
    assert outcome.result_json["row_rules"]["results"] == one.result_json["row_rules"]["results"]


def test_a_repeat_of_a_rejected_first_occurrence_keeps_both_reasons() -> None:
    objects, _ = _day()
    _, rejects, _ = _streamed(objects, 13)
    by_place = {(r.source_uri.rsplit("/", 1)[-1], r.line_no): r.reasons for r in rejects}
    assert by_place[(NAMES[0], 4)] == ["model: missing or blank"]  # the first r-3: rejected, still the first
    assert by_place[(NAMES[3], 2)] == [  # r-149 again, with no question
        "question: missing or blank", f"record_id: repeated (first kept: {ROOT}/{NAMES[2]} line 30)"]


def test_ids_sharing_a_hash_are_told_apart_by_the_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every id of the same length shares one hash: only the ids themselves can decide.
    monkeypatch.setattr(SeenIds, "hashes", staticmethod(lambda ids: ids.str.len_bytes().cast(pl.UInt64)))
    objects, expected = _day()
    valid, rejects, _ = _streamed(objects, 13)
    assert _repeats(rejects) == expected
    assert valid["record_id"].is_unique().all()
    assert valid.height == 240 - len(expected) - 2  # two first occurrences (r-3, r-100) fail another rule


def test_earlier_ids_are_spilled_to_local_files_removed_when_the_day_is_finished(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    objects, _ = _day()
    validator = DayValidator(DAY, max_reject_ratio=1.0)
    for batch in ingest_batches(objects, DAY, batch_rows=50):
        validator.validate_batch(batch.rows)
    (folder,) = tmp_path.glob("evaluation-record-ids-*")
    assert len(list(folder.glob("ids-*.parquet"))) == 4  # five batches: the last one's ids are in memory
    validator.finish()
    assert not folder.exists()


def test_a_day_in_one_batch_writes_nothing_to_disk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    objects, expected = _day()
    whole = ingest_objects(objects, DAY)
    assert _repeats(validate(whole.rows, day=DAY, max_reject_ratio=1.0).rejects) == expected
    assert list(tmp_path.iterdir()) == []


def test_ingest_stage_stages_the_repeats_of_a_day_read_in_small_batches(tmp_path: Path) -> None:
    objects, expected = _day()
    raw = storage.LocalStore(tmp_path / "raw")
    for uri, data in objects:
        raw.write_bytes(f"dt={DAY.isoformat()}/{uri.rsplit('/', 1)[-1]}", data)
    cfg = RunConfig(date=DAY, input_uri=str(tmp_path / "raw"), output_uri=str(tmp_path / "out"), run_id="r",
                    max_reject_ratio=0.5)
    stores = stages.Stores.open(cfg)
    counts = stages.ingest_and_validate(cfg, stores, batch_rows=11)
    rejects = storage.read_parquet(stores.out, stages.staged_key(cfg, "rejects"))
    local = raw.uri(f"dt={DAY.isoformat()}")  # where the stage read the objects
    staged = {
        (uri.replace(local, ROOT), line): [r.replace(local, ROOT) for r in reasons if "repeated" in r][0]
        for uri, line, reasons in rejects.select("source_uri", "line_no", "reasons").iter_rows()
        if any("repeated" in r for r in reasons)
    }
    assert staged == expected
    assert counts.rejected == len(expected) + 2
    parts = stores.out.list(storage.work_key(DAY, "r", "valid/"))
    valid = pl.concat([storage.read_parquet(stores.out, info.key) for info in parts])
    assert valid.height == counts.valid and valid["record_id"].is_unique().all()


def test_seen_ids_answer_only_for_ids_seen_before() -> None:
    seen = SeenIds()
    seen.add(pl.DataFrame({"record_id": ["a", "b"], "source_uri": ["u1", "u1"], "line_no": [1, 2]}))
    seen.add(pl.DataFrame({"record_id": ["c"], "source_uri": ["u2"], "line_no": [5]}))
    found = seen.earlier(pl.Series(["c", "x", "a"])).sort("record_id")
    assert found.rows() == [("a", "u1", 1), ("c", "u2", 5)]
    assert seen.earlier(pl.Series([], dtype=pl.String)).height == 0
    seen.close()
    assert validation.SeenIds().earlier(pl.Series(["a"])).height == 0
