"""System test: docker-compose.yml's topology, run natively, driven through the REST API only.

One deployment for the module (scripts/deployment.py): PostgreSQL metadata DB, Redis broker,
CeleryExecutor with two Celery workers (compose's `--scale airflow-worker=2`), scheduler,
dag-processor, api-server, triggerer, and an S3 API holding the logs and the landed tables. The
compose file's `llm_judge` pool gets 2 slots (`LLM_JUDGE_POOL_SLOTS`), so a day cut into 4 chunks
shows the pool's limit. Runs are triggered and followed over REST; what they land is read from
the S3 server with boto3 and Polars; a run against a rate-limited judge server is measured from
that server's own log of attempts.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest

from evaluation import storage
from evaluation.calling.fleetrate import rate_settings
from evaluation.calling.ratelimit import DEFAULT_BURST_S
from evaluation.testing import synthetic
from evaluation.testing.openai_server import OpenAIServer
from scripts.airflow_api import ApiClient, ApiError, max_overlap
from scripts.deployment import TASK_ROLE, LocalDeployment
from tests.reliability.helpers import judge_reply

pytestmark = pytest.mark.system

POOL_SLOTS = 2
#: Celery workers, as `docker compose up --scale airflow-worker=2` runs them.
WORKERS = 2
#: The days are written before the deployment starts: quiet for longer than this by the first run.
COMPOSE_VARIABLES = {"LLM_JUDGE_POOL_SLOTS": str(POOL_SLOTS), "EVALUATION_QUIET_PERIOD_S": "10"}
DAILY = "daily_evaluation"
COMPARISON = "model_comparison"
#: The day of the manual runs: well before any day the scheduler would pick.
DAY = dt.date(2026, 3, 10)
RECORDS = 80
CHUNKS = 4
#: 80 valid records in chunks of 20: 4 chunks, twice the pool's slots. The day's 6 planted bad
#: records are 7% of its input: above the default reject ceiling (5%).
CONF = {"chunk_size": 20, "max_reject_ratio": 0.1}
#: Records of the day the scheduler evaluates by itself.
SCHEDULED_RECORDS = 30
JUDGES = ("rag", "masis", "prompt")
STATUSES = ("ok", "parse_error", "judge_failed", "call_error", "skipped")
RUN_TIMEOUT = 240.0
#: Imported by the Celery worker before it forks its pool: task processes start with them loaded
#: instead of importing litellm and Great Expectations in every task (seconds each on 2 cores).


def _logical(day: dt.date) -> dt.datetime:
    """The logical date of the daily run that evaluates `day` (its interval starts at 02:00 UTC)."""
    return dt.datetime.combine(day, dt.time(2, 0), dt.UTC)


def scheduled_days(now: dt.datetime) -> list[dt.date]:
    """The day the scheduler's next run of `0 2 * * *` (catchup off) evaluates, and the next one
    (should an interval end between now and the first unpause).

    The latest complete interval ends at the last 02:00 UTC; its start is the logical date.
    """
    end = now.astimezone(dt.UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    if end > now:
        end -= dt.timedelta(days=1)
    first = (end - dt.timedelta(days=1)).date()
    return [first, first + dt.timedelta(days=1)]


def _input_store(deployment: LocalDeployment) -> Any:
    return storage.open_store(deployment.compose_env["EVALUATION_INPUT_URI"], deployment.s3_access())


def _output_store(deployment: LocalDeployment) -> Any:
    return storage.open_store(deployment.compose_env["EVALUATION_OUTPUT_URI"], deployment.s3_access())


def _write_logs(deployment: LocalDeployment) -> None:
    """Before any Airflow component starts: the manual runs' days. The scheduler's day has no
    logs until its test writes them: its run waits for them, deferred, meanwhile."""
    raw = _input_store(deployment)
    synthetic.write_day(raw, DAY, RECORDS)
    synthetic.write_day(raw, BATCH_DAY, BATCH_RECORDS, bad=False)
    synthetic.write_day(raw, FLEET_DAY, FLEET_RECORDS, bad=False)


def _write_scheduled_logs(deployment: LocalDeployment) -> None:
    """The day(s) the scheduler's run evaluates, late: the run, waiting, finds them."""
    raw = _input_store(deployment)
    for day in scheduled_days(dt.datetime.now(dt.UTC)):
        synthetic.write_day(raw, day, SCHEDULED_RECORDS, bad=False)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDeployment]:
    folder = tmp_path_factory.mktemp("deployment")
    # A 5 s grace: after SIGTERM the triggerer alone waits 10 s for its trigger runner; stop() then
    # ends what is left (a second SIGTERM, then SIGKILL).
    with LocalDeployment(COMPOSE_VARIABLES, folder=folder, prepare=_write_logs,
                         stop_grace=5.0, workers=WORKERS) as running:
        # Whatever AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION says: unpaused, as an operator would.
        # The daily DAG's scheduled run starts now, and waits for its day's logs.
        for dag_id in (DAILY, COMPARISON):
            running.api.unpause(dag_id)  # type: ignore[union-attr]
        yield running


