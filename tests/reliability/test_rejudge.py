"""``rejudge_parse_errors``: a glitch that stored an unparseable reply can be judged again, once.

By default a stored reply is reused as it is (never paid for twice), so a malformed reply stays a
``parse_error`` on every re-run. With the option, exactly the calls whose stored reply does not
parse are made again; the new reply supersedes the old one in the ledger, so later runs without
the option reuse it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import polars as pl

from evaluation import stages, storage
from evaluation.cli.day import run_day
from evaluation.testing import synthetic
from evaluation.testing.openai_server import MALFORMED_CONTENT, OpenAIServer
from tests.reliability.helpers import DAY, config, judge_reply, prompt_pair, runs, table

RECORDS = 40


class GlitchOnce:
    """Answers every third distinct prompt with malformed text the first time it is asked."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        pair = prompt_pair(body)
        with self.lock:
            first = pair not in self.seen
            if first:
                self.seen[pair] = len(self.seen)
            glitch = first and self.seen[pair] % 3 == 0
        return MALFORMED_CONTENT if glitch else judge_reply(body)


def _run(tmp_path: Path, server: OpenAIServer, run_id: str, **options: Any) -> dict[str, Any]:
    cfg = config(tmp_path, run_id=run_id, judge_model="openai/mock-judge", api_base=server.base_url,
                 chunk_size=15, **options)
    return run_day(cfg, stages.Stores.open(cfg), api_key="k")


def test_parse_errors_are_judged_again_only_when_asked_and_only_once(tmp_path: Path) -> None:
    synthetic.write_day(storage.LocalStore(tmp_path / "raw"), DAY, RECORDS, bad=False)
    out = tmp_path / "out"
    with OpenAIServer(responder=GlitchOnce()) as server:
        first = _run(tmp_path, server, "first")
        glitched = first["statuses"]["parse_error"]
        assert glitched > 0
        asked = server.request_count

        again = _run(tmp_path, server, "again")  # default: reuse, pay nothing, the glitch stays
        assert server.request_count == asked and again["calls_made"] == 0
        assert again["statuses"] == first["statuses"]

        fixed = _run(tmp_path, server, "rejudge", rejudge_parse_errors=True)
        rejudged = server.requests[asked:]
        unparsed = table(out, "evaluations").filter(pl.col("judge_status") == "parse_error")
        assert unparsed.height == 0 and fixed["statuses"]["parse_error"] == 0
        # exactly the distinct prompts whose stored reply was malformed were asked again
        assert len(rejudged) == fixed["calls_made"] == len({prompt_pair(r) for r in rejudged})
        assert fixed["statuses"]["ok"] == first["statuses"]["ok"] + glitched
        assert fixed["calls_reused"] == first["rows"] - first["statuses"]["skipped"] - fixed["calls_made"]

        later = _run(tmp_path, server, "later")  # without the option: the new replies are reused
        assert server.request_count == asked + len(rejudged) and later["calls_made"] == 0
        assert later["statuses"] == fixed["statuses"]
    assert runs(out).filter(pl.col("run_id") == "rejudge")["status"].to_list() == ["success"]
