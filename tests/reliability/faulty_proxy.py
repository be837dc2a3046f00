"""A fault-injecting HTTP proxy on loopback, to put in front of an S3 endpoint (such as
:class:`evaluation.testing.s3.LocalS3`) and see a client ride out a flaky store.

Point the client at :attr:`FaultyProxy.endpoint_url`. Each request is passed upstream unchanged
or, as :class:`S3FaultPlan` decides, answered by the proxy before the upstream sees it: ``503
SlowDown`` (S3's throttling), ``500 InternalError``, or a reset connection (TCP RST, no answer).
A request's draw is a hash of the seed, the request (method, path, query, ``Range``, a digest of
the body) and how many times that request was seen, so an identical retry draws afresh; faults are
bounded per request (keep ``max_faults_per_request`` below the client's attempts).
A ``refuse`` rule may answer an S3 error instead of forwarding, from the access key id that signed
the request (to stand for S3's own refusal of keys it does not accept, expired ones among them);
every request is recorded with that key. A ``fail`` rule answers an S3 error for every attempt of
the requests it picks by method and path (such as the upload of one object: a task that dies there).
Requests whose URLs carry random parts (multipart upload ids, random names) draw differently from
one run to the next. Everything listens on 127.0.0.1 and is closed by :meth:`FaultyProxy.stop`.
Each record keeps the request's headers, and the body of a POST (such as a multi-object delete's
list of keys), so a test can tell what every request asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import re
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from evaluation.testing.replies import check_shares, draw_fault

logger = logging.getLogger(__name__)

FaultKind = Literal["slow_down", "server_error", "reset"]
FAULT_KINDS: tuple[FaultKind, ...] = ("slow_down", "server_error", "reset")
#: Headers of one connection, never forwarded.
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect"}
_ERRORS = {"slow_down": (503, "SlowDown", "Please reduce your request rate."),
           "server_error": (500, "InternalError", "We encountered an internal error. Please try again.")}


@dataclass(frozen=True)
class S3FaultPlan:
    """The share of requests that gets each fault (about 10% in all by default), and the bounds."""

    slow_down: float = 0.04
    server_error: float = 0.03
    reset: float = 0.03
    seed: int = 0
    max_faults_per_request: int = 2

    def __post_init__(self) -> None:
        check_shares(self, FAULT_KINDS)
        if self.max_faults_per_request < 0:
            raise ValueError("S3FaultPlan.max_faults_per_request must be >= 0")

    def decide(self, request_key: str, attempt: int) -> FaultKind | None:
        """The fault for this attempt of this request (the bound aside), or None to forward it."""
        return draw_fault(self, FAULT_KINDS, f"{self.seed}:{attempt}:{request_key}")


@dataclass(frozen=True)
class ProxiedRequest:
    """A request the proxy saw and what became of it: a fault kind, or the upstream's status."""

    method: str
    path: str
    outcome: str  #: a fault kind, "refused", or the upstream's status
    access_key: str = ""  #: the access key id that signed it ("" when unsigned)
    user_agent: str = ""  #: which client sent it (botocore's, or Polars' object_store)
    headers: tuple[tuple[str, str], ...] = ()  #: as sent, names lower-cased
    body: bytes = b""  #: a POST's body (empty for other methods)

    def header(self, name: str) -> str:
        """The value of header ``name`` ("" when absent)."""
        return next((value for key, value in self.headers if key == name.lower()), "")


#: An S3 error for a request signed with this access key id, as (status, code, message); None: forward it.
RefuseRule = Callable[[str], "tuple[int, str, str] | None"]
#: An S3 error for a request with this method and path (as sent: keys URL-encoded); None: forward it.
FailRule = Callable[[str, str], "tuple[int, str, str] | None"]


