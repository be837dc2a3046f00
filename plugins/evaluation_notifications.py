"""Notifications of the daily evaluation through Airflow notifiers, and the Assets it lands.

Two channels, each configured by a Connection and off when that Connection does not exist:

* ``evaluation_smtp`` (conn type ``smtp``, read by the SMTP provider's hook): host, port, login,
  password; ``extra.from_email`` the sender, ``extra.to`` the recipients (a list or a comma
  separated string), ``extra.disable_ssl`` / ``extra.disable_tls`` as the provider reads them.
* ``evaluation_webhook`` (conn type ``http``): a Slack-compatible incoming webhook. ``host`` is
  the whole URL (``https://hooks.slack.com/services/...``), or host, port and ``schema`` with
  ``extra.endpoint`` the path. The message is posted as ``{"text": ...}``.

:class:`QualityFlagNotifier` sends the daily report's quality flags (one message per day listing
every flag: day, model, judge, metric, the change against its baseline and the report's link);
:class:`RunFailureNotifier` is the DAG's ``on_failure_callback``. A channel that cannot deliver is
logged, never raised: a notification must not fail, or re-run, the evaluation.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Asset
from airflow.sdk.bases.notifier import BaseNotifier
from evaluation_airflow import connection, evaluation_day

logger = logging.getLogger(__name__)

SMTP_CONN_ID = os.environ.get("EVALUATION_SMTP_CONN_ID", "evaluation_smtp")
WEBHOOK_CONN_ID = os.environ.get("EVALUATION_WEBHOOK_CONN_ID", "evaluation_webhook")

#: The tables a successful landing replaces for the day, one Asset each (CONTRACT §3).
LANDED_TABLES = ("evaluations", "judge_calls", "rejects", "daily_summary", "runs")
#: What a downstream DAG schedules on (``schedule=[...]``). Named, not addressed: the output root
#: is a run option, and a URI scheme would load every provider's URI handlers (boto3 among them)
#: when the DAG file is parsed.
LANDED_ASSETS = tuple(Asset(name=f"llm_evaluation.{table}", group="llm_evaluation") for table in LANDED_TABLES)


@dataclass(frozen=True)
class Message:
    """One notification: a subject line and a plain-text body."""

    subject: str
    body: str


def _recipients(value: Any) -> list[str]:
    if isinstance(value, str):
        return [a.strip() for a in value.split(",") if a.strip()]
    return [str(a) for a in value or []]


def send_email(message: Message, conn_id: str = SMTP_CONN_ID) -> bool:
    """Send through the SMTP provider's hook; False (and nothing sent) without the connection."""
    conn = connection(conn_id)
    if conn is None:
        return False
    to = _recipients((conn.extra_dejson or {}).get("to"))
    if not to:
        logger.warning("connection %s has no extra.to: no e-mail sent", conn_id)
        return False
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    html = "<pre>" + message.body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") + "</pre>"
    with SmtpHook(smtp_conn_id=conn_id) as hook:
        hook.send_email_smtp(to=to, subject=message.subject, html_content=html)
    logger.info("e-mail %r sent to %d recipient(s) through %s", message.subject, len(to), conn_id)
    return True


def send_webhook(message: Message, conn_id: str = WEBHOOK_CONN_ID) -> bool:
    """Post ``{"text": ...}`` to a Slack-compatible incoming webhook; False without the connection."""
    conn = connection(conn_id)
    if conn is None:
        return False
    from airflow.providers.http.hooks.http import HttpHook

    endpoint = (conn.extra_dejson or {}).get("endpoint")
    hook = HttpHook(method="POST", http_conn_id=conn_id)
    hook.run(endpoint=endpoint, json={"text": f"*{message.subject}*\n{message.body}"},
             headers={"Content-Type": "application/json"}, extra_options={"timeout": 30})
    logger.info("webhook message %r posted through %s", message.subject, conn_id)
    return True


def deliver(message: Message) -> list[str]:
    """Send on every configured channel; returns the channels that delivered."""
    delivered = []
    for channel, send in (("email", send_email), ("webhook", send_webhook)):
        try:
            if send(message):
                delivered.append(channel)
        except Exception:
            logger.exception("the %s notification %r could not be delivered", channel, message.subject)
    return delivered


