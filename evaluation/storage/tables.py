"""Tables on a store: Parquet and JSON reads and writes, scans of the landed tables, and the
day's commit records that decide which run's objects a reader sees."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import re
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from evaluation.contract.errors import StorageError
from evaluation.storage.keys import (
    DAY_OBJECTS,
    DAY_TABLES,
    PARQUET_COMPRESSION,
    commit_key,
    day_partition,
    legacy_key,
)
from evaluation.storage.stores import ObjectInfo, S3Store, SessionCredentials, Store, _failing

logger = logging.getLogger(__name__)


def write_parquet(store: Store, key: str, frame: pl.DataFrame) -> None:
    """Land one Parquet object (zstd) atomically."""
    with tempfile.TemporaryDirectory(prefix="evaluation-") as folder:
        path = Path(folder) / "part.parquet"
        frame.write_parquet(path, compression=PARQUET_COMPRESSION, statistics=True)
        store.upload_file(key, path)
    logger.info("landed %s (%d rows)", store.uri(key), frame.height)


def sink_parquet(store: Store, key: str, frame: pl.LazyFrame) -> int:
    """Stream a lazy table into one Parquet object (zstd), atomically; returns its row count."""
    with tempfile.TemporaryDirectory(prefix="evaluation-") as folder:
        path = Path(folder) / "part.parquet"
        frame.sink_parquet(path, compression=PARQUET_COMPRESSION)
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        store.upload_file(key, path)
    logger.info("landed %s (%d rows)", store.uri(key), rows)
    return int(rows)


def read_parquet(store: Store, key: str) -> pl.DataFrame:
    return pl.read_parquet(io.BytesIO(store.read_bytes(key)))


def write_json(store: Store, key: str, payload: Any) -> None:
    """Land a JSON document atomically."""
    store.write_bytes(key, json.dumps(payload, indent=2, default=str, ensure_ascii=False).encode())


def read_json(store: Store, key: str) -> Any:
    """The JSON object at ``key``; one that does not parse is a :class:`StorageError` naming its URI."""
    data = store.read_bytes(key)
    try:
        return json.loads(data)
    except ValueError as exc:
        raise StorageError(f"cannot read {store.uri(key)}: not valid JSON: {exc}") from exc


#: An object of a daily table: ``<table>/dt=YYYY-MM-DD/<name>.parquet``.
_DAILY_OBJECT = re.compile(r"[^/]+/dt=\d{4}-\d{2}-\d{2}/[^/]+\.parquet")


def storage_options(store: Store) -> dict[str, Any] | None:
    """Polars' ``storage_options`` for reading the store's objects in place (None for a directory)."""
    return store.storage_options() if isinstance(store, S3Store) else None


def credential_provider(store: Store) -> SessionCredentials | None:
    """Polars' ``credential_provider`` for the store's objects (None for a directory): the S3
    session's credentials, current at each request."""
    return SessionCredentials(store.s3.session) if isinstance(store, S3Store) else None


def scan_parquet(store: Store, keys: list[str], *, hive: bool = True) -> pl.LazyFrame:
    """Objects of one table as one lazy table, read where they live; with ``hive`` the ``dt=``
    folder is a ``dt`` Date column and a filter on it skips other partitions' objects unopened.

    Objects written by different versions may differ: the newest object's schema is the table's
    (the keys sort oldest first), a column the newest object holds only as nulls (Parquet's null
    type) is read as a string, columns it lacks are dropped and columns an older object lacks are
    null, and narrower integers and floats are widened."""
    if not keys:
        raise StorageError(f"no objects to scan under {store.root}")
    options, credentials = storage_options(store), credential_provider(store)
    uris = [store.uri(key) for key in keys]
    permission = store.object_permission("s3:GetObject", keys[-1]) if isinstance(store, S3Store) else None
    # Polars raises several error types for a missing or torn object
    with _failing(f"cannot read {uris[-1]}", permission):
        newest = pl.scan_parquet(uris[-1], hive_partitioning=False, storage_options=options,
                                 credential_provider=credentials).collect_schema()
    schema = {name: pl.String if dtype == pl.Null else dtype for name, dtype in newest.items()
              if not (hive and name == "dt")}
    frame = pl.scan_parquet(
        uris,
        schema=schema,
        hive_partitioning=hive,
        hive_schema={"dt": pl.Date} if hive else None,
        missing_columns="insert",
        extra_columns="ignore",
        cast_options=pl.ScanCastOptions(integer_cast="upcast", float_cast="upcast"),
        storage_options=options,
        credential_provider=credentials,
    )
    return frame.select("dt", pl.exclude("dt")) if hive else frame


def scan_table(store: Store, table: str, landed: Landed | None = None) -> pl.LazyFrame | None:
    """A landed daily table with its ``dt`` column (a Date), lazily, read in place; None when no
    object of it has landed. A table of :data:`DAY_TABLES` is read through its days' commits:
    ``landed`` (pass the same :class:`Landed` to every table a reader combines, so they are of one
    run per day), else read now; ``runs`` is every run's object. Filter on ``dt`` to read only those
    days' objects, and select the columns needed: nothing else is read."""
    if table in DAY_TABLES:
        keys = (landed if landed is not None else read_landed(store)).keys(table)
    else:
        keys = [info.key for info in store.list(f"{table}/") if _DAILY_OBJECT.fullmatch(info.key)]
    return scan_parquet(store, keys) if keys else None


