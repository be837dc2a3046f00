"""The report's people section degrades on labels it cannot read (named in the section, logged) and
nothing else: a damaged ``human_labels`` object does not stop the day's report, a bug does."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.report import people

DAY = dt.date(2026, 11, 20)


def test_a_damaged_labels_object_is_named_and_the_section_says_so(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = storage.open_store(str(tmp_path))
    store.write_bytes(f"human_labels/dt={DAY.isoformat()}/labels-damaged.parquet", b"PAR1 not a parquet file")
    section = people.people_summary(store, DAY)
    assert section.labels == 0 and list(section.model_dump()) == ["window", "labels", "error"]
    assert (section.error or "").startswith(f"cannot read {tmp_path}/human_labels/dt={DAY.isoformat()}/labels-damaged.parquet")
    assert "human_labels under" in caplog.text and "could not be read" in caplog.text


def test_a_bug_while_reading_labels_is_not_taken_for_unreadable_labels(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(store: storage.Store) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(people, "read_labels", broken)
    with pytest.raises(TypeError, match="a bug"):
        people.people_summary(storage.open_store(str(tmp_path)), DAY)
