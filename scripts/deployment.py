"""The production topology of docker-compose.yml, run natively on loopback, for system tests.

:class:`LocalDeployment` reads the environment that every Airflow service of docker-compose.yml
shares (the ``x-airflow-common`` block, interpolated with the given compose variables over those
of ``dev.env``) and runs the same components as separate processes on this machine:
``airflow scheduler``, ``dag-processor``, ``api-server``, ``triggerer`` and one ``celery worker``
or more (CeleryExecutor; ``workers=2`` is compose's ``up --scale airflow-worker=2``), with a
PostgreSQL metadata database, a Redis broker and an S3 API. What compose would provide is mapped to
this machine:

* the ``postgres`` host: a database of its own on the local PostgreSQL (created, dropped at the
  end; the URL's role is created when missing, under trust auth);
* the ``redis`` host: the local Redis, on a database index nobody uses (flushed at the end);
* the ``s3`` host: moto's S3 server in this process on a free loopback port, with the buckets that
  the ``s3-init`` job creates; the ``aws_default`` connection keeps the compose file's keys and
  assumes a role (:data:`TASK_ROLE`) through the same server's STS, as a production connection
  with ``role_arn`` does, so every S3 request of the tasks is made with the role's credentials;
* the ``airflow-apiserver`` host: the api-server on a free loopback port;
* ``/opt/airflow``: a fresh ``AIRFLOW_HOME`` in the deployment's folder, the repository's
  ``dags/`` and ``plugins/``, and the repository on ``PYTHONPATH``.

Like the ``airflow-init`` job it migrates the database, creates the ``llm_judge`` pool and writes
the SimpleAuthManager passwords file. Every listening socket is bound to 127.0.0.1. Each process
runs in a session of its own with its output in ``<folder>/<component>.log`` (:meth:`stop` ends
them). :class:`ApiClient` drives the deployment through the REST API v2 only.

Each Celery worker has a host name of its own (:attr:`LocalDeployment.worker_hostnames`), as each
container of a scaled compose service has, and each component gets the environment of its own
compose service on top of the common block.

This module is imported by the worker's task processes for :func:`celery_worker_hostname`: keep
its top-level imports to the standard library.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from scripts.airflow_api import ApiClient, ApiError
from scripts.processes import DeploymentError, answers, free_port, port_open, session_cpu_seconds, session_processes

REPO = Path(__file__).resolve().parent.parent
#: The Airflow home inside the image; paths under it in the compose environment move to the local home.
IMAGE_HOME = "/opt/airflow"
#: The Celery workers' host names are this, a dash and the worker's number from 1 (task
#: instances' ``hostname``).
CELERY_WORKER_HOSTNAME = "celery-worker-systest"
#: The component name of the Celery workers (``celery-worker-1``, ...) and their compose service.
WORKER_COMPONENT = "celery-worker"
#: Buckets created when the compose file's s3-init job does not name them in a way we can read.
DEFAULT_BUCKETS = ("llm-logs", "llm-evaluation")
#: The IAM role the deployment's ``aws_default`` connection assumes (created on the local S3 server).
TASK_ROLE = "llm-evaluation-tasks"
#: The long-running components and their docker-compose.yml services. Once the database is
#: migrated they start in this order, each once the components its service depends on are
#: started or healthy, as compose requires (the worker waits for a healthy api-server).
COMPONENTS = {
    "api-server": "airflow-apiserver",
    "scheduler": "airflow-scheduler",
    "dag-processor": "airflow-dag-processor",
    "triggerer": "airflow-triggerer",
    "celery-worker": "airflow-worker",
}
#: Variables of the caller's environment that would configure Airflow, boto3 or the pipeline
#: behind the compose file's back; none of them reach the deployment.
_INHERITED_PREFIXES = ("AIRFLOW", "_AIRFLOW", "AWS_", "EVALUATION_", "LITELLM_", "PYTHONPATH", "BOTO_")
_CLAIM_KEY = "llm-evaluation:local-deployment"
#: Where the local PostgreSQL and Redis listen, and the PostgreSQL role that creates the database.
POSTGRES_PORT = 5432
POSTGRES_ADMIN = "postgres"
REDIS_PORT = 6379
STARTUP_TIMEOUT_S = 240.0


def celery_worker_hostname() -> str:
    """``[core] hostname_callable`` of the Celery workers: names the worker in task instances, from
    the ``HOSTNAME`` the deployment gives each worker (as Docker gives each container its own)."""
    return os.environ.get("HOSTNAME") or CELERY_WORKER_HOSTNAME


def claim_redis_db() -> int:
    """Claim an unused database index of the local Redis: one that holds no key but our claim.
    The claimer flushes it when done."""
    import redis

    token = secrets.token_hex(8)
    for db in range(1, 16):
        with redis.Redis(host="127.0.0.1", port=REDIS_PORT, db=db, socket_timeout=10) as client:
            if client.dbsize() == 0 and client.set(_CLAIM_KEY, token, nx=True):
                if client.dbsize() == 1:
                    return db
                client.delete(_CLAIM_KEY)
    raise DeploymentError("no unused Redis database index (1-15)")


def _kind(name: str) -> str:
    """The entry of :data:`COMPONENTS` a component is an instance of (``celery-worker-2``: the worker)."""
    return WORKER_COMPONENT if name.startswith(f"{WORKER_COMPONENT}-") else name


def _on_loopback(url: str, port: int, path: str | None = None) -> str:
    """`url` with its host and port replaced by 127.0.0.1:`port` (credentials kept), and its path
    by `path` when given."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    parts = parts._replace(netloc=f"{userinfo}127.0.0.1:{port}")
    return urlunsplit(parts if path is None else parts._replace(path=path))


