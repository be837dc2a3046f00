"""LocalStore writes: atomic replace, and nothing left behind when a copy fails; tables scanned in
place whatever version wrote each object; Polars reads S3 with the boto3 client's settings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evaluation import storage


def test_a_failed_copy_leaves_the_previous_object_and_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = storage.LocalStore(tmp_path / "out")
    source = tmp_path / "new.bin"
    source.write_bytes(b"new" * 1000)
    store.write_bytes("t/dt=2026-11-20/part-0.parquet", b"old")
    folder = tmp_path / "out" / "t" / "dt=2026-11-20"

    def failing_copy(src: str, dst: str) -> None:
        Path(dst).write_bytes(Path(src).read_bytes()[:100])  # torn, then the disk fills up
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", failing_copy)
    with pytest.raises(OSError, match="No space left"):
        store.upload_file("t/dt=2026-11-20/part-0.parquet", source)
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.parquet"]
    assert store.read_bytes("t/dt=2026-11-20/part-0.parquet") == b"old"

    monkeypatch.undo()
    store.upload_file("t/dt=2026-11-20/part-0.parquet", source)
    assert store.read_bytes("t/dt=2026-11-20/part-0.parquet") == b"new" * 1000
    assert sorted(p.name for p in folder.iterdir()) == ["part-0.parquet"]


def test_scan_table_reads_objects_of_differing_schemas_in_place(tmp_path: Path) -> None:
    import datetime as dt

    import polars as pl

    store = storage.LocalStore(tmp_path / "out")
    days = [dt.date(2026, 11, d) for d in (1, 2, 3)]
    # An old run row: message of the null type, no evidence_uri; newer ones typed, one more column.
    storage.write_parquet(store, storage.run_key(days[0], "a"), pl.DataFrame({"run_id": ["a"], "message": [None]}))
    for day, message in ((days[1], "boom"), (days[2], None)):
        frame = pl.DataFrame({"run_id": [day.isoformat()], "message": [message], "evidence_uri": [None]},
                             schema={"run_id": pl.String, "message": pl.String, "evidence_uri": pl.String})
        storage.write_parquet(store, storage.run_key(day, day.isoformat()), frame)
    runs = storage.scan_table(store, "runs")
    assert runs is not None and runs.collect_schema() == pl.Schema(
        {"dt": pl.Date, "run_id": pl.String, "message": pl.String, "evidence_uri": pl.String})
    assert runs.sort("dt").collect()["message"].to_list() == [None, "boom", None]
    (tmp_path / "out" / "runs" / "dt=2026-11-01" / "run-a.parquet").write_bytes(b"torn")
    assert runs.filter(pl.col("dt") > days[0]).select("run_id").collect()["run_id"].to_list() == ["2026-11-02", "2026-11-03"]
    assert storage.scan_table(store, "evaluations") is None


def test_polars_storage_options_come_from_the_boto3_client() -> None:
    client = storage.s3_client("http://127.0.0.1:9", access_key="k", secret_key="s", region="eu-west-1", max_attempts=5)
    options = storage.storage_options(storage.S3Store("s3://bucket/prefix", client))
    assert options == {"aws_region": "eu-west-1", "aws_endpoint_url": "http://127.0.0.1:9", "aws_allow_http": "true",
                       "aws_virtual_hosted_style_request": "false", "aws_access_key_id": "k",
                       "aws_secret_access_key": "s", "max_retries": 4}
    aws = storage.s3_client("https://s3.eu-west-1.amazonaws.com", access_key="k", secret_key="s", region="eu-west-1")
    assert "aws_endpoint_url" not in storage.storage_options(storage.S3Store("s3://bucket", aws))  # type: ignore[operator]
    assert storage.storage_options(storage.LocalStore("/tmp")) is None
