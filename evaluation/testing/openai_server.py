"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

The server speaks just enough of the OpenAI HTTP API for ``litellm`` (or the ``openai`` client) to
drive LLM judges against it::

    with OpenAIServer(responder=ScriptedResponder(['{"score": 1.0}', Reply.rate_limited()])) as srv:
        await litellm.acompletion(model="openai/judge", api_base=srv.base_url, api_key="x", ...)

Endpoints: ``POST /v1/chat/completions`` (also ``/chat/completions``) and ``GET /v1/models``
(also ``/models``). Replies have the exact OpenAI ``chat.completion`` shape, with deterministic
token usage (:func:`count_tokens`). A *responder* decides each reply; a :class:`Reply` can also
express a fault (429 with ``Retry-After``, 500, 400, quota, hang, malformed content), and a
:class:`FaultPlan` injects faults deterministically so that a retried identical request can
succeed on a later attempt.

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
import hashlib
import inspect
import itertools
import json
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, overload

from aiohttp import web

logger = logging.getLogger(__name__)

#: Assistant content used when no responder (or no ``--reply-file``) is given.
DEFAULT_REPLY_CONTENT = json.dumps({"score": 1.0, "hits": [], "misses": [], "reasoning": "ok"})

#: Content of a :meth:`Reply.malformed` reply: a 200 whose content is not JSON.
MALFORMED_CONTENT = "I think the answer is good"

#: Model ids listed by ``GET /v1/models`` unless told otherwise.
DEFAULT_MODELS: tuple[str, ...] = ("mock-judge",)

FaultKind = Literal["rate_limit", "server_error", "hang", "malformed"]
#: Fault kinds a :class:`FaultPlan` can inject, in the order their probability bands are laid out.
FAULT_KINDS: tuple[FaultKind, ...] = ("rate_limit", "server_error", "hang", "malformed")

_JSON_CONTENT_TYPE = "application/json"


# --------------------------------------------------------------------------------------------- tokens


def count_tokens(text: str) -> int:
    """Deterministic stand-in for a tokenizer: ``len(text) // 4 + 1``."""
    return len(text) // 4 + 1


def message_text(content: Any) -> str:
    """The text of one message ``content``: a string, a list of ``{"type": "text", ...}`` parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def prompt_text(body: Mapping[str, Any], sep: str = "") -> str:
    """All message contents of a chat request body, joined with ``sep``."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    return sep.join(message_text(m.get("content")) for m in messages if isinstance(m, Mapping))


def count_prompt_tokens(body: Mapping[str, Any]) -> int:
    """``prompt_tokens`` the server reports for a request body: :func:`count_tokens` of all contents."""
    return count_tokens(prompt_text(body))


# ---------------------------------------------------------------------------------------------- Reply


