"""Shared helpers: running a measurement in a child process, the local judge server as a process,
machine load, peak memory."""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psutil

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def child_env() -> dict[str, str]:
    """Environment of a measurement child: the repository on the path, litellm kept offline."""
    env = os.environ.copy()
    paths = [str(REPO), str(REPO / "plugins"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.setdefault("LITELLM_LOG", "ERROR")
    env.setdefault("PYTHONWARNINGS", "ignore")
    return env


# --------------------------------------------------------------------------------------------
# Inside a child


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (MiB; Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU of this process so far (all threads); with ``RUSAGE_CHILDREN``, of the
    children it has reaped."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(run: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """What ``run(*args, **kwargs)`` returned, and the wall seconds it took."""
    started = time.monotonic()
    return run(*args, **kwargs), time.monotonic() - started


def child_main(tasks: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> None:
    """Entry point of a measurement module: ``python -m bench.X TASK --params JSON --out FILE``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("task", choices=sorted(tasks))
    parser.add_argument("--params", default="{}")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    result = tasks[args.task](json.loads(args.params))
    result.setdefault("peak_rss_mib", round(peak_rss_mib(), 1))
    args.out.write_text(json.dumps(result, indent=2, default=str))


# --------------------------------------------------------------------------------------------
# Machine load


def _busy_seconds() -> float:
    times = psutil.cpu_times()
    return float(sum(times[:8]) - times.idle - times.iowait)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (0 when it is gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def load_average() -> float:
    """The 1-minute load average."""
    return round(os.getloadavg()[0], 2)


@dataclass
class LoadProbe:
    """CPU used on the machine during a measurement, split into ours and everybody else's."""

    watched: list[int] = field(default_factory=list)  # live helper processes that count as ours
    _busy: float = 0.0
    _wall: float = 0.0
    _children: float = 0.0
    _self: float = 0.0
    _watched: float = 0.0
    load_before: float = 0.0

    def start(self) -> LoadProbe:
        self.load_before = load_average()
        self._busy = _busy_seconds()
        self._wall = time.monotonic()
        self._children = cpu_seconds(resource.RUSAGE_CHILDREN)
        self._self = cpu_seconds()
        self._watched = sum(process_cpu_seconds(p) for p in self.watched)
        return self

    def stop(self) -> dict[str, float]:
        wall = max(time.monotonic() - self._wall, 1e-9)
        busy = _busy_seconds() - self._busy
        ours = (cpu_seconds(resource.RUSAGE_CHILDREN) - self._children) + (cpu_seconds() - self._self)
        ours += sum(process_cpu_seconds(p) for p in self.watched) - self._watched
        return {
            "load_avg_1m_before": self.load_before,
            "load_avg_1m_after": load_average(),
            "cores_busy": round(busy / wall, 2),
            "cores_ours": round(ours / wall, 2),
            "cores_others": round(max(0.0, busy - ours) / wall, 2),
        }


def wait_for_quiet(max_wait_s: float = 45.0, threshold: float = 1.5) -> float:
    """Wait (bounded) until other processes use under ``threshold`` cores; returns the last reading."""
    deadline = time.monotonic() + max_wait_s
    while True:
        before = _busy_seconds()
        time.sleep(2.0)
        cores = (_busy_seconds() - before) / 2.0
        if cores < threshold or time.monotonic() >= deadline:
            return round(cores, 2)


# --------------------------------------------------------------------------------------------
# The local OpenAI-compatible server as a separate process


@dataclass
class ServerProcess:
    """``python -m evaluation.testing.openai_server`` running in its own process."""

    process: subprocess.Popen[str]
    base_url: str
    requests: int | None = None


@contextmanager
def judge_server(latency_s: float, reply: str) -> Iterator[ServerProcess]:
    """Start the server (fixed latency, `reply` to every request); stop it on exit and read how
    many requests it served."""
    with tempfile.NamedTemporaryFile("w", prefix="bench-reply-", suffix=".json", delete=False) as handle:
        handle.write(reply)
        reply_file = Path(handle.name)
    command = [sys.executable, "-m", "evaluation.testing.openai_server", "--port", "0", "--latency", str(latency_s),
               "--reply-file", str(reply_file)]
    process = subprocess.Popen(command, cwd=REPO, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if not line.startswith("READY "):
            raise RuntimeError(f"the judge server did not start: {line!r}")
        server = ServerProcess(process, line.split(" ", 1)[1])
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            output, _ = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
        for text in (output or "").splitlines():
            if text.startswith("REQUESTS "):
                server.requests = int(text.split()[1])  # type: ignore[possibly-undefined]
        reply_file.unlink(missing_ok=True)


class Bench:
    """Collects the table's rows and every measurement's details."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[dict[str, Any]] = []
        self.details: dict[str, Any] = {}
        self.started = time.monotonic()
        self.log = Path(tempfile.gettempdir()) / "llm-evaluation-bench.log"
        self.log.write_text("")

    def row(self, item: int, metric: str, value: str, target: str, holds: bool | None, **extra: Any) -> None:
        self.rows.append({"item": item, "metric": metric, "value": value, "target": target,
                          "holds": "n/a" if holds is None else ("yes" if holds else "no"), **extra})

    def child(self, module: str, task: str, params: dict[str, Any], *, keep: str | None = None,
              timeout_s: float = 900.0, watched: list[int] | None = None) -> dict[str, Any]:
        """Run ``python -m bench.<module> <task>`` (its output appended to the log) and return its JSON
        result, plus the child's wall time (``child_wall_s``, imports included) and the machine's load
        during the run; the result is also kept as ``details[keep]``."""
        print(f"  [{self.elapsed():5.0f}s] {module}.{task} {json.dumps(params)[:110]}", flush=True)
        with tempfile.NamedTemporaryFile(prefix=f"bench-{task}-", suffix=".json", delete=False) as handle:
            out = Path(handle.name)
        command = [sys.executable, "-m", f"bench.{module}", task, "--params", json.dumps(params), "--out", str(out)]
        probe = LoadProbe(watched=list(watched or [])).start()
        with open(self.log, "a") as stream:
            completed, wall = timed(subprocess.run, command, cwd=REPO, env=child_env(), stdout=stream,
                                    stderr=subprocess.PIPE, text=True, timeout=timeout_s)
        load = probe.stop()
        try:
            if completed.returncode != 0:
                raise RuntimeError(f"bench.{module} {task} exited {completed.returncode}:\n{completed.stderr[-4000:]}")
            result = json.loads(out.read_text())
        finally:
            out.unlink(missing_ok=True)
        result["child_wall_s"] = round(wall, 2)
        result["load"] = load
        if keep is not None:
            self.details[keep] = result
        return result

    def day(self, module: str, task: str, timeout_s: float) -> tuple[int, dict[str, Any]]:
        """(records, result) of a measurement on a generated day of 2,000 records (400 with
        --quick), started once the machine is quiet; the result is kept as ``details[module]``."""
        records = 400 if self.args.quick else 2000
        wait_for_quiet()
        return records, self.child(module, task, {"records": records}, keep=module, timeout_s=timeout_s)

    def elapsed(self) -> float:
        return time.monotonic() - self.started