@pytest.fixture(scope="module")
def api(deployment: LocalDeployment) -> ApiClient:
    assert deployment.api is not None
    return deployment.api


def _wait(api: ApiClient, dag_id: str, run_id: str) -> dict[str, Any]:
    # No task of these runs has a reason to be retried: the first retry fails the test, with its log.
    return api.wait_for_run(dag_id, run_id, timeout=RUN_TIMEOUT, fail_on_retry=True)


def _trigger_and_wait(api: ApiClient, dag_id: str, conf: dict[str, Any], day: dt.date | None = None) -> dict[str, Any]:
    run = api.trigger(dag_id, conf, logical_date=_logical(day) if day else None)
    return _wait(api, dag_id, run["dag_run_id"])


def _assert_succeeded(api: ApiClient, dag_id: str, run: dict[str, Any]) -> None:
    assert run["state"] == "success", api.diagnose(dag_id, run["dag_run_id"])


def _parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _runs_row(deployment: LocalDeployment, day: dt.date, run_id: str) -> dict[str, Any]:
    frame = storage.read_parquet(_output_store(deployment), storage.run_key(day, run_id))
    assert frame.height == 1
    return frame.row(0, named=True)


def _evaluations(deployment: LocalDeployment, day: dt.date) -> pl.DataFrame:
    return storage.read_day(_output_store(deployment), "evaluations", day)


@pytest.fixture(scope="module")
def first_run(deployment: LocalDeployment, api: ApiClient) -> dict[str, Any]:
    """The manual run of DAY, cut into CHUNKS chunks; succeeded."""
    run = _trigger_and_wait(api, DAILY, CONF, DAY)
    _assert_succeeded(api, DAILY, run)
    return run


COMPARISON_CONF = {"start_date": DAY.isoformat(), "end_date": DAY.isoformat(),
                   "models": ["assistant-v2", "assistant-lite"], "baseline": "assistant-lite",
                   "judges": list(JUDGES), "seed": 7, "bootstrap": 200}


@pytest.fixture(scope="module")
def second_runs(api: ApiClient, first_run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """After the first run, at once: the same day again, and a comparison of its landed scores."""
    # A second run of the same day: a run without a logical date (the first run holds DAY's), the day as a param.
    rerun = api.trigger(DAILY, {**CONF, "date": DAY.isoformat()})
    comparison = api.trigger(COMPARISON, COMPARISON_CONF)
    return {"rerun": _wait(api, DAILY, rerun["dag_run_id"]), "comparison": _wait(api, COMPARISON, comparison["dag_run_id"])}


# --- the deployment ---------------------------------------------------------------------------------


def test_deployment_follows_the_compose_file(deployment: LocalDeployment, api: ApiClient) -> None:
    assert api.version()["version"].startswith("3.3.")
    health = api.health()
    for component in ("metadatabase", "scheduler", "triggerer", "dag_processor"):
        assert health[component]["status"] == "healthy", health
    pool = api.pool(deployment.pool_name)
    assert pool["slots"] == POOL_SLOTS == deployment.pool_slots
    assert deployment.worker_concurrency >= POOL_SLOTS
    # Two workers, each its own process under its own host name (its Celery node celery@<name>).
    workers = [deployment.components[name] for name in deployment.worker_names]
    assert len(workers) == WORKERS and len({worker.pid for worker in workers}) == WORKERS
    assert len(set(deployment.worker_hostnames)) == WORKERS
    for worker in workers:
        # The judge budget of the tasks a worker runs is shared through the broker's Redis: the
        # worker's own environment (as the task processes inherit it) says so.
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{worker.pid}/environ").read_text().split("\0") if "=" in item)
        assert rate_settings(environ) == (deployment.env["AIRFLOW__CELERY__BROKER_URL"], float(POOL_SLOTS)), worker.name
    assert {d["dag_id"] for d in api.dags()} >= {DAILY, COMPARISON}
    assert not api.import_errors()
    env = deployment.env
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql")
    assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://")
    for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__RESULT_BACKEND", "AIRFLOW__CELERY__BROKER_URL",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL", "AIRFLOW_CONN_AWS_DEFAULT"):
        assert "127.0.0.1" in env[key], key
    # Every socket the components listen on is on loopback: the api-server and the scheduler's health check.
    listening = deployment.listening_sockets()
    assert {port for _, _, port in listening} >= {deployment.api_port, deployment.health_port}, listening
    assert all(address in ("127.0.0.1", "::1") for _, address, _ in listening), listening


