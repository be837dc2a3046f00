"""Input adapters: other log shapes mapped onto the record fields of CONTRACT §1 before validation.

Two run options choose the adapter (:func:`adapter_for`):

* ``input_format``: ``own`` (the records are already in the contract's shape), ``openai-chat``
  (a ``messages`` list in the OpenAI chat format; see :func:`adapt_chat` for the rules),
  ``litellm`` (LiteLLM's standard logging payload, one per call; :func:`adapt_litellm`) or ``otel``
  (records assembled from OpenTelemetry traces by :mod:`evaluation.storage.otel`);
* ``input_mapping``: ``field=path`` pairs (:func:`parse_mapping`) that read fields from any other
  place of the record, on top of the format: ``question=request.messages[-1].content``; the
  targets ``messages`` and ``response`` hand a chat conversation found anywhere in the record to
  the chat rules.

A third option, ``input_layout``, says how the day's objects are laid out (:data:`INPUT_LAYOUTS`);
each format has its source's layout as its default (:data:`FORMAT_LAYOUTS`).

An adapter turns each parsed object into a record of the contract's fields plus problems of its
own; normalisation and the Great Expectations suite then judge the mapped record as they judge
one in the contract's shape. Reasons of a rejected record name the field as the log spells it
(:meth:`InputAdapter.name_reasons`): ``request.messages[-1].content: missing or blank``, not
``question: missing or blank``.

The report's option ``accept_baseline`` is read here too (:func:`accepted_baselines`), beside the
other option texts.

Light on purpose (standard library only): :mod:`evaluation.contract.config` validates the options with it
when a run is configured, also at DAG-parse time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from evaluation.contract.errors import UsageError

#: The record fields of CONTRACT §1, the targets of a mapping.
INPUT_FIELDS: tuple[str, ...] = (
    "record_id", "conversation_id", "timestamp", "model", "question", "answer", "contexts", "reference",
    "expected_outcome", "rubrics", "evaluation_goal", "metadata",
)
#: Mapping targets that are not record fields: a chat conversation's ``messages`` list and the
#: chat completion ``response`` beside it, read by the chat rules (:func:`adapt_chat`).
CHAT_TARGETS: tuple[str, ...] = ("messages", "response")
#: Everything a mapping may name.
MAPPING_TARGETS: tuple[str, ...] = INPUT_FIELDS + CHAT_TARGETS
#: Values of the ``input_format`` option.
INPUT_FORMATS: tuple[str, ...] = ("own", "openai-chat", "litellm", "otel")
#: Values of the ``input_layout`` option: where a day's objects lie under the input root.
#: ``hive``: ``dt=YYYY-MM-DD/``; ``date``: ``YYYY-MM-DD/`` (LiteLLM's, with or without hour
#: folders); ``ymd``: ``year=YYYY/month=MM/day=DD/`` (the OpenTelemetry collector's S3 exporter's,
#: with hour and minute folders below).
INPUT_LAYOUTS: tuple[str, ...] = ("hive", "date", "ymd")
#: Each format's default layout: the one its source writes.
FORMAT_LAYOUTS: dict[str, str] = {"own": "hive", "openai-chat": "hive", "litellm": "date", "otel": "ymd"}
#: The object suffixes each format reads (``.json``: one JSON document per object).
FORMAT_SUFFIXES: dict[str, tuple[str, ...]] = {
    "own": (".jsonl", ".jsonl.gz", ".parquet"),
    "openai-chat": (".jsonl", ".jsonl.gz", ".parquet"),
    "litellm": (".json", ".jsonl", ".jsonl.gz"),
    "otel": (".json", ".json.gz", ".jsonl", ".jsonl.gz"),
}
#: Roles of the chat messages whose content is retrieved evidence (contexts).
CHAT_CONTEXT_ROLES: tuple[str, ...] = ("tool", "function", "retrieval")
#: Key of an object that is not a record to judge, with the reason (the ``otel`` format's
#: assembled objects: an LLM span that answers no user).
SKIP_KEY = "skipped"
#: Where the ``otel`` format's fields come from, for reject reasons.
OTEL_NAMES = {
    "record_id": "traceId-spanId", "timestamp": "startTimeUnixNano",
    "model": "gen_ai.response.model|gen_ai.request.model|llm.model_name",
    "question": "input messages (last user turn)", "answer": "output messages (text reply)",
    "contexts": "retrieval documents",
}
#: Fields an ``openai-chat`` record carries under their own names, as the contract's records do.
_CHAT_OWN_FIELDS = ("conversation_id", "reference", "expected_outcome", "rubrics", "evaluation_goal")
#: Key of ``metadata`` that holds the turns before the judged question.
HISTORY_KEY = "conversation_history"

#: One step of a path: a key, a list index (negative from the end) or ``*`` (every item).
Step: TypeAlias = str | int | None
_STAR: Step = None
_NAME = re.compile(r"[^.\[\]\s=,]+")
_INDEX = re.compile(r"\[(-?\d+|\*)\]")


class MappingError(UsageError, ValueError):
    """An ``input_format`` or ``input_mapping`` that cannot be used: one line naming the option."""


#: JSON's name of each parsed type, in the order they are tried (a boolean is no number).
_JSON_TYPES: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"), (bool, "boolean"), ((int, float), "number"), (str, "string"), (list, "array"),
    (dict, "object"),
)


def type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for problem messages."""
    return next((name for kinds, name in _JSON_TYPES if isinstance(value, kinds)), type(value).__name__)


