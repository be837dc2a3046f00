"""Item 12 of ``make bench``: a day of many small objects read from S3, as LiteLLM's S3 logging
writes it (one object per call), through the real ingest stage (``input_format: litellm``: one
listing, a bounded pool of reads, the same validation in bounded batches).

The S3 server (moto) runs in a process of its own on loopback, so the reader's CPU is its own.
A day of ``objects`` one-call objects (generated payloads in LiteLLM's shape and key layout, from
:mod:`evaluation.cli.sample_formats`) is read with the pool, and a smaller day of ``serial`` objects
both with the pool and one object at a time (one read in flight); reported: objects a second, the
reader's CPU per object, its peak memory, and the ratio of the pool's rate to one at a time's.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import child_main, cpu_seconds, peak_rss_mib

BUCKET = "bench-logs"
DAYS = {"big": dt.date(2026, 11, 25), "small": dt.date(2026, 11, 26)}
#: The S3 server, in a process of its own: it prints its address and stops when its stdin closes.
SERVER = ("import sys, logging; from moto.server import ThreadedMotoServer; logging.getLogger('werkzeug').setLevel(40); "
          "s = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False); s.start(); "
          "print('http://%s:%s' % s.get_host_and_port(), flush=True); sys.stdin.read(); s.stop()")


def start_server() -> tuple[subprocess.Popen[str], str]:
    """The S3 server's process and endpoint."""
    process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _access(endpoint: str) -> Any:
    # the project's storage and the embedded server's keys: only in the child that uses them
    from evaluation.storage import s3_access
    from evaluation.testing.s3 import LocalS3

    server = LocalS3()
    server.endpoint_url = endpoint
    return s3_access(server.session(), endpoint_url=endpoint)


def fill(params: dict[str, Any]) -> dict[str, Any]:
    """Write the two days' one-call objects (``objects`` and ``serial`` of them)."""
    from evaluation.cli import sample_formats
    from evaluation.testing import synthetic

    access = _access(params["endpoint"])
    access.client.create_bucket(Bucket=BUCKET)
    written = 0
    with ThreadPoolExecutor(16) as pool:
        for name, count in (("big", params["objects"]), ("small", params["serial"])):
            lines = synthetic.generate_day(DAYS[name], count, bad=False)
            objects = sample_formats.day_objects(DAYS[name], lines, "litellm")
            puts = [pool.submit(access.client.put_object, Bucket=BUCKET, Key=f"litellm/{key}", Body=data)
                    for key, data in objects.items()]
            written += sum(1 for put in puts if put.result())
    return {"written": written}


def read(params: dict[str, Any]) -> dict[str, Any]:
    """Ingest one day with ``concurrency`` reads in flight: objects/s, CPU per object, peak memory."""
    from evaluation.contract.options import build_config
    from evaluation.stages import Stores
    from evaluation.stages import ingest as ingest_stage

    ingest_stage.READ_CONCURRENCY = params["concurrency"]
    access = _access(params["endpoint"])
    with tempfile.TemporaryDirectory(prefix="bench-objects-") as out:
        cfg = build_config({"input_uri": f"s3://{BUCKET}/litellm", "output_uri": out, "input_format": "litellm"},
                           date=DAYS[params["day"]], run_id="bench", trigger="bench")
        stores = Stores.open(cfg, access)
        started, cpu = time.monotonic(), cpu_seconds()
        counts = ingest_stage.ingest_and_validate(cfg, stores)
        seconds, cpu = time.monotonic() - started, cpu_seconds() - cpu
    return {"objects": counts.objects, "valid": counts.valid, "seconds": round(seconds, 2),
            "objects_per_s": round(counts.objects / seconds, 1), "cpu_ms_per_object": round(1000 * cpu / counts.objects, 3),
            "peak_rss_mib": round(peak_rss_mib(), 1), "concurrency": params["concurrency"]}


if __name__ == "__main__":
    child_main({"fill": fill, "read": read})
