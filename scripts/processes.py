"""Processes and ports of this machine, as a local deployment starts, watches and stops them."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path


class DeploymentError(RuntimeError):
    """The deployment could not start, or a component died."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def process_stats() -> Iterator[tuple[Path, list[str]]]:
    """(``/proc/<pid>``, the fields of its ``stat`` after the command name, which may hold spaces:
    state, ppid, pgrp, session, ...) of every process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        yield entry, stat[stat.rindex(")") + 2 :].split()


def session_cpu_seconds(session: int) -> float:
    """CPU time (user + system) of the live processes of a session and of the children they reaped."""
    ticks = sum(sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
                for _, fields in process_stats() if int(fields[3]) == session)
    return ticks / os.sysconf("SC_CLK_TCK")


def session_processes(sessions: Iterable[int], environ_marker: bytes) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose session is one of `sessions`, or whose
    environment holds `environ_marker` (a ``NAME=value`` entry)."""
    wanted = set(sessions)
    found = []
    for entry, fields in process_stats():
        if fields[0] == "Z" or int(entry.name) == os.getpid():
            continue
        try:
            if int(fields[3]) not in wanted and environ_marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), cmdline))
    return found


def answers(url: str) -> bool:
    """``GET url`` answers 200."""
    import httpx

    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False
