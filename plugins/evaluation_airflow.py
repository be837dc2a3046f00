"""Airflow glue for the evaluation DAGs: Connections to clients and keys, context to RunConfig.

Secrets come from Connections (or the environment), never from Params, XCom, logs or tables:

* ``aws_default`` (conn type ``aws``; ``EVALUATION_S3_CONN_ID`` names another): read by the Amazon
  provider's S3 hook, so whatever the provider supports works: keys (``login``/``password``) and a
  session token, ``role_arn`` (assume-role) with ``assume_role_method`` / ``assume_role_kwargs``,
  a profile, no keys at all for the instance or pod role (IRSA), ``region_name``,
  ``endpoint_url``, ``config_kwargs`` (botocore's config, over the product's retries and
  timeouts) and ``verify``. Without the connection, boto3's own chain (the environment, a
  profile, the instance role).
* ``llm_judge``: ``password`` is the judge's API key, ``host`` an optional API base, ``extra``
  may hold ``rpm`` and ``tpm`` (the provider's requests and tokens per minute for the whole
  deployment, used when the run options ``judge_rpm`` / ``judge_tpm`` are empty; shared by the judge
  tasks through Redis, see :mod:`evaluation.calling.fleetrate`). Without it, ``EVALUATION_JUDGE_API_KEY`` /
  ``LLM_API_KEY`` or the provider's own variables (read by litellm).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook, Connection, Context, Param
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from evaluation.cli.support import KEY_HINT, api_key_from_env
from evaluation.contract.options import RUN_OPTIONS, Option, build_config, fill_from_env

if TYPE_CHECKING:
    from airflow.sdk.types import DagRunProtocol

    from evaluation.contract.config import RunConfig
    from evaluation.stages import DaySize, Stores
    from evaluation.storage import S3Access

logger = logging.getLogger(__name__)

S3_CONN_ID = os.environ.get("EVALUATION_S3_CONN_ID", "aws_default")
JUDGE_CONN_ID = os.environ.get("EVALUATION_JUDGE_CONN_ID", "llm_judge")


def connection(conn_id: str) -> Connection | None:
    """The Airflow Connection ``conn_id``, or None when it does not exist."""
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def s3_access(conn_id: str | None = S3_CONN_ID) -> S3Access:
    """S3 as the Amazon provider reaches it: the boto3 session its S3 hook makes from the
    connection ``conn_id`` (credentials refreshed as they expire, an assumed role's included), and
    an S3 client from that session with the connection's endpoint, region and botocore config."""
    # amazon provider and boto3: only on the S3 path, not when DAG files parse
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    # Polars: plugins are imported when DAG files parse, so they stay light
    from evaluation import storage

    hook = S3Hook(aws_conn_id=conn_id)
    storage.share_models()  # before the hook makes its session
    return storage.s3_access(
        hook.get_session(region_name=hook.region_name),
        endpoint_url=hook.conn_config.get_service_endpoint_url("s3"),
        config=storage.s3_config(hook.config),
        verify=hook.verify,
    )


def judge_credentials(api_base: str | None = None) -> tuple[str | None, str | None]:
    """(api_key, api_base) of the judge: the connection's password and host, else the environment
    (a placeholder key for a keyless OpenAI-compatible server at ``api_base``)."""
    return credentials_of(connection(JUDGE_CONN_ID), api_base)


def credentials_of(conn: Connection | None, api_base: str | None) -> tuple[str | None, str | None]:
    """:func:`judge_credentials` from a judge Connection already read (None: there is none)."""
    if conn is not None:
        api_base = api_base or conn.host or None
        if conn.password:
            return conn.password, api_base
    return api_key_from_env(api_base), api_base


def judge_key_hint() -> str:
    """Where a task looks for the judge's key, as a message about missing credentials names it."""
    return f"the password of the {JUDGE_CONN_ID} connection, or {KEY_HINT} in the workers' environment"


def judge_pool_slots() -> int:
    """Slots of the ``llm_judge`` pool as the deployment sets them (``$LLM_JUDGE_POOL_SLOTS``,
    default 1): the chunks judged at once, for a dry run's estimate of the judging time."""
    try:
        return max(1, int(os.environ.get("LLM_JUDGE_POOL_SLOTS", "1")))
    except ValueError:
        return 1


def log_day_size(size: DaySize) -> None:
    """A dry run's plan in the task log: the lines ``python -m evaluation plan`` prints, then its JSON."""
    # Polars: plugins are imported when DAG files parse, so they stay light
    from evaluation.stages import size_text

    logger.info("dry run, nothing judged or landed:\n%s", size_text(size))
    logger.info("plan: %s", size.model_dump_json())


def judge_rate_limits() -> dict[str, float]:
    """``judge_rpm`` / ``judge_tpm`` from the judge connection's extra ``rpm`` / ``tpm`` (the ones
    it sets to a positive number)."""
    conn = connection(JUDGE_CONN_ID)
    extra = (conn.extra_dejson or {}) if conn is not None else {}
    limits: dict[str, float] = {}
    for option, key in (("judge_rpm", "rpm"), ("judge_tpm", "tpm")):
        try:
            value = float(extra.get(key) or 0)
        except (TypeError, ValueError):
            logger.warning("connection %s: extra %s=%r is not a number: ignored", JUDGE_CONN_ID, key, extra.get(key))
            continue
        if value > 0:
            limits[option] = value
    return limits


def judge_connection_defaults(values: dict[str, Any]) -> None:
    """Fill ``values``' empty ``api_base`` and rate limits from the judge connection (host, extra rpm/tpm)."""
    values["api_base"] = values.get("api_base") or judge_credentials()[1]
    values.update({option: value for option, value in judge_rate_limits().items() if not values.get(option)})


def evaluation_day(context: Context) -> dt.date:
    """The day a run evaluates: the ``date`` param, else the logical date's day (UTC). A manual
    run without a logical date evaluates the day before it was triggered."""
    override = (context["params"].get("date") or "").strip()
    if override:
        return dt.date.fromisoformat(override)
    logical = context.get("logical_date")
    if logical is not None:
        return logical.astimezone(dt.UTC).date()
    return (context["dag_run"].run_after.astimezone(dt.UTC) - dt.timedelta(days=1)).date()


def check_conf(context: Context) -> dict[str, Any]:
    """Refuse a run whose conf names a key the DAG has no Param for (a typo would otherwise be
    ignored, and the run would go ahead with the default): fail without retry, naming the unknown
    key(s) and the known ones. Airflow validates the types of the known keys itself. Returns the Params."""
    conf = getattr(context["dag_run"], "conf", None) or {}
    known = set(context["dag"].params.keys())
    unknown = sorted(set(conf) - known)
    if unknown:
        raise AirflowFailException(
            f"unknown conf key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} for DAG "
            f"{context['dag'].dag_id}; the known keys are: {', '.join(sorted(known))}"
        )
    return context["params"]


def trigger(dag_run: DagRunProtocol) -> str:
    """What started the run, as ``runs.trigger`` records it: manual, scheduled, backfill, ..."""
    run_type = getattr(dag_run, "run_type", None) or "manual"
    return str(getattr(run_type, "value", run_type))


def run_config(context: Context) -> RunConfig:
    """The RunConfig of this DAG run, from its Params and context (after :func:`check_conf`)."""
    names = {o.name for o in RUN_OPTIONS}
    # The option, else its variable in this worker's environment, else the llm_judge connection.
    params = fill_from_env(RUN_OPTIONS, {k: v for k, v in check_conf(context).items() if k in names})
    dag_run = context["dag_run"]
    judge_connection_defaults(params)
    with fail_without_retry(ValueError, prefix="invalid run configuration: "):
        cfg = build_config(params, date=evaluation_day(context), run_id=dag_run.run_id, trigger=trigger(dag_run))
    refuse_local_output_when_distributed(cfg.output_uri, conf.get("core", "executor"))
    return cfg


#: Executors whose tasks all run on the scheduler's host, so a directory is the same for every task.
SINGLE_HOST_EXECUTORS = ("LocalExecutor", "SequentialExecutor")


def refuse_local_output_when_distributed(output_uri: str, executor: str) -> None:
    """A distributed executor (Celery, Kubernetes) runs a day's tasks on different hosts: an output
    that is a directory would be split between them, so the run fails before anything is paid."""
    names = [name.strip().rsplit(".", 1)[-1] for name in executor.split(",") if name.strip()]
    distributed = [name for name in names if name not in SINGLE_HOST_EXECUTORS]
    if distributed and not output_uri.startswith("s3://"):
        raise AirflowFailException(
            f"output_uri {output_uri!r} is a directory, but the {distributed[0]} runs this run's tasks on several "
            "hosts, which would each write their own part of the day: set output_uri (or EVALUATION_OUTPUT_URI) "
            "to s3://bucket/prefix"
        )


def stores(cfg: RunConfig) -> Stores:
    """The run's input and output stores, S3 through the Airflow connection."""
    # Polars: plugins are imported when DAG files parse, so they stay light
    from evaluation.stages import Stores

    return Stores(*open_stores(cfg.input_uri, cfg.output_uri))


def open_stores(*uris: str) -> list[Any]:
    """A store for each URI (None for an empty one), S3 through the Airflow connection."""
    # Polars: plugins are imported when DAG files parse, so they stay light
    from evaluation import storage

    return storage.open_stores(*uris, make_access=s3_access)


@contextmanager
def fail_without_retry(*errors: type[Exception], prefix: str = "") -> Iterator[None]:
    """A deterministic failure (bad input, counts, config) among ``errors``: fail the task, do not
    retry."""
    try:
        yield
    except errors as exc:
        raise AirflowFailException(f"{prefix}{exc}") from exc


def form_params(options: Iterable[Option]) -> dict[str, Param]:
    """The Params of a form: one per option of :func:`evaluation.contract.options.options` (a required one
    without a default)."""
    return {
        o.name: Param(**({} if o.required else {"default": o.default}), title=o.title, description=o.help,
                      **o.schema)
        for o in options
    }
