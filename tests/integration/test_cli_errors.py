"""``python -m evaluation`` answers people: every error is one line on stderr naming the option, the
value and what is accepted, with its exit code (2: the command line, 1: the work failed)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.cli.main import main
from evaluation.testing import synthetic
from evaluation.testing.s3 import local_s3_environment

DAY = dt.date(2026, 9, 10)
SHIPPED_SET = Path(__file__).resolve().parents[2] / "data" / "golden" / "halueval-qa"


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse ends there
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


@pytest.fixture
def landed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A landed day (offline judge), for the commands that read tables."""
    synthetic.write_day(storage.open_store(str(tmp_path / "raw")), DAY, 12, bad=False)
    code, errors, _ = _run_cli(["run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw"),
                                "--output", str(tmp_path / "out"), "--no-progress"], capsys)
    assert code == 0, errors
    assert errors == []  # a normal run prints no third-party warning (litellm's pricing note goes to the log)
    return tmp_path


RUN = ["run", "--date", DAY.isoformat(), "--input", "in", "--output", "out"]


@pytest.mark.parametrize(("argv", "code", "expected"), [
    (["run", "--date", "2026-13-01", "--input", "i", "--output", "o"], 2,
     "python -m evaluation run: error: --date: '2026-13-01' is not a day (YYYY-MM-DD): month must be in 1..12"),
    ([*RUN, "--judges", "rag,rubric"], 2,
     "--judges: unknown judge 'rubric'; judges: rag, masis, prompt"),
    ([*RUN, "--judges", "rag,masiss"], 2, "--judges: unknown judge 'masiss' (did you mean masis?)"),
    ([*RUN, "--judge-modle", "openai/x"], 2, "unknown option --judge-modle (did you mean --judge-model?)"),
    ([*RUN, "--concurency=4"], 2, "unknown option --concurency (did you mean --concurrency?)"),
    (["runn", "--date", "2026-09-10"], 2, "invalid choice: 'runn' (choose from "),
    (["runn"], 2, "(did you mean run?)"),
    ([*RUN, "--concurrency", "0"], 2, "--concurrency: 0 is out of range (accepted: from 1 to 1024)"),
    ([*RUN, "--chunk-size", "ten"], 2, "--chunk-size: 'ten' is not a whole number"),
    ([*RUN, "--pass-threshold", "1.5"], 2, "--pass-threshold: 1.5 is out of range (accepted: from 0 to 1)"),
    ([*RUN, "--pass-threshold", "0.5", "--borderline-threshold", "0.7"], 2,
     "--borderline-threshold: borderline threshold 0.7 is above pass threshold 0.5"),
    ([*RUN, "--sample", "most"], 2,
     "--sample 'most': sample is a fraction in (0, 1] (0.25) or a count per model (200)"),
    (["compare", "--from", "2026-09-01", "--to", "2026-09-3x", "--models", "a,b", "--output", "o"], 2,
     "python -m evaluation compare: error: --to: '2026-09-3x' is not a day (YYYY-MM-DD, latest or latest-N)"),
    (["compare", "--from", "2026-09-01", "--to", "2026-09-03", "--models", "a,b", "--output", "o",
      "--judges", "rags"], 2, "--judges: unknown judge 'rags' (did you mean rag?)"),
    (["report", "--date", "2026-02-30", "--output", "o"], 2, "--date: '2026-02-30' is not a day (YYYY-MM-DD, latest"),
    (["sql", "SELECT 1", "--output", "o", "--format", "parquet"], 2, "--format parquet needs --to PATH"),
    (["sql", "SELECT 1", "--output", "o", "--format", "yaml"], 2, "--format: invalid choice: 'yaml'"),
    (["calibrate", "--golden", "g", "--judges", "masis,promt"], 2, "unknown judge 'promt' (did you mean prompt?)"),
    ([*RUN, "--input-format", "chatt"], 2, "--input-format: unknown format 'chatt'; formats: own, openai-chat"),
    ([*RUN, "--input-mapping", "questoin=a.b"], 2, "--input-mapping: unknown field 'questoin'; did you mean question?"),
    (["generate", "--date", "2026-13-01", "--output", "o"], 2, "--date: '2026-13-01' is not a day (YYYY-MM-DD)"),
    (["plan", "--date", "2026-11-31", "--input", "i", "--output", "o"], 2, "--date: '2026-11-31' is not a day"),
    (["calibrate", "--golden", str(SHIPPED_SET)], 2,
     f"--output is required: the golden set's folder {SHIPPED_SET.parent} is inside the repository"),
])
def test_each_error_is_one_line(argv: list[str], code: int, expected: str, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALUATION_OUTPUT_URI", raising=False)
    found, errors, out = _run_cli(argv, capsys)
    assert found == code
    assert len(errors) == 1, errors
    assert expected in errors[0]
    assert "pydantic" not in errors[0] and "usage:" not in errors[0] and out == ""


def test_input_and_output_fall_back_to_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("EVALUATION_INPUT_URI", raising=False)
    monkeypatch.delenv("EVALUATION_OUTPUT_URI", raising=False)
    code, errors, _ = _run_cli(["run", "--date", DAY.isoformat(), "--input", "in"], capsys)
    assert (code, errors) == (2, ["python -m evaluation run: error: --output is required (or set EVALUATION_OUTPUT_URI)"])

    code, _, out = _run_cli(["run", "--help"], capsys)
    assert code == 0
    assert out.splitlines()[0] == "usage: python -m evaluation run --date DATE [options] [run options]"
    own, run_options = out.split("\nrun options:\n", 1)  # the command's own options first, then the run's
    assert "--no-progress" in own and "--input URI" not in own
    assert "--input URI, --input-uri URI" in run_options and "--output URI, --output-uri URI" in run_options
    assert "$EVALUATION_INPUT_URI" in out and "$EVALUATION_OUTPUT_URI" in out
    assert "(default: $EVALUATION_JUDGE_MODEL, else offline/lexical)" in " ".join(out.split())
    for command in ("", "run", "plan", "compare", "sql", "report", "calibrate", "gc", "generate"):
        _, _, text = _run_cli([*([command] if command else []), "--help"], capsys)
        assert "`" not in text, command


def test_sql_names_an_unknown_column_and_the_table_columns(landed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, errors, _ = _run_cli(["sql", "SELECT modle FROM evaluations", "--output", str(landed / "out")], capsys)
    assert code == 1 and len(errors) == 1
    assert errors[0].startswith("python -m evaluation sql: error: unknown column 'modle' (did you mean model?): "
                                "evaluations has dt, run_id, record_id")
    assert "Resolved plan" not in errors[0] and "FAILED HERE" not in errors[0]


def test_sql_prints_readable_results(landed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(landed / "out")
    query = "SELECT model, count(*) AS n FROM evaluations GROUP BY model ORDER BY model"
    code, _, text = _run_cli(["sql", query, "--output", out], capsys)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].split() == ["model", "|", "n"] and set(lines[1]) <= {"-", "+"}
    assert lines[-1] == "(3 rows)" and lines[2].startswith("assistant-lite | ")

    _, _, as_json = _run_cli(["sql", query, "--output", out, "--format", "json"], capsys)
    rows = json.loads(as_json)
    assert [r["model"] for r in rows] == ["assistant-lite", "assistant-v1", "assistant-v2"]
    _, _, as_csv = _run_cli(["sql", query, "--output", out, "--format", "csv"], capsys)
    assert as_csv.splitlines()[0] == "model,n" and len(as_csv.splitlines()) == 4
    _, _, markdown = _run_cli(["sql", query, "--output", out, "--format", "markdown"], capsys)
    assert markdown.splitlines()[:2] == ["| model | n |", "|---|---|"]

    # 40 columns: one block per row, every cell cut to a readable width
    _, _, wide = _run_cli(["sql", "SELECT * FROM evaluations LIMIT 2", "--output", out], capsys)
    assert wide.startswith("-[ row 1 ]") and "\nquestion_key" in wide
    assert max(len(line) for line in wide.splitlines()) < 80


def test_a_storage_failure_is_one_line_naming_the_uri(capsys: pytest.CaptureFixture[str]) -> None:
    with local_s3_environment("present"):
        code, errors, _ = _run_cli(["sql", "SELECT * FROM runs", "--output", "s3://absent-bucket/x"], capsys)
        assert code == 1 and len(errors) == 1, errors
        assert errors[0].startswith("python -m evaluation sql: error: cannot list s3://absent-bucket/x/runs/")
        assert "NoSuchBucket" in errors[0]

        for verbose in (["-v", "sql", "SELECT * FROM runs"], ["sql", "SELECT * FROM runs", "-v"]):
            code, errors, _ = _run_cli([*verbose, "--output", "s3://absent-bucket/x"], capsys)
            assert code == 1 and "Traceback (most recent call last):" in errors
            assert errors[-1].startswith("python -m evaluation sql: error: cannot list s3://absent-bucket/x/runs/")


def test_a_normal_run_prints_no_third_party_warning_on_the_terminal(tmp_path: Path) -> None:
    """In a process of its own (no test harness's log handlers): litellm's pricing note for the
    offline judge goes to the log at INFO, not to the terminal; the run's own lines stay."""
    import subprocess
    import sys

    from tests.reliability.helpers import REPO, cli_env

    synthetic.write_day(storage.open_store(str(tmp_path / "raw")), DAY, 12, bad=False)
    argv = [sys.executable, "-m", "evaluation", "run", "--date", DAY.isoformat(), "--input", str(tmp_path / "raw")]
    # the two runs at once, each to an output of its own, their terminals' stderr to files
    runs = []
    for flags in ((), ("-v",)):
        with (tmp_path / f"stderr{len(flags)}").open("w") as stderr:
            runs.append(subprocess.Popen([*argv[:3], *flags, *argv[3:], "--output", str(tmp_path / f"out{len(flags)}")],
                                         cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=stderr))
    codes = [run.wait(timeout=300) for run in runs]
    quiet, verbose = ((tmp_path / f"stderr{n}").read_text() for n in (0, 1))
    assert codes == [0, 0], (quiet, verbose)
    assert f"{DAY} landed" in quiet
    assert "LiteLLM" not in quiet and "WARNING" not in quiet, quiet
    assert "INFO LiteLLM" in verbose  # the same note, in the log at INFO