def _error_body(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class _HangFlag:
    """Static-typing view of ``Reply.hang``: a factory on the class, a ``bool`` flag on instances."""

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> Callable[[], Reply]: ...
    @overload
    def __get__(self, instance: object, owner: type[Any]) -> bool: ...
    def __get__(self, instance: object, owner: type[Any]) -> Callable[[], Reply] | bool:
        raise NotImplementedError  # never used at run time (see below the Reply class)

    def __set__(self, instance: object, value: bool) -> None:
        raise NotImplementedError


@dataclass
class Reply:
    """What the server answers to one chat-completion request.

    * ``content``: the assistant message content of a 200 reply (``None`` gives ``"content": null``).
    * ``status``: HTTP status. A non-200 status without ``body`` gets an OpenAI-style error body.
    * ``headers``: extra response headers (e.g. ``Retry-After``).
    * ``body``: the raw response body, overriding everything else: a dict/list is sent as JSON,
      ``str``/``bytes`` verbatim (with ``Content-Type: application/json`` unless ``headers`` set one).
    * ``delay_s``: extra delay for this reply, on top of the server's ``latency_s``.
    * ``hang``: never answer; the request stays open until the client disconnects or the server stops.

    Helpers build the common faults: :meth:`rate_limited`, :meth:`server_error`, :meth:`bad_request`,
    :meth:`quota`, :meth:`hang` (the class method; ``reply.hang`` on an instance is the flag) and
    :meth:`malformed`.
    """

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | list[Any] | str | bytes | None = None
    delay_s: float = 0.0
    if TYPE_CHECKING:
        hang: _HangFlag = _HangFlag()
    else:
        hang: bool = False

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        type_: str,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """An error reply with an OpenAI-style ``{"error": {...}}`` body."""
        return cls(status=status, headers=dict(headers or {}), body=_error_body(message, type_, code))

    @classmethod
    def rate_limited(cls, retry_after: float = 1, message: str | None = None) -> Reply:
        """429 ``rate_limit_error`` / ``rate_limit_exceeded`` with a ``Retry-After`` header (seconds)."""
        seconds = int(retry_after) if float(retry_after).is_integer() else retry_after
        return cls.error(
            429,
            message or f"Rate limit reached for requests. Please try again in {seconds}s.",
            "rate_limit_error",
            "rate_limit_exceeded",
            headers={"Retry-After": str(seconds)},
        )

    @classmethod
    def server_error(cls, message: str = "The server had an error while processing your request.") -> Reply:
        """500 ``server_error``."""
        return cls.error(500, message, "server_error", None)

    @classmethod
    def bad_request(cls, message: str = "Invalid request.", code: str | None = None) -> Reply:
        """400 ``invalid_request_error``."""
        return cls.error(400, message, "invalid_request_error", code)

    @classmethod
    def quota(cls, message: str | None = None) -> Reply:
        """429 ``insufficient_quota`` (type and code): out of credit, not worth retrying."""
        return cls.error(
            429,
            message or "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )

    @classmethod
    def malformed(cls, text: str = MALFORMED_CONTENT) -> Reply:
        """A 200 whose assistant content is not JSON."""
        return cls(content=text)

    @classmethod
    def _hanging(cls) -> Reply:
        """A reply that never comes: the request hangs until the client disconnects or the server stops."""
        return cls(hang=True)


# ``Reply.hang()`` builds a hanging reply while ``reply.hang`` stays the dataclass flag: a classmethod is
# a non-data descriptor, so the instance attribute set by ``__init__`` wins on instances. It is attached
# after the dataclass is built so that the field's default stays ``False``.
setattr(Reply, "hang", Reply.__dict__["_hanging"])  # noqa: B010 - a classmethod object

ReplyLike = Reply | str
#: ``(request_body) -> Reply | str`` (or an awaitable of it); ``str`` is the assistant content.
Responder = Callable[[dict[str, Any]], ReplyLike | Awaitable[ReplyLike]]


def _as_reply(value: Any) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    raise TypeError(f"responder must return Reply or str, got {type(value).__name__}")


def _is_probe(body: Mapping[str, Any]) -> bool:
    from evaluation.judges import PROBE_PROMPT

    messages = body.get("messages")
    return (isinstance(messages, list) and len(messages) == 2 and isinstance(messages[0], dict)
            and messages[0].get("content") == PROBE_PROMPT.system)


def default_responder(body: dict[str, Any]) -> Reply | str:
    """Answer every request with :data:`DEFAULT_REPLY_CONTENT`."""
    return DEFAULT_REPLY_CONTENT


class ScriptExhaustedError(RuntimeError):
    """A :class:`ScriptedResponder` got more requests than it has replies."""


class ScriptedResponder:
    """Returns the given replies in order, one per request (thread-safe).

    Once the script is used up it raises :class:`ScriptExhaustedError`, which the server turns into a
    500 whose error message says so (and records in :attr:`OpenAIServer.errors`).
    """

    def __init__(self, replies: Iterable[ReplyLike]) -> None:
        """Script the given replies; each is a :class:`Reply` or the assistant content as ``str``."""
        self._replies = [_as_reply(r) for r in replies]
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The next scripted reply."""
        with self._lock:
            index = self._next
            self._next += 1
        if index >= len(self._replies):
            raise ScriptExhaustedError(
                f"ScriptedResponder exhausted: request #{index + 1} but only {len(self._replies)} replies"
            )
        return self._replies[index]

    @property
    def used(self) -> int:
        """How many requests the responder has been called for (including ones past the end)."""
        with self._lock:
            return self._next

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        with self._lock:
            return max(0, len(self._replies) - self._next)


class KeyedResponder:
    """Picks a reply from the prompt text (all message contents joined with newlines).

    ``table`` is either a callable ``prompt_text -> Reply | str | None`` or a mapping whose keys are
    substrings of the prompt: the first key (in mapping order) found in the prompt wins. When nothing
    matches, ``default`` is returned; with no default the request fails with a 500 (``KeyError``).
    """

    def __init__(
        self,
        table: Callable[[str], ReplyLike | None] | Mapping[str, ReplyLike],
        default: ReplyLike | None = None,
    ) -> None:
        """Route by ``table``, falling back to ``default``."""
        self._table = table
        self._default = default

    def __call__(self, body: dict[str, Any]) -> Reply:
        """The reply for this request's prompt."""
        text = prompt_text(body, sep="\n")
        found: ReplyLike | None = None
        if callable(self._table):
            found = self._table(text)
        else:
            for key, value in self._table.items():
                if key in text:
                    found = value
                    break
        if found is None:
            found = self._default
        if found is None:
            raise KeyError(f"KeyedResponder: no reply for prompt starting {text[:80]!r}")
        return _as_reply(found)


# ------------------------------------------------------------------------------------------ FaultPlan


@dataclass(frozen=True)
class FaultPlan:
    """Deterministic, seeded fault injection.

    For each request the server hashes ``(seed, server seed, request body, attempt)`` — ``attempt``
    being how many times that same body was seen before — into a number in ``[0, 1)`` and injects the
    fault whose probability band it falls in (bands laid out in :data:`FAULT_KINDS` order), instead of
    calling the responder. An identical retry has a new attempt number, so it gets a fresh draw and
    eventually passes; ``max_faults_per_body`` caps the faults for one body to guarantee that.
    """

    rate_limit: float = 0.3
    server_error: float = 0.1
    hang: float = 0.05
    malformed: float = 0.05
    retry_after: float = 0
    seed: int = 0
    max_faults_per_body: int | None = None

    def __post_init__(self) -> None:
        """Check the probabilities."""
        total = 0.0
        for kind in FAULT_KINDS:
            p = getattr(self, kind)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"FaultPlan.{kind} must be in [0, 1], got {p}")
            total += p
        if total > 1.0 + 1e-9:
            raise ValueError(f"FaultPlan probabilities sum to {total} > 1")
        if self.retry_after < 0:
            raise ValueError("FaultPlan.retry_after must be >= 0")

    @staticmethod
    def body_key(body: Mapping[str, Any]) -> str:
        """A stable digest of a request body (canonical JSON), identifying retries of the same request."""
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).hexdigest()

    def draw(self, body_key: str, attempt: int, server_seed: int = 0) -> float:
        """The deterministic number in ``[0, 1)`` for this body and attempt."""
        token = f"{self.seed}:{server_seed}:{attempt}:{body_key}".encode()
        return int.from_bytes(hashlib.blake2b(token, digest_size=8).digest(), "big") / 2.0**64

    def decide(self, body_key: str, attempt: int, server_seed: int = 0, faults_so_far: int = 0) -> FaultKind | None:
        """The fault to inject for this attempt of this body, or None to let the responder answer."""
        if self.max_faults_per_body is not None and faults_so_far >= self.max_faults_per_body:
            return None
        u = self.draw(body_key, attempt, server_seed)
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None

    def reply_for(self, kind: FaultKind) -> Reply:
        """The :class:`Reply` that expresses a fault kind."""
        if kind == "rate_limit":
            return Reply.rate_limited(retry_after=self.retry_after)
        if kind == "server_error":
            return Reply.server_error()
        if kind == "hang":
            return Reply(hang=True)
        if kind == "malformed":
            return Reply.malformed()
        raise ValueError(f"unknown fault kind {kind!r}")


