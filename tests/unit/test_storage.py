"""LocalStore writes: atomic replace, and nothing left behind when a copy fails."""

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
