"""Two landings of one day racing: the day is one run's, whole, and the loser retried or failed
naming why. The interleavings are forced through hooks in the first landing (another landing runs
whole at that point), on a directory and on S3, whose conditional PUTs (``If-None-Match: *``,
``If-Match: <etag>``) the embedded server honours as S3 does (412 PreconditionFailed)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.contract.config import RunConfig
from evaluation.stages import land
from evaluation.stages._run import write_run_row
from evaluation.testing import synthetic
from evaluation.testing.s3 import LocalS3
from tests.reliability.helpers import DAY, config

OFFLINE: dict[str, Any] = {"judge_model": "offline/lexical", "max_reject_ratio": 0.5, "chunk_size": 10}


@pytest.fixture(scope="module")
def s3() -> Iterator[LocalS3]:
    with LocalS3() as server:
        server.create_bucket("curated")
        yield server


@pytest.fixture(params=["directory", "s3"])
def output(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, storage.S3Access | None]:
    """Where the day lands: a directory, or a prefix of its own on S3."""
    if request.param == "directory":
        return str(tmp_path / "out"), None
    server: LocalS3 = request.getfixturevalue("s3")
    return f"s3://curated/{tmp_path.name}", server.access()


def _landing(tmp_path: Path, run_id: str, output: tuple[str, storage.S3Access | None]) -> tuple[RunConfig, stages.Stores]:
    cfg = config(tmp_path, run_id=run_id, output_uri=output[0], **OFFLINE)
    return cfg, stages.Stores.open(cfg, output[1])


def _assert_whole_day_of(store: storage.Store, run_id: str) -> None:
    """The day's commit names ``run_id``'s objects, every one of them there, each of that run."""
    commit = storage.read_landed(store, [DAY]).commits[DAY]
    assert commit.run_id == run_id and sorted(commit.objects) == sorted(storage.DAY_OBJECTS)
    for name, key in commit.objects.items():
        assert store.exists(key), f"{name}: {key} is named by the commit but gone"
    for name in storage.DAY_TABLES:
        assert set(storage.read_day(store, name, DAY)["run_id"]) <= {run_id}
    assert storage.read_day(store, "evaluations", DAY).height > 0


def _before_first(hooked: Callable[..., Any], action: Callable[[], object]) -> Callable[..., Any]:
    """``hooked`` with ``action`` run once, before its first call."""
    done: list[bool] = []

    def hook(*args: Any, **kwargs: Any) -> Any:
        if not done:
            done.append(True)
            action()
        return hooked(*args, **kwargs)

    return hook


@pytest.fixture()
def day(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 24)


@pytest.mark.usefixtures("day")
def test_a_landing_that_runs_whole_between_anothers_commit_and_its_deletions_keeps_its_day(
        tmp_path: Path, output: tuple[str, storage.S3Access | None], monkeypatch: pytest.MonkeyPatch) -> None:
    """A commits; B (newer) then lands whole, replacing A's day; A goes on to its deletions. A
    deletes only what the commit it replaced named (none) and dead landings' old objects: never
    B's, which B's commit names."""
    cfg_a, stores_a = _landing(tmp_path, "run-a", output)
    cfg_b, stores_b = _landing(tmp_path, "run-b", output)
    original = write_run_row  # A's next step after its commit, before its deletions

    def b_lands_whole() -> None:
        run_day(cfg_b, stores_b)

    def hooked(cfg: RunConfig, *args: Any, **kwargs: Any) -> None:
        if cfg.run_id == "run-a" and args[4] == "success":
            return _before_first(original, b_lands_whole)(cfg, *args, **kwargs)
        return original(cfg, *args, **kwargs)

    monkeypatch.setattr(land, "write_run_row", hooked)
    run_day(cfg_a, stores_a)
    _assert_whole_day_of(stores_a.out, "run-b")


@pytest.mark.usefixtures("day")
def test_a_landing_whose_view_is_stale_does_not_overwrite_the_newer_commit(
        tmp_path: Path, output: tuple[str, storage.S3Access | None], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A reads the day (no commit yet); B (newer) lands whole; A's conditional PUT fails (412), A
    reads the day again, finds B's claim and withdraws, naming B: the day is B's, whole."""
    cfg_a, stores_a = _landing(tmp_path, "run-a", output)
    cfg_b, stores_b = _landing(tmp_path, "run-b", output)
    monkeypatch.setattr(stores_a.out, "write_bytes_if",
                        _before_first(stores_a.out.write_bytes_if, lambda: run_day(cfg_b, stores_b)))
    with caplog.at_level(logging.WARNING, logger="evaluation.stages.land"), \
            pytest.raises(stages.StaleRun, match="run run-b has claimed the day"):
        run_day(cfg_a, stores_a)
    assert "another landing committed the day" in caplog.text
    _assert_whole_day_of(stores_a.out, "run-b")
    assert not [o.key for o in storage.list_day_objects(stores_a.out, [DAY]) if "run-a" in o.key]