class FaultyProxy:
    """``with FaultyProxy(upstream_url, S3FaultPlan(seed=1)) as proxy: proxy.endpoint_url``."""

    def __init__(self, upstream_url: str, plan: S3FaultPlan | None = None, *, refuse: RefuseRule | None = None,
                 fail: FailRule | None = None) -> None:
        upstream = urlsplit(upstream_url)
        if upstream.scheme != "http" or not upstream.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream_url!r}")
        self.upstream = (upstream.hostname, upstream.port or 80)
        self.plan = plan or S3FaultPlan()
        self.refuse = refuse
        self.fail = fail
        self.endpoint_url = ""
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()
        self._faulted: Counter[str] = Counter()
        self._log: list[ProxiedRequest] = []
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None

    def start(self) -> FaultyProxy:
        """Listen on an ephemeral port of 127.0.0.1; returns self."""
        self._server = _Server(self)
        threading.Thread(target=self._server.serve_forever, name="faulty-proxy", daemon=True).start()
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        """Stop listening and close every open connection."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> FaultyProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def requests(self) -> list[ProxiedRequest]:
        """Every request seen so far, in arrival order."""
        with self._lock:
            return list(self._log)

    @property
    def fault_counts(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        return Counter(r.outcome for r in self.requests if r.outcome in FAULT_KINDS)

    def _decide(self, key: str) -> FaultKind | None:
        with self._lock:
            attempt = self._seen[key]
            self._seen[key] += 1
            if self._faulted[key] >= self.plan.max_faults_per_request:
                return None
            kind = self.plan.decide(key, attempt)
            if kind is not None:
                self._faulted[key] += 1
            return kind

    def _record(self, method: str, path: str, outcome: str, access_key: str = "", user_agent: str = "",
                headers: tuple[tuple[str, str], ...] = (), body: bytes = b"") -> None:
        with self._lock:
            self._log.append(ProxiedRequest(method, path, outcome, access_key, user_agent, headers,
                                            body if method == "POST" else b""))


def _access_key(authorization: str, path: str) -> str:
    """The access key id of a SigV4 request: its Authorization header's, or a presigned URL's."""
    match = re.search(r"Credential=([^/,\s]+)/", authorization)
    if match:
        return match.group(1)
    credential = parse_qs(urlsplit(path).query).get("X-Amz-Credential", [""])[0]
    return credential.split("/", 1)[0]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, proxy: FaultyProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3 clients expect
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.proxy._lock:
            self.server.proxy._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.proxy._lock:
            self.server.proxy._connections.discard(self.connection)
        with contextlib.suppress(OSError):  # a connection reset on purpose
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logger.debug("%s " + format, self.address_string(), *args)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        parts = []
        while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
            pass
        return b"".join(parts)

    def _proxy(self) -> None:
        proxy, body = self.server.proxy, self._body()
        key = f"{self.command} {self.path} {self.headers.get('Range', '')} {hashlib.blake2b(body).hexdigest()}"
        access_key = _access_key(self.headers.get("Authorization", ""), self.path)
        agent = self.headers.get("User-Agent", "")
        fault = proxy._decide(key)
        if fault is not None:
            proxy._record(self.command, self.path, fault, access_key, agent)
        if fault == "reset":  # SO_LINGER 0: close() sends RST, not FIN
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        refusal = proxy.refuse(access_key) if fault is None and proxy.refuse is not None else None
        if refusal is None and fault is None and proxy.fail is not None:
            refusal = proxy.fail(self.command, self.path)
        if refusal is not None:
            proxy._record(self.command, self.path, "refused", access_key, agent)
        error = refusal if refusal is not None else _ERRORS[fault] if fault in _ERRORS else None
        if error is not None:
            status, code, message = error
            payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}'
                       "</Message><RequestId>faulty-proxy</RequestId></Error>").encode()
            self._answer(status, [("Content-Type", "application/xml")], payload, str(len(payload)))
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body or self.command in ("PUT", "POST"):
            headers["Content-Length"] = str(len(body))
        upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body or None, headers=headers)
            response = upstream.getresponse()
            payload = response.read()
        finally:
            upstream.close()
        sent = tuple((name.lower(), value) for name, value in self.headers.items())
        proxy._record(self.command, self.path, str(response.status), access_key, agent, sent, body)
        length = response.getheader("Content-Length") if self.command == "HEAD" else str(len(payload))
        self._answer(response.status, response.getheaders(), payload, length)

    def _answer(self, status: int, headers: list[tuple[str, str]], payload: bytes, length: str | None) -> None:
        self.send_response_only(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if length is not None:
            self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _proxy
