"""The benchmark's generated judged rows are what the judges' parsers produce: every judge and
status, at PARSED_SCHEMA, and the table path scores them (a change of the parsed rows that the
generator misses fails here, not in the middle of `make bench`)."""

from __future__ import annotations

import polars as pl

from bench import data
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import score_table


def test_generated_judged_rows_have_every_judge_and_status_and_score() -> None:
    parsed = data.parsed_rows(3000, seed=7)
    assert dict(parsed.schema) == PARSED_SCHEMA
    assert set(parsed["judge"]) == {"rag", "masis", "prompt"}
    assert set(parsed["judge_status"]) == {"ok", "parse_error", "call_error", "judge_failed", "skipped"}
    scored = score_table(parsed)
    assert scored.height == parsed.height
    ok = scored.filter(pl.col("judge_status") == "ok")
    assert ok["score"].null_count() == 0 and ok["verdict"].null_count() == 0
    rubric = ok.filter((pl.col("judge") == "prompt") & pl.col("rubric_mode"))
    assert rubric.height > 0 and rubric["score"].is_between(0.0, 1.0).all()