@pytest.mark.usefixtures("day")
def test_the_same_run_landing_twice_at_once_retries_from_the_fresh_view(
        tmp_path: Path, output: tuple[str, storage.S3Access | None], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Two attempts of one run (a task and its zombie) both hold the claim: the one overtaken
    retries over the other's commit instead of overwriting a record it never saw."""
    cfg_a, stores_a = _landing(tmp_path, "run-a", output)
    _, stores_again = _landing(tmp_path, "run-a", output)
    first: list[storage.DayCommit] = []

    def other_attempt_lands() -> None:
        run_day(cfg_a, stores_again)
        first.append(storage.read_landed(stores_again.out, [DAY]).commits[DAY])

    monkeypatch.setattr(stores_a.out, "write_bytes_if", _before_first(stores_a.out.write_bytes_if, other_attempt_lands))
    with caplog.at_level(logging.WARNING, logger="evaluation.stages.land"):
        run_day(cfg_a, stores_a)
    assert "try 1 of 3" in caplog.text and "try 2" not in caplog.text
    _assert_whole_day_of(stores_a.out, "run-a")
    final = storage.read_landed(stores_a.out, [DAY]).commits[DAY]
    assert first and final.landed_at is not None and first[0].landed_at is not None
    assert final.landed_at > first[0].landed_at  # committed over the other attempt's record, after reading it


@pytest.mark.usefixtures("day")
def test_a_landing_overtaken_at_every_try_fails_naming_the_cause(
        tmp_path: Path, output: tuple[str, storage.S3Access | None], monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, stores = _landing(tmp_path, "run-a", output)
    conditional = stores.out.write_bytes_if

    def overtaken(key: str, data: bytes, version: str | None) -> None:
        storage.commit_day(stores.out, DAY, "run-a", {})  # another writer commits first, every time
        conditional(key, data, version)

    monkeypatch.setattr(stores.out, "write_bytes_if", overtaken)
    with pytest.raises(stages.RunFailed, match=r"commit record .* changed under each of 3 tries"):
        run_day(cfg, stores)


def test_conditional_writes(tmp_path: Path, output: tuple[str, storage.S3Access | None]) -> None:
    """Only over what the writer saw: absent (None), or the version it listed."""
    store = storage.open_store(output[0], output[1])
    store.write_bytes_if("k.json", b"1", None)
    with pytest.raises(storage.StaleWrite):
        store.write_bytes_if("k.json", b"2", None)  # If-None-Match: * over an object
    (seen,) = store.list("k.json")
    with pytest.raises(storage.StaleWrite):
        store.write_bytes_if("k.json", b"3", "not-" + seen.version)
    store.write_bytes_if("k.json", b"4", seen.version)
    assert store.read_bytes("k.json") == b"4" and store.list("k.json")[0].version != seen.version
    with pytest.raises(storage.StaleWrite):
        store.write_bytes_if("k.json", b"5", seen.version)  # the version it saw is gone
    with pytest.raises(storage.StaleWrite):
        store.write_bytes_if("missing.json", b"6", seen.version)  # If-Match on no object
    assert [o.key for o in store.list("")] == ["k.json"]
