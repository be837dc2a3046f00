"""Daily offline evaluation of LLM assistants' conversation logs with LLM judges.

The library behind the Airflow DAGs and ``python -m evaluation``; it never imports Airflow.

This package re-exports only a light name, the run's options (``RunConfig``). A DAG file
imports ``evaluation.contract.options`` at parse time, which runs this module first, so it must import
nothing heavy (Polars, Great Expectations, litellm). The jobs are imported from their modules:
``evaluation.cli.day.run_day``, ``evaluation.stages`` (each stage), ``evaluation.judges``,
``evaluation.calling.client.JudgeClient`` (the one module that imports litellm),
``evaluation.storage.open_store``, ``evaluation.report.write_daily_report``,
``evaluation.compare.run_comparison``, ``evaluation.calibration.run.run_calibration`` and
``evaluation.storage.sql.run_sql``. docs/layout.md gives the layers they sit in.
"""

from evaluation.contract.config import RunConfig

__all__ = ["RunConfig"]
