"""Input adapters: other log shapes mapped onto the record fields of CONTRACT §1 before validation.

Two run options choose the adapter (:func:`adapter_for`):

* ``input_format``: ``own`` (the records are already in the contract's shape) or ``openai-chat``
  (a ``messages`` list in the OpenAI chat format; see :func:`adapt_chat` for the rules);
* ``input_mapping``: ``field=path`` pairs (:func:`parse_mapping`) that read fields from any other
  place of the record, on top of the format: ``question=request.messages[-1].content``.

An adapter turns each parsed object into a record of the contract's fields plus problems of its
own; normalisation and the Great Expectations suite then judge the mapped record as they judge
one in the contract's shape. Reasons of a rejected record name the field as the log spells it
(:meth:`InputAdapter.name_reasons`): ``request.messages[-1].content: missing or blank``, not
``question: missing or blank``.

Light on purpose (standard library only): :mod:`evaluation.contract` validates the options with it
when a run is configured, also at DAG-parse time.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from evaluation.errors import UsageError

__all__ = [
    "CHAT_CONTEXT_ROLES",
    "INPUT_FIELDS",
    "INPUT_FORMATS",
    "InputAdapter",
    "adapt_chat",
    "adapter_for",
    "check_input_format",
    "parse_mapping",
    "parse_path",
    "type_name",
]

#: The record fields of CONTRACT §1, the targets of a mapping.
INPUT_FIELDS: tuple[str, ...] = (
    "record_id", "conversation_id", "timestamp", "model", "question", "answer", "contexts", "reference",
    "expected_outcome", "rubrics", "evaluation_goal", "metadata",
)
#: Values of the ``input_format`` option.
INPUT_FORMATS: tuple[str, ...] = ("own", "openai-chat")
#: Roles of the chat messages whose content is retrieved evidence (contexts).
CHAT_CONTEXT_ROLES: tuple[str, ...] = ("tool", "function", "retrieval")
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


def type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for problem messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


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


def _suggest(name: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f"did you mean {close[0]}? " if close else ""


def parse_mapping(value: str | Mapping[str, str] | None) -> dict[str, str]:
    """``input_mapping`` as ``{field: path}``: from ``field=path`` pairs separated by commas or new
    lines (a form's or a flag's text), or from a mapping. Every field must be one of
    :data:`INPUT_FIELDS`, named once, and every path well formed (:func:`parse_path`); anything
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
        if target not in INPUT_FIELDS:
            raise MappingError(f"input_mapping: unknown field {target!r}; {_suggest(target, INPUT_FIELDS)}"
                               f"fields: {', '.join(INPUT_FIELDS)}")
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


def check_input_format(value: str) -> str:
    """``value`` when it is one of :data:`INPUT_FORMATS`, else :class:`MappingError`."""
    if value not in INPUT_FORMATS:
        raise MappingError(f"input_format: unknown format {value!r}; {_suggest(value, INPUT_FORMATS)}"
                           f"formats: {', '.join(INPUT_FORMATS)}")
    return value


# --------------------------------------------------------------------------------------------
# The openai-chat format
# --------------------------------------------------------------------------------------------


def _unix_time(value: Any, problems: list[str]) -> Any:
    """A number as Unix seconds (UTC); any other value as it is, for normalisation to judge."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC)
    except (OverflowError, OSError, ValueError):
        problems.append(f"timestamp: not a Unix time in seconds: {value}")
        return None


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
        try:
            items = json.loads(text)
        except ValueError:
            pass
        else:
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
    question = None
    for index in range(len(messages) - 1, -1, -1):
        if type(messages[index]) is dict and messages[index].get("role") == "user":
            question = index
            break
    answer = None
    if question is not None:
        for index in range(question + 1, len(messages)):
            message = messages[index]
            # An assistant turn that only calls tools (content null or "") is not the reply.
            if (type(message) is dict and message.get("role") == "assistant" and message.get("content") is not None
                    and not (message.get("content") == "" and message.get("tool_calls"))):
                answer = index
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
    record["timestamp"] = _unix_time(obj.get("created") if "created" in obj else obj.get("timestamp"), problems)
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
# Adapters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputAdapter:
    """Maps each parsed object of one run onto the contract's fields (see the module's text)."""

    input_format: str = "own"
    mapping: dict[str, str] = field(default_factory=dict)  #: field → path, as written
    _steps: dict[str, tuple[Step, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_input_format(self.input_format)
        self._steps.update({target: parse_path(path) for target, path in parse_mapping(self.mapping).items()})

    def adapt(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The record in the contract's fields, and problems that name the field as the log does."""
        if self.input_format == "openai-chat":
            record, problems = adapt_chat(obj)
        else:
            record, problems = dict(obj), []
        for target, steps in self._steps.items():
            value, problem = resolve(obj, steps)
            if problem is not None:
                # Under the field's name: it reads as the mapped path once named, and spares the
                # field a second, vaguer "missing" reason.
                problems.append(f"{target}: {problem}")
            if target == "timestamp":
                value = _unix_time(value, problems)
            record[target] = value
        return record, problems

    def source_names(self, obj: Any) -> dict[str, str]:
        """Field → the name the log gives it, for one record (its parsed object)."""
        names = _chat_names(obj) if self.input_format == "openai-chat" and type(obj) is dict else {}
        names.update(self.mapping)
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
