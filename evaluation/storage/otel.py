"""OpenTelemetry traces as records (``input_format: otel``): OTLP JSON exports, as the collector's
S3 exporter writes them, assembled trace by trace into the fields of CONTRACT §1.

One record per LLM span that answers a user (its input has a user turn, its output a text reply):

* question: the last user turn of the span's input messages; answer: its output's text;
* contexts: the documents of the trace's retriever spans that started before the LLM span (and
  after the previous answering LLM span of the trace), then the tool results among its input
  messages after the question;
* model: ``gen_ai.response.model``, else ``gen_ai.request.model``, else ``llm.model_name``;
* record_id: ``<traceId>-<spanId>``; timestamp: the span's start; conversation_id:
  ``gen_ai.conversation.id`` or ``session.id``; metadata: the trace, span and service.

Both attribute families are read: the OpenTelemetry GenAI semantic conventions
(``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON with typed parts,
``gen_ai.retrieval.documents`` on ``retrieval`` spans; the older ``gen_ai.prompt`` /
``gen_ai.completion`` span events and indexed ``gen_ai.prompt.N.*`` attributes) and OpenInference's
(``openinference.span.kind`` LLM / RETRIEVER, ``llm.input_messages.N.message.*``,
``llm.output_messages.N.message.*`` or ``output.value``, ``retrieval.documents.N.document.*``).

A trace may span objects and minutes: only the spans that matter, cut down to what a record needs,
are kept, spilled to temporary files by trace id while the day is read; then each file's traces
are assembled. Memory follows one file's share of the day, not the day.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from evaluation.contract.adapters import SKIP_KEY, adapt_chat
from evaluation.storage.ingest import ParsedRow, Reject

__all__ = ["assemble_traces"]

#: Files the spans of a day are spread over by trace id.
BUCKETS = 64
_HEX_ID = re.compile(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}")
_GENAI_CHAT = ("chat", "text_completion", "generate_content")


def _value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (JSON mapping) as a Python value."""
    if type(value) is not dict:
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    if "arrayValue" in value:
        return [_value(item) for item in value["arrayValue"].get("values", [])]
    if "kvlistValue" in value:
        return attributes(value["kvlistValue"].get("values", []))
    return value.get("bytesValue")


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` items as a dict."""
    return {item["key"]: _value(item.get("value")) for item in items or [] if type(item) is dict and "key" in item}


def _id(value: Any) -> str:
    """A trace or span id as hex: OTLP/JSON writes hex, protobuf's JSON mapping base64."""
    if type(value) is not str or not value:
        return ""
    if _HEX_ID.fullmatch(value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def request_spans(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every span of an ``ExportTraceServiceRequest`` (JSON), with its resource's attributes
    under ``resource``."""
    for resource_spans in request.get("resourceSpans") or []:
        resource = attributes((resource_spans.get("resource") or {}).get("attributes"))
        for scope in resource_spans.get("scopeSpans") or resource_spans.get("instrumentationLibrarySpans") or []:
            for span in scope.get("spans") or []:
                if type(span) is dict:
                    yield {**span, "resource": resource}


def _json(value: Any) -> Any:
    if type(value) is str:
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.N.rest`` attributes as a list of ``{rest: value}``, by N."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix):].partition(".")
            if index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return [items[index] for index in sorted(items)]


def _text(parts: Any) -> Any:
    """The text of GenAI message parts (``{"type": "text", "content": ...}``), joined."""
    if type(parts) is not list:
        return parts
    texts = [p.get("content") for p in parts if type(p) is dict and p.get("type") == "text"]
    return "\n".join(t for t in texts if type(t) is str) if texts else None


def _genai_messages(value: Any) -> list[dict[str, Any]]:
    """GenAI ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as chat messages: text parts
    joined, each tool call response a ``tool`` message of its own."""
    messages: list[dict[str, Any]] = []
    for message in _json(value) if type(_json(value)) is list else []:
        if type(message) is not dict:
            continue
        parts = message.get("parts")
        if type(parts) is not list:  # an OpenAI-style message
            messages.append(message)
            continue
        for part in parts:
            if type(part) is dict and part.get("type") == "tool_call_response":
                response = part.get("response")
                messages.append({"role": "tool", "content": response if type(response) is str else json.dumps(response)})
        text = _text(parts)
        tool_calls = [p for p in parts if type(p) is dict and p.get("type") == "tool_call"]
        if text is not None or tool_calls or message.get("role") != "tool":
            messages.append({"role": message.get("role"), "content": text, "tool_calls": tool_calls or None})
    return messages


def _openinference_messages(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    messages = []
    for item in _indexed(attrs, prefix):
        content = item.get("message.content")
        if content is None:
            texts = [v for k, v in sorted(item.items()) if k.startswith("message.contents.") and k.endswith(".text")]
            content = "\n".join(texts) if texts else None
        messages.append({"role": item.get("message.role"), "content": content,
                         "tool_calls": [True] if any(k.startswith("message.tool_calls.") for k in item) else None})
    return messages


def _event_messages(span: dict[str, Any], name: str, key: str) -> list[dict[str, Any]]:
    """The older GenAI content events: ``gen_ai.content.prompt`` / ``gen_ai.content.completion``."""
    for event in span.get("events") or []:
        if type(event) is dict and event.get("name") == name:
            value = _json(attributes(event.get("attributes")).get(key))
            return [m for m in value if type(m) is dict] if type(value) is list else []
    return []


def _output_value(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """OpenInference's ``output.value``: a chat completion (JSON) or the reply's text."""
    value = _json(attrs.get("output.value"))
    if type(value) is dict:
        choices = value.get("choices")
        message = choices[0].get("message") if type(choices) is list and choices and type(choices[0]) is dict else None
        return [message] if type(message) is dict else []
    return [{"role": "assistant", "content": value}] if type(value) is str else []


def _io(span: dict[str, Any], attrs: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The span's input and output messages, from whichever family it carries."""
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        return _genai_messages(attrs.get("gen_ai.input.messages")), _genai_messages(attrs.get("gen_ai.output.messages"))
    if any(k.startswith("llm.input_messages.") for k in attrs):
        output = _openinference_messages(attrs, "llm.output_messages.") or _output_value(attrs)
        return _openinference_messages(attrs, "llm.input_messages."), output
    indexed = [{"role": m.get("role"), "content": m.get("content")} for m in _indexed(attrs, "gen_ai.prompt.")]
    if indexed:
        completion = [{"role": m.get("role") or "assistant", "content": m.get("content")}
                      for m in _indexed(attrs, "gen_ai.completion.")]
        return indexed, completion
    completion = _event_messages(span, "gen_ai.content.completion", "gen_ai.completion")
    return (_event_messages(span, "gen_ai.content.prompt", "gen_ai.prompt"),
            [c.get("message", c) for c in completion if type(c.get("message", c)) is dict])


def _documents(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """A retriever span's documents as contexts (``text``, and ``source`` / ``score`` when given)."""
    found = [{"text": item.get("document.content"), "source": item.get("document.id"),
              "score": item.get("document.score")} for item in _indexed(attrs, "retrieval.documents.")]
    genai = _json(attrs.get("gen_ai.retrieval.documents"))
    for item in genai if type(genai) is list else []:
        if type(item) is dict:
            found.append({"text": item.get("content"), "source": item.get("source_id") or item.get("id"),
                          "score": item.get("score")})
    return [{k: v for k, v in d.items() if v is not None and (k != "score" or type(v) in (int, float))}
            for d in found]


def _kind(attrs: dict[str, Any], span: dict[str, Any]) -> str | None:
    kind = attrs.get("openinference.span.kind")
    operation = attrs.get("gen_ai.operation.name")
    if kind == "RETRIEVER" or operation == "retrieval" or "gen_ai.retrieval.documents" in attrs:
        return "retriever"
    if kind == "LLM" or operation in _GENAI_CHAT:
        return "llm"
    if any(k.startswith(("gen_ai.prompt.", "llm.input_messages.")) for k in attrs) or "gen_ai.input.messages" in attrs:
        return "llm"
    if any(type(e) is dict and e.get("name") == "gen_ai.content.prompt" for e in span.get("events") or []):
        return "llm"
    return None


def compact_span(span: dict[str, Any], source_uri: str, line_no: int) -> dict[str, Any] | None:
    """What a record needs of one span (None for a span that is neither an LLM nor a retriever)."""
    attrs = attributes(span.get("attributes"))
    kind = _kind(attrs, span)
    if kind is None:
        return None
    compact: dict[str, Any] = {
        "kind": kind, "trace": _id(span.get("traceId")), "span": _id(span.get("spanId")), "name": span.get("name"),
        "start": int(span.get("startTimeUnixNano") or 0), "uri": source_uri, "line": line_no,
        "service": span.get("resource", {}).get("service.name"),
    }
    if kind == "retriever":
        compact["documents"] = _documents(attrs)
        return compact
    compact["input"], compact["output"] = _io(span, attrs)
    compact["model"] = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or attrs.get("llm.model_name")
    compact["conversation"] = attrs.get("gen_ai.conversation.id") or attrs.get("session.id")
    return compact


def _iso(nanoseconds: int) -> str:
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=nanoseconds // 1000)
    return moment.isoformat().replace("+00:00", "Z")


def _reply(span: dict[str, Any]) -> dict[str, Any] | None:
    """The span's text reply (empty text too: an empty answer is judged, as CONTRACT §2.5 says);
    None for an output that only calls tools, or none."""
    return next((m for m in span["output"] if type(m) is dict and type(m.get("content")) is str
                 and (m["content"].strip() or not m.get("tool_calls"))), None)


def _record(span: dict[str, Any], reply: dict[str, Any], documents: list[dict[str, Any]]) -> dict[str, Any]:
    chat, problems = adapt_chat({"messages": [*span["input"], {"role": "assistant", "content": reply["content"]}]})
    contexts = chat["contexts"] if type(chat["contexts"]) is list else []
    metadata = {**(chat.get("metadata") or {}), "otel": {"trace_id": span["trace"], "span_id": span["span"],
                                                          "span_name": span["name"], "service": span["service"]}}
    return {"record_id": f"{span['trace']}-{span['span']}", "conversation_id": span["conversation"],
            "timestamp": _iso(span["start"]), "model": span["model"], "question": chat["question"],
            "answer": chat["answer"], "contexts": [*documents, *contexts], "metadata": metadata,
            **({"problems": problems} if problems else {})}


def trace_records(spans: list[dict[str, Any]]) -> Iterator[tuple[str, ParsedRow]]:
    """The records of one trace's compact spans, in start order, each with its object's URI."""
    documents: list[dict[str, Any]] = []
    for span in sorted(spans, key=lambda s: s["start"]):
        if span["kind"] == "retriever":
            documents.extend(span["documents"])
            continue
        reply = _reply(span)  # the span answers a user with it when a user turn is in
        if reply is not None and any(type(m) is dict and m.get("role") == "user" for m in span["input"]):
            record = _record(span, reply, documents)
            documents = []
        else:
            record = {SKIP_KEY: "LLM span without a user question or a text reply",
                      "record_id": f"{span['trace']}-{span['span']}"}
        yield span["uri"], (span["line"], record, json.dumps(record, ensure_ascii=False, default=str))


def assemble_traces(items: Iterator[tuple[str, ParsedRow | Reject]]) -> Iterator[tuple[str, ParsedRow | Reject]]:
    """A day's parsed OTLP JSON objects as records (see the module's text): rejects pass through
    as they come; the records follow once every object has been read."""
    with tempfile.TemporaryDirectory(prefix="evaluation-traces-") as folder:
        files: dict[int, IO[str]] = {}
        with contextlib.ExitStack() as opened:  # every file closed (written out) before it is read
            for source_uri, item in items:
                if type(item) is not tuple:
                    yield source_uri, item
                    continue
                line_no, obj, raw = item
                if "resourceSpans" not in obj:
                    yield source_uri, Reject.of(source_uri, line_no, raw,
                                                "not an OTLP JSON trace export (no resourceSpans)")
                    continue
                for span in request_spans(obj):
                    compact = compact_span(span, source_uri, line_no)
                    if compact is not None:
                        trace = compact["trace"]
                        bucket = (int(trace[-6:], 16) if _HEX_ID.fullmatch(trace) else hash(trace)) % BUCKETS
                        handle = files.get(bucket) or files.setdefault(bucket, opened.enter_context(
                            open(Path(folder) / f"{bucket:03d}.jsonl", "w", encoding="utf-8")))
                        handle.write(json.dumps(compact, ensure_ascii=False) + "\n")
        for bucket in sorted(files):
            traces: dict[str, list[dict[str, Any]]] = {}
            with open(Path(folder) / f"{bucket:03d}.jsonl", encoding="utf-8") as handle:
                for line in handle:
                    span = json.loads(line)
                    traces.setdefault(span["trace"], []).append(span)
            for trace in traces.values():
                yield from trace_records(trace)