# ------------------------------------------------------------------------------------ recorded requests


class RecordedRequest(dict[str, Any]):
    """A received request body (the parsed JSON dict itself) plus how and when it arrived.

    ``received_at`` is ``time.time()`` at arrival; ``path`` the URL path; ``attempt`` how many times an
    identical body had been seen before (counted only with a :class:`FaultPlan`, else 0); ``fault`` the
    fault kind a :class:`FaultPlan` injected, or None.
    """

    __slots__ = ("attempt", "fault", "path", "received_at")

    def __init__(
        self,
        body: Mapping[str, Any],
        *,
        received_at: float,
        path: str,
        attempt: int = 0,
        fault: FaultKind | None = None,
    ) -> None:
        """Wrap ``body`` with its arrival metadata."""
        super().__init__(body)
        self.received_at = received_at
        self.path = path
        self.attempt = attempt
        self.fault = fault

    @property
    def body(self) -> dict[str, Any]:
        """The request body as a plain dict."""
        return dict(self)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's ``messages`` (empty if absent)."""
        messages = self.get("messages")
        return messages if isinstance(messages, list) else []

    def __repr__(self) -> str:
        """Body plus metadata."""
        return (
            f"RecordedRequest({dict.__repr__(self)}, received_at={self.received_at!r}, "
            f"path={self.path!r}, attempt={self.attempt}, fault={self.fault!r})"
        )