def test_a_conf_of_the_wrong_type_is_refused(api: ApiClient) -> None:
    with pytest.raises(ApiError) as refused:
        api.trigger(DAILY, {"chunk_size": "many"}, logical_date=_logical(DAY - dt.timedelta(days=1)))
    assert 400 <= refused.value.status < 500
    assert "chunk_size" in refused.value.body


# --- a day through the deployment --------------------------------------------------------------------


def test_judges_ran_on_the_celery_workers_within_the_pool(deployment: LocalDeployment, api: ApiClient,
                                                         first_run: dict[str, Any]) -> None:
    tis = api.task_instances(DAILY, first_run["dag_run_id"])
    judges = [ti for ti in tis if ti["task_id"] == "judge"]
    assert sorted(ti["map_index"] for ti in judges) == list(range(CHUNKS))
    assert all(ti["state"] == "success" for ti in judges), [(ti["map_index"], ti["state"]) for ti in judges]
    # Every task of the run ran on a Celery worker (its host name comes from the workers' hostname_callable).
    assert {ti["hostname"] for ti in tis if ti["state"] == "success"} <= set(deployment.worker_hostnames)
    assert all(ti["pool"] == "llm_judge" for ti in judges)
    spans = [(_parse_time(ti["start_date"]), _parse_time(ti["end_date"])) for ti in judges]
    # More chunks than slots: the pool is full at some instant, and never over-full.
    assert max_overlap(spans) == POOL_SLOTS, spans


def test_landed_day_follows_the_contract(deployment: LocalDeployment, first_run: dict[str, Any]) -> None:
    out = _output_store(deployment)
    evaluations = _evaluations(deployment, DAY)
    rejects = storage.read_day(out, "rejects", DAY)
    summary = storage.read_day(out, "daily_summary", DAY)
    run = _runs_row(deployment, DAY, first_run["dag_run_id"])

    planted = len(synthetic.bad_lines(DAY)) + 1  # + the repeated record_id
    valid = evaluations["record_id"].n_unique()
    # CONTRACT §4: input = valid + rejected; rows = valid × selected judges; one status per row.
    assert valid == RECORDS and rejects.height == planted
    assert run["input_records"] == run["valid_records"] + run["rejected_records"] == RECORDS + planted
    assert run["valid_records"] == valid and run["rejected_records"] == rejects.height
    assert evaluations.height == valid * len(JUDGES) == run["rows"]
    assert set(evaluations["judge"].unique()) == set(JUDGES)
    assert evaluations["judge_status"].is_not_null().all()
    assert evaluations["judge_status"].is_in(list(STATUSES)).all()
    assert evaluations.select("record_id", "judge").is_duplicated().sum() == 0
    assert sum(run[f"n_{status}"] for status in STATUSES) == evaluations.height
    assert (evaluations["run_id"] == first_run["dag_run_id"]).all()
    assert run["status"] == "success" and run["trigger"] == "manual"
    assert run["calls_made"] > 0
    assert summary["rows"].sum() == evaluations.height
    assert out.exists(storage.report_key(DAY))


def test_the_tasks_reach_s3_with_the_role_their_connection_assumes(deployment: LocalDeployment,
                                                                   first_run: dict[str, Any]) -> None:
    # aws_default holds keys and role_arn: the run's tasks (on the Celery worker) assumed the role
    # through the S3 server's STS; nothing else in the deployment assumes a role.
    roles = deployment.assumed_roles()
    assert roles and {role.role_arn for role in roles} == {deployment.s3_role_arn}
    assert deployment.s3_role_arn.endswith(f":role/{TASK_ROLE}")
    assert json.loads(deployment.env["AIRFLOW_CONN_AWS_DEFAULT"])["extra"]["role_arn"] == deployment.s3_role_arn


