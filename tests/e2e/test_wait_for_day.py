"""daily_evaluation waits for a complete day (completion marker or quiet period) before ingesting:
under Airflow (dag.test runs the deferred wait's trigger inline) against an S3 API on loopback and
a directory; and a day that gains objects after it landed pays, on its re-run, only for the new
records."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pytest
from evaluation_wait import DEADLINE_GRACE_S

from evaluation import storage
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

INPUT_URI = "s3://llm-logs/wait"
RECORDS = 30
MARKER = "_SUCCESS"
QUIET_S = 5


def _run(day: dt.date, conf: dict[str, Any]) -> Any:
    return airflow_local.run_dag("daily_evaluation", day, {"judge_model": "offline/lexical", "chunk_size": 100, **conf})


def _runs(store: storage.Store, day: dt.date) -> pl.DataFrame:
    return storage.scan_table(store, "runs").filter(pl.col("dt") == day).collect()  # type: ignore[union-attr]


def _deferred() -> bool:
    """The running DagRun's wait_for_day has deferred (its trigger runs)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(TaskInstance).filter(
            TaskInstance.dag_id == "daily_evaluation", TaskInstance.task_id == "wait_for_day",
            TaskInstance.next_method.isnot(None), TaskInstance.state.notin_(["success", "failed"]),
        ).count() > 0