# --------------------------------------------------------------------------------------------
# Paths and mappings
# --------------------------------------------------------------------------------------------


def parse_path(text: str) -> tuple[Step, ...]:
    """The steps of a dotted path: ``request.messages[-1].content`` → ``("request", "messages", -1,
    "content")``; ``docs[*].text`` takes ``text`` of every item of ``docs``. A path starts with a
    key; keys hold no ``.``, ``[``, ``]``, ``=``, ``,`` or white space. Raises ValueError naming
    the first character that does not fit."""
    steps: list[Step] = []
    position = 0
    while position < len(text):
        if steps and text[position] == "[":
            index = _INDEX.match(text, position)
            if index is None:
                raise ValueError(f"expected [N] or [*] at character {position + 1}")
            steps.append(_STAR if index.group(1) == "*" else int(index.group(1)))
            position = index.end()
            continue
        if steps:
            if text[position] != ".":
                raise ValueError(f"expected '.' or '[' at character {position + 1}")
            position += 1
        name = _NAME.match(text, position)
        if name is None:
            raise ValueError(f"expected a key at character {position + 1}")
        steps.append(name.group())
        position = name.end()
    if not steps:
        raise ValueError("the path is empty")
    return tuple(steps)


def _path_text(steps: tuple[Step, ...]) -> str:
    text = ""
    for step in steps:
        if isinstance(step, str):
            text += f".{step}" if text else step
        else:
            text += "[*]" if step is _STAR else f"[{step}]"
    return text


def resolve(obj: Any, steps: tuple[Step, ...], start: int = 0) -> tuple[Any, str | None]:
    """The value at ``steps[start:]`` in ``obj``, or None when a key or index is absent; and the
    problem when a step meets a value of the wrong kind (a key into a list, an index into a string),
    naming the path up to that value."""
    value = obj
    for position in range(start, len(steps)):
        step = steps[position]
        if value is None:
            return None, None
        if isinstance(step, str):
            if type(value) is not dict:
                return None, f"{_path_text(steps[:position]) or 'the record'} is not an object (got {type_name(value)})"
            value = value.get(step)
            continue
        if type(value) is not list:
            return None, f"{_path_text(steps[:position])} is not a list (got {type_name(value)})"
        if step is _STAR:
            items = []
            for item in value:
                item_value, problem = resolve(item, steps, position + 1)
                if problem is not None:
                    return None, problem
                items.append(item_value)
            return items, None
        assert isinstance(step, int)
        value = value[step] if -len(value) <= step < len(value) else None
    return value, None


