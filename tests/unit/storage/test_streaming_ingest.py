"""Streaming ingest: a day read and validated in bounded batches decides exactly what one batch does."""

from __future__ import annotations

import datetime as dt
import gzip
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.contract import schemas
from evaluation.contract.config import RunConfig
from evaluation.storage import ingest, validation
from evaluation.storage.ingest import IngestResult, Reject, ingest_batches, ingest_objects, iter_object, read_object
from evaluation.storage.validation import DayValidator, validate
from evaluation.testing import synthetic
from tests.factories import jsonl, raw_record

DAY = dt.date(2026, 11, 25)
ROOT = "s3://llm-logs/raw/dt=2026-11-25"


record = raw_record


def parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def day_objects() -> list[tuple[str, bytes]]:
    """Several objects of every kind, with bad lines, failing rows and repeated record_ids within
    an object, across objects, and of a first occurrence that is itself rejected."""
    first = [record(record_id=f"a-{i}") for i in range(10)]
    first[3] = record(record_id="a-3", model=None)  # rejected, and repeated later
    first.insert(5, "{broken")
    first.insert(8, record(record_id="a-1"))  # a repeat within the object
    second = [record(record_id=f"b-{i}") for i in range(9)]
    second[2] = record(record_id="a-7")  # a repeat of the first object's id
    second[6] = record(record_id="b-6", timestamp="2026-11-24T12:00:00Z")
    third = pl.DataFrame(
        {
            "record_id": ["c-0", "a-3", "c-2", "b-1", "c-4"],
            "timestamp": [dt.datetime(2026, 11, 25, 9, 0)] * 5,
            "model": ["assistant-v2"] * 5,
            "question": ["q"] * 5,
            "answer": ["a", "a", None, "a", "a"],
        }
    )
    fourth = [record(record_id=f"d-{i}") for i in range(8)] + ["[1, 2]", record(record_id="c-4")]
    return [
        (f"{ROOT}/part-000.jsonl", jsonl(*first)),
        (f"{ROOT}/part-001.jsonl.gz", gzip.compress(jsonl(*second))),
        (f"{ROOT}/part-002.parquet", parquet(third)),
        (f"{ROOT}/part-003.jsonl", b""),
        (f"{ROOT}/part-004.txt", b"not a log"),
        (f"{ROOT}/part-005.jsonl", jsonl(*fourth)),
    ]


def streamed(
    objects: list[tuple[str, Any]], batch_rows: int, **options: Any
) -> tuple[list[IngestResult], pl.DataFrame, list[Reject], list[Reject], validation.DayOutcome]:
    """Ingest and validate in batches: the batches, the valid rows, ingest and row-rule rejects."""
    validator = DayValidator(DAY, **options)
    batches, valid, ingest_rejects, rule_rejects = [], [], [], []
    for batch in ingest_batches(objects, DAY, batch_rows=batch_rows):
        batches.append(batch)
        validator.add_ingest_rejects(len(batch.rejects))
        ingest_rejects += batch.rejects
        if batch.rows.height:
            checked = validator.validate_batch(batch.rows)
            valid.append(checked.valid)
            rule_rejects += checked.rejects
    outcome = validator.finish(input_objects=len(objects))
    frame = pl.concat(valid) if valid else validate(ingest_objects([], DAY).rows, day=DAY, allow_empty=True).valid
    return batches, frame, ingest_rejects, rule_rejects, outcome


