"""Daily offline evaluation of LLM assistants' conversation logs with LLM judges.

The library behind the Airflow DAGs and ``python -m evaluation``; it never imports Airflow.

This package re-exports only light names: the contract's models and the run options. A DAG file
imports ``evaluation.contract.options`` at parse time, which runs this module first, so it must import
nothing heavy (Polars, Great Expectations, litellm). The jobs are imported from their modules:
``evaluation.cli.day.run_day``, ``evaluation.stages`` (each stage), ``evaluation.judges``,
``evaluation.calling.client.JudgeClient`` (the one module that imports litellm),
``evaluation.storage.open_store``, ``evaluation.report.write_daily_report``,
``evaluation.compare.run_comparison``, ``evaluation.calibration.run.run_calibration`` and
``evaluation.storage.sql.run_sql``. docs/layout.md gives the layers they sit in.
"""

from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import InputRecord, RunConfig, Thresholds, question_key
from evaluation.contract.options import build_config

__all__ = ["ComparisonSpec", "InputRecord", "RunConfig", "Thresholds", "build_config", "question_key"]
