"""Notifications of the daily evaluation through Airflow notifiers, and the Assets it lands.

Two channels, each configured by a Connection (``evaluation_smtp``, ``evaluation_webhook``) and off
when that Connection does not exist. What each Connection needs, what a message holds and where its
link points: docs/reports.md, "Notifications and Assets".

:class:`RegressionNotifier` sends a message only on a day when a model's headline line pages
(:func:`regression_message` says what it holds). :class:`RunFailureNotifier` is the DAG's
``on_failure_callback``. Every message stays within :data:`MAX_MESSAGE_CHARS`. A channel that cannot
deliver is logged, never raised: a notification must not fail, or re-run, the evaluation.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, Context
from airflow.sdk.bases.notifier import BaseNotifier
from evaluation_airflow import connection, evaluation_day, run_config, stores

if TYPE_CHECKING:
    import jinja2

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


def send_email(message: Message) -> bool:
    """Send through the SMTP provider's hook; False (and nothing sent) without the connection."""
    conn = connection(SMTP_CONN_ID)
    if conn is None:
        return False
    to = _recipients((conn.extra_dejson or {}).get("to"))
    if not to:
        logger.warning("connection %s has no extra.to: no e-mail sent", SMTP_CONN_ID)
        return False
    # smtp provider: only when a mail is sent, not when DAG files parse
    from airflow.providers.smtp.hooks.smtp import SmtpHook

    body = f"<pre>{html.escape(message.body, quote=False)}</pre>"
    with SmtpHook(smtp_conn_id=SMTP_CONN_ID) as hook:
        hook.send_email_smtp(to=to, subject=message.subject, html_content=body)
    logger.info("e-mail %r sent to %d recipient(s) through %s", message.subject, len(to), SMTP_CONN_ID)
    return True


def send_webhook(message: Message) -> bool:
    """Post ``{"text": ...}`` to a Slack-compatible incoming webhook; False without the connection."""
    conn = connection(WEBHOOK_CONN_ID)
    if conn is None:
        return False
    # http provider: only when a webhook is called, not when DAG files parse
    from airflow.providers.http.hooks.http import HttpHook

    endpoint = (conn.extra_dejson or {}).get("endpoint")
    hook = HttpHook(method="POST", http_conn_id=WEBHOOK_CONN_ID)
    hook.run(endpoint=endpoint, json={"text": f"*{message.subject}*\n{message.body}"},
             headers={"Content-Type": "application/json"}, extra_options={"timeout": 30})
    logger.info("webhook message %r posted through %s", message.subject, WEBHOOK_CONN_ID)
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


#: The longest message (subject and body) a notification sends: a person reads it on a phone.
MAX_MESSAGE_CHARS = 2000
#: The changes listed per regressed model (its largest, by absolute change).
MAX_CHANGES = 3
#: A model name longer than this is cut in a message (names come from the logs).
MAX_NAME_CHARS = 80
#: A model name longer than this is cut in a subject (which names at most three).
MAX_SUBJECT_NAME_CHARS = 40
#: The reason of a failed run is cut to this many characters.
MAX_REASON_CHARS = 400
#: The environment variable with the HTTPS address the output root's reports are served under.
REPORT_BASE_URL_ENV = "EVALUATION_REPORT_BASE_URL"

_MINUS = "\u2212"
_BASELINES = {"previous": "the previous day", "trailing_7d": "the trailing 7 days",
              "before_regression": "its level before the regression"}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def report_base_url() -> str | None:
    """The HTTPS address the reports are served under (``EVALUATION_REPORT_BASE_URL``), or None
    when it is unset; an address that is not ``https://`` is ignored with a warning."""
    base = os.environ.get(REPORT_BASE_URL_ENV, "").strip()
    if not base:
        return None
    if not base.lower().startswith("https://"):
        logger.warning("%s=%r is not an https:// address: notifications link the report's URI instead",
                       REPORT_BASE_URL_ENV, base)
        return None
    return base.rstrip("/")


def report_link(day: str, report_uri: str, base_url: str | None) -> str:
    """The one link a message gives: ``{base_url}/reports/dt=D/index.html`` (the report's key under
    the output root, served over HTTPS) when a base URL is configured, else the report's URI."""
    if not base_url:
        return report_uri
    # evaluation.storage imports Polars: only this path needs it, not the parsing of the DAG file
    from evaluation.storage import report_key

    return f"{base_url}/{report_key(dt.date.fromisoformat(day), 'index.html')}"