def _number(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def flag_line(day: str, flag: dict[str, Any], report_url: str) -> str:
    """One flag as a line: day, model, judge, metric, the change and its baseline, the report."""
    delta = flag.get("delta")
    change = "n/a" if delta is None else f"{delta:+.3f}"
    baseline = "the trailing 7 days" if flag.get("baseline") == "trailing_7d" else f"{flag.get('baseline_dt')}"
    return (f"day {day} | model {flag['model']} | judge {flag['judge']} | metric {flag['measure']} | "
            f"change {change} ({_number(flag.get('baseline_value'))} on {baseline} -> {_number(flag.get('value'))}, "
            f"95% interval {_number(flag.get('ci_low'))}-{_number(flag.get('ci_high'))}; {flag.get('assessment')}) | "
            f"report {report_url}")


def flags_message(summary: dict[str, Any], report_url: str) -> Message | None:
    """The message of a day's quality flags (``summary.json``'s ``flags``); None without any."""
    flags = summary.get("flags") or []
    if not flags:
        return None
    day = str(summary["dt"])
    worse = sorted({f["model"] for f in flags if f.get("assessment") == "worse"})
    models = worse or sorted({f["model"] for f in flags})
    subject = (f"LLM evaluation {day}: {len(flags)} quality flag{'s' if len(flags) > 1 else ''}"
               f" ({'worse' if worse else 'changed'}: {', '.join(models)})")
    lines = [f"The daily report of {day} flags {len(flags)} measure(s) whose baseline lies outside "
             f"the day's 95% interval.", ""]
    lines += [flag_line(day, f, report_url) for f in flags]
    lines += ["", f"Report: {report_url}"]
    return Message(subject, "\n".join(lines))


def failure_message(*, dag_id: str, run_id: str, day: str, task_id: str | None, reason: str | None,
                    report_url: str | None = None) -> Message:
    """The message of a failed run."""
    lines = [f"day {day} | DAG {dag_id} | run {run_id} | failed task {task_id or 'unknown'} | reason {reason or 'unknown'}",
             "The day's tables and report were left as they were; the run's evidence is under _failed/ "
             "and its row in the runs table gives the cause."]
    if report_url:
        lines.append(f"Report (last landed): {report_url}")
    return Message(f"LLM evaluation {day}: run {run_id} of {dag_id} failed", "\n".join(lines))


class _UntemplatedNotifier(BaseNotifier):
    """A notifier with no template fields: nothing to render. (``dag.test()`` hands DAG callbacks a
    serialized DAG, which has no Jinja environment to render with.)"""

    template_fields: Sequence[str] = ()

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        return None


class QualityFlagNotifier(_UntemplatedNotifier):
    """Sends the daily report's quality flags on every configured channel.

    ``summary`` is the report's ``summary.json`` content, ``report_url`` the page's address."""

    def __init__(self, summary: dict[str, Any], report_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary = summary
        self.report_url = report_url

    def notify(self, context: Any) -> None:
        message = flags_message(self.summary, self.report_url)
        if message is None:
            logger.info("no quality flag on %s: nothing to send", self.summary.get("dt"))
            return
        deliver(message)


class RunFailureNotifier(_UntemplatedNotifier):
    """The DAG's ``on_failure_callback``: the day, the run, the failed task and the reason."""

    def notify(self, context: Any) -> None:
        dag_run = context.get("dag_run")
        ti = context.get("ti") or context.get("task_instance")
        try:
            day = evaluation_day(context).isoformat()
        except Exception:  # a callback must say what it can, whatever the context lacks
            day = "unknown"
        dag = context.get("dag")
        output_uri = str((context.get("params") or {}).get("output_uri") or os.environ.get("EVALUATION_OUTPUT_URI", ""))
        report_url = f"{output_uri.rstrip('/')}/reports/dt={day}/index.html" if output_uri and day != "unknown" else None
        message = failure_message(
            dag_id=getattr(dag, "dag_id", None) or getattr(dag_run, "dag_id", "unknown"),
            run_id=getattr(dag_run, "run_id", None) or str(context.get("run_id")),
            day=day,
            task_id=getattr(ti, "task_id", None),
            reason=str(context.get("reason")) if context.get("reason") else None,
            report_url=report_url,
        )
        deliver(message)
