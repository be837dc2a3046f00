"""LocalStore writes: atomic replace, and nothing left behind when a copy fails; a day is what its
commit record names; tables scanned in place whatever version wrote each object; Polars reads S3
with the boto3 client's settings (against the S3 API: tests/integration/test_s3_scan_credentials.py)."""

from __future__ import annotations

import contextlib
import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import polars as pl
import pytest
from botocore.config import Config
from botocore.credentials import CredentialProvider, RefreshableCredentials

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


def test_a_day_is_what_its_commit_names_and_a_day_without_one_its_legacy_objects(tmp_path: Path) -> None:
    store = storage.LocalStore(tmp_path / "out")
    legacy, committed, unlanded = dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3)
    frame = pl.DataFrame({"run_id": ["x"]})
    for name in ("evaluations", "daily_summary"):
        storage.write_parquet(store, storage.legacy_key(name, legacy), frame)
        storage.write_parquet(store, storage.legacy_key(name, committed), frame)  # superseded by the commit
        storage.write_parquet(store, storage.landing_key(name, committed, "x"), frame)
        storage.write_parquet(store, storage.landing_key(name, committed, "dead"), frame)  # died before committing
        storage.write_parquet(store, storage.landing_key(name, unlanded, "first"), frame)  # a first landing that died
    store.write_bytes("evaluations/dt=2026-11-02/notes.txt", b"not a landing's")
    commit = storage.commit_day(store, committed, "x", {n: storage.landing_key(n, committed, "x")
                                                         for n in ("evaluations", "daily_summary")})
    assert storage.read_commit(store, storage.commit_key(committed)) == commit

    objects = storage.list_day_objects(store)
    landed = storage.read_landed(store)
    assert sorted(landed.commits) == [legacy, committed]
    assert landed.commits[legacy].run_id is None and landed.key("evaluations", legacy) == "evaluations/dt=2026-11-01/part-0.parquet"
    assert landed.keys("evaluations") == [storage.legacy_key("evaluations", legacy),
                                          storage.landing_key("evaluations", committed, "x")]
    assert landed.key("rejects", committed) is None and landed.key("evaluations", unlanded) is None
    assert storage.read_landed(store, [committed]).commits == {committed: commit}
    assert sorted(o.key for o in storage.uncommitted(objects, landed)) == sorted(
        [storage.legacy_key(n, committed) for n in ("evaluations", "daily_summary")]
        + [storage.landing_key(n, d, r) for n in ("evaluations", "daily_summary")
           for d, r in ((committed, "dead"), (unlanded, "first"))])
    assert "evaluations/dt=2026-11-02/notes.txt" not in {o.key for o in objects}  # other files are left alone
    assert storage.scan_table(store, "evaluations", landed).select(pl.len()).collect().item() == 2  # type: ignore[union-attr]
    with pytest.raises(storage.StorageError, match="no evaluations landed for 2026-11-03"):
        storage.read_day(store, "evaluations", unlanded)


@pytest.mark.parametrize("where", ["directory", "s3"])
def test_the_day_objects_of_several_days_are_one_listing_of_each_folder(where: str, tmp_path: Path) -> None:
    from evaluation.testing.s3 import LocalS3

    days = [dt.date(2026, 10, 30) + dt.timedelta(days=n) for n in range(6)]  # across a month's end
    wanted = [days[1], days[2], days[4]]
    with contextlib.ExitStack() as stack:
        if where == "s3":
            s3 = stack.enter_context(LocalS3())
            s3.create_bucket("listing")
            store: Any = storage.open_store("s3://listing/out", s3.access())
            lists: list[dict[str, Any]] = []
            store.client.meta.events.register("before-call.s3.ListObjectsV2",
                                              lambda params, **_: lists.append(params))
        else:
            store = storage.LocalStore(tmp_path / "out")
        for day in days:
            for name in ("evaluations", "validation"):
                key = storage.landing_key(name, day, "r") if name != "validation" else storage.legacy_key(name, day)
                store.write_bytes(key, b"x")
            store.write_bytes(f"evaluations/{storage.day_partition(day)}/notes.txt", b"not a landing's")
        store.write_bytes("evaluations_old/dt=2026-11-01/run-r.parquet", b"another folder")

        listed = sorted(info.key for info in storage.list_day_objects(store, wanted))
        one_by_one = sorted(info.key for day in wanted for info in storage.list_day_objects(store, [day]))
        assert listed == one_by_one == sorted(
            [storage.landing_key("evaluations", day, "r") for day in wanted]
            + [storage.legacy_key("validation", day) for day in wanted])
        assert storage.list_day_objects(store, []) == []
        if where == "s3":
            # one listing of each folder of DAY_OBJECTS for the three days, then one per day and folder
            assert len(lists) == len(storage.DAY_OBJECTS) * (1 + len(wanted))


