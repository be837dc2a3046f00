"""The Celery worker's configuration (``[celery] celery_config_options``) and its preload.

:data:`CELERY_CONFIG` is Airflow's default Celery configuration, unchanged: naming this module in
``celery_config_options`` is what makes every process that builds Airflow's Celery app import it,
and so connect :func:`preload` to Celery's ``worker_init`` signal. Only a starting worker sends
that signal, once, in its main process before it forks its pool: the pool's processes, and the
task processes forked from them, start with polars, Great Expectations and litellm (set up by
:func:`evaluation.calling.client.configure`) already imported instead of importing them again (some 4 s
per task), and with botocore's S3 models parsed (:func:`evaluation.storage.parse_s3_models`).
Everything else that builds the app (the scheduler, ``celery inspect ping`` in the worker's
healthcheck) imports this module and nothing heavy.

``worker_process_init`` (once per pool process, after the fork) would not do: Celery kills a pool
process that does not report ready within ``worker_proc_alive_timeout`` (4 s), less than the
preload takes on a small machine, and the pool would no longer share the imported modules'
memory with the main process. ``EVALUATION_WORKER_PRELOAD`` may name other modules.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
from celery.signals import worker_init

#: What the worker imports before it forks, unless ``EVALUATION_WORKER_PRELOAD`` says otherwise.
PRELOAD = ("evaluation.stages", "evaluation.storage.validation", "evaluation.report", "evaluation.calling.client")

#: ``[celery] celery_config_options``: Airflow's defaults; see the module's docstring for why.
CELERY_CONFIG: dict[str, Any] = DEFAULT_CELERY_CONFIG

log = logging.getLogger(__name__)


def preload_modules() -> tuple[str, ...]:
    """The modules :func:`preload` imports: ``EVALUATION_WORKER_PRELOAD`` (comma-separated) or
    :data:`PRELOAD`."""
    names = os.environ.get("EVALUATION_WORKER_PRELOAD")
    if not names:
        return PRELOAD
    return tuple(name for name in (part.strip() for part in names.split(",")) if name)


@worker_init.connect
def preload(**_: Any) -> None:
    """Import the pipeline's heavy modules, set litellm up and parse S3's models, in the worker before its pool forks."""
    started = time.monotonic()
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    modules = preload_modules()
    for module in modules:
        importlib.import_module(module)
    importlib.import_module("evaluation.calling.client").configure()
    importlib.import_module("evaluation.storage").parse_s3_models()
    log.info("worker preload: imported %s in %.1f s (pid %d)",
                ", ".join(modules), time.monotonic() - started, os.getpid())