def test_rerun_of_the_day_reuses_every_call(deployment: LocalDeployment, api: ApiClient,
                                            second_runs: dict[str, dict[str, Any]]) -> None:
    rerun = second_runs["rerun"]
    _assert_succeeded(api, DAILY, rerun)
    run = _runs_row(deployment, DAY, rerun["dag_run_id"])
    assert run["status"] == "success"
    assert run["calls_made"] == 0
    evaluations = _evaluations(deployment, DAY)
    # every row a judge was sent (not skipped, not an empty answer, CONTRACT §2.5) reused its reply
    judged = evaluations.filter((pl.col("judge_status") != "skipped")
                                & ~pl.col("clamps_applied").list.contains("empty_answer"))
    assert run["calls_reused"] == judged.height > 0
    assert judged["cached"].all()
    assert (evaluations["run_id"] == rerun["dag_run_id"]).all()
    assert evaluations.height == RECORDS * len(JUDGES)


def test_model_comparison_over_the_landed_day(deployment: LocalDeployment, api: ApiClient,
                                              second_runs: dict[str, dict[str, Any]]) -> None:
    run = second_runs["comparison"]
    _assert_succeeded(api, COMPARISON, run)
    states = api.task_states(COMPARISON, run["dag_run_id"])
    assert states["rejudge"] == "skipped"  # no judge model: the landed scores are compared
    result = api.xcom(COMPARISON, run["dag_run_id"], "compare")
    out = _output_store(deployment)
    for name in ("metrics.parquet", "verdicts.parquet", "spec.json", "report.html"):
        assert out.exists(storage.comparison_key(result["comparison_id"], name)), name
    metrics = storage.read_parquet(out, storage.comparison_key(result["comparison_id"], "metrics.parquet"))
    assert set(metrics["model"].unique()) == {"assistant-v2", "assistant-lite"}
    assert set(metrics["judge"].unique()) <= set(JUDGES)


# --- the scheduler on its own ---------------------------------------------------------------------------


def test_a_manual_run_starts_while_a_scheduled_run_waits_for_its_day(deployment: LocalDeployment,
                                                                    api: ApiClient) -> None:
    """The first scheduled run of a fresh deployment, for a day with no logs yet, waits deferred;
    a manual trigger meanwhile runs (it would sit queued behind a DAG held by the waiting run)."""
    import time

    scheduled = api.wait_for_new_run(DAILY, "scheduled", timeout=60)["dag_run_id"]

    def waiting() -> bool | None:
        """Whether the scheduled run's wait_for_day is deferred (None: the API did not answer in
        time, as happens while the first tasks load on a busy machine; the next look decides)."""
        try:
            deferred = api.get(f"/api/v2/dags/{DAILY}/dagRuns/~/taskInstances", state="deferred", limit=100)
        except httpx.TimeoutException:
            return None
        return any(ti["dag_run_id"] == scheduled and ti["task_id"] == "wait_for_day"
                   for ti in deferred["task_instances"])

    def settled() -> bool:
        deadline = time.monotonic() + RUN_TIMEOUT
        while (seen := waiting()) is None:
            assert time.monotonic() < deadline, api.diagnose(DAILY, scheduled)
        return seen

    deadline = time.monotonic() + RUN_TIMEOUT
    while not settled():
        assert time.monotonic() < deadline, api.diagnose(DAILY, scheduled)
        time.sleep(1.0)
    manual = _trigger_and_wait(api, DAILY, {**CONF, "dry_run": True, "date": DAY.isoformat()})  # check, ingest, plan
    _assert_succeeded(api, DAILY, manual)
    assert settled(), api.diagnose(DAILY, scheduled)  # still waiting: the two runs went at once


