"""The Celery worker's configuration (``[celery] celery_config_options``): Airflow's defaults,
read after the worker has imported the pipeline's heavy modules once, before it forks its pool.

Every task process of the worker is forked from the pool, so it starts with polars, Great
Expectations and litellm (set up by :func:`evaluation.client.configure`) already imported, instead
of importing them again (some 4 s per task). docker-compose.yml points the worker, and only the
worker, at :data:`CELERY_CONFIG`; ``EVALUATION_WORKER_PRELOAD`` may name other modules.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

#: What the worker imports before it forks, unless ``EVALUATION_WORKER_PRELOAD`` says otherwise.
PRELOAD = ("evaluation.stages", "evaluation.validation", "evaluation.report", "evaluation.client")


def _preload() -> None:
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    names = os.environ.get("EVALUATION_WORKER_PRELOAD")
    for module in (m.strip() for m in names.split(",")) if names else PRELOAD:
        if module:
            importlib.import_module(module)
    importlib.import_module("evaluation.client").configure()


def __getattr__(name: str) -> Any:
    if name != "CELERY_CONFIG":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _preload()
    from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

    return DEFAULT_CELERY_CONFIG