def _value(measure: str, value: float | None, *, change: bool = False) -> str:
    """A value of ``measure`` (``change``: a signed difference): a rate in % (pp), a mean to 3 places."""
    if value is None:
        return "n/a"
    sign = "+" if change else ""
    text = f"{value * 100:{sign}.1f}{' pp' if change else '%'}" if measure.endswith("_rate") else f"{value:{sign}.3f}"
    return text.replace("-", _MINUS)


def change_line(change: dict[str, Any]) -> str:
    """One change of the headline: ``rag pass rate 85.0% → 34.4% (−50.6 pp vs the trailing 7 days)``."""
    measure = str(change["measure"])
    name = measure.rsplit("_", 1)[0].replace("_", " ") + (" rate" if measure.endswith("_rate") else "")
    against = _BASELINES.get(str(change.get("baseline")), str(change.get("baseline") or "the baseline"))
    return (f"{change['judge']} {name} {_value(measure, change.get('before'))} → {_value(measure, change.get('after'))} "
            f"({_value(measure, change.get('delta'), change=True)} vs {against})")


def largest_changes(changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The :data:`MAX_CHANGES` changes with the largest absolute change (rates and means are both on 0–1)."""
    return sorted(changes, key=lambda c: -abs(c.get("delta") or 0.0))[:MAX_CHANGES]


def _fit(subject: str, lines: list[str], tail: list[str]) -> Message:
    """A message of ``subject``, as many of ``lines`` as fit, then ``tail`` (kept whole), within
    :data:`MAX_MESSAGE_CHARS` for subject and body together."""
    subject = _cut(subject, 200)
    marker = "… (cut: the report has the rest)"
    budget = MAX_MESSAGE_CHARS - len(subject) - 1 - sum(len(line) + 1 for line in tail) - len(marker) - 1
    kept: list[str] = []
    for line in lines:
        if len(line) + 1 > budget:
            kept.append(marker)
            break
        kept.append(line)
        budget -= len(line) + 1
    return Message(subject, "\n".join(kept + tail))


def regression_message(summary: dict[str, Any], report_uri: str, base_url: str | None = None) -> Message | None:
    """The message of a day on which a model's headline line pages (``summary.json``'s
    ``headline``: newly regressed, or worse than when it last paged; a line without ``pages``
    pages when regressed), or a model regressed in a segment (``segments.headline``, whose lines
    page as a model's do) while not regressed as a whole; None otherwise: a steady or improved day,
    or one whose regressions were all paged before, sends nothing.

    The subject names the paging models only; the body gives each one's largest changes (before →
    after, against which baseline), each segment that regressed with its changes, names the models
    still regressed since an earlier page, and one link to the report (a served one at its section
    of the regressed models' failing records)."""
    day = str(summary["dt"])
    lines_of_day = summary.get("headline")
    if lines_of_day is None:
        logger.warning("the summary of %s has no headline: no notification sent", day)
        return None
    regressed = [line for line in lines_of_day if line.get("status") == "regressed"]
    in_segments = (summary.get("segments") or {}).get("headline") or []
    paging = [line for line in regressed if line.get("pages", True)]
    models = [str(line["model"]) for line in paging]
    models += sorted({str(line["model"]) for line in in_segments if line.get("pages", True)}
                     - {str(line["model"]) for line in regressed})
    if not models:  # nothing new: a regression already paged stays on the report until it recovers
        return None
    names = [_cut(model, MAX_SUBJECT_NAME_CHARS) for model in models]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    subject = f"LLM evaluation {day}: {shown} regressed"
    still = len(regressed) - len(paging)
    others = len(lines_of_day) - len(models) - still
    lines = [f"{len(models)} of {len(lines_of_day)} model(s) regressed on {day}"
             + (f"; {still} still regressed, paged before" if still else "")
             + (f"; the other {others} are not regressed." if others else "."), ""]
    for line in regressed:
        changes = line.get("changes") or []
        state = f" {line['text']}" if line.get("text") else ""
        lines.append(f"{_cut(str(line['model']), MAX_NAME_CHARS)}:{state}"
                     + ("" if line.get("pages", True) else " (paged before; not again today)"))
        if not line.get("pages", True):
            continue
        lines += [f"  - {change_line(c)}" for c in largest_changes(changes)]
        if len(changes) > MAX_CHANGES:
            lines.append(f"  - and {len(changes) - MAX_CHANGES} more change(s) in the report")
    for line in in_segments:  # a regression confined to one segment of a model's traffic
        segment, changes = line["segment"], line.get("changes") or []
        where = f"{str(segment['key']).removeprefix('metadata.')}={segment['value']}"
        state = "" if line.get("day") in (None, 1) else f" still regressed since {line['since']} (day {line['day']})"
        lines.append(f"{_cut(str(line['model']), MAX_NAME_CHARS)} in {_cut(where, MAX_NAME_CHARS)}:{state}"
                     + ("" if line.get("pages", True) else " (paged before; not again today)"))
        if line.get("pages", True):
            lines += [f"  - {change_line(c)}" for c in largest_changes(changes)]
    link = report_link(day, report_uri, base_url)
    if link.startswith("https://"):  # a served page opens at the regressed models' failing records
        link += "#evidence"  # the section evaluation.report.evidence_page writes
    return _fit(subject, lines, ["", f"Report: {link}"])


def failure_message(*, dag_id: str, run_id: str, day: str, task_id: str | None, reason: str | None,
                    report_url: str | None = None, run_row: dict[str, Any] | None = None) -> Message:
    """The message of a failed run; ``report_url`` the day's report link (the last landed one);
    ``run_row`` (its ``runs`` row, when it landed one) adds the cause and the rejects by reason."""
    lines = [f"day {day} | DAG {dag_id} | run {run_id} | failed task {task_id or 'unknown'} | "
             f"reason {_cut(reason, MAX_REASON_CHARS) if reason else 'unknown'}",
             "The day's tables and report were left as they were; the run's evidence is under _failed/ "
             "and its row in the runs table gives the cause."]
    if run_row and run_row.get("message"):
        cause = str(run_row["message"]).split("; rejects by reason: ")[0]  # the reasons follow, one a line
        lines.append(f"Cause: {_cut(cause, MAX_REASON_CHARS)}")
    for item in json.loads((run_row or {}).get("reject_reasons") or "[]"):
        lines.append(f"  rejected {item['count']}: {item['reason']} (e.g. {', '.join(item['examples'])})")
    tail = [f"Report (last landed): {report_url}"] if report_url else []
    return _fit(f"LLM evaluation {day}: run {run_id} of {dag_id} failed", lines, tail)


class _UntemplatedNotifier(BaseNotifier):
    """A notifier with no template fields: nothing to render. (``dag.test()`` hands DAG callbacks a
    serialized DAG, which has no Jinja environment to render with.)"""

    template_fields: Sequence[str] = ()

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        return None


class RegressionNotifier(_UntemplatedNotifier):
    """Sends the day's regressions (``summary``: the report's ``summary.json`` content,
    ``report_uri``: the page's URI) on every configured channel, and nothing on a day without one."""

    def __init__(self, summary: dict[str, Any], report_uri: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary = summary
        self.report_uri = report_uri

    def notify(self, context: Context) -> None:
        message = regression_message(self.summary, self.report_uri, report_base_url())
        if message is None:
            logger.info("no model regressed on %s: nothing to send", self.summary.get("dt"))
            return
        deliver(message)


class RunFailureNotifier(_UntemplatedNotifier):
    """The DAG's ``on_failure_callback``: the day, the run, the failed task and the reason."""

    def notify(self, context: Context) -> None:
        dag_run = context.get("dag_run")
        ti = context.get("ti") or context.get("task_instance")
        try:
            day = evaluation_day(context).isoformat()
        except Exception:  # a callback must say what it can, whatever the context lacks
            day = "unknown"
        dag = context.get("dag")
        output_uri = str((context.get("params") or {}).get("output_uri") or os.environ.get("EVALUATION_OUTPUT_URI", ""))
        report_url = None
        if output_uri and day != "unknown":
            # evaluation.storage imports Polars: only this path needs it, not the parsing of the DAG file
            from evaluation.storage import report_key

            uri = f"{output_uri.rstrip('/')}/{report_key(dt.date.fromisoformat(day), 'index.html')}"
            report_url = report_link(day, uri, report_base_url())
        message = failure_message(
            dag_id=str(getattr(dag, "dag_id", None) or getattr(dag_run, "dag_id", "unknown")),
            run_id=getattr(dag_run, "run_id", None) or str(context.get("run_id")),
            day=day,
            task_id=getattr(ti, "task_id", None),
            reason=str(context.get("reason")) if context.get("reason") else None,
            report_url=report_url,
            run_row=_run_row(context),
        )
        deliver(message)


def _run_row(context: Context) -> dict[str, Any] | None:
    """The failed run's ``runs`` row, when it landed one (None when it cannot be read)."""
    from evaluation import storage  # Polars: only when a run has failed, not when the DAG file is parsed

    try:
        cfg = run_config(context)
        store = stores(cfg).out
        key = storage.run_key(cfg.date, cfg.run_id)
        return storage.read_parquet(store, key).row(0, named=True) if store.exists(key) else None
    except Exception:  # a callback must say what it can, whatever the context lacks
        logger.warning("the failed run's runs row could not be read", exc_info=True)
        return None