def test_the_scheduler_runs_the_latest_interval(deployment: LocalDeployment, api: ApiClient) -> None:
    created = api.wait_for_new_run(DAILY, "scheduled", timeout=60)
    _write_scheduled_logs(deployment)  # late: its run has been waiting for them
    run = _wait(api, DAILY, created["dag_run_id"])
    _assert_succeeded(api, DAILY, run)
    day = _parse_time(run["logical_date"]).astimezone(dt.UTC).date()
    assert day in scheduled_days(_parse_time(run["run_after"])) or day in scheduled_days(dt.datetime.now(dt.UTC))
    row = _runs_row(deployment, day, run["dag_run_id"])
    assert row["trigger"] == "scheduled" and row["status"] == "success"
    assert row["valid_records"] == SCHEDULED_RECORDS
    evaluations = _evaluations(deployment, day)
    assert (evaluations["run_id"] == run["dag_run_id"]).all()
    assert evaluations.height == SCHEDULED_RECORDS * len(JUDGES)


# --- runs that must fail before paying -------------------------------------------------------------------


def test_an_unknown_conf_key_fails_the_run_in_check_run(api: ApiClient) -> None:
    run = _trigger_and_wait(api, DAILY, {"judge_modle": "openai/gpt-4o-mini"}, DAY - dt.timedelta(days=2))
    tis = api.task_instances(DAILY, run["dag_run_id"])
    states = {ti["task_id"] if ti["map_index"] < 0 else f"{ti['task_id']}[{ti['map_index']}]": ti["state"]
              for ti in tis}
    assert run["state"] == "failed", states
    assert states.pop("check_run") == "failed", states
    assert set(states.values()) == {"upstream_failed"}, states
    # The judge task was never expanded, and no task but check_run reached a worker.
    assert [ti["map_index"] for ti in tis if ti["task_id"] == "judge"] == [-1]
    assert [ti["task_id"] for ti in tis if ti["hostname"]] == ["check_run"], tis


def test_a_bad_judge_model_fails_in_check_run_and_keeps_the_day(deployment: LocalDeployment, api: ApiClient,
                                                                 first_run: dict[str, Any]) -> None:
    out = _output_store(deployment)
    key = storage.landed_key(out, "evaluations", DAY)
    assert key is not None
    before = out.read_bytes(key)
    run = _trigger_and_wait(api, DAILY, {"judge_model": "nope/not-a-model", "date": DAY.isoformat()})
    states = api.task_states(DAILY, run["dag_run_id"])
    assert run["state"] == "failed", states
    assert states["check_run"] == "failed", states
    assert not any(task.startswith("judge[") for task in states), states
    assert storage.landed_key(out, "evaluations", DAY) == key and out.read_bytes(key) == before
    row = _runs_row(deployment, DAY, run["dag_run_id"])
    assert row["status"] == "failed" and row["message"], row


# --- batch mode ------------------------------------------------------------------------------------------

#: A day judged in batch mode: 2 chunks, each waiting for its batch deferred on the triggerer.
BATCH_DAY = DAY - dt.timedelta(days=4)
BATCH_RECORDS = 20


def test_a_batch_mode_run_waits_on_the_triggerer_and_lands_the_day(deployment: LocalDeployment,
                                                                   api: ApiClient) -> None:
    import time

    from evaluation.testing.openai_server import OpenAIServer
    from tests.reliability.helpers import judge_reply

    with OpenAIServer(responder=judge_reply) as server:
        server.batches.delay_s = 4.0  # long enough for the tasks to be seen deferred
        conf = {"judge_model": "openai/gpt-4o-mini", "api_base": server.base_url, "batch": True,
                "batch_poll_s": 0.5, "chunk_size": 10}
        run_id = api.trigger(DAILY, conf, logical_date=_logical(BATCH_DAY))["dag_run_id"]
        seen: set[str] = set()
        deadline = time.monotonic() + RUN_TIMEOUT
        while api.dag_run(DAILY, run_id)["state"] not in ("success", "failed"):
            seen |= {str(ti["state"]) for ti in api.task_instances(DAILY, run_id) if ti["task_id"] == "judge"}
            assert time.monotonic() < deadline, api.diagnose(DAILY, run_id)
            time.sleep(0.3)
        counts = dict(server.batches.counts)
        lines = list(server.batches.line_ids)
    run = api.dag_run(DAILY, run_id)
    _assert_succeeded(api, DAILY, run)
    assert "deferred" in seen, seen  # no worker slot held while the provider works
    assert counts["batches_created"] == 2 and len(lines) == len(set(lines)) > 0
    evaluations = _evaluations(deployment, BATCH_DAY)
    assert evaluations.height == BATCH_RECORDS * len(JUDGES)
    assert evaluations.filter(pl.col("judge_status") != "skipped")["judge_status"].eq("ok").all()
    assert _runs_row(deployment, BATCH_DAY, run_id)["calls_made"] == len(lines)


