"""The OpenAI batch API of the test server (:class:`evaluation.testing.openai_server.OpenAIServer`).

Endpoints: ``POST /v1/files`` (multipart upload, ``purpose=batch``), ``GET /v1/files/{id}`` and
``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches`` (the list, newest first),
``GET /v1/batches/{id}`` and ``POST /v1/batches/{id}/cancel`` (each also without ``/v1``). A batch's lines are answered by the
server's own responder and rendered by its own completion builder, so a batch line gets the very
reply an online call of the same body gets.

Knobs (attributes of :class:`BatchEndpoints`, reachable as ``server.batches``; change them at
any time):

* ``delay_s``: seconds a batch stays ``in_progress`` before its lines are run;
* ``fail_ids`` / ``fail_fraction``: lines (by ``custom_id``, or a deterministic share of them)
  answered with a 500 in the error file; ``fail_times``: how many times each such line fails
  before it is answered (None: every time);
* ``bad_fraction``: a deterministic share of the lines answered with a 400 (``invalid_request_error``);
* ``max_requests`` / ``max_bytes``: one batch's limits; a batch whose input file has more lines or
  bytes ``failed`` at validation, running none of its lines, as OpenAI's does;
* ``max_batches``: batches created past this many are refused with a 500 (a provider failing
  half-way through a chunk's submission);
* ``expire_batches`` / ``expire_after``: the next ``expire_batches`` batches expire after running
  ``expire_after`` of their lines (an int, or a fraction of the lines); the rest land in the error
  file with code ``batch_expired``, as OpenAI does.

Every request is counted (:attr:`BatchEndpoints.counts`) and every line run is recorded
(:attr:`BatchEndpoints.line_ids`) and counted as a chat request of the server, so a test can
assert that nothing was sent twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from evaluation.testing.replies import RecordedRequest, Reply, error_body


def json_response(
    status: int, payload: dict[str, Any] | list[Any] | str | bytes, headers: Mapping[str, str] | None = None
) -> web.Response:
    """A response of ``payload``: a dict or list as JSON, ``str`` or ``bytes`` verbatim (also sent as
    ``application/json`` unless ``headers`` name another content type)."""
    if isinstance(payload, bytes):
        data = payload
    elif isinstance(payload, str):
        data = payload.encode("utf-8")
    else:
        data = json.dumps(payload).encode("utf-8")
    out = dict(headers or {})
    if not any(k.lower() == "content-type" for k in out):
        out["Content-Type"] = "application/json"
    return web.Response(status=status, body=data, headers=out)


def _not_found(what: str) -> web.Response:
    return json_response(404, error_body(f"No such {what}", "invalid_request_error", "not_found"))


def _share(custom_id: str) -> float:
    return int(hashlib.sha256(custom_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class BatchEndpoints:
    """Files and batches held in memory, run on the server's event loop."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.delay_s = 0.0
        self.fail_ids: set[str] = set()
        self.fail_fraction = 0.0
        self.fail_times: int | None = None
        self.bad_fraction = 0.0
        self.max_requests: int | None = None
        self.max_bytes: int | None = None
        self.max_batches: int | None = None
        self._failures: dict[str, int] = {}
        self.expire_batches = 0
        self.expire_after: float = 0.5
        self._lock = threading.Lock()
        self.files: dict[str, dict[str, Any]] = {}
        self._contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._cancel: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)
        self.counts: dict[str, int] = dict.fromkeys(
            ("files_created", "file_reads", "batches_created", "batch_reads", "cancels", "lines"), 0)
        self.line_ids: list[str] = []

    def add_routes(self, app: web.Application) -> None:
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/files", self._create_file)
            app.router.add_get(f"{prefix}/files/{{file_id}}", self._get_file)
            app.router.add_get(f"{prefix}/files/{{file_id}}/content", self._file_content)
            app.router.add_post(f"{prefix}/batches", self._create_batch)
            app.router.add_get(f"{prefix}/batches", self._list_batches)
            app.router.add_get(f"{prefix}/batches/{{batch_id}}", self._get_batch)
            app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", self._cancel_batch)

    def _count(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    # ------------------------------------------------------------------------------------ files

    def _store_file(self, name: str, data: bytes, purpose: str) -> dict[str, Any]:
        file_id = f"file-{next(self._ids):08d}"
        info = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": name, "purpose": purpose, "status": "processed", "status_details": None}
        with self._lock:
            self.files[file_id] = info
            self._contents[file_id] = data
        return info

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        """The request lines of an uploaded input file, as the server holds it."""
        with self._lock:
            data = self._contents[file_id]
        return [json.loads(raw) for raw in data.decode().splitlines() if raw.strip()]

    async def _create_file(self, request: web.Request) -> web.Response:
        self._count("files_created")
        form = await request.post()
        upload, purpose = form.get("file"), str(form.get("purpose") or "")
        if not isinstance(upload, web.FileField):
            return json_response(400, error_body("a file is required", "invalid_request_error"))
        return json_response(200, self._store_file(str(upload.filename or "upload.jsonl"), upload.file.read(), purpose))

    async def _get_file(self, request: web.Request) -> web.Response:
        info = self.files.get(request.match_info["file_id"])
        return json_response(200, info) if info is not None else _not_found("file")

    async def _file_content(self, request: web.Request) -> web.Response:
        self._count("file_reads")
        data = self._contents.get(request.match_info["file_id"])
        if data is None:
            return _not_found("file")
        return web.Response(status=200, body=data, content_type="application/octet-stream")

    # ---------------------------------------------------------------------------------- batches

    async def _create_batch(self, request: web.Request) -> web.Response:
        self._count("batches_created")
        body = json.loads(await request.read())
        input_id = body.get("input_file_id")
        if input_id not in self._contents:
            return json_response(400, error_body(f"unknown input_file_id {input_id!r}", "invalid_request_error"))
        if self.max_batches is not None and len(self.batches) >= self.max_batches:
            return json_response(500, error_body("The server had an error creating the batch", "server_error"))
        now = int(time.time())
        batch_id = f"batch_{next(self._ids):08d}"
        data = self._contents[input_id]
        lines = self.lines(input_id)
        too_large = [f"{what} {have} is more than {limit}" for what, have, limit in
                     (("the file's requests", len(lines), self.max_requests), ("the file's bytes", len(data), self.max_bytes))
                     if limit is not None and have > limit]
        batch: dict[str, Any] = {
            "id": batch_id, "object": "batch", "endpoint": body.get("endpoint", "/v1/chat/completions"),
            "errors": None, "input_file_id": input_id, "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress", "output_file_id": None, "error_file_id": None, "created_at": now,
            "in_progress_at": now, "expires_at": now + 86400, "finalizing_at": None, "completed_at": None,
            "failed_at": None, "expired_at": None, "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        expire_after: int | None = None
        if too_large:  # refused at validation: failed, nothing run
            batch.update(status="failed", failed_at=now, in_progress_at=None, errors={"object": "list", "data": [
                {"code": "batch_too_large", "message": "; ".join(too_large), "param": None, "line": None}]})
            with self._lock:
                self.batches[batch_id] = batch
            return json_response(200, batch)
        with self._lock:
            self.batches[batch_id] = batch
            if self.expire_batches > 0:
                self.expire_batches -= 1
                share = self.expire_after
                expire_after = int(share) if share >= 1 else int(len(lines) * share)
        task = asyncio.get_running_loop().create_task(self._run(batch, lines, expire_after))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return json_response(200, batch)

    async def _list_batches(self, request: web.Request) -> web.Response:
        self._count("batch_reads")
        with self._lock:
            listed = list(reversed(self.batches.values()))
        return json_response(200, {"object": "list", "data": listed, "has_more": False,
                                   "first_id": listed[0]["id"] if listed else None,
                                   "last_id": listed[-1]["id"] if listed else None})

    async def _get_batch(self, request: web.Request) -> web.Response:
        self._count("batch_reads")
        batch = self.batches.get(request.match_info["batch_id"])
        return json_response(200, batch) if batch is not None else _not_found("batch")

    async def _cancel_batch(self, request: web.Request) -> web.Response:
        self._count("cancels")
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return _not_found("batch")
        if batch["status"] not in ("completed", "failed", "expired", "cancelled"):
            self._cancel.add(batch["id"])
            batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
        return json_response(200, batch)

    async def _run(self, batch: dict[str, Any], lines: list[dict[str, Any]], expire_after: int | None) -> None:
        started = time.monotonic()  # delay_s is read as it goes: a test may shorten it while a batch waits
        while time.monotonic() < started + self.delay_s and batch["id"] not in self._cancel:
            await asyncio.sleep(min(0.05, max(0.0, started + self.delay_s - time.monotonic())))
        results: dict[str, list[str]] = {"output": [], "error": []}
        ended = "completed"
        for position, line in enumerate(lines):
            custom_id = str(line.get("custom_id"))
            record: dict[str, Any] = {"id": f"batch_req_{next(self._ids):08d}", "custom_id": custom_id,
                                      "response": None, "error": None}
            if batch["id"] in self._cancel or (expire_after is not None and position >= expire_after):
                ended = "cancelled" if batch["id"] in self._cancel else "expired"
                record["error"] = {"code": f"batch_{ended}", "message": f"This request was not run: batch_{ended}"}
                results["error"].append(json.dumps(record))
                continue
            status, payload = await self._answer(line.get("body") or {}, custom_id)
            record["response"] = {"status_code": status, "request_id": f"req_{next(self._ids):08d}", "body": payload}
            results["output" if status == 200 else "error"].append(json.dumps(record))
            batch["request_counts"]["completed" if status == 200 else "failed"] += 1
        now = int(time.time())
        for kind, records in results.items():
            if records:
                data = ("\n".join(records) + "\n").encode()
                batch[f"{kind}_file_id"] = self._store_file(f"{batch['id']}_{kind}.jsonl", data, "batch_output")["id"]
        batch["finalizing_at"] = now
        batch[f"{ended}_at"] = now
        batch["status"] = ended

    async def _answer(self, body: dict[str, Any], custom_id: str) -> tuple[int, Any]:
        """Run one line as the server runs a chat request: recorded, counted, the same responder."""
        server = self.server
        server._record(RecordedRequest(body, received_at=time.time(), path="/v1/batches"))
        with self._lock:
            self.counts["lines"] += 1
            self.line_ids.append(custom_id)
        failing = custom_id in self.fail_ids or (self.fail_fraction > 0 and _share(custom_id) < self.fail_fraction)
        if failing:
            with self._lock:
                failed = self._failures.get(custom_id, 0)
                failing = self.fail_times is None or failed < self.fail_times
                if failing:
                    self._failures[custom_id] = failed + 1
        if failing:
            reply = Reply.server_error("injected batch line failure")
        elif self.bad_fraction > 0 and 1.0 - _share(custom_id) < self.bad_fraction:
            reply = Reply.error(400, "injected invalid request", "invalid_request_error")
        else:
            reply = await server._call_responder(body)
        payload = server._payload(body, reply)
        return reply.status, payload.decode() if isinstance(payload, bytes) else payload
