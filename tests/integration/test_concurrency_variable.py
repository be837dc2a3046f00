"""An option's variable reaches what the option drives: EVALUATION_CONCURRENCY sets how many calls
a run's judge client has in flight, against the OpenAI-compatible server (the variables themselves
are tests/unit/contract/test_option_variables.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from evaluation import storage
from evaluation.cli import main as cli
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from tests.reliability.helpers import judge_reply

DAY = dt.date(2026, 11, 25)


def test_evaluation_concurrency_reaches_the_runs_judge_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EVALUATION_CONCURRENCY=24 and no --concurrency: 24 calls in flight at once, never more.
    Each reply waits until 24 requests are in the server (or until a few seconds pass, should
    fewer ever come): a run held to the default 8 cannot reach 24."""
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, 60, bad=False)
    state = {"in_flight": 0, "most": 0}
    full: asyncio.Event | None = None

    async def responder(body: dict[str, Any]) -> str:
        nonlocal full
        full = full or asyncio.Event()
        state["in_flight"] += 1  # the responder runs on the server's single event loop
        state["most"] = max(state["most"], state["in_flight"])
        if state["in_flight"] >= 24:
            full.set()
        try:
            await asyncio.wait_for(full.wait(), timeout=5.0)
        except TimeoutError:
            pass  # fewer than 24 came: the run goes on, and the figure says so
        finally:
            state["in_flight"] -= 1
        return judge_reply(body)

    with OpenAIServer(responder) as server:
        for name, value in {"EVALUATION_CONCURRENCY": "24", "EVALUATION_JUDGE_MODEL": "openai/mock-judge",
                            "EVALUATION_API_BASE": server.base_url, "EVALUATION_INPUT_URI": str(tmp_path / "raw"),
                            "EVALUATION_OUTPUT_URI": str(tmp_path / "out"), "EVALUATION_QUIET_PERIOD_S": "0"}.items():
            monkeypatch.setenv(name, value)
        assert cli.main(["run", "--date", DAY.isoformat(), "--no-progress"]) == 0
        calls = server.request_count
    assert calls > 24
    assert state["most"] == 24