def _pool_from_init(script: str) -> tuple[str, int, str]:
    """(name, slots, description) of the pool that airflow-init's `script` creates."""
    for line in script.splitlines():
        if "airflow pools set" in line:
            words = shlex.split(line[line.index("airflow pools set") :])
            return words[3], int(words[4]), words[5] if len(words) > 5 else ""
    raise DeploymentError("docker-compose.yml: airflow-init creates no pool (`airflow pools set`)")


@dataclass
class Component:
    """One process of the deployment, leading a session (and process group) of its own."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the component's log ('' when it does not exist)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class LocalDeployment:
    """docker-compose.yml's Airflow stack as native processes on loopback.

    ``with LocalDeployment() as deployment: deployment.api.trigger(...)``. `variables` are compose
    variables (as in ``.env``) over those of ``dev.env``, the development stack's; a variable
    given by neither takes the file's default. `prepare` runs once
    the S3 API and its buckets exist, while the database migrates and before any component starts
    (to put input data in place before the scheduler may create a run). `folder` holds the Airflow
    home and the components' logs; a temporary folder (removed by :meth:`stop`) when not given.
    `workers` Celery workers run (compose's ``--scale airflow-worker=N``), each one process more
    than the pool has slots, each its own session and PID, stopped by PID with the rest.
    """

    def __init__(
        self,
        variables: Mapping[str, str] | None = None,
        *,
        folder: Path | None = None,
        prepare: Callable[[LocalDeployment], None] | None = None,
        stop_grace: float = 15.0,
        workers: int = 1,
    ) -> None:
        from scripts import compose

        if workers < 1:
            raise ValueError("a deployment needs at least one Celery worker")
        compose_file = compose.load_compose({**compose.dev_variables(), **(variables or {})})
        self.compose_env = compose.environment(compose_file[compose.AIRFLOW_COMMON])
        services = compose_file["services"]
        #: Per component: what its compose service sets beyond the common block (its env_file, the
        #: provider's variables, then its environment; PYTHONPATH stays this side's), and the
        #: services it depends on with their conditions.
        self._service_env = {
            name: {k: v for k, v in {**compose.env_file_variables(services[service]),
                                     **compose.environment(services[service])}.items()
                   if self.compose_env.get(k) != v and k != "PYTHONPATH"}
            for name, service in COMPONENTS.items()
        }
        self._depends_on = {name: compose.depends_on(services[service]) for name, service in COMPONENTS.items()}
        init = services["airflow-init"]
        self.pool_name, self.pool_slots, self.pool_description = _pool_from_init(compose.command_text(init))
        init_env = compose.environment(init)
        self.username = init_env.get("_AIRFLOW_WWW_USER_USERNAME", "airflow")
        self.password = init_env.get("_AIRFLOW_WWW_USER_PASSWORD", "airflow")
        buckets = re.search(r"for bucket in ([^;\n]+);", compose.command_text(services.get("s3-init", {})))
        self.buckets = tuple(buckets.group(1).split()) if buckets else DEFAULT_BUCKETS
        self._own_folder = folder is None
        self.folder = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="llm-evaluation-deployment-"))
        self.home = self.folder / "airflow-home"
        self.worker_concurrency = self.pool_slots + 1
        self.workers = workers
        self.prepare = prepare
        self.stop_grace = stop_grace
        self.expected_dags = sorted(p.stem for p in (REPO / "dags").glob("*.py") if not p.name.startswith("_"))
        self.api_port = free_port()
        self.health_port = free_port()
        self.api_url = f"http://127.0.0.1:{self.api_port}"
        #: Where the mapped compose services end up on this machine.
        self.database = ""
        self.created_role: str | None = None
        self.redis_db: int | None = None
        self.s3_server: Any = None
        self.s3_endpoint = ""
        self.s3_role_arn = ""
        self.components: dict[str, Component] = {}
        self.env: dict[str, str] = {}
        self.api: ApiClient | None = None
        self._stopped = False
        #: Every process started (components and one-off commands); each leads its own session.
        self._spawned: list[Component] = []
        self._started_at: float | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> LocalDeployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalDeployment:
        """Bring everything up; returns when the API answers, the DAGs are parsed and every
        component reports healthy. On failure everything started so far is stopped."""
        try:
            self._start()
        except BaseException as exc:
            try:
                self.stop()
            except DeploymentError as cleanup:  # the start's error stays the one raised
                exc.add_note(f"while stopping: {cleanup}")
            raise
        return self

    def _start(self) -> None:
        self._started_at = time.monotonic()
        deadline = self._started_at + STARTUP_TIMEOUT_S
        self.home.mkdir(parents=True, exist_ok=True)
        self._ensure_listening(POSTGRES_PORT, "PostgreSQL", self._start_postgres)
        self._ensure_listening(REDIS_PORT, "Redis", self._start_redis)
        self._start_s3()
        self._create_database()
        self.redis_db = claim_redis_db()
        self.env = self._environment()
        self._write_passwords_file()
        self._mark(f"services: database {self.database}, Redis DB {self.redis_db}, S3 {self.s3_endpoint}")
        migrate = self._spawn("db-migrate", ["db", "migrate"])
        if self.prepare is not None:  # while the database migrates
            self.prepare(self)
            self._mark("prepared")
        self._wait_exit(migrate, deadline)
        self._mark("migrated")
        pool = self._spawn("pools-set", ["pools", "set", self.pool_name, str(self.pool_slots), self.pool_description])
        argv = {
            "scheduler": ["scheduler"],
            "dag-processor": ["dag-processor"],
            "api-server": ["api-server", "-H", "127.0.0.1", "-p", str(self.api_port)],
            "triggerer": ["triggerer", "--skip-serve-logs"],
        }
        for name, hostname in zip(self.worker_names, self.worker_hostnames, strict=True):
            argv[name] = ["celery", "worker", "--skip-serve-logs", "--concurrency", str(self.worker_concurrency),
                          "--celery-hostname", hostname]
        pending = [name for kind in COMPONENTS for name in self._instances(kind)]

        def start_ready_components() -> str:
            for name in [n for n in pending if self._dependencies_met(n)]:
                env = {**self.env, **self._service_env[_kind(name)]}
                if name in self.worker_names:
                    env["HOSTNAME"] = self.worker_hostnames[self.worker_names.index(name)]
                    env["AIRFLOW__CORE__HOSTNAME_CALLABLE"] = f"{__name__}.{celery_worker_hostname.__name__}"
                self.components[name] = self._spawn(name, argv[name], env)
                pending.remove(name)
                self._mark(f"started {name} (pid {self.components[name].pid})")
            return f"the dependencies of {', '.join(pending)}" if pending else ""

        self._wait_until(start_ready_components, deadline)
        self._wait_exit(pool, deadline)
        self._mark(f"pool {self.pool_name} set to {self.pool_slots} slots")
        self.api = ApiClient(self)
        self._wait_until(self._not_ready, deadline)
        self._mark(f"ready: API on {self.api_url}")

    def _mark(self, event: str) -> None:
        """Note a step of the start or the stop, with the seconds since the start, in
        ``<folder>/deployment.log``."""
        seconds = round(time.monotonic() - (self._started_at or time.monotonic()), 1)
        with contextlib.suppress(OSError), (self.folder / "deployment.log").open("a", encoding="utf-8") as log:
            log.write(f"{dt.datetime.now(dt.UTC).isoformat(timespec='milliseconds')} +{seconds}s {event}\n")

    def stop(self) -> None:
        """Stop every component (SIGTERM, SIGKILL after the grace period), the S3 server, drop the
        database (and the role if it was created) and flush the Redis index. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        errors: list[str] = []
        if self.api is not None:
            self.api.close()
        if self.components:
            self._mark("stopping; CPU seconds so far: " + ", ".join(
                f"{name} {session_cpu_seconds(c.pid):.1f}" for name, c in self.components.items()))
        self._stop_processes()
        survivors = self.surviving_processes()
        if survivors:
            errors.append(f"processes survived: {survivors}")
        self._mark("processes stopped: " + ", ".join(
            f"{c.name} exited {c.process.poll()}" for c in self.components.values()))
        for step in (self._stop_s3, self._drop_database, self._flush_redis):
            try:
                step()
            except Exception as exc:  # keep cleaning up
                errors.append(f"{step.__name__}: {exc!r}")
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        if errors:
            raise DeploymentError("; ".join(errors))

    def _stop_processes(self) -> None:
        """SIGTERM to every process started, SIGKILL to what is left of their sessions after the
        grace period; reaps them."""
        for component in self._spawned:
            if component.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(component.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace
        for component in self._spawned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(max(0.0, deadline - time.monotonic()))
        # A leader that did not stop in time, or descendants that outlived their leader.
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            remaining = self.surviving_processes()
            if not remaining:
                break
            for pid, _ in remaining:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            end = time.monotonic() + wait
            while time.monotonic() < end and self.surviving_processes():
                time.sleep(0.1)
        for component in self._spawned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                component.process.wait(5)

    def surviving_processes(self) -> list[tuple[int, str]]:
        """Live processes of the deployment (none after :meth:`stop`): those in the sessions of
        the processes it started, and any other process with its ``AIRFLOW_HOME``."""
        return session_processes((c.pid for c in self._spawned), f"AIRFLOW_HOME={self.home}".encode())

    def listening_sockets(self) -> list[tuple[str, str, int]]:
        """(command line, address, port) of every TCP socket that a process of the deployment
        listens on."""
        import psutil

        found = []
        for pid, cmdline in self.surviving_processes():
            with contextlib.suppress(psutil.Error):
                for conn in psutil.Process(pid).net_connections(kind="inet"):
                    if conn.status == psutil.CONN_LISTEN:
                        found.append((cmdline, conn.laddr.ip, conn.laddr.port))
        return found

    # --- processes ----------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Component:
        """Start `airflow <args>` in a session of its own, its output in ``<folder>/<name>.log``."""
        log_path = self.folder / f"{name}.log"
        with log_path.open("ab") as log:
            # start_new_session: a session (and process group) of its own, so that stop() finds the
            # component's descendants (Celery's pool, task processes, parsing processes) by session.
            process = subprocess.Popen([sys.executable, "-m", "airflow", *args], env=env or self.env, cwd=REPO,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        component = Component(name, args, log_path, process)
        self._spawned.append(component)
        return component

    def _wait_exit(self, component: Component, deadline: float) -> None:
        try:
            code: int | None = component.process.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            outcome = "did not finish in time" if code is None else f"exited with {code}"
            raise DeploymentError(f"`airflow {' '.join(component.argv)}` {outcome}; its log:\n{component.log_tail()}")

    def check_components(self) -> None:
        """Raise :class:`DeploymentError` with its log's end when a component has exited."""
        for component in self.components.values():
            code = component.process.poll()
            if code is not None:
                raise DeploymentError(
                    f"{component.name} exited with {code}; the end of {component.log_path}:\n{component.log_tail()}"
                )

    def _wait_until(self, waiting_for: Callable[[], str], deadline: float) -> None:
        """Poll `waiting_for` (what is not ready yet, '' once everything is) until it answers '';
        DeploymentError with the ends of the components' logs when one dies or at `deadline`."""
        while what := waiting_for():
            self.check_components()
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {c.name}\n{c.log_tail(15)}" for c in self.components.values())
                raise DeploymentError(f"not ready after {STARTUP_TIMEOUT_S:.0f}s: waiting for {what}\n{tails}")
            time.sleep(0.5)

    def _not_ready(self) -> str:
        """What is not ready yet ('' when everything is)."""
        import httpx

        assert self.api is not None
        try:
            health = self.api.health()
            unhealthy = [name for name in ("metadatabase", "scheduler", "triggerer", "dag_processor")
                         if (health.get(name) or {}).get("status") != "healthy"]
            if unhealthy:
                return "healthy " + ", ".join(unhealthy)
            errors = self.api.import_errors()
            if errors:
                raise DeploymentError("DAG import errors:\n" + "\n".join(
                    f"{e.get('filename')}: {e.get('stack_trace')}" for e in errors))
            missing = sorted(set(self.expected_dags) - {d["dag_id"] for d in self.api.dags()})
        except (httpx.TransportError, ApiError) as exc:  # not listening yet, or not yet able to answer
            return f"the API ({exc})"
        if missing:
            return f"parsed DAGs {missing}"
        if not all(name in self.components and self._worker_ready(name) for name in self.worker_names):
            return "the Celery workers"
        if not self._scheduler_health():
            return f"the scheduler's health check on port {self.health_port}"
        return ""

    def _scheduler_health(self) -> bool:
        """The scheduler's own health check server answers 200 (compose's scheduler healthcheck)."""
        return answers(f"http://127.0.0.1:{self.health_port}/health")

    @property
    def worker_names(self) -> list[str]:
        """The Celery workers' component names (their logs are ``<name>.log``)."""
        return [f"{WORKER_COMPONENT}-{number}" for number in range(1, self.workers + 1)]

    @property
    def worker_hostnames(self) -> list[str]:
        """The Celery workers' host names, in the order of :attr:`worker_names`: what task
        instances' ``hostname`` says."""
        return [f"{CELERY_WORKER_HOSTNAME}-{number}" for number in range(1, self.workers + 1)]

    def _instances(self, kind: str) -> list[str]:
        """The components of one entry of :data:`COMPONENTS`: the workers for the worker's, else itself."""
        return self.worker_names if kind == WORKER_COMPONENT else [kind]

    def _worker_ready(self, name: str) -> bool:
        """The worker's log says its Celery node (``celery@<its host name>``) is ready."""
        hostname = self.worker_hostnames[self.worker_names.index(name)]
        return f"celery@{hostname} ready" in self.components[name].log_tail(400)

    def _healthy(self, name: str) -> bool:
        """A started component passes its compose healthcheck's equivalent: for the api-server,
        ``GET /api/v2/version`` answers 200."""
        checks: dict[str, Callable[[], bool]] = {
            "api-server": lambda: answers(f"{self.api_url}/api/v2/version"),
            "scheduler": self._scheduler_health,
        }
        check = (lambda: self._worker_ready(name)) if name in self.worker_names else checks.get(name, lambda: True)
        return name in self.components and self.components[name].process.poll() is None and check()

    def _dependencies_met(self, name: str) -> bool:
        """Every component that `name`'s compose service depends on is started, or healthy when
        the condition says ``service_healthy`` (every instance of a scaled service)."""
        by_service = {service: kind for kind, service in COMPONENTS.items()}
        for service, condition in self._depends_on[_kind(name)].items():
            kind = by_service.get(service)
            if kind is None:  # postgres, redis, airflow-init: taken care of before
                continue
            for dependency in self._instances(kind):
                if dependency not in self.components:
                    return False
                if condition == "service_healthy" and not self._healthy(dependency):
                    return False
        return True

    # --- services -----------------------------------------------------------------------------

    @staticmethod
    def _ensure_listening(port: int, what: str, start: Callable[[], None], timeout: float = 30.0) -> None:
        """Unless something listens on 127.0.0.1:`port`, `start` the local `what` and wait until it does."""
        if port_open(port):
            return
        start()
        end = time.monotonic() + timeout
        while not port_open(port):
            if time.monotonic() > end:
                raise DeploymentError(f"{what} does not listen on 127.0.0.1:{port}")
            time.sleep(0.2)

    @staticmethod
    def _start_postgres() -> None:
        versions = sorted(os.listdir("/etc/postgresql")) if Path("/etc/postgresql").is_dir() else []
        if not versions:
            raise DeploymentError(f"no PostgreSQL on 127.0.0.1:{POSTGRES_PORT} and none installed to start")
        subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", "start"], check=True)

    @staticmethod
    def _start_redis() -> None:
        for folder in ("/var/lib/redis", "/var/log/redis"):
            Path(folder).mkdir(parents=True, exist_ok=True)
        subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1",
                        "--port", str(REDIS_PORT), "--save", "", "--appendonly", "no",
                        "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log"], check=True)

    def _admin_connection(self) -> Any:
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=POSTGRES_PORT, user=POSTGRES_ADMIN,
                               dbname="postgres", autocommit=True, connect_timeout=10)

    def _create_database(self) -> None:
        from psycopg import errors, sql

        url = urlsplit(self.compose_env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        role = url.username or "airflow"
        name = f"{(url.path.lstrip('/') or 'airflow')}_systest_{os.getpid()}_{secrets.token_hex(3)}"
        with self._admin_connection() as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if not exists:
                with contextlib.suppress(errors.DuplicateObject):  # created meanwhile by someone else
                    conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                        sql.Identifier(role), sql.Literal(url.password or "")))
                    self.created_role = role
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(role)))
        self.database = name

    def _drop_database(self) -> None:
        from psycopg import errors, sql

        if not self.database:
            return
        with self._admin_connection() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.database)))
            self.database = ""
            if self.created_role:
                # Another deployment may own a database with it meanwhile: then the role stays.
                with contextlib.suppress(errors.DependentObjectsStillExist, errors.ObjectInUse):
                    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(self.created_role)))
                self.created_role = None

    def _flush_redis(self) -> None:
        if self.redis_db is None:
            return
        import redis

        with redis.Redis(host="127.0.0.1", port=REDIS_PORT, db=self.redis_db, socket_timeout=10) as client:
            client.flushdb()
        self.redis_db = None

    def _start_s3(self) -> None:
        from evaluation.testing.s3 import LocalS3

        server = LocalS3().start()
        self.s3_server = server
        self.s3_endpoint = server.endpoint_url
        self.s3_role_arn = server.create_role(TASK_ROLE)
        client = self.s3_access().client
        for bucket in self.buckets:
            client.create_bucket(Bucket=bucket)

    def _stop_s3(self) -> None:
        if self.s3_server is not None:
            self.s3_server.stop()
            self.s3_server = None

    def aws_connection(self) -> dict[str, Any]:
        """The compose file's ``aws_default`` connection, its endpoint mapped to the local S3 API,
        assuming :data:`TASK_ROLE` through that server's STS."""
        connection = json.loads(self.compose_env["AIRFLOW_CONN_AWS_DEFAULT"])
        extra = connection.setdefault("extra", {})
        extra.update(endpoint_url=self.s3_endpoint, role_arn=self.s3_role_arn,
                     service_config={**extra.get("service_config", {}), "sts": {"endpoint_url": self.s3_endpoint}})
        return connection

    def assumed_roles(self) -> list[Any]:
        """Every AssumeRole the local S3 server's STS has answered (:class:`AssumedRole`)."""
        return self.s3_server.assumed_roles() if self.s3_server is not None else []

    def s3_access(self) -> Any:
        """S3 on the deployment's S3 API with the compose file's keys (not the tasks' role)."""
        import boto3
        from botocore.config import Config

        from evaluation import storage

        connection = self.aws_connection()
        session = boto3.Session(aws_access_key_id=connection.get("login"), aws_secret_access_key=connection.get("password"),
                                region_name=connection["extra"].get("region_name") or "us-east-1")
        return storage.s3_access(session, endpoint_url=self.s3_endpoint, config=storage.s3_config(Config(
            request_checksum_calculation="when_required", response_checksum_validation="when_required")))

    # --- configuration ------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        """The components' environment: the compose block with its hosts and paths mapped here."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
        env.update(self.compose_env)
        # postgres -> the deployment's database on the local server (same role, password, driver),
        # redis -> the claimed index of the local Redis, airflow-apiserver -> the local api-server.
        database = f"/{self.database}"
        on_loopback = {  # variable: (port, path; None keeps the URL's)
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": (POSTGRES_PORT, database),
            "AIRFLOW__CELERY__RESULT_BACKEND": (POSTGRES_PORT, database),
            "AIRFLOW__CELERY__BROKER_URL": (REDIS_PORT, f"/{self.redis_db}"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": (self.api_port, None),
        }
        env.update({key: _on_loopback(env[key], port, path) for key, (port, path) in on_loopback.items()})
        env.update({
            "AIRFLOW_CONN_AWS_DEFAULT": json.dumps(self.aws_connection()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": self._local_path(
                env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]),
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "plugins")]),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(self.health_port),
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def _local_path(self, image_path: str) -> str:
        if image_path == IMAGE_HOME or image_path.startswith(IMAGE_HOME + "/"):
            return str(self.home / image_path[len(IMAGE_HOME) :].lstrip("/"))
        raise DeploymentError(f"{image_path} is outside {IMAGE_HOME}: no local place for it")

    def _write_passwords_file(self) -> None:
        """As airflow-init does: {user: password} as JSON, mode 0660."""
        path = Path(self.env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({self.username: self.password}), encoding="utf-8")
        path.chmod(0o660)


def main(argv: list[str] | None = None) -> int:
    """``python -m scripts.deployment``: bring the stack up and keep it until Ctrl-C."""
    import argparse

    parser = argparse.ArgumentParser(description="docker-compose.yml's stack, natively on loopback")
    parser.add_argument("variables", nargs="*", metavar="NAME=VALUE", help="compose variables (as in .env)")
    parser.add_argument("--workers", type=int, default=1,
                        help="Celery workers to run (compose's --scale airflow-worker=N)")
    args = parser.parse_args(argv)
    variables = dict(item.split("=", 1) for item in args.variables)
    with LocalDeployment(variables, workers=args.workers) as deployment:
        print(f"API {deployment.api_url} (user {deployment.username!r}), S3 {deployment.s3_endpoint}, "
              f"logs in {deployment.folder}; Ctrl-C stops everything", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
                deployment.check_components()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
