"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

The server speaks just enough of the OpenAI HTTP API for ``litellm`` (or the ``openai`` client) to
drive LLM judges against it::

    with OpenAIServer(responder=ScriptedResponder(['{"score": 1.0}', Reply.rate_limited()])) as srv:
        await litellm.acompletion(model="openai/judge", api_base=srv.base_url, api_key="x", ...)

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models`` and the batch API
(:mod:`evaluation.testing.batches`), each also without ``/v1``. Replies have the exact OpenAI
``chat.completion`` shape, with deterministic token usage (:func:`count_tokens`). A *responder*
decides each reply, which can be a fault, and a :class:`FaultPlan` injects faults (both in
:mod:`evaluation.testing.replies`, importable from here). A request whose ``response_format``
carries a ``json_schema`` is answered as a provider that enforces it strictly: the content is the
reply's first JSON object made to follow the schema, and the content faults (``malformed``,
``prose``) are not injected.

The server runs on its own event loop in a background thread, so it can serve synchronous and
asynchronous test code alike, and hundreds of concurrent requests (latency is an ``asyncio.sleep``).
It is also runnable as a process for benchmarks::

    python -m evaluation.testing.openai_server --port 0 --latency 0.2 --reply-file F

which prints ``READY http://127.0.0.1:PORT/v1`` once listening and ``REQUESTS N`` on SIGTERM.

This module imports neither ``litellm`` nor ``airflow``.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import inspect
import itertools
import json
import logging
import math
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from evaluation.testing.batches import BatchEndpoints, json_response
from evaluation.testing.ratelimit import EnforcedRate
from evaluation.testing.replies import (
    CONTENT_FAULTS,
    DEFAULT_REPLY_CONTENT,
    FAULT_KINDS,
    MALFORMED_CONTENT,
    FaultKind,
    FaultPlan,
    KeyedResponder,
    RecordedRequest,
    Reply,
    Responder,
    ScriptedResponder,
    as_reply,
    count_prompt_tokens,
    count_tokens,
    error_body,
    requested_schema,
    schema_reply,
)

__all__ = [
    "DEFAULT_REPLY_CONTENT", "FAULT_KINDS", "MALFORMED_CONTENT", "FaultPlan", "KeyedResponder", "OpenAIServer",
    "RecordedRequest", "Reply", "ScriptedResponder", "count_prompt_tokens", "count_tokens", "main",
]

logger = logging.getLogger(__name__)


def _is_probe(body: Mapping[str, Any]) -> bool:
    # Polars via judges: the test server starts without it; only a probe needs the prompt
    from evaluation.judges import PROBE_PROMPT

    messages = body.get("messages")
    return (isinstance(messages, list) and len(messages) == 2 and isinstance(messages[0], dict)
            and messages[0].get("content") == PROBE_PROMPT.system)


# ---------------------------------------------------------------------------------------------- server


class OpenAIServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1, on its own event loop in a background thread;
    a context manager (or call :meth:`start` / :meth:`stop`).

    ``responder`` answers each request (default: :data:`DEFAULT_REPLY_CONTENT`); it runs on the
    server's loop and may be a plain or an ``async`` callable. An exception from it becomes a 500
    whose message names the exception, and is appended to :attr:`errors`. ``latency_s`` is slept
    (``asyncio.sleep``) before every reply. ``faults`` injects faults per :class:`FaultPlan`;
    ``seed`` is mixed into its draws. ``latency_s`` and ``responder`` may be reassigned while running.
    ``models`` are the ids ``GET /v1/models`` lists.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        faults: FaultPlan | None = None,
        seed: int = 0,
        port: int = 0,
        models: Sequence[str] = ("mock-judge",),
        record_requests: bool = True,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        shutdown_timeout: float = 2.0,
        answer_probes: bool = True,
        rpm: float | None = None,
        tpm: float | None = None,
        rate_burst_s: float = 1.0,
    ) -> None:
        """Configure the server; nothing listens until :meth:`start` (or ``with``).

        ``rpm`` / ``tpm``: an enforced rate limit (token buckets holding ``rate_burst_s`` seconds of
        each rate; tokens are a request's prompt tokens at admission, its completion once answered):
        a request over it gets a 429 ``rate_limit_exceeded`` with ``Retry-After``, ``retry-after-ms``
        and OpenAI's ``x-ratelimit-*`` headers, and is neither recorded nor counted as a request
        (:attr:`throttled_count` counts them, :attr:`throttled_times` says when they came)."""
        self.responder: Responder = responder if responder is not None else lambda body: DEFAULT_REPLY_CONTENT
        self.latency_s = float(latency_s)
        self.faults = faults
        self.seed = seed
        self.models = tuple(models)
        self.record_requests = record_requests
        self.answer_probes = answer_probes
        self.rate_limits = EnforcedRate(rpm, tpm, burst_s=rate_burst_s) if (rpm or tpm) else None
        self._requested_port = port
        self._loop_factory = loop_factory or asyncio.new_event_loop
        self._shutdown_timeout = shutdown_timeout

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._forget()
        self._ids = itertools.count(1)

        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._hanging: set[asyncio.Task[Any]] = set()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        #: The batch API (files, batches): see :mod:`evaluation.testing.batches`.
        self.batches = BatchEndpoints(self)

    # ----------------------------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 10.0) -> Self:
        """Bind the port and start serving in a background thread; returns ``self`` once listening."""
        if self._thread is not None:
            raise RuntimeError("OpenAIServer already started")
        sock = socket.create_server(("127.0.0.1", self._requested_port))
        self._port = sock.getsockname()[1]
        self._ready.clear()
        self._start_error = None
        self._thread = threading.Thread(
            target=self._thread_main, args=(sock,), name=f"openai-server-{self._port}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"OpenAIServer did not start within {timeout}s")
        if self._start_error is not None:
            self._thread.join(timeout)
            self._thread = None
            raise RuntimeError("OpenAIServer failed to start") from self._start_error
        logger.debug("OpenAI-compatible server listening on %s", self.base_url)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving: hanging requests are dropped, in-flight ones get ``shutdown_timeout`` to finish.

        Idempotent. The recorded requests and counters stay readable afterwards.
        """
        thread, loop = self._thread, self._loop
        if thread is None:
            return
        if loop is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("OpenAIServer thread did not stop within %ss", timeout)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _thread_main(self, sock: socket.socket) -> None:
        loop = self._loop_factory()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            try:
                loop.run_until_complete(self._astart(sock))
            except BaseException as exc:  # noqa: BLE001 - re-raised by start() in the caller's thread
                self._start_error = exc
                sock.close()
                return
            finally:
                self._ready.set()
            loop.run_forever()
            loop.run_until_complete(self._ashutdown())
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                asyncio.set_event_loop(None)
                loop.close()

    async def _astart(self, sock: socket.socket) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/chat/completions", self._handle_chat)
            app.router.add_get(f"{prefix}/models", self._handle_models)
        self.batches.add_routes(app)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=self._shutdown_timeout,
        )
        await runner.setup()
        self._runner = runner
        site = web.SockSite(runner, sock, backlog=2048)
        await site.start()

    async def _ashutdown(self) -> None:
        for task in list(self._hanging):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -------------------------------------------------------------------------------------- state

    @property
    def port(self) -> int:
        """The bound TCP port (known once started)."""
        if self._port is None:
            raise RuntimeError("OpenAIServer not started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI ``api_base``: ``http://HOST:PORT/v1``."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the received chat request bodies, in arrival order (see :class:`RecordedRequest`)."""
        with self._lock:
            return list(self._requests)

    @property
    def probes(self) -> list[dict[str, Any]]:
        """Bodies of the judge client's probe calls (``evaluation.judges.PROBE_PROMPT``), which
        the server answers itself with ``ok`` while ``answer_probes`` is on: they are neither
        passed to the responder nor faulted, recorded or counted as requests."""
        with self._lock:
            return list(self._probes)

    @property
    def request_count(self) -> int:
        """How many chat-completion requests with a valid JSON body arrived (recorded or not)."""
        with self._lock:
            return self._count

    @property
    def throttled_count(self) -> int:
        """Requests refused with a 429 by the enforced rate limit (``rpm`` / ``tpm``)."""
        with self._lock:
            return self.rate_limits.refused if self.rate_limits is not None else 0

    @property
    def throttled_times(self) -> list[float]:
        """When each request refused by the enforced rate limit arrived (``time.time()``, in
        arrival order; since the last reset): with :attr:`requests`' ``received_at``, every
        attempt a client made."""
        with self._lock:
            return list(self._throttled_at)

    @property
    def fault_counts(self) -> dict[str, int]:
        """Faults injected by the :class:`FaultPlan`, per kind (all kinds present, zero if none)."""
        with self._lock:
            return dict(self._fault_counts)

    @property
    def errors(self) -> list[str]:
        """Messages of responder exceptions (each answered with a 500)."""
        with self._lock:
            return list(self._errors)

    @property
    def hanging_requests(self) -> int:
        """How many requests are currently held open by a hang (dropped on client disconnect or stop)."""
        return len(self._hanging)

    def reset(self) -> None:
        """Forget recorded requests, counts, fault counts, per-body attempt numbers and errors."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._requests: list[RecordedRequest] = []
        self._throttled_at: list[float] = []
        self._probes: list[dict[str, Any]] = []
        self._count = 0
        self._fault_counts: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self._attempts: dict[str, int] = {}
        self._body_faults: dict[str, int] = {}
        self._errors: list[str] = []

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` requests arrived (since the last reset); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._count >= n, timeout)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until no connection is open: every request that arrived was answered or dropped,
        and every client that went away was seen to go (a killed client's last requests are then
        recorded). False on timeout."""
        loop = self._loop
        if loop is None or self._thread is None:
            return True

        async def idle() -> None:
            while (runner := self._runner) is not None and runner.server is not None and runner.server.connections:
                await asyncio.sleep(0.01)

        future = asyncio.run_coroutine_threadsafe(idle(), loop)
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return False
        return True

    # ----------------------------------------------------------------------------------- handlers

    async def _handle_models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "local"} for m in self.models]
        return json_response(200, {"object": "list", "data": data})

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        received_at = time.time()
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as exc:
            return json_response(400, error_body(f"Invalid JSON body: {exc}", "invalid_request_error"))
        if not isinstance(body, dict):
            return json_response(400, error_body("Request body must be a JSON object.", "invalid_request_error"))

        if self.answer_probes and _is_probe(body):
            with self._lock:
                self._probes.append(body)
            return self._render(body, as_reply("ok"))

        limits = self.rate_limits
        if limits is not None:
            with self._lock:
                wait, which = limits.admit(count_prompt_tokens(body))
                if wait > 0:
                    self._throttled_at.append(received_at)
                    return self._render(body, _throttled(wait, which, limits))

        schema = requested_schema(body)
        plan = self.faults
        fault: FaultKind | None = None
        attempt = 0
        if plan is not None:
            key = FaultPlan.body_key(body)
            with self._lock:
                attempt = self._attempts.get(key, 0)
                self._attempts[key] = attempt + 1
                fault = plan.decide(key, attempt, self.seed, self._body_faults.get(key, 0))
                if fault in CONTENT_FAULTS and schema is not None:
                    fault = None  # a provider that enforces a schema returns no prose and no broken JSON
                if fault is not None:
                    self._fault_counts[fault] += 1
                    self._body_faults[key] = self._body_faults.get(key, 0) + 1
        self._record(RecordedRequest(body, received_at=received_at, path=request.path, attempt=attempt, fault=fault))

        if plan is None or fault is None:
            reply = await self._call_responder(body)
        else:  # prose wraps the responder's answer
            reply = plan.reply_for(fault, await self._call_responder(body) if fault == "prose" else None)
        if schema is not None and reply.status == 200 and reply.body is None and not reply.hang:
            reply = dataclasses.replace(reply, content=schema_reply(reply.content, schema))

        if limits is not None and reply.status == 200:
            with self._lock:
                limits.charge(count_tokens(reply.content or ""))
        if reply.hang:
            await self._hang()
        delay = self.latency_s + reply.delay_s
        if delay > 0:
            await asyncio.sleep(delay)
        if reply.body is None and reply.status == 200 and body.get("stream"):
            return await self._stream(request, body, reply)
        return self._render(body, reply)

    def _record(self, request: RecordedRequest) -> None:
        """Count a chat request (a batch line is one too) and keep it if ``record_requests``."""
        with self._cond:
            self._count += 1
            if self.record_requests:
                self._requests.append(request)
            self._cond.notify_all()

    async def _call_responder(self, body: dict[str, Any]) -> Reply:
        try:
            result = self.responder(body)
            if inspect.isawaitable(result):
                result = await result
            return as_reply(result)
        except Exception as exc:  # noqa: BLE001 - any responder bug becomes a visible 500
            message = f"{type(exc).__name__}: {exc}"
            logger.warning("OpenAIServer responder failed: %s", message)
            with self._lock:
                self._errors.append(message)
            return Reply.server_error(f"responder failed: {message}")

    async def _hang(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._hanging.add(task)
        try:
            await asyncio.get_running_loop().create_future()  # never resolved: cancelled on disconnect/stop
        finally:
            if task is not None:
                self._hanging.discard(task)

    def _completion(self, body: Mapping[str, Any], content: str | None) -> dict[str, Any]:
        prompt_tokens = count_prompt_tokens(body)
        completion_tokens = count_tokens(content or "")
        return {
            "id": f"chatcmpl-{next(self._ids):012d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or (self.models[0] if self.models else "mock")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _payload(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any] | list[Any] | str | bytes:
        """The response body of ``reply`` to ``body`` (online or as a batch line)."""
        if reply.body is not None:
            return reply.body
        if reply.status == 200:
            return self._completion(body, reply.content)
        type_ = "server_error" if reply.status >= 500 else "invalid_request_error"
        return error_body(f"HTTP {reply.status}", type_)

    def _render(self, body: Mapping[str, Any], reply: Reply) -> web.Response:
        return json_response(reply.status, self._payload(body, reply), reply.headers)

    async def _stream(self, request: web.Request, body: Mapping[str, Any], reply: Reply) -> web.StreamResponse:
        """Server-sent events for ``"stream": true``: one content chunk, a stop chunk, optional usage."""
        full = self._completion(body, reply.content)
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **reply.headers}
        response = web.StreamResponse(status=200, headers=headers)
        await response.prepare(request)
        base = {
            "id": full["id"],
            "object": "chat.completion.chunk",
            "created": full["created"],
            "model": full["model"],
        }
        delta = {"role": "assistant", "content": reply.content}
        chunks: list[dict[str, Any]] = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        options = body.get("stream_options")
        if isinstance(options, Mapping) and options.get("include_usage"):
            chunks.append({**base, "choices": [], "usage": full["usage"]})
        for chunk in chunks:
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _throttled(wait_s: float, which: str, limits: EnforcedRate) -> Reply:
    """The 429 of the enforced rate limit, as OpenAI words and heads it."""
    limit = limits.rpm if which == "requests" else limits.tpm
    headers = {"Retry-After": str(max(1, math.ceil(wait_s))), "retry-after-ms": str(max(1, math.ceil(wait_s * 1000))),
               **limits.headers()}
    message = (f"Rate limit reached for mock-judge on {which} per min (RPM/TPM): Limit {int(limit or 0)}. "
               f"Please try again in {wait_s * 1000:.0f}ms.")
    return Reply.error(429, message, which, "rate_limit_exceeded", headers=headers)


# ------------------------------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT; print ``READY <base_url>`` then ``REQUESTS <n>``."""
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.testing.openai_server",
        description="Local OpenAI-compatible chat-completions server for benchmarks.",
    )
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every reply")
    parser.add_argument("--reply-file", type=Path, default=None, help="assistant content for every reply")
    parser.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    parser.add_argument("--rpm", type=float, default=0.0, help="enforced requests per minute (0: none)")
    parser.add_argument("--rate-burst", type=float, default=1.0, help="seconds of each enforced rate a burst may use")
    args = parser.parse_args(argv)
    content = args.reply_file.read_text(encoding="utf-8") if args.reply_file else DEFAULT_REPLY_CONTENT
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if not args.no_uvloop:
        with contextlib.suppress(ImportError):
            # optional: the server runs on asyncio's loop without uvloop
            import uvloop

            loop_factory = uvloop.new_event_loop

    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # before the server's thread starts: it inherits the mask
    server = OpenAIServer(
        lambda body: content,
        latency_s=args.latency,
        port=args.port,
        record_requests=False,
        loop_factory=loop_factory,
        shutdown_timeout=1.0,
        rpm=args.rpm or None,
        rate_burst_s=args.rate_burst,
    )
    with server:
        print(f"READY {server.base_url}", flush=True)
        signal.sigwait(stop_signals)
    print(f"REQUESTS {server.request_count}", flush=True)
    if server.rate_limits is not None:
        print(f"THROTTLED {server.throttled_count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
