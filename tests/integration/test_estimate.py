"""One estimate: ``run`` (its plan stage) and ``plan`` count a day's calls, tokens and cost alike
(evaluation.calling.cost), so they print the same figures for the same day and options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluation import storage
from evaluation.calling.cost import reply_tokens
from evaluation.cli.main import main
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import DAY, judge_reply

MODEL = "openai/gpt-4-turbo"  # priced high enough that a small day's cost shows in cents
RECORDS = 12  # every record in the plan stage's token sample: the two count the same prompts


def _figures(text: str) -> tuple[int, int, int, str]:
    calls = re.search(r"([\d,]+) judge calls|judge calls: ([\d,]+)", text)
    tokens = re.search(r"~([\d,]+) input.*?~([\d,]+) output", text)
    cost = re.search(r"\$([\d,]+\.\d\d)", text)
    assert calls and tokens and cost, text
    return (int((calls.group(1) or calls.group(2)).replace(",", "")), int(tokens.group(1).replace(",", "")),
            int(tokens.group(2).replace(",", "")), cost.group(1))


def test_run_and_plan_print_the_same_estimate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    common = ["--date", DAY.isoformat(), "--input", str(tmp_path / "raw"), "--judge-model", MODEL]
    assert main(["plan", *common, "--output", str(tmp_path / "planned")]) == 0
    planned = capsys.readouterr().out
    with OpenAIServer(judge_reply, models=("gpt-4-turbo",)) as server:
        assert main(["run", *common, "--output", str(tmp_path / "out"), "--api-base", server.base_url]) == 0
    plan_line = next(line for line in capsys.readouterr().err.splitlines() if " plan: " in line)

    run_estimate = _figures(plan_line.split("estimate", 1)[1])
    calls_line = next(line for line in planned.splitlines() if line.startswith("judge calls:"))
    tokens_line = next(line for line in planned.splitlines() if line.startswith("tokens:"))
    cost_line = next(line for line in planned.splitlines() if line.startswith("cost:"))
    plan_estimate = _figures(f"{calls_line} {tokens_line} {cost_line}")
    assert run_estimate == plan_estimate, (plan_line, planned)
    calls, _, output, cost = plan_estimate
    assert calls > 0 and float(cost) > 0
    assert output != 200 * calls  # each judge's typical reply, not one figure for all
    assert min(map(reply_tokens, ("rag", "masis", "prompt"))) * calls <= output
