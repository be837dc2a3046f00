"""The Celery worker of docker-compose.yml: preloads the pipeline once, and its healthcheck is cheap.

A real worker of Airflow's Celery app runs on the local Redis (a database index of its own) with
the worker service's environment from docker-compose.yml. Its healthcheck command, taken from the
same file, is run against it the way Docker runs it (``sh -c`` with the container's ``HOSTNAME``),
and reports the modules it imported.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from scripts.compose import dev_variables, environment, load_compose
from scripts.deployment import REDIS_PORT, claim_redis_db

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parents[2]
WORKER_HOST = "preload-test"
#: Modules the preload brings in and that a healthcheck has no use for.
HEAVY = ("polars", "litellm", "great_expectations", "evaluation.calling.client")
PRELOADED = re.compile(r"worker preload: imported (?P<modules>.+) in [\d.]+ s \(pid (?P<pid>\d+)\)")
#: Waiting for a worker to come up on a loaded 2-core machine (not an assertion about speed).
START_TIMEOUT_S = 180.0

#: Runs the healthcheck's `celery ...` command unchanged, then writes the modules it imported.
CELERY_REPORTING_MODULES = """
import atexit, sys
_path = sys.argv.pop(1)
def _report():
    with open(_path, "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
atexit.register(_report)
from celery.__main__ import main
sys.argv[0] = "celery"
main()
"""


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]


def _worker_service() -> dict[str, object]:
    return load_compose(dev_variables())["services"]["airflow-worker"]


def _preload_line(log: Path) -> re.Match[str] | None:
    return PRELOADED.search(log.read_text(errors="replace")) if log.exists() else None


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, airflow_db: Path) -> Iterator[Worker]:
    folder = tmp_path_factory.mktemp("celery-worker")
    db = claim_redis_db()
    service_env = environment(_worker_service())
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW__CELERY__")}
    env.update({
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": service_env["AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS"],
        "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{REDIS_PORT}/{db}",
        # Airflow's default, as in the compose stack (the test suite's own is WARNING): the worker's
        # preload and ready lines are INFO.
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")]),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    })
    log = folder / "worker.log"
    with log.open("wb") as out:
        # As the compose service runs it (`celery worker` of the Airflow image's entrypoint).
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "airflow"), "celery", "worker", "--celery-hostname",
             f"celery@{WORKER_HOST}", "--concurrency", "1", "--skip-serve-logs", "--without-gossip",
             "--without-mingle"],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not re.search(rf"celery@{WORKER_HOST} ready", log.read_text(errors="replace")):
            assert process.poll() is None, f"the worker exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the worker did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        yield Worker(process, log, env)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        with redis.Redis(host="127.0.0.1", port=REDIS_PORT, db=db) as client:
            client.flushdb()


def test_the_worker_preloads_the_pipeline_once_in_its_main_process(worker: Worker) -> None:
    text = worker.log.read_text(errors="replace")
    lines = PRELOADED.findall(text)
    assert len(lines) == 1, f"expected one preload, found {len(lines)}:\n{text[-3000:]}"
    match = _preload_line(worker.log)
    assert match is not None
    assert int(match.group("pid")) == worker.process.pid, "the preload ran outside the worker's main process"
    assert "evaluation.calling.client" in match.group("modules")
    # Before the pool: the preload's line comes before the worker reports ready.
    assert text.index("worker preload") < text.index(f"celery@{WORKER_HOST} ready")


def test_the_healthcheck_pings_the_worker_without_loading_the_pipeline(worker: Worker, tmp_path: Path) -> None:
    healthcheck = _worker_service()["healthcheck"]
    test = healthcheck["test"]  # type: ignore[index]
    assert test[0] == "CMD-SHELL"
    command = shlex.split(test[1])
    assert command[0] == "celery", command
    modules_file = tmp_path / "modules.txt"
    # As Docker runs it: through sh, HOSTNAME being the container's (the worker's host name).
    reporting = shlex.join([sys.executable, "-c", CELERY_REPORTING_MODULES, str(modules_file)])
    script = reporting + test[1][len("celery"):]
    result = subprocess.run(["sh", "-c", script], env={**worker.env, "HOSTNAME": WORKER_HOST},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"celery@{WORKER_HOST}: OK" in result.stdout and "pong" in result.stdout, result.stdout
    modules = set(modules_file.read_text().split())
    # The healthcheck built the same app as the worker, with the worker's configuration module...
    assert "evaluation_celery" in modules
    # ...and imported none of what the preload brings in.
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