def _check_known(option: str, noun: str, value: object, choices: tuple[str, ...]) -> None:
    """:class:`MappingError` naming the option, the closest choice and every choice, unless
    ``value`` is one of ``choices``."""
    if value not in choices:
        close = difflib.get_close_matches(str(value), choices, n=1)
        raise MappingError(f"{option}: unknown {noun} {value!r}; {f'did you mean {close[0]}? ' if close else ''}"
                           f"{noun}s: {', '.join(choices)}")


def parse_mapping(value: str | Mapping[str, str] | None) -> dict[str, str]:
    """``input_mapping`` as ``{field: path}``: from ``field=path`` pairs separated by commas or new
    lines (a form's or a flag's text), or from a mapping. Every field must be one of
    :data:`MAPPING_TARGETS`, named once, and every path well formed (:func:`parse_path`); anything
    else raises :class:`MappingError`, one line naming the pair."""
    if value is None:
        return {}
    if isinstance(value, str):
        pairs: list[tuple[str, str]] = []
        for item in re.split(r"[,\n]", value):
            if not item.strip():
                continue
            target, equals, path = item.partition("=")
            if not equals:
                raise MappingError(f"input_mapping: {item.strip()!r} is not field=path")
            pairs.append((target.strip(), path.strip()))
    elif isinstance(value, Mapping):
        pairs = [(str(target).strip(), path) for target, path in value.items()]
    else:
        raise MappingError(f"input_mapping: expected field=path pairs, got {type_name(value)}")
    mapping: dict[str, str] = {}
    for target, path in pairs:
        _check_known("input_mapping", "field", target, MAPPING_TARGETS)
        if target in mapping:
            raise MappingError(f"input_mapping: {target} is mapped twice")
        if not isinstance(path, str):
            raise MappingError(f"input_mapping: the path of {target} is not text (got {type_name(path)})")
        try:
            parse_path(path)
        except ValueError as exc:
            raise MappingError(f"input_mapping: malformed path {path!r} for {target}: {exc}") from None
        mapping[target] = path
    return mapping


def accepted_baselines(value: object) -> object:
    """``accept_baseline`` as ``{model: day}``: from ``MODEL=YYYY-MM-DD`` pairs separated by commas
    or new lines (a form's, a flag's or a variable's text; the model is what precedes the last
    ``=``), or a mapping, which is left to the field's own validation. A pair that is not one raises
    :class:`MappingError`, one line naming it."""
    if not isinstance(value, str):
        return value
    accepted: dict[str, dt.date] = {}
    for item in (part.strip() for part in re.split(r"[,\n]", value)):
        if not item:
            continue
        model, equals, day = item.rpartition("=")
        if not equals or not model.strip():
            raise MappingError(f"accept_baseline: {item!r} is not MODEL=YYYY-MM-DD")
        try:
            accepted[model.strip()] = dt.date.fromisoformat(day.strip())
        except ValueError:
            raise MappingError(f"accept_baseline: {day.strip()!r} of {model.strip()} is not a date (YYYY-MM-DD)") from None
    return accepted


def check_input_format(value: str) -> str:
    """``value`` when it is one of :data:`INPUT_FORMATS`, else :class:`MappingError`."""
    _check_known("input_format", "format", value, INPUT_FORMATS)
    return value


def check_input_layout(value: str | None) -> str:
    """``value`` when it is one of :data:`INPUT_LAYOUTS` (or empty: the format's own), else
    :class:`MappingError`."""
    if value in (None, ""):
        return ""
    _check_known("input_layout", "layout", value, INPUT_LAYOUTS)
    return value


def layout_of(input_format: str, input_layout: str | None) -> str:
    """The layout a run reads: ``input_layout`` when set, else the format's own."""
    return input_layout or FORMAT_LAYOUTS[input_format]


def check_options(input_format: str, mapping: Mapping[str, str] | None) -> None:
    """The format and the mapping together: ``otel`` records are assembled from spans, which
    have no paths a mapping could name."""
    check_input_format(input_format)
    if input_format == "otel" and mapping:
        raise MappingError("input_mapping: not available with input_format otel (records are assembled "
                           "from the spans of each trace; see docs/inputs.md)")


