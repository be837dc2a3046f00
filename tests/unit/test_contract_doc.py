"""docs/contract.md and the code agree: every "CONTRACT §N" cited in the repository has its section;
the tables' columns, the run options and the judge statuses it names are the code's, and the
code has none it does not name."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from evaluation.cli.review import REVIEW_OPTIONS
from evaluation.contract import schemas
from evaluation.contract.config import EVALUATION_COLUMNS, JUDGE_STATUSES
from evaluation.contract.options import RUN_OPTIONS
from evaluation.contract.review_queue import QUEUE_SCHEMA
from evaluation.storage.labels import HUMAN_LABELS_SCHEMA

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")

TABLES: dict[str, list[str]] = {
    "evaluations": list(EVALUATION_COLUMNS),
    "judge_calls": ["dt", *schemas.CALLS_SCHEMA],
    "rejects": ["dt", *schemas.REJECT_SCHEMA],
    "daily_summary": ["dt", *schemas.summary_schema()],
    "runs": ["dt", *schemas.runs_schema()],
    "comparisons": list(schemas.METRICS_SCHEMA),
    "comparison_verdicts": list(schemas.VERDICTS_SCHEMA),
    "calibrations": list(schemas.CALIBRATIONS_SCHEMA),
    "review_queue": list(QUEUE_SCHEMA),
    "human_labels": ["dt", *HUMAN_LABELS_SCHEMA],
}


def _section(start: str, end: str) -> str:
    """The doc's text from the line starting with ``start`` to the next line starting with ``end``."""
    match = re.search(rf"^{re.escape(start)}.*?(?=^{re.escape(end)})", DOC, re.M | re.S)
    assert match, f"no section {start!r} in docs/contract.md"
    return match.group(0)


def _first_cells(text: str) -> list[str]:
    """The backticked first cell of each table row."""
    return re.findall(r"^\| `([^`]+)` \|", text, re.M)


def test_every_cited_section_exists() -> None:
    headings = set(re.findall(r"^#{2,3} (§\d+(?:\.\d+)?) ", DOC, re.M))
    assert {f"§{n}" for n in range(1, 8)} <= headings
    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "Makefile", "*.yml", "*.toml"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    cited: dict[str, set[str]] = {}
    for name in files:
        path = REPO / name
        if not path.is_file():
            continue
        for section in re.findall(r"CONTRACT (§\d+(?:\.\d+)?)", path.read_text(encoding="utf-8")):
            cited.setdefault(section, set()).add(name)
    assert cited, "no citation found: the search is broken"
    missing = {s: sorted(f) for s, f in cited.items() if s not in headings}
    assert not missing, f"cited sections with no heading in docs/contract.md: {missing}"


@pytest.mark.parametrize("table", sorted(TABLES))
def test_each_table_names_exactly_its_columns(table: str) -> None:
    match = re.search(rf"^#### `{table}`\n(?:.*\n)*?Columns: (.*)$", DOC, re.M)
    assert match, f"no column list for {table}"
    named = re.findall(r"`([^`]+)`", match.group(1))
    assert len(named) == len(set(named)), f"{table}: a column is named twice"
    assert set(named) - set(TABLES[table]) == set(), f"{table}: named but not in the schema"
    assert set(TABLES[table]) - set(named) == set(), f"{table}: in the schema but not named"


def test_every_landed_table_is_described() -> None:
    described = set(re.findall(r"^#### `(\w+)`", DOC, re.M))
    assert described == set(TABLES)


def test_the_options_are_the_run_options() -> None:
    rows = re.findall(r"^\| `(\w+)` \| `(--[\w-]+)` \|", _section("**Run options**", "## §6"), re.M)
    assert [name for name, _ in rows] == [o.name for o in RUN_OPTIONS]
    assert [flag for _, flag in rows] == [o.flags[0] for o in RUN_OPTIONS]


def test_the_statuses_are_the_judge_statuses() -> None:
    statuses = _first_cells(_section("### §2.5", "## §3"))
    assert statuses == list(JUDGE_STATUSES)


def test_every_status_option_and_column_in_the_text_exists() -> None:
    """Backticked snake_case names in the prose are a column, an option, a status or another known
    name (a reason, a clamp, a field of §1, a rule's key)."""
    columns = {c for names in TABLES.values() for c in names}
    others = {"record_id", "conversation_id", "timestamp", "question", "answer", "contexts", "reference",
              "expected_outcome", "rubrics", "metadata", "not_applicable", "budget_exhausted", "sampled_out",
              "empty_answer", "evaluation_status", "input_format", "failed_rejects", "overall_reasoning",
              "aws_default", "llm_judge", "evaluation_smtp", "evaluation_webhook", "input_uri", "output_uri",
              "label_studio"}
    dags = {path.stem for path in (REPO / "dags").glob("*.py")}  # one DAG per file, dag_id == file stem
    options = {o.name for o in (*RUN_OPTIONS, *REVIEW_OPTIONS)}
    known = columns | options | set(JUDGE_STATUSES) | others | set(TABLES) | dags
    named = set(re.findall(r"`([a-z]+(?:_[a-z0-9]+)+)`", DOC))
    assert named - known == set()