# --- late logs -------------------------------------------------------------------------------------------

#: A day whose export has not finished: the run waits, deferred, for its completion marker.
LATE_DAY = DAY - dt.timedelta(days=5)


def test_a_run_waits_deferred_on_the_triggerer_for_the_days_marker(deployment: LocalDeployment,
                                                                   api: ApiClient) -> None:
    import time

    raw = _input_store(deployment)
    synthetic.write_day(raw, LATE_DAY, 20, bad=False)
    conf = {"completion_marker": "_SUCCESS", "wait_deadline_s": 180}
    run_id = api.trigger(DAILY, conf, logical_date=_logical(LATE_DAY))["dag_run_id"]
    deadline = time.monotonic() + RUN_TIMEOUT
    while api.task_states(DAILY, run_id).get("wait_for_day") != "deferred":  # in the triggerer: no worker slot
        assert api.dag_run(DAILY, run_id)["state"] not in ("success", "failed"), api.diagnose(DAILY, run_id)
        assert time.monotonic() < deadline, api.diagnose(DAILY, run_id)
        time.sleep(0.3)
    raw.write_bytes(f"{storage.raw_prefix(LATE_DAY)}_SUCCESS", b"")
    run = _wait(api, DAILY, run_id)
    _assert_succeeded(api, DAILY, run)
    waited = api.xcom(DAILY, run_id, "wait_for_day")
    assert waited["complete_by"] == "marker" and waited["waited_s"] > 0  # deferred before the marker was written
    row = _runs_row(deployment, LATE_DAY, run_id)
    assert row["waited_s"] == pytest.approx(waited["waited_s"]) and row["valid_records"] == 20


# --- one rate limit for the fleet ---------------------------------------------------------------------------

#: A day judged on both workers against a server that enforces FLEET_RPM: 80 records make about
#: 180 calls (identical requests are made once), some 18 s of traffic at the limit, in 4 chunks: two
#: at a time, one on each worker.
FLEET_DAY = DAY - dt.timedelta(days=6)
FLEET_RECORDS = 80
FLEET_CHUNK = 20
#: The provider's limit, whole: the server enforces it and the run's judge_rpm is the same figure.
FLEET_RPM = 600.0
#: Seconds the server takes to answer a call: one chunk's 8 calls in flight could send 40 a second.
FLEET_LATENCY_S = 0.2
#: The attempts (admitted or refused) in any window of WINDOW_S seconds stay within the rate times
#: WINDOW_S + TOLERANCE_S: the budget's own burst (DEFAULT_BURST_S of the rate) and 2 s of delay
#: between the budget's letting a request go and the server's receiving it (a task's event loop
#: that the machine's 2 shared cores hold up sends what came due meanwhile at once). The run makes
#: more attempts than a window allows (checked), so a fleet over the limit shows in some window.
WINDOW_S = 10.0
TOLERANCE_S = DEFAULT_BURST_S + 2.0
#: A pause of the fleet's requests: none admitted for this long (10 intervals at the limit).
PAUSE_S = 1.0


def _most_in_window(times: Sequence[float], window_s: float) -> int:
    """The most of `times` (sorted) within one window [t, t + window_s)."""
    return max((bisect.bisect_left(times, t + window_s) - i for i, t in enumerate(times)), default=0)


def _pauses(times: Sequence[float], at_least_s: float) -> list[tuple[float, float]]:
    """The intervals between consecutive `times` (sorted) of at least `at_least_s`."""
    return [(a, b) for a, b in zip(times, times[1:], strict=False) if b - a >= at_least_s]


