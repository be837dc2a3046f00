"""What the local OpenAI-compatible server (:mod:`evaluation.testing.openai_server`) answers: the
:class:`Reply` to one request (content, or a fault: 429 with ``Retry-After``, 500, 400, quota, hang,
malformed content), the responders that choose it, the :class:`FaultPlan` that injects faults
deterministically, the requests as recorded, and the deterministic token counts of its replies.

This module imports neither ``litellm`` nor ``airflow``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

#: Assistant content used when no responder (or no ``--reply-file``) is given.
DEFAULT_REPLY_CONTENT = json.dumps({"score": 1.0, "hits": [], "misses": [], "reasoning": "ok"})

#: Content of a :meth:`Reply.malformed` reply: a 200 whose content is not JSON.
MALFORMED_CONTENT = "I think the answer is good"

#: The responder's content wrapped in prose and a code fence, as chatty models answer.
PROSE_TEMPLATE = "Here is my evaluation of the answer.\n```json\n{content}\n```\nLet me know if you need more detail."

FaultKind = Literal["rate_limit", "server_error", "hang", "malformed", "prose"]
#: Fault kinds a :class:`FaultPlan` can inject, in the order their probability bands are laid out
#: (``prose`` last, so adding it left every earlier band where it was).
FAULT_KINDS: tuple[FaultKind, ...] = ("rate_limit", "server_error", "hang", "malformed", "prose")
#: Faults of the content a provider that enforces a JSON schema never produces.
CONTENT_FAULTS: frozenset[FaultKind] = frozenset({"malformed", "prose"})
_Kind = TypeVar("_Kind", bound=str)


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
        texts = (part.get("text") if isinstance(part, Mapping) else part for part in content)
        return "".join(text for text in texts if isinstance(text, str))
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


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


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
        return cls(status=status, headers=dict(headers or {}), body=error_body(message, type_, code))

    @classmethod
    def rate_limited(cls, retry_after: float = 1) -> Reply:
        """429 ``rate_limit_error`` / ``rate_limit_exceeded`` with a ``Retry-After`` header (seconds)."""
        seconds = int(retry_after) if float(retry_after).is_integer() else retry_after
        return cls.error(
            429,
            f"Rate limit reached for requests. Please try again in {seconds}s.",
            "rate_limit_error",
            "rate_limit_exceeded",
            headers={"Retry-After": str(seconds)},
        )

    @classmethod
    def server_error(cls, message: str = "The server had an error while processing your request.") -> Reply:
        return cls.error(500, message, "server_error")

    @classmethod
    def bad_request(cls, message: str = "Invalid request.", code: str | None = None) -> Reply:
        return cls.error(400, message, "invalid_request_error", code)

    @classmethod
    def quota(cls) -> Reply:
        """429 ``insufficient_quota`` (type and code): out of credit, not worth retrying."""
        return cls.error(
            429,
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        )

    @classmethod
    def malformed(cls) -> Reply:
        """A 200 whose assistant content is not JSON."""
        return cls(content=MALFORMED_CONTENT)

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


def as_reply(value: Any) -> Reply:
    """A responder's answer as a :class:`Reply` (a ``str`` is the assistant content)."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    raise TypeError(f"responder must return Reply or str, got {type(value).__name__}")


class ScriptExhaustedError(RuntimeError):
    """A :class:`ScriptedResponder` got more requests than it has replies."""


class ScriptedResponder:
    """Returns the given replies in order, one per request (thread-safe).

    Once the script is used up it raises :class:`ScriptExhaustedError`, which the server turns into a
    500 whose error message says so (and records in :attr:`OpenAIServer.errors`).
    """

    def __init__(self, replies: Iterable[ReplyLike]) -> None:
        self._replies = [as_reply(r) for r in replies]
        self._next = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            index = self._next
            self._next += 1
        if index >= len(self._replies):
            raise ScriptExhaustedError(
                f"ScriptedResponder exhausted: request #{index + 1} but only {len(self._replies)} replies"
            )
        return self._replies[index]


class KeyedResponder:
    """Picks a reply from the prompt text (all message contents joined with newlines).

    The keys of ``table`` are substrings of the prompt: the first key (in mapping order) found in the
    prompt wins. When nothing matches, ``default`` is returned; with no default the request fails with
    a 500 (``KeyError``).
    """

    def __init__(self, table: Mapping[str, ReplyLike], default: ReplyLike | None = None) -> None:
        self._table = table
        self._default = default

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = prompt_text(body, sep="\n")
        found = next((value for key, value in self._table.items() if key in text), self._default)
        if found is None:
            raise KeyError(f"KeyedResponder: no reply for prompt starting {text[:80]!r}")
        return as_reply(found)


# ------------------------------------------------------------------------------------------ FaultPlan