# --------------------------------------------------------------------------------------------
# Timestamps
# --------------------------------------------------------------------------------------------

#: A date and time with a ``T`` or a space between them, the zone optional.
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?\s*([Zz]|[+-]\d{2}(:?\d{2})?)?")
#: Below this, a Unix time is in seconds; below the next, milliseconds; then microseconds;
#: above, nanoseconds (seconds reach 1e11 in the year 5138; milliseconds 1e14 in 5138 too).
_EPOCH_UNITS: tuple[tuple[float, float], ...] = ((1e11, 1.0), (1e14, 1e3), (1e17, 1e6), (float("inf"), 1e9))


def read_timestamp(value: Any, problems: list[str]) -> Any:
    """A timestamp in the common forms, as an aware UTC datetime: Unix time in seconds,
    milliseconds, microseconds or nanoseconds (decided by magnitude), as a number or a string of
    digits; RFC 3339 with a ``T`` or a space, a zone-less one read as UTC. Any other value as it
    is, for normalisation to judge (and name)."""
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d{9,19}(\.\d+)?", text):
            value = float(text)
        elif _DATE_TIME.fullmatch(text) and not re.search(r"[Tt].*([Zz]|[+-]\d{2}:\d{2})$", text):
            # (RFC 3339 proper goes to normalisation as it is, which names what is wrong with it)
            try:
                parsed = dt.datetime.fromisoformat(text.upper().replace(" Z", "Z"))
            except ValueError:
                return value  # well-formed but impossible (month 13): normalisation names it
            return parsed.replace(tzinfo=dt.UTC) if parsed.tzinfo is None else parsed.astimezone(dt.UTC)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    try:
        divisor = next(divisor for bound, divisor in _EPOCH_UNITS if abs(value) < bound)
        return dt.datetime.fromtimestamp(value / divisor, dt.UTC)
    except (OverflowError, OSError, ValueError):
        problems.append(f"timestamp: not a Unix time: {value}")
        return None


# --------------------------------------------------------------------------------------------
# The openai-chat format
# --------------------------------------------------------------------------------------------


def _content_text(content: Any) -> Any:
    """A message's text: a string as it is; a list of content parts as its text parts joined by new
    lines (images and other parts left out). Anything else as it is, for normalisation to name."""
    if type(content) is not list:
        return content
    texts = [part["text"] for part in content if type(part) is dict and type(part.get("text")) is str]
    return "\n".join(texts) if texts else content


def _tool_contexts(message: dict[str, Any]) -> list[Any]:
    """The contexts of one tool / retrieval message: a JSON array in its text is a list of contexts
    (strings or objects with ``text``, as in CONTRACT §1); any other text is one context, with the
    message's ``name`` as its source."""
    text = _content_text(message.get("content"))
    if type(text) is not str:
        return [text]
    if text.lstrip().startswith("["):
        with contextlib.suppress(ValueError):
            items = json.loads(text)
            if type(items) is list:
                return items
    name = message.get("name")
    return [{"text": text, "source": name} if type(name) is str else text]


@dataclass(frozen=True)
class _Turns:
    """Where the judged exchange sits in a ``messages`` list."""

    question: int | None  #: index of the last user turn
    answer: int | None  #: index of the assistant's reply after it


def _turns(messages: list[Any]) -> _Turns:
    latest_first = [(index, message) for index, message in enumerate(messages) if type(message) is dict][::-1]
    question = next((index for index, message in latest_first if message.get("role") == "user"), None)
    # An assistant turn that only calls tools (content null or "") is not the reply.
    answer = None if question is None else next(
        (index for index, message in latest_first if index > question and message.get("role") == "assistant"
         and message.get("content") is not None and not (message.get("content") == "" and message.get("tool_calls"))),
        None)
    return _Turns(question, answer)


def _choices_reply(obj: dict[str, Any]) -> Any:
    """``choices[0].message.content`` of a chat completion response logged beside the request."""
    value, _ = resolve(obj, ("choices", 0, "message", "content"))
    return value