def test_the_fleet_keeps_to_one_rate_limit_and_uses_it(deployment: LocalDeployment, api: ApiClient) -> None:
    """judge_rpm is the provider's limit for the whole deployment: two workers' judge tasks, two
    at a time, keep to it together (one budget in the broker's Redis), use it, and lose no 429."""
    rate = FLEET_RPM / 60.0
    with OpenAIServer(responder=judge_reply, latency_s=FLEET_LATENCY_S, rpm=FLEET_RPM) as server:
        conf = {"judge_model": "openai/gpt-4o-mini", "api_base": server.base_url, "judge_rpm": FLEET_RPM,
                "chunk_size": FLEET_CHUNK}
        run = _trigger_and_wait(api, DAILY, conf, FLEET_DAY)
        admitted = sorted(request.received_at for request in server.requests)
        refused = server.throttled_times
        server_errors = server.errors
    _assert_succeeded(api, DAILY, run)
    run_id = run["dag_run_id"]
    assert not server_errors
    judges = [ti for ti in api.task_instances(DAILY, run_id) if ti["task_id"] == "judge"]

    # The fleet's attempts, admitted or refused, from the server's own log: the most in a window.
    most = _most_in_window(sorted(admitted + refused), WINDOW_S)
    # The busy period: from the first request the server admitted to the last, less the pauses in
    # which the pool changed chunks: a judge task started or ended, no request was refused (no
    # task was waiting out a 429), so no task had a call to send and the budget was not in the way.
    # Every other pause counts. Each stretch between pauses may start with the budget's burst:
    # that is not counted as use.
    changes = [_parse_time(ti[key]).timestamp() for ti in judges for key in ("start_date", "end_date")]
    pauses = _pauses(admitted, PAUSE_S)
    changing = [(a, b) for a, b in pauses if any(a <= t <= b for t in changes)
                and not any(a - PAUSE_S <= t <= b for t in refused)]
    span_s = admitted[-1] - admitted[0]
    busy_s = span_s - sum(b - a for a, b in changing)
    stretches = len(changing) + 1
    used = (len(admitted) - stretches * (1 + rate * DEFAULT_BURST_S)) / (rate * busy_s)
    figures = (f"{len(admitted)} requests admitted and {len(refused)} refused over {span_s:.1f} s, {busy_s:.1f} s "
               f"busy: {used:.3f} of {FLEET_RPM:g} rpm used while busy, {(len(admitted) - 1) / (rate * span_s):.3f} "
               f"over the whole span; at most {most} attempts in {WINDOW_S:g} s (the limit: {rate * WINDOW_S:g}); "
               "pauses (s from the first request + length, * at a chunk change): "
               + (", ".join(f"{a - admitted[0]:.1f}+{b - a:.1f}{'*' if (a, b) in changing else ''}" for a, b in pauses)
                  or "none"))
    print(figures)  # the measured figures, with -s

    assert sorted(ti["map_index"] for ti in judges) == list(range(math.ceil(FLEET_RECORDS / FLEET_CHUNK)))
    # Both workers judged chunks, two at a time (the pool's slots).
    hosts = {ti["map_index"]: ti["hostname"] for ti in judges}
    assert set(hosts.values()) == set(deployment.worker_hostnames), hosts
    assert max_overlap((_parse_time(ti["start_date"]), _parse_time(ti["end_date"])) for ti in judges) == POOL_SLOTS
    # Together they kept to the limit in every window, and used it.
    assert len(admitted) + len(refused) > rate * (WINDOW_S + TOLERANCE_S), figures  # else no window could fail
    assert most <= rate * (WINDOW_S + TOLERANCE_S), figures
    assert used >= 0.9, figures

    # No 429 lost: every call landed a reply, and the attempts reconcile with the server's log.
    evaluations = _evaluations(deployment, FLEET_DAY)
    assert evaluations.height == FLEET_RECORDS * len(JUDGES)
    assert set(evaluations["judge_status"].unique()) <= {"ok", "skipped"}, evaluations["judge_status"].value_counts()
    row = _runs_row(deployment, FLEET_DAY, run_id)
    assert row["status"] == "success" and row["n_call_error"] == 0
    calls = storage.read_day(_output_store(deployment), "judge_calls", FLEET_DAY)
    made = calls.filter(~pl.col("cached"))
    assert row["calls_made"] == made.height == len(admitted)
    assert made["attempts"].sum() == len(admitted) + len(refused), figures
    # Each judge task drew from the one budget kept in the broker's Redis, with the whole limit.
    for ti in judges:
        log = api.task_log(DAILY, run_id, "judge", ti["try_number"], ti["map_index"])
        assert f"rate limits {FLEET_RPM:g} rpm shared by the deployment through Redis" in log, log[-3000:]


# --- the end ---------------------------------------------------------------------------------------------


def test_stop_leaves_no_process_behind(deployment: LocalDeployment) -> None:
    pids = {name: component.pid for name, component in deployment.components.items()}
    assert deployment.surviving_processes(), "the deployment is not running"
    deployment.stop()
    assert deployment.surviving_processes() == []
    for name, pid in pids.items():
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:3], name