def _row_rules(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the landed row-rule result says per expectation, without GE's per-batch metadata."""
    return [
        (item["expectation_config"]["type"], item["expectation_config"]["kwargs"].get("column"), item["success"],
         item["result"])
        for item in result["row_rules"]["results"]
    ]


# --------------------------------------------------------------------------------------------
# Batches equal one batch


@pytest.mark.parametrize("batch_rows", [1, 2, 7, 1_000])
def test_ingest_batches_are_bounded_and_add_up_to_one_batch(batch_rows: int) -> None:
    objects = day_objects()
    whole = ingest_objects(objects, DAY)
    batches = list(ingest_batches(objects, DAY, batch_rows=batch_rows))
    assert all(b.input_records <= batch_rows for b in batches)
    assert sum(b.objects for b in batches) == whole.objects == len(objects)
    assert pl.concat([b.rows for b in batches]).equals(whole.rows)
    assert [r for b in batches for r in b.rejects] == whole.rejects


@pytest.mark.parametrize("batch_rows", [3, 7])
def test_a_day_validated_in_batches_decides_what_one_batch_decides(batch_rows: int) -> None:
    objects = day_objects()
    whole = ingest_objects(objects, DAY)
    one = validate(
        whole.rows, day=DAY, ingest_rejects=len(whole.rejects), input_objects=len(objects), max_reject_ratio=0.25
    )
    batches, valid, ingest_rejects, rule_rejects, outcome = streamed(objects, batch_rows, max_reject_ratio=0.25)
    assert len(batches) >= 3
    assert valid.equals(one.valid)
    assert ingest_rejects == whole.rejects
    assert rule_rejects == one.rejects
    assert (outcome.input_records, outcome.valid_records, outcome.rejected_records) == (
        one.input_records,
        one.valid.height,
        one.rejected_records,
    )
    assert outcome.table_failures == one.table_failures
    assert _row_rules(outcome.result_json) == _row_rules(one.result_json)
    assert outcome.result_json["row_rules"]["statistics"] == one.result_json["row_rules"]["statistics"]
    assert outcome.result_json["table_rules"]["results"] == one.result_json["table_rules"]["results"]
    assert outcome.result_json["success"] == one.result_json["success"]
    assert outcome.result_json["batches"] == sum(1 for b in batches if b.rows.height)


def test_repeated_record_ids_are_found_across_batches_and_objects() -> None:
    _, valid, _, rule_rejects, _ = streamed(day_objects(), 4, max_reject_ratio=1.0)
    repeats = {
        (r.source_uri.rsplit("/", 1)[-1], r.line_no): reason
        for r in rule_rejects
        for reason in r.reasons
        if "repeated" in reason
    }
    assert repeats == {
        ("part-000.jsonl", 9): f"record_id: repeated (first kept: {ROOT}/part-000.jsonl line 2)",
        ("part-001.jsonl.gz", 3): f"record_id: repeated (first kept: {ROOT}/part-000.jsonl line 10)",
        # the first a-3 was rejected (no model): its repeat is a repeat all the same
        ("part-002.parquet", 2): f"record_id: repeated (first kept: {ROOT}/part-000.jsonl line 4)",
        ("part-002.parquet", 4): f"record_id: repeated (first kept: {ROOT}/part-001.jsonl.gz line 2)",
        ("part-005.jsonl", 10): f"record_id: repeated (first kept: {ROOT}/part-002.parquet line 5)",
    }
    assert valid["record_id"].is_unique().all()


def test_rows_without_record_id_are_not_repeats_across_batches() -> None:
    lines = [record(record_id=None), record(record_id=None), record(record_id=None)]
    _, _, _, rule_rejects, _ = streamed([(f"{ROOT}/p.jsonl", jsonl(*lines))], 1, max_reject_ratio=1.0)
    assert [r.reasons for r in rule_rejects] == [["record_id: missing or blank"]] * 3


def test_landed_result_keeps_counts_whole_and_failing_ids_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "_LANDED_IDS", 5)
    lines = [record(record_id=f"r-{i}", answer=None if i % 2 else "a") for i in range(30)]
    _, _, _, rule_rejects, outcome = streamed([(f"{ROOT}/p.jsonl", jsonl(*lines))], 4, max_reject_ratio=1.0)
    (answer_rule,) = [
        item for item in outcome.result_json["row_rules"]["results"]
        if item["expectation_config"]["kwargs"].get("column") == "answer"
    ]
    assert not answer_rule["success"]
    assert (answer_rule["result"]["element_count"], answer_rule["result"]["unexpected_count"]) == (30, 15)
    assert answer_rule["result"]["unexpected_percent"] == 50.0
    assert answer_rule["result"]["unexpected_index_list"] == [{"_row": [1, 3, 5, 7, 9]}]
    assert answer_rule["result"]["partial_unexpected_index_list"] == [{"_row": [1, 3, 5, 7, 9]}]
    assert len(rule_rejects) == 15  # the cap is on the landed result only
    assert outcome.result_json["row_rules"]["statistics"]["unsuccessful_expectations"] == 1


def test_a_day_with_no_rows_still_runs_the_row_suite() -> None:
    _, valid, ingest_rejects, _, outcome = streamed([(f"{ROOT}/p.jsonl", b"oops\n")], 7)
    assert valid.height == 0 and len(ingest_rejects) == 1
    assert outcome.result_json["row_rules"]["statistics"]["evaluated_expectations"] == 9
    assert outcome.table_failures == ["2026-11-25: reject ratio 1 (1 of 1) exceeds max_reject_ratio 0.05"]


