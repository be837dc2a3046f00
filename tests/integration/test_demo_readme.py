"""The README's commands over the demo's output run as written after the demo: ``demo-output/``
holds every table of the demo's week (copied by scripts/demo.py's ``copy_outputs``, which keeps
what users put beside them), and the commands the demo prints with its own dates run too."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from evaluation import storage
from evaluation.cli.day import run_day
from evaluation.cli.main import main
from evaluation.contract.config import RunConfig
from evaluation.stages import Stores
from evaluation.testing import synthetic
from scripts.demo import RUN_CONF, WRITTEN_LIST, copy_outputs, next_steps

REPO = Path(__file__).resolve().parents[2]
LAST = dt.date(2026, 10, 20)
DAYS = [LAST - dt.timedelta(days=i) for i in range(6, -1, -1)]


def readme_commands() -> list[list[str]]:
    """The argv of each command in the README's block over the demo's output."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"Over the demo's output, as written.*?```bash\n(.*?)```", text, re.S)
    assert block, "the README has no block of commands over the demo's output"
    lines = [line for line in block.group(1).splitlines() if line.strip()]
    assert lines and all(line.startswith(".venv/bin/python -m evaluation ") for line in lines)
    return [shlex.split(line)[3:] for line in lines]


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small demo week landed, then copied into a demo-output folder that a user and an earlier
    demo had written into."""
    root = tmp_path_factory.mktemp("demo")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        synthetic.write_day(storage.open_store(raw_uri), day, 24, bad=False)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"demo-{day}", **RUN_CONF)
        run_day(cfg, Stores.open(cfg))
    target = root / "demo-output"
    stale = "evaluations/dt=2001-01-01/part-0.parquet"
    (target / stale).parent.mkdir(parents=True)
    (target / stale).write_bytes(b"from an earlier demo")
    (target / WRITTEN_LIST).write_text(stale + "\n")
    (target / "calibrations" / "notes.txt").parent.mkdir(parents=True)
    (target / "calibrations" / "notes.txt").write_text("mine")
    copy_outputs(storage.open_store(out_uri), target)
    return target


def _run(argv: list[str], target: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([str(target) if arg == "demo-output" else arg for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_demo_output_holds_the_week_and_keeps_what_users_wrote(demo_output: Path) -> None:
    for table in storage.TABLES:
        days = sorted(p.name for p in (demo_output / table).iterdir())
        assert days == [f"dt={d}" for d in DAYS], table
    assert [p.name for p in (demo_output / "reports").iterdir()]
    assert (demo_output / "calibrations" / "notes.txt").read_text() == "mine"
    assert not (demo_output / "evaluations" / "dt=2001-01-01" / "part-0.parquet").exists()
    listed = (demo_output / WRITTEN_LIST).read_text().split()
    assert "calibrations/notes.txt" not in listed and storage.run_key(LAST, f"demo-{LAST}") in listed
    # each day's tables and its commit record, through which the commands read the day
    assert {storage.landing_key("evaluations", LAST, f"demo-{LAST}"), storage.commit_key(LAST)} <= set(listed)
    assert set(storage.read_landed(storage.open_store(str(demo_output))).commits) == set(DAYS)


def test_the_readme_commands_run_as_written(demo_output: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = readme_commands()
    assert {argv[0] for argv in commands} == {"report", "compare", "sql"}
    for argv in commands:
        code, out, err = _run(argv, demo_output, capsys)
        assert code == 0, (argv, err)
        assert err == "", (argv, err)  # no warning: every day of the range has data, no report is emptied
        if argv[0] == "compare":
            report = out.splitlines()[-1].removeprefix("report: ")
            assert Path(report).is_file() and len(out.splitlines()) < 25  # a short table, then the report
            code, out, err = _run([*argv, "--json"], demo_output, capsys)
            result: dict[str, Any] = json.loads(out)
            assert result["report_uri"] == report
            assert result["days"] == [d.isoformat() for d in DAYS] and result["days_without_data"] == []
            spec = json.loads(Path(result["spec_uri"]).read_text())
            assert spec["days"] == result["days"]
        elif argv[0] == "report":
            assert out.strip() == str(demo_output / storage.report_key(LAST))
        else:
            assert "assistant-v2" in out or "demo-" in out


def test_the_commands_the_demo_prints_run(demo_output: Path, capsys: pytest.CaptureFixture[str]) -> None:
    printed = next_steps(DAYS, demo_output)
    assert [shlex.split(c)[3] for c in printed] == ["report", "compare", "sql"]
    for command in printed:
        code, out, err = _run(shlex.split(command)[3:], demo_output, capsys)
        assert code == 0 and err == "", (command, err)
    assert f"--from {DAYS[0]} --to {LAST}" in printed[1]


def test_compare_warns_about_days_without_data(demo_output: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = DAYS[0] - dt.timedelta(days=2)
    code, out, err = _run(["compare", "--from", start.isoformat(), "--to", "latest", "--models",
                           "assistant-v2,assistant-lite", "--output", "demo-output", "--json"], demo_output, capsys)
    assert code == 0
    assert err == (f"python -m evaluation compare: warning: 2 of the 9 days from {start} to {LAST} have no data "
                   f"({start}, {start + dt.timedelta(days=1)}); compared {', '.join(d.isoformat() for d in DAYS)}\n")
    assert json.loads(out)["days_without_data"] == [start.isoformat(), (start + dt.timedelta(days=1)).isoformat()]


def test_report_says_when_it_replaces_a_fuller_report(demo_output: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    only_last = tmp_path / "last-day"
    for table in storage.TABLES:  # a copy holding the last day alone, as the demo's folder once did
        source = demo_output / table / f"dt={LAST}"
        for path in source.iterdir():
            (only_last / table / source.name).mkdir(parents=True, exist_ok=True)
            (only_last / table / source.name / path.name).write_bytes(path.read_bytes())
    commit = storage.commit_key(LAST)  # and the day's commit record, through which readers find it
    (only_last / commit).parent.mkdir(parents=True)
    (only_last / commit).write_bytes((demo_output / commit).read_bytes())
    report_dir = tmp_path / "report"
    code, _, err = _run(["report", "--date", "latest", "--output", "demo-output", "--report-output", str(report_dir)],
                        demo_output, capsys)
    assert code == 0 and err == ""
    code, out, err = _run(["report", "--date", "latest", "--output", str(only_last), "--report-output",
                           str(report_dir)], demo_output, capsys)
    assert code == 0 and out.strip() == str(report_dir / "index.html")
    assert err.startswith(f"python -m evaluation report: warning: replaced the report at {report_dir / 'index.html'}")
    assert "7 days of trends, with one covering" in err and "and 1 days" in err


def test_the_report_header_is_the_same_whatever_the_date_form(demo_output: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def header(page: Path) -> str:
        return re.search(r'<header class="top">.*?</header>', page.read_text(encoding="utf-8"), re.S).group(0)  # type: ignore[union-attr]

    landed = header(demo_output.parent / "out" / storage.report_key(LAST))  # as the run wrote it
    for form in (LAST.isoformat(), "latest", "latest-0"):
        target = tmp_path / form
        code, out, err = _run(["report", "--date", form, "--output", "demo-output", "--report-output", str(target)],
                              demo_output, capsys)
        assert code == 0 and err == "", err
        assert header(target / "index.html") == landed, form
    assert str(demo_output.parent / "out") in landed  # the root the run landed under, not the copy read
