"""Wait for the day's logs to be complete before ingesting them, holding no worker slot.

A day is complete when its **completion marker** (run option ``completion_marker``, e.g.
``_SUCCESS``) exists under ``{input_uri}/dt=YYYY-MM-DD/``, or, when none is configured, after a
**quiet period** (``quiet_period_s``) in which no object was added under that prefix. A quiet period
of 0 and no marker means the day is taken as it is.

:class:`WaitForDayOperator` resolves the run's options (its ``input_uri`` has environment
fallbacks, so only the task knows it), looks once, and when the day is not complete yet defers to
:class:`DayCompleteTrigger` with the deadline (``wait_deadline_s``) as its timeout. The trigger
looks at the day's prefix every ``poke_interval`` seconds: on S3 through boto3, its calls in a
worker thread of the triggerer (the event loop is never blocked), with the session the Amazon
provider's S3 hook makes from the run's connection, as the tasks' (``evaluation_airflow.s3_access``);
in a directory through the file system. The quiet period is seeded with the objects already there
and the newest one's time, so a day that has been quiet for long enough completes at once; any
object added or removed starts it over. At the deadline the trigger says so, and the task fails
without retry naming the prefix, what it waited for and the deadline; the run's ``runs`` row
records it. A prefix that has held no object at all ends the wait sooner, at ``absent_deadline_s``
(event ``absent``), and the task fails naming the prefix and what to check. The task returns (XCom) ``waited_s``: how long it waited, None when the day was
complete already.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import evaluation_airflow as glue
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferralTimeout
from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

if TYPE_CHECKING:
    from evaluation.contract.config import RunConfig
    from evaluation.storage import S3Access

#: Extra time the scheduler gives the trigger past the deadline before it fails the task itself
#: (the trigger reports the deadline first, with its own message).
DEADLINE_GRACE_S = 120.0


@dataclass(frozen=True)
class DayPrefix:
    """The day's prefix under the input root: on S3 (bucket, key prefix) or a directory."""

    uri: str  #: how messages name it
    bucket: str | None  #: None for a directory
    prefix: str  #: S3 key prefix ending in "/", or the directory's path

    @classmethod
    def of(cls, input_uri: str, day: dt.date, layout: str = "hive") -> DayPrefix:
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation import storage

        partition = storage.raw_prefix(day, layout)
        if input_uri.startswith("s3://"):
            bucket, _, root = input_uri.removeprefix("s3://").partition("/")
            prefix = f"{root.strip('/')}/{partition}" if root.strip("/") else partition
            return cls(f"s3://{bucket}/{prefix}", bucket, prefix)
        directory = os.path.join(os.path.abspath(input_uri.removeprefix("file://")), partition)
        return cls(directory, None, directory)


def _day_objects(bucket: str | None, prefix: str, s3: S3Access | None = None) -> dict[str, float]:
    """Objects under the day's prefix and their modification times: full S3 keys (through the
    :class:`~evaluation.storage.S3Access` ``s3``), or a directory's file paths (``.tmp-`` files
    excepted)."""
    # Polars: plugins are imported when DAG files parse, so they stay light
    from evaluation import storage

    if bucket is not None:
        return {info.key: info.modified for info in storage.open_store(f"s3://{bucket}", s3).list(prefix)}
    root, partition = os.path.split(prefix.rstrip("/"))
    return {os.path.join(root, info.key): info.modified for info in storage.LocalStore(root).list(partition + "/")}


def _object_key(bucket: str | None, prefix: str, name: str) -> str:
    """``name`` under the day's prefix, as :func:`_day_objects` names objects."""
    return prefix + name if bucket is not None else os.path.join(prefix, name)