def test_a_finished_day_takes_no_more_batches() -> None:
    validator = DayValidator(DAY, allow_empty=True)
    validator.finish()
    with pytest.raises(validation.ValidationError, match="already finished"):
        validator.validate_batch(ingest_objects([], DAY).rows)


# --------------------------------------------------------------------------------------------
# Reading: one object at a time, in bounded pieces


def test_objects_are_opened_one_at_a_time_as_batches_are_taken() -> None:
    pulled: list[str] = []

    def objects() -> Iterator[tuple[str, bytes]]:
        for uri, data in day_objects():
            pulled.append(uri)
            yield uri, data

    batches = ingest_batches(objects(), DAY, batch_rows=3)
    first = next(batches)
    assert first.objects == 1 and pulled == [f"{ROOT}/part-000.jsonl"]
    rest = list(batches)
    assert len(pulled) == len(day_objects()) and sum(b.objects for b in [first, *rest]) == len(pulled)


def test_jsonl_is_read_in_small_blocks_from_a_path_or_a_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = [record(record_id=f"r-{i}", answer="é" * (i * 7)) for i in range(20)]
    data = b"\xef\xbb\xbf" + jsonl(*lines[:5]) + b"\n  \n" + b"\xff oops\r\n" + jsonl(*lines[5:]).rstrip(b"\n")
    expected = read_object(f"{ROOT}/p.jsonl", data)
    monkeypatch.setattr(ingest, "_READ_CHUNK", 16)  # lines and UTF-8 sequences cross block edges
    path = tmp_path / "p.jsonl"
    path.write_bytes(data)
    assert read_object(f"{ROOT}/p.jsonl", path) == expected
    with path.open("rb") as handle:
        assert read_object(f"{ROOT}/p.jsonl", handle) == expected
    unzipped = read_object(f"{ROOT}/p.jsonl.gz", gzip.compress(data))
    assert unzipped.rows == expected.rows
    assert [(r.line_no, r.raw, r.reasons) for r in unzipped.rejects] == [
        (r.line_no, r.raw, r.reasons) for r in expected.rejects
    ]
    assert [no for no, _, _ in expected.rows] == [1, *range(2, 6), *range(9, 24)]
    assert [(r.line_no, r.reasons) for r in expected.rejects] == [(8, ["invalid UTF-8"])]


