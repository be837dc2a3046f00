"""Daily offline evaluation of LLM assistants' conversation logs with LLM judges.

The library behind the Airflow DAGs and ``python -m evaluation``; it never imports Airflow. The
public API is :data:`__all__`, loaded on first use (``from evaluation import run_day``), so that
importing a light module (``evaluation.options`` at DAG-parse time) pulls in nothing heavy. Each
public name's module is in ``_EXPORTS`` below; :mod:`evaluation.client` is the one that imports litellm.
"""

from __future__ import annotations

from evaluation._lazy import lazy_exports

_EXPORTS = {
    "ComparisonSpec": "evaluation.contract",
    "InputRecord": "evaluation.contract",
    "RunConfig": "evaluation.contract",
    "Thresholds": "evaluation.contract",
    "question_key": "evaluation.contract",
    "RUN_OPTIONS": "evaluation.options",
    "build_config": "evaluation.options",
    "RunFailed": "evaluation.stages",
    "Stores": "evaluation.stages",
    "check_run": "evaluation.stages",
    "ingest_and_validate": "evaluation.stages",
    "judge_chunk": "evaluation.stages",
    "plan_chunks": "evaluation.stages",
    "run_day": "evaluation.stages",
    "score_and_land": "evaluation.stages",
    "parse_reply": "evaluation.judges",
    "render": "evaluation.judges",
    "score_table": "evaluation.judges",
    "JudgeClient": "evaluation.client",
    "open_store": "evaluation.storage",
    "write_daily_report": "evaluation.report",
    "run_comparison": "evaluation.compare",
    "run_sql": "evaluation.sql",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