# ---------------------------------------------------------------------------------------------- server


class OpenAIServer:
    """An OpenAI-compatible HTTP server on its own event loop in a background thread.

    Use it as a context manager (or call :meth:`start` / :meth:`stop`)::

        with OpenAIServer(responder=..., latency_s=0.0, faults=None, seed=0) as srv:
            srv.base_url  # "http://127.0.0.1:PORT/v1"

    ``responder`` answers each request (default: :data:`DEFAULT_REPLY_CONTENT`); it runs on the
    server's loop and may be a plain or an ``async`` callable. An exception from it becomes a 500
    whose message names the exception, and is appended to :attr:`errors`. ``latency_s`` is slept
    (``asyncio.sleep``) before every reply. ``faults`` injects faults per :class:`FaultPlan`;
    ``seed`` is mixed into its draws. ``latency_s`` and ``responder`` may be reassigned while running.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        faults: FaultPlan | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = DEFAULT_MODELS,
        record_requests: bool = True,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
        shutdown_timeout: float = 2.0,
        backlog: int = 2048,
        answer_probes: bool = True,
    ) -> None:
        """Configure the server; nothing listens until :meth:`start` (or ``with``)."""
        self.responder: Responder = responder if responder is not None else default_responder
        self.latency_s = float(latency_s)
        self.faults = faults
        self.seed = seed
        self.host = host
        self.models = tuple(models)
        self.record_requests = record_requests
        self.answer_probes = answer_probes
        self._probes: list[dict[str, Any]] = []
        self._requested_port = port
        self._loop_factory = loop_factory or asyncio.new_event_loop
        self._shutdown_timeout = shutdown_timeout
        self._backlog = backlog

        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._requests: list[RecordedRequest] = []
        self._count = 0
        self._fault_counts: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
        self._attempts: dict[str, int] = {}
        self._body_faults: dict[str, int] = {}
        self._errors: list[str] = []
        self._ids = itertools.count(1)

        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._hanging: set[asyncio.Task[Any]] = set()
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    # ----------------------------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 10.0) -> Self:
        """Bind the port and start serving in a background thread; returns ``self`` once listening."""
        if self._thread is not None:
            raise RuntimeError("OpenAIServer already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
        except BaseException:
            sock.close()
            raise
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
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # loop already closed
                pass
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("OpenAIServer thread did not stop within %ss", timeout)
        self._thread = None

    def __enter__(self) -> Self:
        """Start the server."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
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
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/models", self._handle_models)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=self._shutdown_timeout,
        )
        await runner.setup()
        self._runner = runner
        site = web.SockSite(runner, sock, backlog=self._backlog)
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
        """``http://HOST:PORT`` (no ``/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

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
            self._requests.clear()
            self._probes.clear()
            self._count = 0
            self._fault_counts = dict.fromkeys(FAULT_KINDS, 0)
            self._attempts.clear()
            self._body_faults.clear()
            self._errors.clear()

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> bool:
        """Block until at least ``n`` requests arrived (since the last reset); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._count < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    # ----------------------------------------------------------------------------------- handlers

    async def _handle_models(self, request: web.Request) -> web.Response:
        created = int(time.time())
        data = [{"id": m, "object": "model", "created": created, "owned_by": "local"} for m in self.models]
        return _json_response(200, {"object": "list", "data": data})

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        received_at = time.time()
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError) as exc:
            return _json_response(400, _error_body(f"Invalid JSON body: {exc}", "invalid_request_error", None))
        if not isinstance(body, dict):
            return _json_response(
                400, _error_body("Request body must be a JSON object.", "invalid_request_error", None)
            )

        if self.answer_probes and _is_probe(body):
            with self._lock:
                self._probes.append(body)
            return self._render(body, _as_reply("ok"))

        plan = self.faults
        key = FaultPlan.body_key(body) if plan is not None else ""
        fault: FaultKind | None = None
        attempt = 0
        with self._cond:
            if plan is not None:
                attempt = self._attempts.get(key, 0)
                self._attempts[key] = attempt + 1
                fault = plan.decide(key, attempt, self.seed, self._body_faults.get(key, 0))
                if fault is not None:
                    self._fault_counts[fault] += 1
                    self._body_faults[key] = self._body_faults.get(key, 0) + 1
            self._count += 1
            if self.record_requests:
                self._requests.append(
                    RecordedRequest(body, received_at=received_at, path=request.path, attempt=attempt, fault=fault)
                )
            self._cond.notify_all()

        if plan is not None and fault is not None:
            reply = plan.reply_for(fault)
        else:
            reply = await self._call_responder(body)

        if reply.hang:
            await self._hang()
        delay = self.latency_s + reply.delay_s
        if delay > 0:
            await asyncio.sleep(delay)
        if reply.body is None and reply.status == 200 and body.get("stream"):
            return await self._stream(request, body, reply)
        return self._render(body, reply)

    async def _call_responder(self, body: dict[str, Any]) -> Reply:
        try:
            result = self.responder(body)
            if inspect.isawaitable(result):
                result = await result
            return _as_reply(result)
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

    def _render(self, body: Mapping[str, Any], reply: Reply) -> web.Response:
        if reply.body is not None:
            payload = reply.body
        elif reply.status == 200:
            payload = self._completion(body, reply.content)
        else:
            type_ = "server_error" if reply.status >= 500 else "invalid_request_error"
            payload = _error_body(f"HTTP {reply.status}", type_, None)
        return _json_response(reply.status, payload, reply.headers)

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
        chunks: list[dict[str, Any]] = [
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": reply.content},
                        "finish_reason": None,
                    }
                ],
            },
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


