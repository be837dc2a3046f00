"""Airflow's REST API v2 as the system tests and the deployment script drive it: a JWT from the
simple auth manager, DAG runs, task instances and their logs."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from scripts.processes import DeploymentError


class _Logged(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def log_path(self) -> Any: ...

    def log_tail(self, lines: int = ...) -> str: ...


class Deployed(Protocol):
    """What the client needs of a deployment (:class:`scripts.deployment.LocalDeployment`): the API's
    URL and user, its components' logs, and a check that they still run."""

    api_url: str
    username: str
    password: str

    @property
    def components(self) -> Mapping[str, _Logged]: ...

    def check_components(self) -> None: ...


class ApiError(RuntimeError):
    """A REST call answered with an error status."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> {status}: {body[:2000]}")
        self.status = status
        self.body = body


class ApiClient:
    """A small client of Airflow's REST API v2 with the SimpleAuthManager's JWT."""

    def __init__(self, deployment: Deployed) -> None:
        import httpx

        self.deployment = deployment
        self._http = httpx.Client(base_url=deployment.api_url, timeout=30.0)
        self._token: str | None = None

    def close(self) -> None:
        self._http.close()

    # --- plumbing -----------------------------------------------------------------------------

    def token(self) -> str:
        """A JWT from ``POST /auth/token`` with the user's password (cached)."""
        if self._token is None:
            credentials = {"username": self.deployment.username, "password": self.deployment.password}
            response = self._http.post("/auth/token", json=credentials)
            if response.status_code not in (200, 201):
                raise ApiError("POST", "/auth/token", response.status_code, response.text)
            self._token = response.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,),
                headers: Mapping[str, str] | None = None, **kwargs: Any) -> Any:
        """JSON of an authenticated call; ApiError on any other status than `expect`."""
        for attempt in range(2):
            response = self._http.request(
                method, path, headers={**(headers or {}), "Authorization": f"Bearer {self.token()}"}, **kwargs)
            if response.status_code == 401 and attempt == 0:  # expired: a new token, once
                self._token = None
                continue
            break
        if response.status_code not in expect:
            raise ApiError(method, path, response.status_code, response.text)
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def _pages(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = self.get(path, limit=100, offset=len(items), **params)
            items.extend(page[key])
            if not page[key] or len(items) >= page.get("total_entries", 0):
                return items

    # --- reads --------------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        return self.get("/api/v2/version")

    def health(self) -> dict[str, Any]:
        return self.get("/api/v2/monitor/health")

    def dags(self) -> list[dict[str, Any]]:
        return self._pages("/api/v2/dags", "dags")

    def import_errors(self) -> list[dict[str, Any]]:
        return self._pages("/api/v2/importErrors", "import_errors")

    def pool(self, name: str) -> dict[str, Any]:
        return self.get(f"/api/v2/pools/{name}")

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of a run, mapped ones included (one per map index)."""
        return self._pages(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", "task_instances")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        """`task_id` or `task_id[map_index]` -> state."""
        return {ti_label(ti): ti["state"] for ti in self.task_instances(dag_id, run_id)}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int, map_index: int = -1) -> str:
        """A task try's log as text."""
        page = self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
                            params={"map_index": map_index, "full_content": "true"},
                            headers={"Accept": "application/json"})
        content = page.get("content") if isinstance(page, dict) else page
        if isinstance(content, list):
            return "\n".join(log_line(entry) for entry in content)
        return str(content)

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        """What a task returned (its ``return_value`` XCom, deserialized)."""
        entry = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
                         map_index=-1, deserialize="true", stringify="false")
        return entry["value"]

    # --- writes -------------------------------------------------------------------------------

    def unpause(self, dag_id: str) -> dict[str, Any]:
        return self.request("PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: Mapping[str, Any], *, logical_date: dt.datetime | None = None) -> dict[str, Any]:
        """``POST /api/v2/dags/{dag_id}/dagRuns``; returns the new run (``dag_run_id``, ``state``...).
        `logical_date` None triggers a run without one."""
        body = {"logical_date": logical_date.isoformat() if logical_date else None, "conf": dict(conf)}
        return self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json=body, expect=(200, 201))

    # --- waiting ------------------------------------------------------------------------------

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 180.0, *,
                     fail_on_retry: bool = False) -> dict[str, Any]:
        """The run once it is `success` or `failed`; DeploymentError with the task states and the
        ends of the logs after `timeout` seconds. With `fail_on_retry`, as soon as a task of the
        DAG (in this run, or in a run it queues behind) waits for a retry (looked up every third
        poll: every request costs the api-server's CPU, which the tasks share)."""
        end = time.monotonic() + timeout
        for polls in itertools.count():
            run = self.dag_run(dag_id, run_id)
            if run["state"] in ("success", "failed"):
                return run
            self.deployment.check_components()
            if fail_on_retry and polls % 3 == 2:
                # Task instances of the DAG, in any run, that failed a try and wait for the next one.
                retrying = self._pages(f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances", "task_instances",
                                       state="up_for_retry")
                if retrying:
                    ti = retrying[0]
                    raise DeploymentError(
                        f"waiting for {dag_id} run {run_id} ({run['state']}): {ti_label(ti)} of run "
                        f"{ti['dag_run_id']} failed try {ti['try_number']} and waits for a retry\n"
                        + self.diagnose(dag_id, ti["dag_run_id"]))
            if time.monotonic() > end:
                raise DeploymentError(f"{dag_id} run {run_id} still {run['state']} after {timeout:.0f}s\n"
                                      + self.diagnose(dag_id, run_id))
            time.sleep(1.0)
        raise AssertionError("unreachable")

    def wait_for_new_run(self, dag_id: str, run_type: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first run of `run_type` (e.g. ``scheduled``) once the scheduler has created one."""
        end = time.monotonic() + timeout
        while True:
            runs = self._pages(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs", run_type=run_type)
            if runs:
                return runs[0]
            if time.monotonic() > end:
                raise DeploymentError(f"no {run_type} run of {dag_id} after {timeout:.0f}s")
            time.sleep(1.0)

    def diagnose(self, dag_id: str, run_id: str, lines: int = 25) -> str:
        """Task states, the ends of the unfinished or failed tasks' logs and of the components' logs."""
        parts = []
        try:
            tis = self.task_instances(dag_id, run_id)
        except Exception as exc:  # diagnostics must not hide the original problem
            return f"(task instances unavailable: {exc!r})"
        parts.append("task states: " + json.dumps({ti_label(ti): ti["state"] for ti in tis}, sort_keys=True))
        for ti in tis:
            if ti["state"] in ("success", "skipped", "upstream_failed", None) or not ti.get("try_number"):
                continue
            try:
                text = self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"], ti["map_index"])
            except Exception as exc:
                text = f"(log unavailable: {exc!r})"
            parts.append(f"--- log of {ti_label(ti)} ({ti['state']}), try {ti['try_number']}:\n"
                         + "\n".join(text.splitlines()[-lines:]))
        for component in self.deployment.components.values():
            parts.append(f"--- {component.log_path.name}:\n{component.log_tail(lines)}")
        return "\n".join(parts)


def ti_label(ti: Mapping[str, Any]) -> str:
    return f"{ti['task_id']}[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else ti["task_id"]


#: Fields of a structured task log line that every line repeats.
_LOG_CONTEXT = frozenset(("event", "timestamp", "level", "logger", "dag_id", "task_id", "run_id", "ti_id", "map_index",
                          "try_number", "filename", "lineno", "error_detail"))


def log_line(entry: Any) -> str:
    """A structured task log entry as one line of text, exceptions as `type: message` (innermost
    cause last)."""
    if not isinstance(entry, dict):
        return str(entry)
    extra = {k: v for k, v in entry.items() if k not in _LOG_CONTEXT}
    parts = [entry.get("timestamp", ""), entry.get("level", ""), entry.get("event", ""), extra or ""]
    parts += [f"{e.get('exc_type')}: {e.get('exc_value')}" for e in entry.get("error_detail") or []
              if isinstance(e, dict)]
    return " ".join(str(p) for p in parts if p)


def max_overlap(intervals: Iterable[tuple[dt.datetime, dt.datetime]]) -> int:
    """The most intervals [start, end) that hold one instant in common."""
    spans = list(intervals)
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])  # an end before a start
    return max(itertools.accumulate((step for _, step in events), initial=0))