def test_truncated_gzip_read_in_small_blocks_keeps_the_lines_before_the_damage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compressed = gzip.compress(jsonl(*[record(record_id=f"r-{i}", answer="x" * 500) for i in range(50)]))
    cut = compressed[: len(compressed) // 2]
    expected = read_object(f"{ROOT}/p.jsonl.gz", cut)
    monkeypatch.setattr(ingest, "_READ_CHUNK", 100)
    parsed = read_object(f"{ROOT}/p.jsonl.gz", cut)
    assert [no for no, _, _ in parsed.rows] == [no for no, _, _ in expected.rows]
    assert [r.reasons for r in parsed.rejects] == [r.reasons for r in expected.rejects]
    assert parsed.rejects[-1].line_no == len(parsed.rows) + 1


def test_parquet_is_read_in_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    frame = pl.DataFrame({"record_id": [f"r-{i}" for i in range(11)], "question": ["q"] * 11})
    data = parquet(frame)
    expected = read_object(f"{ROOT}/p.parquet", data)
    monkeypatch.setattr(ingest, "_PARQUET_BATCH", 3)
    assert read_object(f"{ROOT}/p.parquet", data) == expected
    assert [no for no, _, _ in expected.rows] == list(range(1, 12))


def test_iter_object_yields_rows_and_rejects_in_input_order() -> None:
    items = list(iter_object(f"{ROOT}/p.jsonl", jsonl(record(record_id="a"), "nope", record(record_id="b"))))
    assert [item[0] if isinstance(item, tuple) else item.line_no for item in items] == [1, 2, 3]
    assert isinstance(items[1], Reject)


# --------------------------------------------------------------------------------------------
# The pipeline stages: staged parts, landed rejects, chunks


def _config(tmp_path: Path, out: str, **options: Any) -> RunConfig:
    return RunConfig(date=DAY, input_uri=str(tmp_path / "raw"), output_uri=str(tmp_path / out), run_id="r", **options)


def _write_raw(tmp_path: Path, objects: list[tuple[str, bytes]]) -> None:
    raw = storage.LocalStore(tmp_path / "raw")
    for uri, data in objects:
        raw.write_bytes(f"dt={DAY.isoformat()}/{uri.rsplit('/', 1)[-1]}", data)


def _staged(cfg: RunConfig) -> dict[str, Any]:
    """What ingest and plan staged for the landing (nothing is landed before the last stage)."""
    store = storage.LocalStore(cfg.output_uri)
    staged = stages.read_manifest(cfg, stages.Stores.open(cfg))
    manifest = {**staged.ingest.model_dump(), **staged.plan.model_dump()}
    chunks = [storage.read_parquet(store, storage.chunk_key(DAY, "r", "records", i)) for i in range(manifest["chunks"])]
    assert storage.landed_key(store, "rejects", DAY) is None
    return {
        "rejects": storage.read_parquet(store, stages.staged_key(cfg, "rejects")),
        "result": storage.read_json(store, stages.staged_key(cfg, "validation")),
        "manifest": manifest,
        "chunks": chunks,
    }


@pytest.mark.parametrize("sample", [None, 0.5, 3])
def test_pipeline_in_small_batches_lands_and_stages_what_one_batch_does(tmp_path: Path, sample: Any) -> None:
    objects = day_objects()
    _write_raw(tmp_path, objects)
    outcomes = {}
    for out, batch_rows in (("one", 10**9), ("small", 7)):
        cfg = _config(tmp_path, out, max_reject_ratio=0.3, chunk_size=6, sample=sample)
        stores = stages.Stores.open(cfg)
        counts = stages.ingest_and_validate(cfg, stores, batch_rows=batch_rows)
        chunks = stages.plan_chunks(cfg, stores)
        outcomes[out] = (counts, chunks, _staged(cfg))
    (counts, chunks, one), (small_counts, small_chunks, small) = outcomes["one"], outcomes["small"]
    assert small_counts == counts
    assert counts["objects"] == len(objects) - 1  # the .txt object is not a raw log to the pipeline
    assert counts["input"] == counts["valid"] + counts["rejected"]
    assert [c["records"] for c in small_chunks] == [c["records"] for c in chunks]
    assert small["rejects"].equals(one["rejects"])
    assert one["rejects"].height == counts["rejected"]
    assert _row_rules(small["result"]) == _row_rules(one["result"])
    assert small["result"]["table_rules"]["results"] == one["result"]["table_rules"]["results"]
    assert (one["manifest"]["valid_parts"], small["manifest"]["valid_parts"]) == (1, 5)
    for key in ("counts", "chunks", "chunk_size", "sampled", "estimate"):
        assert small["manifest"][key] == one["manifest"][key]
    assert len(small["chunks"]) == len(one["chunks"]) == -(-counts["valid"] // 6) > 3
    for mine, theirs in zip(small["chunks"], one["chunks"], strict=True):
        assert mine.equals(theirs)
    # The chunks are the valid records in content-key order (ties in input order), as the whole
    # table sorted and cut in slices would be.
    records = pl.concat(one["chunks"])
    assert records.columns == [*schemas.RECORD_SCHEMA, "sampled"]
    assert records["sampled"].equals(stages.sample_mask(records, _config(tmp_path, "x", sample=sample)))
    whole = ingest_objects(objects, DAY)
    expected = validate(whole.rows, day=DAY, ingest_rejects=len(whole.rejects), max_reject_ratio=1.0).valid
    expected = expected.select([pl.col(c).cast(t) for c, t in schemas.RECORD_SCHEMA.items()])
    expected = expected.with_columns(stages.content_keys(expected)).sort("_key", maintain_order=True)
    assert records.select("record_id", "line_no").equals(expected.select("record_id", "line_no"))
    assert records.height == counts["valid"] and records["record_id"].n_unique() == records.height


def test_a_day_of_only_bad_records_keeps_every_reject_as_evidence(tmp_path: Path) -> None:
    bad = [record(record_id=f"r-{i}", question=None) if i % 3 else "{nope" for i in range(40)]
    _write_raw(tmp_path, [(f"{ROOT}/a.jsonl", jsonl(*bad[:25])), (f"{ROOT}/b.jsonl.gz", gzip.compress(jsonl(*bad[25:])))])
    cfg = _config(tmp_path, "out")
    with pytest.raises(stages.RunFailed, match=r"reject ratio 1 \(40 of 40\) exceeds max_reject_ratio 0.05"):
        stages.ingest_and_validate(cfg, stages.Stores.open(cfg), batch_rows=7)
    store = storage.LocalStore(tmp_path / "out")
    assert storage.landed_key(store, "rejects", DAY) is None  # a failed run replaces no table
    rejects = storage.read_parquet(store, storage.failed_key(DAY, "r", "rejects.parquet"))
    assert rejects.height == 40
    assert rejects["run_id"].unique().to_list() == ["r"]
    # ingest rejects first, then the row-rule rejects, each in input order
    ingest_lines = [i + 1 for i in range(25) if i % 3 == 0] + [i - 24 for i in range(25, 40) if i % 3 == 0]
    rule_lines = [i + 1 for i in range(25) if i % 3] + [i - 24 for i in range(25, 40) if i % 3]
    assert rejects["line_no"].to_list() == ingest_lines + rule_lines
    assert rejects["reasons"].list.first().value_counts().sort("reasons").rows() == [
        ("not valid JSON: Expecting property name enclosed in double quotes: column 2", 14),
        ("question: missing or blank", 26),
    ]
    result = storage.read_json(store, storage.failed_key(DAY, "r", "validation.json"))
    assert result["success"] is False and result["batches"] == 6  # 40 records, 7 per batch
    run = storage.read_parquet(store, storage.run_key(DAY, "r")).row(0, named=True)
    assert run["status"] == "failed" and "reject ratio" in run["message"]
    assert run["evidence_uri"] == store.uri(storage.failed_prefix(DAY, "r"))
    assert (run["input_records"], run["rejected_records"]) == (40, 40)
    manifest = stages.read_manifest(cfg, stages.Stores.open(cfg)).ingest.model_dump()
    assert manifest["counts"] == {"objects": 2, "input": 40, "valid": 0, "rejected": 40, "skipped": {}}
    assert manifest["valid_parts"] == 0


@pytest.mark.parametrize("allow_empty", [False, True])
def test_a_day_without_objects(tmp_path: Path, allow_empty: bool) -> None:
    (tmp_path / "raw").mkdir()
    cfg = _config(tmp_path, "out", allow_empty=allow_empty)
    stores = stages.Stores.open(cfg)
    if not allow_empty:
        with pytest.raises(stages.RunFailed, match="2026-11-25: no input objects"):
            stages.ingest_and_validate(cfg, stores)
        assert storage.read_parquet(stores.out, storage.failed_key(DAY, "r", "rejects.parquet")).height == 0
        assert storage.landed_key(stores.out, "rejects", DAY) is None
        return
    assert stages.ingest_and_validate(cfg, stores).model_dump() == {"objects": 0, "input": 0, "valid": 0, "rejected": 0,
                                                                   "skipped": {}}
    assert stages.plan_chunks(cfg, stores) == []
    rejects = storage.read_parquet(stores.out, stages.staged_key(cfg, "rejects"))
    assert rejects.height == 0 and rejects.schema == pl.Schema(schemas.REJECT_SCHEMA)


def test_a_rerun_of_ingest_replaces_the_staged_parts(tmp_path: Path) -> None:
    _write_raw(tmp_path, [(f"{ROOT}/a.jsonl", jsonl(*[record(record_id=f"r-{i}") for i in range(20)]))])
    cfg = _config(tmp_path, "out", chunk_size=8)
    stores = stages.Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores, batch_rows=3)
    stages.ingest_and_validate(cfg, stores, batch_rows=10)
    parts = [o.key for o in stores.out.list(storage.work_key(DAY, "r", "valid/"))]
    assert [p.rsplit("/", 1)[-1] for p in parts] == ["part-00000.parquet", "part-00001.parquet"]
    chunks = stages.plan_chunks(cfg, stores)
    assert [c["records"] for c in chunks] == [8, 8, 4]


def test_plan_without_ingest_fails_naming_the_run(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "out")
    with pytest.raises(stages.RunFailed, match="run r of 2026-11-25: no valid records staged"):
        stages.plan_chunks(cfg, stages.Stores.open(cfg))


def test_synthetic_day_streams_like_the_dag_sees_it(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 60)
    cfg = _config(tmp_path, "out", chunk_size=25)
    stores = stages.Stores.open(cfg)
    planted = len(synthetic.bad_lines(DAY)) + 1
    with pytest.raises(stages.RunFailed, match="reject ratio"):  # 6 of 66 rejected
        stages.ingest_and_validate(cfg, stores, batch_rows=11)
    relaxed = cfg.model_copy(update={"max_reject_ratio": 0.2})
    counts = stages.ingest_and_validate(relaxed, stores, batch_rows=11)
    assert counts.model_dump() == {"objects": 2, "input": 60 + planted, "valid": 60, "rejected": planted,
                                   "skipped": {}}
    chunks = stages.plan_chunks(relaxed, stores)
    assert [c["records"] for c in chunks] == [25, 25, 10]