@dataclass(kw_only=True, eq=False, repr=False)
class DayCompleteTrigger(BaseTrigger):
    """Fires once the day is complete (its marker exists, or its prefix has been quiet for
    ``quiet_period_s``), or at ``deadline`` (ISO time) with ``status: deadline``. Every event
    carries ``waited_s``, the seconds since ``started`` (ISO time, when the wait began). With
    ``absent_deadline`` (ISO time), a prefix that has held no object by then fires ``status: absent``.

    ``known`` (objects already seen) and ``last_activity`` (ISO time of the newest) seed the quiet
    period, so the time the day has already been quiet counts."""

    bucket: str | None
    prefix: str
    marker: str
    quiet_period_s: float
    min_objects: int
    started: str
    deadline: str
    poke_interval: float
    known: list[str] = field(default_factory=list)
    last_activity: str | None = None
    aws_conn_id: str | None = None
    absent_deadline: str | None = None

    def __post_init__(self) -> None:
        super().__init__()

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """Class path and every field, as ``__init__`` takes them back."""
        arguments = {f.name: getattr(self, f.name) for f in fields(self)}
        return f"{type(self).__module__}.{type(self).__qualname__}", arguments

    async def _until_complete(self) -> tuple[str, str]:
        """Look at the day's prefix every ``poke_interval`` until it is complete (``success``, and
        how), or still holds nothing at ``absent_deadline`` (``absent``)."""
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation import storage

        s3: storage.S3Access | None = None
        if self.bucket is not None:  # the hook reads the connection: a blocking call, off the event loop
            s3 = await sync_to_async(glue.s3_access)(self.aws_conn_id)
        known = set(self.known)
        last = dt.datetime.fromisoformat(self.last_activity).timestamp() if self.last_activity else time.time()
        absent = None if known or not self.absent_deadline else dt.datetime.fromisoformat(self.absent_deadline)
        while True:
            found = await asyncio.to_thread(_day_objects, self.bucket, self.prefix, s3)
            now = time.time()
            if set(found) != known:  # an object added or removed: the quiet period starts over
                known, last = set(found), now
            absent = None if found else absent  # an object once seen: the day is late, not absent
            if self.marker:
                if (marker := _object_key(self.bucket, self.prefix, self.marker)) in found:
                    return "success", f"{marker} exists"
            elif len(found) >= self.min_objects and now - last >= self.quiet_period_s:
                return "success", f"{len(found)} objects, none added or removed for {now - last:.0f}s"
            if absent is not None and dt.datetime.now(dt.UTC) >= absent:
                return "absent", f"no object under {self.prefix}"
            await asyncio.sleep(self.poke_interval)

    def _payload(self, status: str, message: str | None = None) -> dict[str, Any]:
        waited = (dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(self.started)).total_seconds()
        return {"status": status, "message": message, "waited_s": round(waited, 3), "started": self.started}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation.storage import StorageError

        remaining = (dt.datetime.fromisoformat(self.deadline) - dt.datetime.now(dt.UTC)).total_seconds()
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                result = self._payload(*await self._until_complete())
        except TimeoutError:
            result = self._payload("deadline")
        except StorageError as exc:  # the task reports it, and Airflow retries it
            result = self._payload("error", str(exc))
        yield TriggerEvent(result)