def _json_response(
    status: int, payload: dict[str, Any] | list[Any] | str | bytes, headers: Mapping[str, str] | None = None
) -> web.Response:
    if isinstance(payload, bytes):
        data = payload
    elif isinstance(payload, str):
        data = payload.encode("utf-8")
    else:
        data = json.dumps(payload).encode("utf-8")
    out = dict(headers or {})
    if not any(k.lower() == "content-type" for k in out):
        out["Content-Type"] = _JSON_CONTENT_TYPE
    return web.Response(status=status, body=data, headers=out)


# ------------------------------------------------------------------------------------------------- CLI


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m evaluation.testing.openai_server",
        description="Local OpenAI-compatible chat-completions server for benchmarks.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds slept before every reply")
    parser.add_argument("--reply-file", type=Path, default=None, help="assistant content for every reply")
    parser.add_argument("--seed", type=int, default=0, help="fault-injection seed")
    parser.add_argument("--rate-limit", type=float, default=0.0, help="probability of a 429")
    parser.add_argument("--server-error", type=float, default=0.0, help="probability of a 500")
    parser.add_argument("--hang", type=float, default=0.0, help="probability of a hanging request")
    parser.add_argument("--malformed", type=float, default=0.0, help="probability of non-JSON content")
    parser.add_argument("--retry-after", type=float, default=0, help="Retry-After seconds on injected 429s")
    parser.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT; print ``READY <base_url>`` then ``REQUESTS <n>``."""
    args = _parse_args(argv)
    content = args.reply_file.read_text(encoding="utf-8") if args.reply_file else DEFAULT_REPLY_CONTENT
    reply = Reply(content=content)

    def responder(body: dict[str, Any]) -> Reply:
        return reply

    faults: FaultPlan | None = None
    if any(p > 0 for p in (args.rate_limit, args.server_error, args.hang, args.malformed)):
        faults = FaultPlan(
            rate_limit=args.rate_limit,
            server_error=args.server_error,
            hang=args.hang,
            malformed=args.malformed,
            retry_after=args.retry_after,
            seed=args.seed,
        )

    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    if not args.no_uvloop:
        try:
            import uvloop

            loop_factory = uvloop.new_event_loop
        except ImportError:
            loop_factory = None

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server = OpenAIServer(
        responder,
        latency_s=args.latency,
        faults=faults,
        seed=args.seed,
        host=args.host,
        port=args.port,
        record_requests=False,
        loop_factory=loop_factory,
        shutdown_timeout=1.0,
    )
    with server:
        print(f"READY {server.base_url}", flush=True)
        while not stop.wait(0.5):
            pass
    print(f"REQUESTS {server.request_count}", flush=True)
    if faults is not None:
        counts = " ".join(f"{k}={v}" for k, v in server.fault_counts.items())
        print(f"FAULTS {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
