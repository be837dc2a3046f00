"""A fault-injecting HTTP proxy on loopback, to put in front of an S3 endpoint (such as
:class:`evaluation.testing.s3.LocalS3`) and see a client ride out a flaky store.

Point the client's endpoint at :attr:`FaultyProxy.endpoint_url`: each request is either passed to
the upstream endpoint unchanged, or — as :class:`S3FaultPlan` decides — answered by the proxy
itself, before the upstream sees it, with one of:

* ``slow_down``: ``503 SlowDown``, S3's throttling answer;
* ``server_error``: ``500 InternalError``;
* ``reset``: the connection is reset (TCP RST) without an answer.

Decisions are deterministic: a request's draw is a hash of the plan's seed, the request (method,
path, query, ``Range`` header and a digest of the body) and how many times that same request was
seen before, so an identical retry gets a fresh draw. Faults are bounded: at most
``max_faults_per_request`` for one request (keep it below the client's attempts and every
request eventually passes) and ``max_faults`` in all. Requests whose URLs carry random parts
(multipart upload ids, random object names) draw differently from one run to the next.

Everything listens on ``127.0.0.1`` and :meth:`FaultyProxy.stop` (or leaving the ``with`` block)
closes the listening socket and every open connection.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

FaultKind = Literal["slow_down", "server_error", "reset"]
FAULT_KINDS: tuple[FaultKind, ...] = ("slow_down", "server_error", "reset")
#: Headers that belong to one connection, never forwarded.
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
_ERRORS = {
    "slow_down": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "server_error": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
}


@dataclass(frozen=True)
class S3FaultPlan:
    """Which share of requests gets which fault (about 10% in all by default), and the bounds."""

    slow_down: float = 0.04
    server_error: float = 0.03
    reset: float = 0.03
    seed: int = 0
    #: Faults injected into one request (its retries included) at most.
    max_faults_per_request: int = 2
    #: Faults injected in all at most (None: no cap).
    max_faults: int | None = None

    def __post_init__(self) -> None:
        """Check the shares."""
        shares = [getattr(self, kind) for kind in FAULT_KINDS]
        if any(not 0.0 <= p <= 1.0 for p in shares) or sum(shares) > 1.0 + 1e-9:
            raise ValueError(f"S3FaultPlan shares must be in [0, 1] and sum to at most 1, got {shares}")
        if self.max_faults_per_request < 0 or (self.max_faults is not None and self.max_faults < 0):
            raise ValueError("S3FaultPlan bounds must be >= 0")

    def draw(self, request_key: str, attempt: int) -> float:
        """The deterministic number in ``[0, 1)`` for this request and attempt."""
        token = f"{self.seed}:{attempt}:{request_key}".encode()
        return int.from_bytes(hashlib.blake2b(token, digest_size=8).digest(), "big") / 2.0**64

    def decide(self, request_key: str, attempt: int) -> FaultKind | None:
        """The fault for this attempt of this request, or None to forward it (bounds aside)."""
        u, edge = self.draw(request_key, attempt), 0.0
        for kind in FAULT_KINDS:
            edge += getattr(self, kind)
            if u < edge:
                return kind
        return None


@dataclass(frozen=True)
class ProxiedRequest:
    """One request the proxy saw, and what became of it (a fault kind, or the upstream status)."""

    method: str
    path: str
    outcome: str


class FaultyProxy:
    """``with FaultyProxy(upstream_url, S3FaultPlan(seed=1)) as proxy: proxy.endpoint_url``."""

    def __init__(self, upstream_url: str, plan: S3FaultPlan | None = None, *, timeout_s: float = 60.0) -> None:
        upstream = urlsplit(upstream_url)
        if upstream.scheme != "http" or not upstream.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream_url!r}")
        self.upstream = (upstream.hostname, upstream.port or 80)
        self.plan = plan or S3FaultPlan()
        self.timeout_s = timeout_s
        self.endpoint_url = ""
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._faulted: Counter[str] = Counter()
        self._log: list[ProxiedRequest] = []
        self._connections: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------------------
    # Life cycle

    def start(self) -> FaultyProxy:
        """Listen on an ephemeral port of 127.0.0.1; returns self."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="faulty-proxy", daemon=True)
        self._thread.start()
        self.endpoint_url = f"http://127.0.0.1:{server.server_address[1]}"
        return self

    def stop(self) -> None:
        """Stop listening and close every open connection."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FaultyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------------------------
    # What happened

    @property
    def requests(self) -> list[ProxiedRequest]:
        """Every request seen so far, in arrival order."""
        with self._lock:
            return list(self._log)

    @property
    def fault_counts(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        with self._lock:
            return Counter(r.outcome for r in self._log if r.outcome in FAULT_KINDS)

    # ----------------------------------------------------------------------------------------
    # Per request (called from the handler threads)

    def _decide(self, key: str) -> FaultKind | None:
        with self._lock:
            attempt = self._seen[key]
            self._seen[key] += 1
            if self._faulted[key] >= self.plan.max_faults_per_request:
                return None
            if self.plan.max_faults is not None and sum(self._faulted.values()) >= self.plan.max_faults:
                return None
            kind = self.plan.decide(key, attempt)
            if kind is not None:
                self._faulted[key] += 1
            return kind

    def _record(self, method: str, path: str, outcome: str) -> None:
        with self._lock:
            self._log.append(ProxiedRequest(method, path, outcome))

    def _track(self, connection: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)


def _handler(proxy: FaultyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect

        def setup(self) -> None:
            super().setup()
            proxy._track(self.connection, True)

        def finish(self) -> None:
            proxy._track(self.connection, False)
            try:
                super().finish()
            except OSError:
                pass

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            logger.debug("%s " + format, self.address_string(), *args)

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _proxy(self) -> None:
            body = self._body()
            digest = hashlib.blake2b(body, digest_size=16).hexdigest()
            key = f"{self.command} {self.path} {self.headers.get('Range', '')} {digest}"
            fault = proxy._decide(key)
            if fault == "reset":
                proxy._record(self.command, self.path, fault)
                # SO_LINGER 0: close() sends RST, not FIN — the client sees "connection reset".
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if fault is not None:
                status, reason, code, message = _ERRORS[fault]
                proxy._record(self.command, self.path, fault)
                payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                           f"</Message><RequestId>faulty-proxy</RequestId></Error>").encode()
                self.send_response_only(status, reason)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)
                return
            self._forward(body)

        def _forward(self, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            upstream = http.client.HTTPConnection(*proxy.upstream, timeout=proxy.timeout_s)
            try:
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                response = upstream.getresponse()
                payload = response.read()
            finally:
                upstream.close()
            proxy._record(self.command, self.path, str(response.status))
            self.send_response_only(response.status, response.reason)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            length = response.getheader("Content-Length") if self.command == "HEAD" else str(len(payload))
            if length is not None:
                self.send_header("Content-Length", length)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _proxy

    return Handler