class WaitForDayOperator(BaseOperator):
    """Wait, deferred, until the run's day is complete (see the module); returns ``waited_s``."""

    ui_color = "#e8f4fa"

    def execute(self, context: Context) -> dict[str, Any]:
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation.stages.wait import absent_after, is_complete, min_objects, poke_interval, waiting_for

        cfg = glue.run_config(context)
        day = DayPrefix.of(cfg.input_uri, cfg.date, cfg.input_layout)
        if not cfg.completion_marker and cfg.quiet_period_s <= 0:
            self.log.info("no completion marker and no quiet period: %s is taken as it is", day.uri)
            return {"waited_s": None, "prefix": day.uri, "complete_by": None}
        objects = _day_objects(day.bucket, day.prefix, glue.s3_access() if day.bucket is not None else None)
        marker_key = _object_key(day.bucket, day.prefix, cfg.completion_marker)
        now = time.time()
        newest = max(objects.values(), default=None)
        if is_complete(cfg, objects, marker_key, now if newest is None else newest, now):
            self.log.info("%s is complete: %s", day.uri, waiting_for(cfg))
            return {"waited_s": None, "prefix": day.uri,
                    "complete_by": "marker" if cfg.completion_marker else "quiet_period"}
        started = dt.datetime.now(dt.UTC)
        deadline = started + dt.timedelta(seconds=cfg.wait_deadline_s)
        absent = absent_after(cfg)
        absent_deadline = None if objects or absent is None else started + dt.timedelta(seconds=absent)
        self.log.info("%s is not complete yet: waiting (deferred) for %s until %s", day.uri,
                      waiting_for(cfg), deadline.isoformat())
        if not objects:
            # Polars: plugins are imported when DAG files parse, so they stay light
            from evaluation.stages.ingest import DayInput, missing_input

            self.log.warning("nothing there yet: %s", missing_input(glue.stores(cfg).raw, cfg.date, DayInput.of(cfg)))
            if absent_deadline is not None:
                self.log.warning("the run fails at %s (absent_deadline_s=%g) unless an object appears",
                                 absent_deadline.isoformat(), cfg.absent_deadline_s)
        conn = glue.connection(glue.S3_CONN_ID) if day.bucket is not None else None
        self.defer(
            trigger=DayCompleteTrigger(
                bucket=day.bucket, prefix=day.prefix, marker=cfg.completion_marker,
                quiet_period_s=cfg.quiet_period_s, min_objects=min_objects(cfg), started=started.isoformat(),
                deadline=deadline.isoformat(), poke_interval=poke_interval(cfg.wait_deadline_s, cfg.quiet_period_s),
                known=sorted(objects),
                last_activity=dt.datetime.fromtimestamp(newest, dt.UTC).isoformat() if newest is not None else None,
                aws_conn_id=glue.S3_CONN_ID if conn is not None else None,
                absent_deadline=None if absent_deadline is None else absent_deadline.isoformat(),
            ),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=cfg.wait_deadline_s + DEADLINE_GRACE_S),
        )

    def _deadline_failure(self, context: Context, cfg: RunConfig, waited_s: float, *,
                          absent: bool = False) -> AirflowFailException:
        """The run fails at the deadline (``absent``: the absent deadline), without retry; its
        ``runs`` row says why."""
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation.stages import fail_run, where
        from evaluation.stages.ingest import DayInput, missing_input
        from evaluation.stages.wait import absent_message, incomplete_message

        said = absent_message if absent else incomplete_message
        message = said(where(cfg), DayPrefix.of(cfg.input_uri, cfg.date, cfg.input_layout).uri, cfg, waited_s)
        stores = glue.stores(cfg)
        missing = missing_input(stores.raw, cfg.date, DayInput.of(cfg))  # what the URI holds: a wrong path reads unlike a late day
        message += f"; {missing}" if missing else ""
        try:
            fail_run(cfg, stores, message, started_at=context["dag_run"].start_date, waited_s=waited_s)
        except Exception:  # the message matters more than the row
            self.log.exception("could not record the failed wait in runs")
        return AirflowFailException(message)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        # Polars: plugins are imported when DAG files parse, so they stay light
        from evaluation.stages.wait import waiting_for

        cfg = glue.run_config(context)
        day = DayPrefix.of(cfg.input_uri, cfg.date, cfg.input_layout)
        status, waited = event.get("status"), event.get("waited_s")
        if status in ("deadline", "absent"):
            raise self._deadline_failure(context, cfg, float(waited or cfg.wait_deadline_s), absent=status == "absent")
        if status != "success":
            raise AirflowException(f"waiting for {day.uri} failed: {event.get('message')}")
        self.log.info("%s is complete (%s) after %.1fs", day.uri, waiting_for(cfg), waited)
        return {"waited_s": waited, "prefix": day.uri,
                "complete_by": "marker" if cfg.completion_marker else "quiet_period"}

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """The scheduler's own timeout (the trigger did not report the deadline in time) fails
        the run the same way."""

        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout as exc:
            cfg = glue.run_config(context)
            raise self._deadline_failure(context, cfg, cfg.wait_deadline_s) from exc
