"""End to end: daily_evaluation's notifications and Assets under Airflow (dag.test) on embedded S3.

A real SMTP server and a real HTTP endpoint, both on 127.0.0.1 and started here, receive what the
SMTP provider's hook and the HTTP provider's hook send; the messages are read back and checked.
"""

from __future__ import annotations

import datetime as dt
import email
import json
import re
import socketserver
import threading
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evaluation import storage
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

INPUT_URI = "s3://llm-logs/notify"
OUTPUT_URI = "s3://llm-evaluation/notify"
DAYS = (dt.date(2026, 10, 5), dt.date(2026, 10, 6), dt.date(2026, 10, 7))
DEGRADED_MODEL = "assistant-v2"
RECORDS = 120
BASE_URL = "https://reports.example.org/llm-evaluation"
#: A change line of a regression message: judge, measure, before → after (change vs baseline).
CHANGE = re.compile(r"^  - (?:rag|masis|prompt) [a-z ]+ \S+ → \S+ \((?P<delta>[+\u2212][0-9.]+)(?P<pp> pp)? "
                    r"vs the (?:previous day|trailing 7 days)\)$")


class _SmtpHandler(socketserver.StreamRequestHandler):
    """Just enough of RFC 5321 for smtplib: greeting, EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT."""

    def _reply(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        server: SmtpServer = self.server  # type: ignore[assignment]
        self._reply("220 127.0.0.1 test SMTP")
        sender, recipients = "", []
        while line := self.rfile.readline():
            command = line.decode().strip()
            verb = command[:4].upper()
            if verb in ("EHLO", "HELO"):
                self._reply("250 127.0.0.1")
            elif verb == "MAIL":
                sender, recipients = command.split(":", 1)[1].strip(), []
                self._reply("250 OK")
            elif verb == "RCPT":
                recipients.append(command.split(":", 1)[1].strip().strip("<>"))
                self._reply("250 OK")
            elif verb == "DATA":
                self._reply("354 end with <CRLF>.<CRLF>")
                data = []
                while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                    data.append(chunk[1:] if chunk.startswith(b"..") else chunk)
                server.received.append((sender, recipients, email.message_from_bytes(b"".join(data))))
                self._reply("250 OK queued")
            elif verb in ("RSET", "NOOP"):
                self._reply("250 OK")
            elif verb == "QUIT":
                self._reply("221 bye")
                return
            else:
                self._reply("502 not implemented")


class SmtpServer(socketserver.ThreadingTCPServer):
    """An SMTP server on 127.0.0.1 that keeps every message it receives."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SmtpHandler)
        self.received: list[tuple[str, list[str], Message]] = []


class _WebhookHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((self.path, json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(server: socketserver.BaseServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def channels(monkeypatch) -> Iterator[tuple[SmtpServer, ThreadingHTTPServer]]:
    """A loopback SMTP server and webhook endpoint, and the Connections that point at them."""
    smtp = SmtpServer()
    webhook = ThreadingHTTPServer(("127.0.0.1", 0), _WebhookHandler)
    webhook.received = []  # type: ignore[attr-defined]
    threads = [_serve(smtp), _serve(webhook)]
    monkeypatch.setenv("AIRFLOW_CONN_EVALUATION_SMTP", json.dumps({
        "conn_type": "smtp", "host": "127.0.0.1", "port": smtp.server_address[1],
        "extra": {"from_email": "evaluation@example.org", "to": "platform@example.org, oncall@example.org",
                  "disable_ssl": True, "disable_tls": True, "retry_limit": 0, "timeout": 10},
    }))
    monkeypatch.setenv("AIRFLOW_CONN_EVALUATION_WEBHOOK", json.dumps({
        "conn_type": "http", "host": "127.0.0.1", "port": webhook.server_address[1], "schema": "http",
        "extra": {"endpoint": "/services/T000/B000/secret"},
    }))
    try:
        yield smtp, webhook
    finally:
        for server in (smtp, webhook):
            server.shutdown()
            server.server_close()
        for thread in threads:
            thread.join(timeout=5)


def _degrade(line: str) -> str:
    """The degraded model's answer loses its grounding: a figure and claims no context holds."""
    record = json.loads(line)
    if record["model"] == DEGRADED_MODEL:
        record["answer"] = ("Independent surveys published decades ago reported a remarkably different "
                            "figure of 12 units, which textbooks widely repeat.")
    return json.dumps(record)


def _write_days(s3) -> None:
    raw = storage.open_store(INPUT_URI, s3.access())
    for day in DAYS:
        lines = synthetic.generate_day(day, RECORDS, bad=False)
        if day == DAYS[-1]:
            lines = [_degrade(line) for line in lines]
        raw.write_bytes(f"dt={day.isoformat()}/part-000.jsonl", ("\n".join(lines) + "\n").encode())


def _conf(**extra: Any) -> dict[str, Any]:
    return {"input_uri": INPUT_URI, "output_uri": OUTPUT_URI, "judge_model": "offline/lexical",
            "chunk_size": 200, **extra}


def _body(message: Message) -> str:
    part = next(p for p in message.walk() if p.get_content_type() == "text/html")
    return part.get_payload(decode=True).decode(part.get_content_charset() or "utf-8")


def _asset_events(run_id: str) -> dict[str, dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(AssetModel.name, AssetEvent.extra)
                .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
                .filter(AssetEvent.source_run_id == run_id).all())
        return {name: dict(extra) for name, extra in rows}


def _documented_downstream_dag(folder: Path) -> str:
    """docs/reports.md's downstream DAG, written into ``folder``, parsed and stored (unpaused) in the
    metadata DB as the DAG processor would; returns its dag_id."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    page = (airflow_local.REPO / "docs" / "reports.md").read_text()
    section = page.split("## Notifications and Assets", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    (folder / "quality_dashboard.py").write_text(code)
    bag = DagBag(dag_folder=str(folder))
    assert not bag.import_errors and list(bag.dags) == ["quality_dashboard"]
    DagBundlesManager().sync_bundles_to_db()
    sync_bag_to_db(bag, "dags-folder", None)
    with create_session() as session:
        session.query(DagModel).filter(DagModel.dag_id == "quality_dashboard").update({"is_paused": False})
    return "quality_dashboard"


def _queued_for(dag_id: str, *, clear: bool = False) -> set[str]:
    """The assets whose events queue a run of ``dag_id`` (the scheduler's asset-triggered queue);
    ``clear`` empties the queue afterwards, as the scheduler does when it starts the run."""
    from airflow.models.asset import AssetDagRunQueue, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(AssetModel.name).join(AssetDagRunQueue, AssetModel.id == AssetDagRunQueue.asset_id)
                .filter(AssetDagRunQueue.target_dag_id == dag_id).all())
        if clear:
            session.query(AssetDagRunQueue).filter(AssetDagRunQueue.target_dag_id == dag_id).delete()
        return {name for (name,) in rows}


def _start_asset_triggered_run(dag_id: str) -> dict[str, list[dict[str, Any]]]:
    """What the scheduler does with the queue: create the asset-triggered run of ``dag_id``;
    returns the asset events it consumed, by asset name."""
    from airflow.jobs.job import Job
    from airflow.jobs.scheduler_job_runner import SchedulerJobRunner
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        dag_model = session.query(DagModel).filter(DagModel.dag_id == dag_id).one()
        SchedulerJobRunner(job=Job())._create_dag_runs_asset_triggered(dag_models=[dag_model], session=session)
        session.flush()
        run = session.query(DagRun).filter(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).first()
        assert run is not None and str(run.run_type) in ("asset_triggered", "DagRunType.ASSET_TRIGGERED"), run
        consumed: dict[str, list[dict[str, Any]]] = {}
        for event in run.consumed_asset_events:
            consumed.setdefault(event.asset.name, []).append(dict(event.extra))
        return consumed


def test_only_the_regression_day_reaches_email_and_webhook_and_assets_are_emitted(
        airflow_db, local_s3, channels, tmp_path, monkeypatch) -> None:
    smtp, webhook = channels
    monkeypatch.setenv("EVALUATION_REPORT_BASE_URL", BASE_URL)
    _write_days(local_s3)
    downstream = _documented_downstream_dag(tmp_path)
    _queued_for(downstream, clear=True)
    for day in DAYS:
        dag_run = airflow_local.run_dag("daily_evaluation", day, _conf())
        assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
        # both assets the documented DAG schedules on had an event: the scheduler starts a run of it
        # that consumes the day's events
        assert _queued_for(downstream) == {"llm_evaluation.evaluations", "llm_evaluation.daily_summary"}
        consumed = _start_asset_triggered_run(downstream)
        assert set(consumed) == {"llm_evaluation.evaluations", "llm_evaluation.daily_summary"}
        for name, extras in consumed.items():
            assert {"dt": day.isoformat(), "run_id": dag_run.run_id, "uri": f"{OUTPUT_URI}/{name.split('.')[1]}/"} in extras
        assert _queued_for(downstream) == set()

        events = _asset_events(dag_run.run_id)
        assert set(events) == {f"llm_evaluation.{t}" for t in storage.TABLES}
        for name, extra in events.items():
            table = name.rsplit(".", 1)[1]
            assert extra == {"dt": day.isoformat(), "run_id": dag_run.run_id, "uri": f"{OUTPUT_URI}/{table}/"}

        if day < DAYS[-1]:  # a steady day: no model regressed, nothing is sent
            assert smtp.received == [] and webhook.received == [], (day, smtp.received, webhook.received)

    day = DAYS[-1].isoformat()
    link = f"{BASE_URL}/reports/dt={day}/index.html"
    assert len(smtp.received) == 1 and len(webhook.received) == 1
    sender, recipients, message = smtp.received[0]
    assert recipients == ["platform@example.org", "oncall@example.org"]
    # the subject names the regressed model alone
    assert message["Subject"] == f"LLM evaluation {day}: {DEGRADED_MODEL} regressed"
    path, payload = webhook.received[0]
    assert path == "/services/T000/B000/secret"
    text = payload["text"]
    assert text.startswith(f"*{message['Subject']}*\n")
    for body in (_body(message), text):
        assert len(body) <= 2000 and body.count(link) == 1 and OUTPUT_URI not in body
        assert all(model not in body for model in synthetic.MODELS if model != DEGRADED_MODEL)
        changes = [CHANGE.match(line) for line in body.splitlines() if line.startswith("  - ") and " → " in line]
        assert 1 <= len(changes) <= 3 and all(changes), body
        # the first listed change is the largest: the planted drop, well over 20 points (or 0.2)
        first = changes[0]
        assert first is not None
        size = abs(float(first["delta"].replace("\u2212", "-")))
        assert size >= (20 if first["pp"] else 0.2), first.group(0)


def test_a_failed_run_sends_a_failure_message(airflow_db, local_s3, channels) -> None:
    day = dt.date(2026, 10, 12)  # no logs landed for this day: check_run fails the run before the judge's probe
    dag_run = airflow_local.run_dag("daily_evaluation", day, _conf())
    assert str(dag_run.state) == "failed"
    assert _asset_events(dag_run.run_id) == {}

    smtp, webhook = channels
    assert len(smtp.received) == 1 and len(webhook.received) == 1
    message = smtp.received[0][2]
    assert message["Subject"] == f"LLM evaluation {day}: run {dag_run.run_id} of daily_evaluation failed"
    text = webhook.received[0][1]["text"]
    for body in (_body(message), text):
        assert f"day {day} | DAG daily_evaluation | run {dag_run.run_id} | failed task check_run" in body
        assert f"Cause: run {dag_run.run_id} of {day}: no input objects: {INPUT_URI}/dt={day}/ does not exist" in body
        assert "reason task_failure" in body
        assert f"Report (last landed): {OUTPUT_URI}/reports/dt={day}/index.html" in body