def adapt_chat(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One ``openai-chat`` record as the contract's fields, and the problems met on the way.

    * question: the content of the last ``user`` message;
    * answer: the last ``assistant`` message after it that is not only a tool call, else
      ``choices[0].message.content`` (a response logged beside the request);
    * contexts: every ``tool`` / ``function`` / ``retrieval`` message after the question, in order
      (see :func:`_tool_contexts`);
    * metadata: the record's ``metadata`` object, with the messages before the question under
      ``conversation_history``;
    * record_id from ``id``, model from ``model``, timestamp from ``created`` (Unix seconds, as in
      OpenAI's responses) or else ``timestamp`` (RFC 3339, or Unix seconds);
    * conversation_id, reference, expected_outcome, rubrics and evaluation_goal under their own names.

    Message content may be a string or a list of content parts (their text parts are joined).
    """
    problems: list[str] = []
    record: dict[str, Any] = {name: obj.get(name) for name in _CHAT_OWN_FIELDS}
    record["record_id"] = obj.get("id")
    record["model"] = obj.get("model")
    record["timestamp"] = read_timestamp(obj.get("created") if "created" in obj else obj.get("timestamp"), problems)
    metadata = obj.get("metadata")
    messages = obj.get("messages")
    if type(messages) is not list:
        if messages is not None:
            problems.append(f"messages: not a list (got {type_name(messages)})")
        record.update(question=None, answer=_content_text(_choices_reply(obj)), metadata=metadata)
        return record, problems
    for index, message in enumerate(messages):
        if type(message) is not dict:
            problems.append(f"messages: item {index} is not an object")
    turns = _turns(messages)
    record["question"] = None if turns.question is None else _content_text(messages[turns.question].get("content"))
    record["answer"] = _content_text(
        _choices_reply(obj) if turns.answer is None else messages[turns.answer].get("content"))
    contexts: list[Any] = []
    if turns.question is not None:
        for message in messages[turns.question + 1:]:
            if type(message) is dict and message.get("role") in CHAT_CONTEXT_ROLES:
                contexts.extend(_tool_contexts(message))
    record["contexts"] = contexts
    history = messages[: turns.question] if turns.question else []
    if history and (metadata is None or type(metadata) is dict):
        metadata = {**(metadata or {}), HISTORY_KEY: history}
    record["metadata"] = metadata
    return record, problems


def _chat_names(obj: dict[str, Any]) -> dict[str, str]:
    """Where an ``openai-chat`` record's fields came from, for its reject reasons."""
    names = {"record_id": "id", "timestamp": "created" if "created" in obj else "timestamp",
             "contexts": "messages[role=tool]", "question": "messages[role=user].content",
             "answer": "messages[role=assistant].content"}
    messages = obj.get("messages")
    turns = _turns(messages) if type(messages) is list else _Turns(None, None)
    if turns.question is not None:
        names["question"] = f"messages[{turns.question}].content"
    if turns.answer is not None:
        names["answer"] = f"messages[{turns.answer}].content"
    elif _choices_reply(obj) is not None:
        names["answer"] = "choices[0].message.content"
    return names


# --------------------------------------------------------------------------------------------
# The litellm format: LiteLLM's standard logging payload
# --------------------------------------------------------------------------------------------

#: ``call_type`` values of LiteLLM's chat completion calls; every other call is skipped.
LITELLM_CHAT_CALLS: tuple[str, ...] = ("completion", "acompletion")
#: Keys of a payload kept in the record's metadata (under ``litellm``), when not empty.
_LITELLM_KEPT = ("trace_id", "call_type", "model_group", "model_id", "custom_llm_provider", "api_base",
                 "response_cost", "prompt_tokens", "completion_tokens", "response_time", "end_user", "request_tags",
                 "cache_hit")


def litellm_skip(obj: dict[str, Any]) -> str | None:
    """Why a LiteLLM payload is not a record to judge (None when it is): a failed call, a call
    that is not a chat completion (embeddings, images, ...), or a reply that only calls tools (a
    step of an agent's loop; the call that answers comes after it)."""
    if obj.get("status") == "failure" or (obj.get("status") is None and obj.get("error_str")):
        return "failed call"
    call_type = obj.get("call_type")
    if call_type is not None and call_type not in LITELLM_CHAT_CALLS:
        return f"not a chat call ({call_type})"
    response = obj.get("response")
    message, _ = resolve(response, ("choices", 0, "message"))
    if type(message) is dict and message.get("content") in (None, "") and message.get("tool_calls"):
        return "tool calls only (no answer)"
    return None


def _vector_store_contexts(metadata: Any) -> list[Any]:
    """Passages the proxy's vector store search added (``metadata.vector_store_request_metadata``)."""
    requests = metadata.get("vector_store_request_metadata") if type(metadata) is dict else None
    contexts: list[Any] = []
    for request in requests if type(requests) is list else []:
        found, _ = resolve(request, ("vector_store_search_response", "data"))
        for item in found if type(found) is list else []:
            if type(item) is not dict:
                continue
            text = _content_text(item.get("content"))
            context: dict[str, Any] = {"text": text}
            source = item.get("filename") or item.get("file_id")
            if type(source) is str:
                context["source"] = source
            if type(item.get("score")) in (int, float):
                context["score"] = item["score"]
            contexts.append(context)
    return contexts


def _litellm_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    found = [(key, obj.get(key)) for key in _LITELLM_KEPT] + [
        (key, metadata.get(key) if type(metadata) is dict else None)
        for key in ("requester_metadata", "spend_logs_metadata", "user_api_key_team_alias", "user_api_key_alias")]
    return {"litellm": {key: value for key, value in found if value not in (None, "", [], {})}}


def adapt_litellm(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One LiteLLM standard logging payload (a call :func:`litellm_skip` keeps) as the contract's
    fields: the chat rules of :func:`adapt_chat` over the request's ``messages``, with the answer
    from ``response.choices[0].message.content``; contexts from tool messages and the proxy's
    vector store search; record_id from ``id``, model from ``model`` (the model that answered;
    map ``model=model_group`` for the proxy's model name), timestamp from ``startTime``,
    conversation_id from ``session_id``; the call's details under ``metadata.litellm``."""
    response = obj.get("response")
    view = {"id": obj.get("id"), "model": obj.get("model"), "timestamp": obj.get("startTime"),
            "messages": obj.get("messages"), "metadata": _litellm_metadata(obj),
            "choices": response.get("choices") if type(response) is dict else None}
    record, problems = adapt_chat(view)
    reply = _choices_reply(view)
    if reply is not None:
        record["answer"] = _content_text(reply)
    session = obj.get("session_id")
    record["conversation_id"] = session if type(session) is str and session.strip() else None
    if type(record.get("contexts")) is list:
        record["contexts"] = [*record["contexts"], *_vector_store_contexts(obj.get("metadata"))]
    return record, problems


def _litellm_names(obj: dict[str, Any]) -> dict[str, str]:
    names = _chat_names({"messages": obj.get("messages")})
    names.update(record_id="id", timestamp="startTime", conversation_id="session_id")
    reply, _ = resolve(obj, ("response", "choices", 0, "message", "content"))
    if reply is not None or names["answer"].startswith("messages[role"):
        names["answer"] = "response.choices[0].message.content"
    return names


# --------------------------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------------------------

#: Fields whose mapped value may be a list of content parts (their text parts are joined).
_TEXT_FIELDS = ("question", "answer", "reference", "expected_outcome", "evaluation_goal")


def _mapped_value(target: str, value: Any, problems: list[str]) -> Any:
    """A mapped value made to fit its field: a timestamp in the common forms, text parts joined,
    one string of contexts as a list of one."""
    if target == "timestamp":
        return read_timestamp(value, problems)
    if target in _TEXT_FIELDS:
        return _content_text(value)
    if target == "contexts" and type(value) is str:
        return [value]
    return value


def _chat_response(response: Any) -> Any:
    """The ``choices`` of a mapped chat completion ``response``; a string is the reply itself."""
    if type(response) is str:
        return [{"message": {"role": "assistant", "content": response}}]
    return response.get("choices") if type(response) is dict else None


@dataclass(frozen=True)
class InputAdapter:
    """Maps each parsed object of one run onto the contract's fields (see the module's text)."""

    input_format: str = "own"
    mapping: dict[str, str] = field(default_factory=dict)  #: field → path, as written
    _steps: dict[str, tuple[Step, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_options(self.input_format, self.mapping)
        self._steps.update({target: parse_path(path) for target, path in parse_mapping(self.mapping).items()})

    @property
    def chat_mapped(self) -> bool:
        """Whether the mapping hands a conversation to the chat rules (``messages`` or ``response``)."""
        return any(target in self._steps for target in CHAT_TARGETS)

    def skip(self, obj: dict[str, Any]) -> str | None:
        """Why ``obj`` is not a record to judge, counted but not rejected (None when it is one)."""
        if self.input_format == "otel":
            reason = obj.get(SKIP_KEY)
            return reason if type(reason) is str else None
        return litellm_skip(obj) if self.input_format == "litellm" else None

    def _read(self, obj: dict[str, Any], target: str, problems: list[str]) -> Any:
        """The value ``target`` is mapped to in ``obj``. A problem on the way is given under the
        field's name: it reads as the mapped path once named, and spares the field a second, vaguer
        "missing" reason."""
        value, problem = resolve(obj, self._steps[target])
        if problem is not None:
            problems.append(f"{target}: {problem}")
        return value

    def _chat_view(self, obj: dict[str, Any], problems: list[str]) -> dict[str, Any]:
        view = dict(obj)
        if "messages" in self._steps:
            view["messages"] = self._read(obj, "messages", problems)
        if "response" in self._steps:
            view["choices"] = _chat_response(self._read(obj, "response", problems))
        return view

    def adapt(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The record in the contract's fields, and problems that name the field as the log does."""
        problems: list[str] = []
        if self.input_format == "litellm":
            record, problems = adapt_litellm(obj)
        elif self.input_format == "otel":
            record = dict(obj)
            problems = list(record.pop("problems", None) or [])
        elif self.input_format == "openai-chat" or self.chat_mapped:
            record, found = adapt_chat(self._chat_view(obj, problems))
            problems.extend(found)
        else:
            record = dict(obj)
        for target in self._steps:
            if target not in CHAT_TARGETS:
                record[target] = _mapped_value(target, self._read(obj, target, problems), problems)
        return record, problems

    def source_names(self, obj: Any) -> dict[str, str]:
        """Field → the name the log gives it, for one record (its parsed object)."""
        names: dict[str, str] = dict(OTEL_NAMES) if self.input_format == "otel" else {}
        if type(obj) is dict and self.input_format == "litellm":
            names = _litellm_names(obj)
        elif type(obj) is dict and (self.input_format == "openai-chat" or self.chat_mapped):
            names = _chat_names(self._chat_view(obj, []))
            for target, prefix in (("messages", "messages"), ("response", "choices[0]")):
                if target in self.mapping:
                    path = self.mapping[target] + (".choices[0]" if target == "response" else "")
                    names = {k: path + v[len(prefix):] if v.startswith(prefix) else v for k, v in names.items()}
        names.update({k: v for k, v in self.mapping.items() if k not in CHAT_TARGETS})
        return names

    def name_reasons(self, reasons: list[str], raw: str) -> list[str]:
        """A reject's reasons with each field named as the record spells it (``raw`` is its text;
        text cut short names the fields as a record without them would)."""
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = {}
        names = self.source_names(obj)
        named = []
        for reason in reasons:
            target, colon, rest = reason.partition(":")
            source = names.get(target) if colon else None
            named.append(reason if source is None else f"{source}:{rest}")
        return named


def adapter_for(input_format: str, mapping: Mapping[str, str] | None) -> InputAdapter | None:
    """The adapter of a run's options; None for records in the contract's own shape."""
    if input_format == "own" and not mapping:
        return None
    return InputAdapter(input_format, dict(mapping or {}))