def scan_day(store: Store, table: str, day: dt.date, landed: Landed | None = None) -> pl.LazyFrame | None:
    """One landed day of a table of :data:`DAY_TABLES` (with ``dt``), lazily; None when the day
    has not landed. ``landed`` as for :func:`scan_table`."""
    key = (landed if landed is not None else read_landed(store, [day])).key(table, day)
    return None if key is None else scan_parquet(store, [key])


def landed_key(store: Store, name: str, day: dt.date) -> str | None:
    """The landed object of ``name`` (a table of :data:`DAY_TABLES`, or ``validation``) for
    ``day``, as the day's commit names it; None when the day has not landed."""
    return read_landed(store, [day]).key(name, day)


def read_day(store: Store, table: str, day: dt.date) -> pl.DataFrame:
    """One landed table-day, as its object holds it (no ``dt`` column); StorageError when the day
    has not landed."""
    key = landed_key(store, table, day)
    if key is None:
        raise StorageError(f"no {table} landed for {day.isoformat()} under {store.root} "
                           f"(no commit record {store.uri(commit_key(day))})")
    return read_parquet(store, key)


class DayCommit(BaseModel):
    """A day's commit record (``_landed/dt=YYYY-MM-DD.json``): the run whose objects are the
    day's tables, and each object's key. A landing writes it last, in one PUT, once every object it
    names is written (:func:`commit_day`); readers find a day's objects through it only, so one PUT
    replaces every table of the day at once, and a landing that dies before it changes nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    day: dt.date = Field(description="The day (dt) landed.")
    run_id: str | None = Field(description="The run that landed the day; None for a day landed before commit "
                                           "records (read as its legacy objects).")
    landed_at: dt.datetime | None = Field(description="When the commit was written (UTC).")
    objects: dict[str, str] = Field(description="Each of DAY_OBJECTS -> its object's key under the output root.")


@dataclass(frozen=True)
class Landed:
    """The landed days under a root, as read at one moment (:func:`read_landed`): each day's commit.
    A reader that takes every table it combines from one ``Landed`` sees one run's day."""

    commits: dict[dt.date, DayCommit]

    def key(self, name: str, day: dt.date) -> str | None:
        """The day's object of ``name``; None when the day has not landed."""
        commit = self.commits.get(day)
        return None if commit is None else commit.objects.get(name)

    def keys(self, name: str) -> list[str]:
        """Every landed day's object of ``name``, oldest day first."""
        return [commit.objects[name] for _, commit in sorted(self.commits.items()) if name in commit.objects]


_COMMIT = re.compile(r"_landed/dt=(\d{4}-\d{2}-\d{2})\.json")


#: An object a landing names (``run-<id>``), or a legacy one, under a day folder of DAY_OBJECTS.
_DAY_OBJECT = re.compile(rf"(?P<name>{'|'.join(DAY_OBJECTS)})/dt=(?P<day>\d{{4}}-\d{{2}}-\d{{2}})/"
                         r"(?P<file>run-[A-Za-z0-9._-]+(?:~1)?\.(?:parquet|json)|part-0\.parquet|result\.json)")


#: Commit records read at once (small GETs; a year of days is a few hundred): fewer than the boto3
#: client's pool of connections (botocore's default, 10), so no reader waits for one.
COMMIT_READERS = 8


def read_commit(store: Store, key: str) -> DayCommit:
    data = store.read_bytes(key)
    with _failing(f"cannot read the commit record {store.uri(key)}"):
        return DayCommit.model_validate_json(data)


def read_landed(store: Store, days: Iterable[dt.date] | None = None) -> Landed:
    """What has landed under ``store`` (of ``days``, else every day): the one way every reader finds
    a day's objects. A day is what its commit record names; a day without one that holds legacy
    objects (landed before commit records) is those; any other object is no part of a day."""
    wanted = None if days is None else set(days)
    found: dict[dt.date, str] = {}
    for info in store.list("_landed/"):
        match = _COMMIT.fullmatch(info.key)
        if match is not None and (wanted is None or dt.date.fromisoformat(match.group(1)) in wanted):
            found[dt.date.fromisoformat(match.group(1))] = info.key
    with ThreadPoolExecutor(max_workers=COMMIT_READERS) as pool:
        commits = dict(zip(found, pool.map(lambda key: read_commit(store, key), found.values()), strict=True))
    if wanted is None or wanted - commits.keys():  # only the folders of the days without a commit
        legacy: dict[dt.date, dict[str, str]] = {}
        for info in list_day_objects(store, None if wanted is None else wanted - commits.keys()):
            match = _DAY_OBJECT.fullmatch(info.key)
            assert match is not None  # list_day_objects lists only such objects
            name, day = match.group("name"), dt.date.fromisoformat(match.group("day"))
            if day not in commits and info.key == legacy_key(name, day):
                legacy.setdefault(day, {})[name] = info.key
        commits.update({day: DayCommit(day=day, run_id=None, landed_at=None, objects=objects)
                        for day, objects in legacy.items()})
    return Landed(dict(sorted(commits.items())))