@pytest.fixture
def once_waiting() -> Iterator[Callable[..., None]]:
    """``once_waiting(action, when)``: in a thread, once ``when()`` holds (wait_for_day deferred),
    do ``action`` (write under the day's prefix)."""
    threads: list[threading.Thread] = []

    def start(action: Callable[[], None], when: Callable[[], bool]) -> None:
        def later() -> None:
            deadline = time.monotonic() + 120  # a hang guard, not a timing bound
            while time.monotonic() < deadline and not when():
                time.sleep(0.2)
            action()

        thread = threading.Thread(target=later, daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    for thread in threads:
        thread.join(timeout=130)


class _HeldClock:
    """The wait's wall clock (``evaluation_wait.time``) standing still until :meth:`release`, the
    machine's after: no quiet period can pass before the test has written the late object,
    whatever the machine's load."""

    def __init__(self) -> None:
        self.at: float | None = time.time()

    def time(self) -> float:
        return time.time() if self.at is None else self.at

    def release(self) -> None:
        self.at = None


@pytest.fixture
def held_clock(monkeypatch: pytest.MonkeyPatch) -> _HeldClock:
    """The wait's clock, held (dag.test runs the operator and its trigger in this process)."""
    import evaluation_wait

    clock = _HeldClock()
    monkeypatch.setattr(evaluation_wait, "time", clock)
    return clock


def test_an_incomplete_day_waits_for_its_marker_then_lands(airflow_db, local_s3, once_waiting) -> None:
    day = dt.date(2026, 10, 1)
    output_uri = "s3://llm-evaluation/wait-marker"
    raw = storage.open_store(INPUT_URI, local_s3.access())
    synthetic.write_day(raw, day, RECORDS, bad=False)
    once_waiting(lambda: raw.write_bytes(f"{storage.raw_prefix(day)}{MARKER}", b""), _deferred)
    conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "completion_marker": MARKER, "wait_deadline_s": 90}

    started = time.monotonic()
    dag_run = _run(day, conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    waited = airflow_local.xcom(dag_run, "wait_for_day")
    assert waited["complete_by"] == "marker" and waited["prefix"] == f"{INPUT_URI}/dt={day}/"
    assert 0 < waited["waited_s"] < time.monotonic() - started  # the marker came after the wait deferred
    out = storage.open_store(output_uri, local_s3.access())
    run = _runs(out, day).row(0, named=True)
    assert run["status"] == "success" and run["valid_records"] == RECORDS
    assert run["waited_s"] == pytest.approx(waited["waited_s"])
    assert json.loads(run["config"])["completion_marker"] == MARKER

    # The marker is there now: a re-run does not wait, and its row says so (null).
    again = _run(day, conf)
    assert str(again.state) == "success"
    assert airflow_local.xcom(again, "wait_for_day")["waited_s"] is None
    assert _runs(out, day).filter(pl.col("run_id") == again.run_id)["waited_s"].to_list() == [None]


def test_a_day_without_its_marker_fails_at_the_deadline(airflow_db, local_s3, capfd) -> None:
    day = dt.date(2026, 10, 2)
    output_uri = "s3://llm-evaluation/wait-deadline"
    synthetic.write_day(storage.open_store(INPUT_URI, local_s3.access()), day, RECORDS, bad=False)
    capfd.readouterr()
    dag_run = _run(day, {"input_uri": INPUT_URI, "output_uri": output_uri, "completion_marker": MARKER,
                         "wait_deadline_s": 2})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed"
    assert states["check_run"] == "success" and states["wait_for_day"] == "failed", states  # not up_for_retry
    assert states["ingest_validate"] == "upstream_failed" and not any(t.startswith("judge") for t in states
                                                                        if states[t] == "success")
    message = "".join(capfd.readouterr())
    prefix = f"{INPUT_URI}/dt={day}/"
    expected = (f"{prefix} was not complete after 2s: waited for completion marker '{MARKER}' until the deadline "
                "(wait_deadline_s=2)")
    assert expected in message
    out = storage.open_store(output_uri, local_s3.access())
    run = _runs(out, day).row(0, named=True)
    assert run["status"] == "failed" and expected in run["message"]
    # the trigger's own deadline ended the wait, not the scheduler's timeout (DEADLINE_GRACE_S later)
    assert 2 <= run["waited_s"] < 2 + DEADLINE_GRACE_S
    assert storage.landed_key(out, "evaluations", day) is None  # nothing landed


def test_a_misspelt_input_says_so_at_the_deadline(airflow_db, local_s3, capfd) -> None:
    day = dt.date(2026, 10, 3)
    output_uri = "s3://llm-evaluation/wait-misspelt"
    misspelt = "s3://llm-logs/no-such-root"
    capfd.readouterr()
    dag_run = _run(day, {"input_uri": misspelt, "output_uri": output_uri, "completion_marker": MARKER,
                         "wait_deadline_s": 2})
    assert str(dag_run.state) == "failed"
    finding = (f"no input objects: {misspelt}/dt={day}/ does not exist, nor do the 7 days before it under "
               f"{misspelt}/ (is the input URI right? input_layout hive reads dt=2026-10-03/)")
    logged = "".join(capfd.readouterr())
    assert f"nothing there yet: {finding}" in logged  # said when the wait starts, not only at its end
    run = _runs(storage.open_store(output_uri, local_s3.access()), day).row(0, named=True)
    assert run["status"] == "failed" and run["message"].endswith(finding)


def _late_object(day: dt.date, count: int, tag: str) -> bytes:
    """``count`` new valid records of the day, each with its own prompt and every judge applicable."""
    lines = []
    for i, line in enumerate(synthetic.generate_day(day, count, seed=99, bad=False)):
        record = json.loads(line)
        record.update(record_id=f"{tag}-{i:04d}", answer=f"{record['answer']} [{tag} {i}]",
                      expected_outcome=record.get("expected_outcome") or "The answer states the fact asked for.")
        lines.append(json.dumps(record))
    return gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)


def _arriving(raw: storage.Store, day: dt.date, late: int, clock: _HeldClock) -> Callable[[], None]:
    """A late object with ``late`` more records, written while the run waits (deferred, having
    seen the day's first objects); then the held clock moves past the quiet period."""
    def write() -> None:
        raw.write_bytes(f"{storage.raw_prefix(day)}part-late.jsonl.gz", _late_object(day, late, "late"))
        clock.release()
    return write


def test_the_quiet_period_waits_out_a_late_object_then_lands_it(airflow_db, local_s3, once_waiting,
                                                               held_clock) -> None:
    day = dt.date(2026, 10, 3)
    output_uri = "s3://llm-evaluation/wait-quiet"
    raw = storage.open_store(INPUT_URI, local_s3.access())
    late = 6
    synthetic.write_day(raw, day, RECORDS, bad=False)
    once_waiting(_arriving(raw, day, late, held_clock), _deferred)
    dag_run = _run(day, {"input_uri": INPUT_URI, "output_uri": output_uri, "quiet_period_s": QUIET_S,
                         "wait_deadline_s": 90})
    assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
    waited = airflow_local.xcom(dag_run, "wait_for_day")
    assert waited["complete_by"] == "quiet_period" and waited["waited_s"] > 0
    run = _runs(storage.open_store(output_uri, local_s3.access()), day).row(0, named=True)
    assert run["valid_records"] == RECORDS + late  # the object that came during the wait is in
    assert run["waited_s"] == pytest.approx(waited["waited_s"])