def check_shares(plan: object, kinds: Iterable[str]) -> None:
    """Check that the fault shares of ``plan`` (its attributes named by ``kinds``) are probabilities
    summing to at most 1."""
    shares = {kind: getattr(plan, kind) for kind in kinds}
    if any(not 0.0 <= p <= 1.0 for p in shares.values()) or sum(shares.values()) > 1.0 + 1e-9:
        raise ValueError(f"{type(plan).__name__} shares must be in [0, 1] and sum to at most 1, got {shares}")


def draw_fault(plan: object, kinds: tuple[_Kind, ...], token: str) -> _Kind | None:
    """The fault for ``token``: a hash of it into ``[0, 1)`` falls in the band of one kind (bands of
    the shares ``plan.<kind>``, laid out in ``kinds`` order) or past them all (None)."""
    u = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big") / 2.0**64
    edge = 0.0
    for kind in kinds:
        edge += getattr(plan, kind)
        if u < edge:
            return kind
    return None



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
    prose: float = 0.0
    retry_after: float = 0
    seed: int = 0
    max_faults_per_body: int | None = None

    def __post_init__(self) -> None:
        check_shares(self, FAULT_KINDS)
        if self.retry_after < 0:
            raise ValueError("FaultPlan.retry_after must be >= 0")

    @staticmethod
    def body_key(body: Mapping[str, Any]) -> str:
        """A stable digest of a request body (canonical JSON), identifying retries of the same request."""
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.blake2b(canonical.encode("utf-8"), digest_size=16).hexdigest()

    def decide(self, body_key: str, attempt: int, server_seed: int = 0, faults_so_far: int = 0) -> FaultKind | None:
        """The fault to inject for this attempt of this body, or None to let the responder answer."""
        if self.max_faults_per_body is not None and faults_so_far >= self.max_faults_per_body:
            return None
        return draw_fault(self, FAULT_KINDS, f"{self.seed}:{server_seed}:{attempt}:{body_key}")

    def reply_for(self, kind: FaultKind, answer: Reply | None = None) -> Reply:
        """The :class:`Reply` that expresses a fault kind (``prose`` wraps the responder's ``answer``)."""
        if kind == "prose":
            content = answer.content if answer is not None and answer.content is not None else DEFAULT_REPLY_CONTENT
            return Reply(content=PROSE_TEMPLATE.format(content=content))
        if kind == "rate_limit":
            return Reply.rate_limited(retry_after=self.retry_after)
        return {"server_error": Reply.server_error, "hang": Reply.hang, "malformed": Reply.malformed}[kind]()


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
        super().__init__(body)
        self.received_at = received_at
        self.path = path
        self.attempt = attempt
        self.fault = fault

    @property
    def body(self) -> dict[str, Any]:
        return dict(self)

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.get("messages")
        return messages if isinstance(messages, list) else []

    def __repr__(self) -> str:
        return (
            f"RecordedRequest({dict.__repr__(self)}, received_at={self.received_at!r}, "
            f"path={self.path!r}, attempt={self.attempt}, fault={self.fault!r})"
        )


# ------------------------------------------------------------------------------------- JSON schemas


def requested_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request's ``response_format`` asks the reply to follow, or None."""
    response_format = body.get("response_format")
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, dict) else None


def _first_object(text: str | None) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    position = (text or "").find("{")
    while position >= 0 and text is not None:
        try:
            value, _ = decoder.raw_decode(text, position)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        position = text.find("{", position + 1)
    return None


def _conform(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` made to follow ``schema`` (the subset strict schemas use): a value of the right type
    is kept, an object keeps exactly the schema's properties, anything else becomes the schema's
    first option (null where allowed, else the first enum value, 0, "", false, [] or {})."""
    choices = schema.get("anyOf")
    if isinstance(choices, list):
        for choice in choices:
            if _fits(value, choice):
                return _conform(value, choice)
        nullable = any(c.get("type") == "null" for c in choices)
        return None if nullable else _conform(None, choices[0])
    kind = schema.get("type")
    if "enum" in schema:
        return value if value in schema["enum"] else schema["enum"][0]
    if kind == "object":
        given = value if isinstance(value, dict) else {}
        return {name: _conform(given.get(name), sub) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        items = schema.get("items", {})
        return [_conform(item, items) for item in value if _fits(item, items)] if isinstance(value, list) else []
    if _fits(value, schema):
        return value
    return {"number": 0.0, "integer": 0, "string": "", "boolean": False, "null": None}.get(str(kind))


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if "anyOf" in schema:
        return any(_fits(value, choice) for choice in schema["anyOf"])
    if "enum" in schema:
        return value in schema["enum"]
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return {"string": isinstance(value, str), "boolean": isinstance(value, bool), "null": value is None,
            "object": isinstance(value, dict), "array": isinstance(value, list)}.get(str(kind), True)


def schema_reply(content: str | None, schema: Mapping[str, Any]) -> str:
    """What a provider that enforces ``schema`` (strictly) answers where the responder answered
    ``content``: the first JSON object of it, made to follow the schema, as the whole content."""
    return json.dumps(_conform(_first_object(content), schema), ensure_ascii=False)