_T = TypeVar("_T")


#: How many times :func:`read_consistently` reads again after a landing replaced a day under it.
CONSISTENT_READS = 3


def read_consistently(store: Store, days: Iterable[dt.date] | None, read: Callable[[Landed], _T]) -> _T:
    """``read`` of what has landed (of ``days``, else every day: :func:`read_landed`). A landing
    that replaces a day deletes the objects the day's old commit named, once its own commit is
    written: a reader that read the old commit just before can find them gone. When ``read`` fails
    and the commit records changed meanwhile, it reads again, with the new ones (at most
    :data:`CONSISTENT_READS` times); a failure with the records unchanged is raised at once."""
    wanted = None if days is None else list(days)
    landed = read_landed(store, wanted)
    for _ in range(CONSISTENT_READS - 1):
        try:
            return read(landed)
        except Exception:
            fresh = read_landed(store, wanted)
            if fresh == landed:
                raise
            changed = sorted(d.isoformat() for d in fresh.commits.keys() | landed.commits.keys()
                             if fresh.commits.get(d) != landed.commits.get(d))
            logger.info("%s: day(s) %s landed again during the read: reading again", store.root, ", ".join(changed))
            landed = fresh
    return read(landed)


def commit_day(store: Store, day: dt.date, run_id: str, objects: dict[str, str]) -> DayCommit:
    """Make ``objects`` (each of :data:`DAY_OBJECTS` -> its key, every one written already) the
    day's landed tables, all at once: one PUT of the day's commit record, whatever it held."""
    return _write_commit(store, day, run_id, objects, store.write_bytes)


def commit_version(store: Store, day: dt.date) -> str | None:
    """The version of the day's commit record as it is now (None: the day has none), for
    :func:`commit_day_if`. Read it before the record itself: a commit written in between then
    makes the conditional write fail, never succeed on a stale view."""
    key = commit_key(day)
    return next((info.version for info in store.list(key) if info.key == key), None)


def commit_day_if(store: Store, day: dt.date, run_id: str, objects: dict[str, str], version: str | None) -> DayCommit:
    """:func:`commit_day` as a conditional write: only over the record at ``version``
    (:func:`commit_version`), or where there is none (``version`` None); :class:`StaleWrite` when
    another landing committed the day since (S3: ``If-Match`` / ``If-None-Match``)."""
    return _write_commit(store, day, run_id, objects, lambda key, data: store.write_bytes_if(key, data, version))


def _write_commit(store: Store, day: dt.date, run_id: str, objects: dict[str, str],
                  write: Callable[[str, bytes], None]) -> DayCommit:
    commit = DayCommit(day=day, run_id=run_id, landed_at=dt.datetime.now(dt.UTC), objects=objects)
    write(commit_key(day), commit.model_dump_json(indent=2).encode())
    logger.info("committed %s: run %s", store.uri(commit_key(day)), run_id)
    return commit


def list_day_objects(store: Store, days: Iterable[dt.date] | None = None) -> list[ObjectInfo]:
    """The objects landings wrote under the day folders of :data:`DAY_OBJECTS` (of ``days``, else
    every day): ``run-<id>`` objects and legacy ones. Other files there are not listed.

    Each folder is listed once: of more than one day, from the first day's folder to the last's
    (a report's 30 days are 5 listings, not 150)."""
    chosen = None if days is None else set(days)
    wanted = sorted(chosen or ())
    found: list[ObjectInfo] = []
    for name in DAY_OBJECTS:
        if chosen is None:
            listed = store.list(f"{name}/")
        elif len(wanted) == 1:
            listed = store.list(f"{name}/{day_partition(wanted[0])}/")
        elif wanted:
            # keys sort by day (dt=YYYY-MM-DD): the first day's folder name sorts before its objects,
            # the folder of the day after the last before its own objects
            listed = store.list(f"{name}/", start_after=f"{name}/{day_partition(wanted[0])}/",
                                end_before=f"{name}/{day_partition(wanted[-1] + dt.timedelta(days=1))}/")
        else:
            listed = []
        found += [info for info in listed if (match := _DAY_OBJECT.fullmatch(info.key)) is not None
                  and (chosen is None or dt.date.fromisoformat(match.group("day")) in chosen)]
    return found


def uncommitted(objects: Iterable[ObjectInfo], landed: Landed) -> list[ObjectInfo]:
    """Those of ``objects`` (from :func:`list_day_objects`) that no commit of ``landed`` names: a
    superseded run's, and those of a landing that died before or after its commit. List the objects
    first and read ``landed`` after: a commit written in between then names its objects."""
    named = {(day, key) for day, commit in landed.commits.items() for key in commit.objects.values()}
    return [info for info in objects if (match := _DAY_OBJECT.fullmatch(info.key)) is not None
            and (dt.date.fromisoformat(match.group("day")), info.key) not in named]
