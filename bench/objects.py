"""Item 14 of ``make bench``: a day of many small objects read from S3, as LiteLLM's S3 logging
writes it (one object per call), through the real ingest stage (``input_format: litellm``: one
listing, a bounded pool of reads, the same validation in bounded batches).

The S3 server (moto's application, served by uvicorn with connections kept alive as S3 keeps them)
runs in a process of its own, so the reader's CPU is its own. It answers on two loopback ports over
one store: at once, and after :data:`S3_LATENCY_S` a request (a first-byte latency as S3's; the
wait is a sleep, it costs the server no CPU). A day of ``big`` one-call objects (generated payloads
in LiteLLM's shape and key layout, from :mod:`evaluation.cli.sample_formats`) is read with the pool,
and a smaller day both with the pool and one object at a time (a client of one connection: one read
in flight); reported: objects a second, the reader's CPU per object and the server's, the reader's
peak memory, and the ratio of the pool's rate to one at a time's. Each read runs after a warm-up
day in the same process, so imports and the validation suite's set-up (once a run) are not counted
against the objects.

On loopback both sides are CPU-bound (botocore ~2 ms a GET, moto ~3 ms: on 2 shared cores a pool
can at best overlap the two), so that ratio is reported, not held to a goal; the ≥ 10× goal is
decided with the latency, which is what a pool hides on S3.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import child_main, cpu_seconds, peak_rss_mib, process_cpu_seconds

BUCKET = "bench-logs"
DAYS = {"big": dt.date(2026, 11, 25), "small": dt.date(2026, 11, 26), "warm": dt.date(2026, 11, 24)}
#: The per-request latency put in front of the server for the latency-bound figures (seconds): the
#: low end of the 100-200 ms widely quoted for small objects on S3; AWS's whitepaper puts the median
#: often in the tens of milliseconds (docs/performance.md, Many small objects, projects the ratio there).
S3_LATENCY_S = 0.1
#: Requests the server handles at once (a2wsgi's threads running moto).
SERVER_THREADS = 128


def serve(latency_s: float = S3_LATENCY_S) -> None:
    """The S3 server of the module's docstring, the second port waiting ``latency_s`` a request
    (uvicorn: werkzeug, moto's own server, closes each connection, so every request would pay a
    new one). Prints the two endpoints, direct first; stops when stdin closes."""
    import asyncio
    import logging
    import socket
    import threading

    import uvicorn
    from a2wsgi import WSGIMiddleware
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    moto: Any = DomainDispatcherApplication(create_backend_app)
    application = WSGIMiddleware(moto, workers=SERVER_THREADS)

    async def delayed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await asyncio.sleep(latency_s)
        await application(scope, receive, send)

    async def main() -> None:
        servers, sockets = [], []
        for app in (application, delayed):
            # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say so; without it, each
            # response's body waits for the client's delayed ACK of its headers (40 ms)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.bind(("127.0.0.1", 0))
            sock.listen(1024)  # connections queue from here, before the servers start
            sockets.append(sock)
            servers.append(uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                                         backlog=1024, timeout_keep_alive=60)))
        print(" ".join(f"http://{host}:{port}" for host, port in (s.getsockname()[:2] for s in sockets)), flush=True)
        loop = asyncio.get_running_loop()

        def stop_on_eof() -> None:
            sys.stdin.read()
            for server in servers:
                loop.call_soon_threadsafe(setattr, server, "should_exit", True)

        threading.Thread(target=stop_on_eof, daemon=True).start()
        await asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in zip(servers, sockets, strict=True)))

    asyncio.run(main())


def start_server(latency_s: float = S3_LATENCY_S) -> tuple[subprocess.Popen[str], str, str]:
    """The S3 server's process and its two endpoints: direct, and with ``latency_s`` a request."""
    from bench.common import REPO, child_env

    process = subprocess.Popen([sys.executable, "-c", f"from bench.objects import serve; serve({latency_s!r})"],
                               cwd=REPO, env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    direct, delayed = process.stdout.readline().split()
    return process, direct, delayed


def _access(endpoint: str, connections: int | None = None) -> Any:
    # the project's storage, botocore and the embedded server's keys: only in the child that uses them
    from botocore.config import Config

    from evaluation.storage import s3_access, s3_config
    from evaluation.testing.s3 import LocalS3

    config = s3_config(Config(max_pool_connections=connections) if connections else None)
    return s3_access(LocalS3().session(), endpoint_url=endpoint, config=config)


def fill(params: dict[str, Any]) -> dict[str, Any]:
    """Write the days' one-call objects (``params["days"]``: day name → objects)."""
    from evaluation.cli import sample_formats
    from evaluation.testing import synthetic

    access = _access(params["endpoint"], 16)
    access.client.create_bucket(Bucket=BUCKET)
    written = 0
    with ThreadPoolExecutor(16) as pool:
        for name, count in params["days"].items():
            lines = synthetic.generate_day(DAYS[name], count, bad=False)
            objects = sample_formats.day_objects(DAYS[name], lines, "litellm")
            puts = [pool.submit(access.client.put_object, Bucket=BUCKET, Key=f"litellm/{key}", Body=data)
                    for key, data in objects.items()]
            written += sum(1 for put in puts if put.result())
    return {"written": written}


def _ingest(endpoint: str, day: str, connections: int | None) -> tuple[Any, float, float]:
    """The ingest stage on one day: its counts, wall seconds and this process's CPU seconds."""
    from evaluation.contract.options import build_config
    from evaluation.stages import Stores
    from evaluation.stages import ingest as ingest_stage

    access = _access(endpoint, connections)
    with tempfile.TemporaryDirectory(prefix="bench-objects-") as out:
        cfg = build_config({"input_uri": f"s3://{BUCKET}/litellm", "output_uri": out, "input_format": "litellm"},
                           date=DAYS[day], run_id="bench", trigger="bench")
        stores = Stores.open(cfg, access)
        started, cpu = time.monotonic(), cpu_seconds()
        counts = ingest_stage.ingest_and_validate(cfg, stores)
        return counts, time.monotonic() - started, cpu_seconds() - cpu


def read(params: dict[str, Any]) -> dict[str, Any]:
    """Ingest one day with ``connections`` reads in flight (None: the client's default pool), after
    a warm-up day in the same process (imports and the validation suite's set-up are paid once a
    run, not per object): objects/s, this reader's CPU per object, the server's, peak memory."""
    from evaluation.storage.stores import S3_MAX_POOL_CONNECTIONS

    _ingest(params["endpoint"], "warm", params["connections"])
    server_cpu = process_cpu_seconds(params["server_pid"])
    counts, seconds, cpu = _ingest(params["endpoint"], params["day"], params["connections"])
    server_cpu = process_cpu_seconds(params["server_pid"]) - server_cpu
    return {"objects": counts.objects, "valid": counts.valid, "seconds": round(seconds, 2),
            "objects_per_s": round(counts.objects / seconds, 1), "cpu_ms_per_object": round(1000 * cpu / counts.objects, 3),
            "server_cpu_ms_per_object": round(1000 * server_cpu / counts.objects, 3),
            "peak_rss_mib": round(peak_rss_mib(), 1), "connections": params["connections"] or S3_MAX_POOL_CONNECTIONS}


if __name__ == "__main__":
    child_main({"fill": fill, "read": read})