def test_scan_table_reads_objects_of_differing_schemas_in_place(tmp_path: Path) -> None:


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


def _session(**values: str) -> boto3.Session:
    return boto3.Session(aws_access_key_id="k", aws_secret_access_key="s", region_name="eu-west-1", **values)


def test_polars_storage_options_come_from_the_boto3_client() -> None:
    access = storage.s3_access(_session(), endpoint_url="http://127.0.0.1:9", config=storage.s3_config(max_attempts=5))
    options = storage.storage_options(storage.S3Store("s3://bucket/prefix", access))
    assert options == {"aws_region": "eu-west-1", "aws_endpoint_url": "http://127.0.0.1:9", "aws_allow_http": "true",
                       "aws_virtual_hosted_style_request": "false", "max_retries": 4}
    aws = storage.s3_access(_session(), endpoint_url="https://s3.eu-west-1.amazonaws.com")
    assert "aws_endpoint_url" not in storage.storage_options(storage.S3Store("s3://bucket", aws))  # type: ignore[operator]
    assert storage.storage_options(storage.LocalStore("/tmp")) is None
    assert storage.credential_provider(storage.LocalStore("/tmp")) is None


def test_a_connections_botocore_config_overrides_the_defaults_it_sets() -> None:
    config = storage.s3_config(Config(read_timeout=5, retries={"mode": "adaptive"}))
    assert config.read_timeout == 5 and config.connect_timeout == storage.S3_CONNECT_TIMEOUT_S
    assert config.retries == {"mode": "adaptive"}  # botocore merges whole options, not their keys
    assert storage.s3_config().retries == {"mode": "standard", "total_max_attempts": storage.S3_MAX_ATTEMPTS}


class _Given(CredentialProvider):
    """A credential provider at the head of botocore's chain that hands out given credentials."""

    METHOD = "given"

    def __init__(self, credentials: RefreshableCredentials) -> None:
        self.credentials = credentials

    def load(self) -> RefreshableCredentials:
        return self.credentials


def test_polars_gets_the_sessions_current_credentials_at_each_request() -> None:
    """Refreshable credentials (as an assumed role's): each call of the provider hands Polars the
    set the session holds now, refreshed by botocore once it nears its expiry, and says it expires
    at once, so Polars asks again before its next request."""
    now = [dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)]
    refreshes: list[dt.datetime] = []

    def refresh() -> dict[str, str]:
        refreshes.append(now[0])
        return {"access_key": f"key-{len(refreshes)}", "secret_key": "secret", "token": f"token-{len(refreshes)}",
                "expiry_time": (now[0] + dt.timedelta(hours=1)).isoformat()}

    first = refresh()
    credentials = RefreshableCredentials(first["access_key"], first["secret_key"], first["token"],
                                         dt.datetime.fromisoformat(first["expiry_time"]), refresh, "given",
                                         time_fetcher=lambda: now[0])
    core = botocore.session.Session()
    core.get_component("credential_provider").insert_before("env", _Given(credentials))
    provider = storage.SessionCredentials(boto3.Session(botocore_session=core), clock=lambda: now[0].timestamp())

    values, expiry = provider()
    assert values == {"aws_access_key_id": "key-1", "aws_secret_access_key": "secret", "aws_session_token": "token-1"}
    assert expiry == int(now[0].timestamp())
    now[0] += dt.timedelta(minutes=40)  # 20 minutes left: still the same set
    assert provider()[0]["aws_access_key_id"] == "key-1" and len(refreshes) == 1
    now[0] += dt.timedelta(minutes=15)  # 5 minutes left: botocore refreshes before handing it out
    values, expiry = provider()
    assert values["aws_access_key_id"] == "key-2" and values["aws_session_token"] == "token-2"
    assert len(refreshes) == 2 and expiry == int(now[0].timestamp())


def test_no_credentials_at_all_is_an_error_naming_where_to_set_them() -> None:
    core = botocore.session.Session()
    core.get_component("credential_provider").providers = []  # an empty chain: nothing anywhere
    with pytest.raises(storage.StorageError, match="no AWS credentials.*aws_default"):
        storage.SessionCredentials(boto3.Session(botocore_session=core))()
