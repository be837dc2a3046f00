"""One error family: every error of the project is an :class:`EvaluationError` of one kind, and the
command line says which (exit 2: usage, 1: anything else) in one line naming the object or option."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.calling._compat import UnsupportedVersion
from evaluation.calling.batch import BatchUnsupported
from evaluation.cli.main import main
from evaluation.cli.support import CliError
from evaluation.contract import errors
from evaluation.contract.adapters import MappingError
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.comparison import ComparisonError
from evaluation.report import ReportError
from evaluation.stages import JudgeUnreachable, JudgeUnusable, RunFailed
from evaluation.storage.sql import SqlError
from evaluation.storage.validation import ValidationError

DAY = dt.date(2026, 9, 10)


@pytest.mark.parametrize(("error", "family", "builtin"), [
    (CliError, errors.UsageError, Exception),
    (MappingError, errors.UsageError, ValueError),
    (storage.StorageError, errors.StorageError, RuntimeError),
    (ValidationError, errors.InputError, RuntimeError),
    (SqlError, errors.InputError, RuntimeError),
    (ReportError, errors.InputError, RuntimeError),
    (ComparisonError, errors.InputError, RuntimeError),
    (JudgeUnreachable, errors.JudgeError, RuntimeError),
    (JudgeUnusable, errors.JudgeError, ValueError),
    (CalibrationError, errors.ConfigurationError, RuntimeError),
    (BatchUnsupported, errors.ConfigurationError, ValueError),
    (UnsupportedVersion, errors.ConfigurationError, RuntimeError),
    (RunFailed, errors.EvaluationError, RuntimeError),
])
def test_each_error_belongs_to_the_family_and_keeps_its_builtin_base(error: type[Exception], family: type[Exception],
                                                                      builtin: type[Exception]) -> None:
    assert issubclass(error, family) and issubclass(error, errors.EvaluationError) and issubclass(error, builtin)
    members = {errors.UsageError, errors.InputError, errors.StorageError, errors.JudgeError, errors.ConfigurationError}
    assert len([m for m in members if issubclass(error, m)]) == (error is not RunFailed)  # one kind at most


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse ends there
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.fixture
def corrupt(tmp_path: Path) -> tuple[Path, str]:
    """An output root whose one commit record is not JSON."""
    store = storage.open_store(str(tmp_path / "out"))
    key = storage.commit_key(DAY)
    store.write_bytes(key, b'{"day": "2026-09-10", ')
    return tmp_path / "out", store.uri(key)


def test_a_corrupt_commit_record_fails_sql_with_exit_1_naming_its_uri(corrupt: tuple[Path, str],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out, uri = corrupt
    code, err = _cli(["sql", "SELECT * FROM evaluations", "--output", str(out)], capsys)
    lines = err.splitlines()
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("python -m evaluation sql: error: ") and uri in lines[0]
    assert "Traceback" not in err


def test_with_v_the_failure_comes_with_its_traceback(corrupt: tuple[Path, str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out, uri = corrupt
    code, err = _cli(["sql", "SELECT * FROM evaluations", "--output", str(out), "-v"], capsys)
    assert code == 1 and "Traceback (most recent call last):" in err
    assert err.rstrip().splitlines()[-1].startswith("python -m evaluation sql: error: ") and uri in err


def test_a_misspelt_option_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _cli(["sql", "SELECT 1", "--output", "o", "--max-rwos", "3"], capsys)
    assert code == 2 and "unknown option --max-rwos (did you mean --max-rows?)" in err


def test_read_json_names_the_uri_of_an_object_that_does_not_parse(tmp_path: Path) -> None:
    store = storage.open_store(str(tmp_path))
    store.write_bytes("reports/summary.json", b"{not json")
    with pytest.raises(storage.StorageError, match=f"cannot read {store.uri('reports/summary.json')}: not valid JSON"):
        storage.read_json(store, "reports/summary.json")


def test_a_bare_value_error_is_a_failure_not_a_usage_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise ValueError("a bug deep inside")

    monkeypatch.setattr("evaluation.storage.sql.run_sql", broken)
    code, err = _cli(["sql", "SELECT 1", "--output", str(tmp_path)], capsys)
    assert code == 1 and "ValueError: a bug deep inside (run with -v for the traceback)" in err


def test_a_usage_error_names_the_option_by_its_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _cli(["generate", "--date", DAY.isoformat(), "--output", str(tmp_path), "--records", "0"], capsys)
    assert code == 2 and "--records must be at least 1, got 0" in err
