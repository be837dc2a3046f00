"""docs/deploy.md's sizing tables are `python -m evaluation plan --records N`'s output, regenerated
here from the command each block names (a change of a constant, a prompt or a default shows as
drift); and the runbook's month backfill covers every day of the month."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
from pathlib import Path

import pytest

from evaluation.cli import main as cli

DOC = (Path(__file__).resolve().parents[3] / "docs" / "deploy.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"<!-- sizing: python -m evaluation (plan [^>]*?) -->\n(.*?)\n<!-- /sizing -->", re.S)


def test_the_doc_has_the_sizing_of_a_million_and_ten_million_records() -> None:
    commands = [command for command, _ in BLOCK.findall(DOC)]
    assert [shlex.split(c)[shlex.split(c).index("--records") + 1] for c in commands] == ["1000000", "10000000"]


@pytest.mark.parametrize("block", BLOCK.findall(DOC), ids=lambda b: str(b)[:40])
def test_each_sizing_table_is_the_commands_output(block: tuple[str, str], capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    command, table = block
    for name in [n for n in os.environ if n.startswith("EVALUATION_")]:  # the defaults, not this shell's
        monkeypatch.delenv(name)
    assert cli.main(shlex.split(command)) == 0
    assert capsys.readouterr().out.strip() == table.strip(), (
        f"docs/deploy.md's table is not what `python -m evaluation {command}` prints: paste its output")


def test_the_month_backfill_covers_every_day_of_the_month() -> None:
    """The REST body of the runbook's backfill, through the daily DAG's own timetable: the days its
    runs evaluate (each run's logical date's day) are the month's, the last one included."""
    from airflow.dag_processing.dagbag import DagBag
    from airflow.serialization.serialized_objects import DagSerialization

    body = json.loads(re.search(r"backfills.*?-d '(\{.*?\})'", DOC, re.S).group(1))  # type: ignore[union-attr]
    dags = Path(__file__).resolve().parents[3] / "dags"
    dag = DagBag(dag_folder=str(dags / "daily_evaluation.py")).dags["daily_evaluation"]
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    start, end = (dt.datetime.fromisoformat(body[k].replace("Z", "+00:00")) for k in ("from_date", "to_date"))
    days = [info.logical_date.date() for info in serialized.iter_dagrun_infos_between(start, end)
            if info.logical_date is not None]
    first = start.date()
    month = [first + dt.timedelta(days=n) for n in range(31) if (first + dt.timedelta(days=n)).month == first.month]
    assert days == month
    cli_dates = re.search(r"--from-date (\S+) --to-date (\S+)", DOC)
    assert cli_dates is not None and cli_dates.groups() == (body["from_date"], body["to_date"])


def test_plan_needs_a_day_or_a_number_of_records(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["plan"]) == 2
    assert "plan needs --date (a day to read) or --records" in capsys.readouterr().err
    assert cli.main(["plan", "--records", "10", "--date", "2026-11-25"]) == 2
    assert "leave out --date" in capsys.readouterr().err
