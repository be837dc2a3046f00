"""Daily offline evaluation of LLM assistants' conversation logs with LLM judges.

The library behind the Airflow DAGs and ``python -m evaluation``; it never imports Airflow. The
public API is :data:`__all__`, loaded on first use (``from evaluation import run_day``), so that
importing a light module (``evaluation.options`` at DAG-parse time) pulls in nothing heavy:

* run configuration and contract models: :class:`RunConfig`, :class:`InputRecord`,
  :class:`ComparisonSpec`, :data:`OPTIONS`, :func:`build_config`, :func:`question_key`;
* the stages of a day (:mod:`evaluation.stages`): :func:`check_run`, :func:`ingest_and_validate`,
  :func:`plan_chunks`, :func:`judge_chunk`, :func:`score_and_land`, :func:`run_day`, :class:`Stores`,
  :class:`RunFailed`;
* the judges (:mod:`evaluation.judges`): :func:`render`, :func:`parse_reply`, :func:`score_table`;
* the judge client (:mod:`evaluation.client`, the one module that imports litellm):
  :class:`JudgeClient`;
* storage and outputs: :func:`open_store`, :func:`write_daily_report`, :func:`run_comparison`,
  :func:`run_sql`.
"""

from __future__ import annotations

from evaluation._lazy import lazy_exports

_EXPORTS = {
    "ComparisonSpec": "evaluation.contract",
    "InputRecord": "evaluation.contract",
    "RunConfig": "evaluation.contract",
    "Thresholds": "evaluation.contract",
    "question_key": "evaluation.contract",
    "OPTIONS": "evaluation.options",
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