def test_a_directory_input_waits_for_its_marker(airflow_db, tmp_path, once_waiting) -> None:
    day = dt.date(2026, 10, 4)
    raw = storage.open_store(str(tmp_path / "raw"))
    synthetic.write_day(raw, day, RECORDS, bad=False)
    once_waiting(lambda: raw.write_bytes(f"{storage.raw_prefix(day)}{MARKER}", b""), _deferred)
    output_uri = str(tmp_path / "out")
    dag_run = _run(day, {"input_uri": str(tmp_path / "raw"), "output_uri": output_uri, "completion_marker": MARKER,
                         "wait_deadline_s": 90})
    assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
    waited = airflow_local.xcom(dag_run, "wait_for_day")
    assert waited["complete_by"] == "marker" and waited["waited_s"] > 0
    assert _runs(storage.open_store(output_uri), day)["waited_s"].to_list() == [pytest.approx(waited["waited_s"])]


def test_a_directory_input_waits_out_its_quiet_period(airflow_db, tmp_path, once_waiting, held_clock) -> None:
    day = dt.date(2026, 10, 5)
    raw = storage.open_store(str(tmp_path / "raw"))
    synthetic.write_day(raw, day, RECORDS, bad=False)
    once_waiting(_arriving(raw, day, 4, held_clock), _deferred)
    output_uri = str(tmp_path / "out")
    dag_run = _run(day, {"input_uri": str(tmp_path / "raw"), "output_uri": output_uri, "quiet_period_s": QUIET_S,
                         "wait_deadline_s": 90})
    assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
    waited = airflow_local.xcom(dag_run, "wait_for_day")
    assert waited["complete_by"] == "quiet_period" and waited["waited_s"] > 0
    assert _runs(storage.open_store(output_uri), day)["valid_records"].to_list() == [RECORDS + 4]


def test_a_day_that_gains_an_object_after_landing_pays_only_for_the_new_records(airflow_db, local_s3) -> None:
    from evaluation.testing.openai_server import OpenAIServer
    from tests.e2e.test_daily_dag import _scripted_reply

    day = dt.date(2026, 10, 6)
    output_uri = "s3://llm-evaluation/late-logs"
    raw = storage.open_store(INPUT_URI, local_s3.access())
    synthetic.write_day(raw, day, RECORDS, bad=False)
    with OpenAIServer(responder=_scripted_reply) as server:
        conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "openai/mock-judge",
                "api_base": server.base_url}
        first = _run(day, conf)
        assert str(first.state) == "success", airflow_local.task_states(first)
        paid_first = server.request_count

        late = 7
        raw.write_bytes(f"{storage.raw_prefix(day)}part-late.jsonl.gz", _late_object(day, late, "late"))
        second = _run(day, conf)
        assert str(second.state) == "success", airflow_local.task_states(second)
        new_calls = server.request_count - paid_first
    judges = 3
    assert new_calls == late * judges  # the judge calls made: the new records' only
    out = storage.open_store(output_uri, local_s3.access())
    runs = _runs(out, day)
    row = runs.filter(pl.col("run_id") == second.run_id).row(0, named=True)
    assert row["valid_records"] == RECORDS + late and row["calls_made"] == late * judges
    evaluations = storage.read_day(out, "evaluations", day)
    assert evaluations["record_id"].n_unique() == RECORDS + late  # the day re-landed whole, with the new records
    fresh = evaluations.filter((pl.col("judge_status") != "skipped") & ~pl.col("cached")
                               & ~pl.col("clamps_applied").list.contains("empty_answer"))  # never sent
    assert sorted(set(fresh["record_id"])) == [f"late-{i:04d}" for i in range(late)]
