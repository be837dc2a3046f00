"""A generated day (:mod:`evaluation.testing.synthetic`) in each input format's shape and layout, for
``python -m evaluation generate``: the project's own JSON lines and the OpenAI chat format under
``dt=YYYY-MM-DD/``; LiteLLM's standard logging payloads, one call per object, under
``YYYY-MM-DD/``; OTLP JSON traces per minute under ``year=/month=/day=/hour=/minute=``.

The planted bad records are a few per cent of the day at most (:func:`planted_lines`), so the
command ``generate`` prints passes the default ``max_reject_ratio``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
from collections.abc import Sequence
from typing import Any

from evaluation import storage
from evaluation.testing import synthetic

__all__ = ["FORMATS", "PLANTED_SHARE", "day_objects", "planted_lines"]

#: Formats ``generate`` writes.
FORMATS: tuple[str, ...] = ("own", "openai-chat", "litellm", "otel")
#: The planted bad records' share of the day at most (the default max_reject_ratio is 0.05).
PLANTED_SHARE = 0.04
#: Planted records that stay bad in a format's shape (a log of calls or spans holds no rubrics, and
#: a trace's record id is its own, so a repeated id cannot be planted there).
_PLANTED = {
    "own": ("bad-json", "bad-no-question", "bad-other-day", "bad-contexts", "bad-rubric", "repeat"),
    "openai-chat": ("bad-json", "bad-no-question", "bad-other-day", "bad-contexts", "bad-rubric", "repeat"),
    "litellm": ("bad-json", "bad-no-question", "bad-other-day", "bad-contexts", "repeat"),
    "otel": ("bad-json", "bad-no-question", "bad-other-day", "bad-contexts"),
}


def _record_id(raw: str) -> str:
    try:
        return str(json.loads(raw)["record_id"])
    except ValueError:
        return "bad-json"


def planted_lines(day: dt.date, lines: Sequence[str], input_format: str) -> list[str]:
    """The bad lines to plant in a day of ``len(lines)`` valid records: as many of the format's
    kinds as keep them within :data:`PLANTED_SHARE` of the day (none below 25 records)."""
    count = min(len(_PLANTED[input_format]), int(PLANTED_SHARE * len(lines)))
    by_id = {_record_id(raw): raw for raw, _ in synthetic.bad_lines(day)}
    by_id["repeat"] = lines[0] if lines else ""
    return [by_id[name] for name in _PLANTED[input_format][:count]]


def _litellm(day: dt.date, index: int, line: str) -> tuple[str, bytes]:
    """One line as LiteLLM's logger writes a call: ``YYYY-MM-DD/time-HH-MM-SS-ffffff_<id>.json``."""
    chat = json.loads(synthetic.to_openai_chat(line)) if line.startswith("{") and line.endswith("}") else None
    if type(chat) is not dict:
        return f"{day.isoformat()}/time-12-00-00-{index:06d}_broken.json", line.encode()
    messages = chat["messages"]
    started = float(chat.get("created") or 0)
    payload = {"id": chat["id"], "call_type": "acompletion", "status": "success", "startTime": started,
               "endTime": started + 1.2, "model": chat["model"], "model_group": chat["model"],
               "session_id": chat.get("conversation_id") or "", "messages": messages[:-1],
               "response": {"id": chat["id"], "object": "chat.completion", "model": chat["model"],
                            "choices": [{"index": 0, "finish_reason": "stop", "message": messages[-1]}]},
               "metadata": {}}
    clock = dt.datetime.fromtimestamp(started, dt.UTC).strftime("%H-%M-%S")
    return f"{day.isoformat()}/time-{clock}-{index:06d}_{chat['id']}.json", json.dumps(payload).encode()


def _skipped_calls(day: dt.date) -> dict[str, bytes]:
    """A failed call and an embedding call, which a LiteLLM day holds too (skipped and counted)."""
    started = dt.datetime.combine(day, dt.time(12), dt.UTC).timestamp()
    failed = {"id": "failed-call", "call_type": "acompletion", "status": "failure", "startTime": started,
              "model": "assistant-v1", "messages": [{"role": "user", "content": "Hi?"}], "response": {},
              "error_str": "upstream unavailable"}
    embedding = {"id": "embedding-call", "call_type": "aembedding", "status": "success", "startTime": started,
                 "model": "text-embedding-3-small", "messages": [{"role": "user", "content": "a passage"}],
                 "response": {"object": "list", "data": [{"embedding": [0.1, 0.2]}]}}
    return {f"{day.isoformat()}/time-12-00-00-999998_failed-call.json": json.dumps(failed).encode(),
            f"{day.isoformat()}/time-12-00-00-999999_embedding-call.json": json.dumps(embedding).encode()}


def _attribute(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": {"stringValue": value if type(value) is str else json.dumps(value)}}


def _span(trace: str, span: str, name: str, start: int, attributes: dict[str, Any]) -> dict[str, Any]:
    return {"traceId": trace, "spanId": span, "name": name, "kind": 1, "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(start + 500_000_000),
            "attributes": [_attribute(k, v) for k, v in attributes.items() if v is not None]}


def _trace(index: int, record: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """One record as a trace in the GenAI semantic conventions: a retrieval span, a chat span."""
    trace = hashlib.sha256(f"trace-{index}-{record.get('record_id')}".encode()).hexdigest()[:32]
    moment = dt.datetime.fromisoformat(str(record.get("timestamp")).replace("Z", "+00:00"))
    start = int(moment.timestamp()) * 1_000_000_000
    documents = [{"content": c.get("text"), "id": c.get("id")} for c in record.get("contexts") or []]
    question = [{"role": "user", "parts": [{"type": "text", "content": record.get("question")}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": record.get("answer")}]}]
    spans = [_span(trace, trace[:16], "retrieve", start - 1_000_000, {
                 "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": documents}),
             _span(trace, trace[16:], "chat", start, {
                 "gen_ai.operation.name": "chat", "gen_ai.request.model": record.get("model"),
                 "gen_ai.conversation.id": record.get("conversation_id"), "gen_ai.input.messages": question,
                 "gen_ai.output.messages": answer})]
    return start, spans


def _otel(day: dt.date, lines: Sequence[str]) -> dict[str, bytes]:
    """The lines as OTLP JSON exports, one gzipped object per minute, as the collector writes them."""
    minutes: dict[str, list[dict[str, Any]]] = {}
    objects: dict[str, bytes] = {}
    prefix = storage.raw_prefix(day, "ymd")
    for index, line in enumerate(lines):
        record = json.loads(line) if line.startswith("{") and line.endswith("}") else None
        if type(record) is not dict:
            objects[f"{prefix}hour=00/minute=00/traces_broken_{index}.json"] = line.encode()
            continue
        start, spans = _trace(index, record)
        clock = dt.datetime.fromtimestamp(start / 1e9, dt.UTC)
        minutes.setdefault(f"hour={clock.hour:02d}/minute={clock.minute:02d}", []).extend(spans)
    for folder, spans in minutes.items():
        request = {"resourceSpans": [{"resource": {"attributes": [_attribute("service.name", "rag-app")]},
                                      "scopeSpans": [{"scope": {"name": "rag-app"}, "spans": spans}]}]}
        objects[f"{prefix}{folder}/traces_{folder.replace('/', '_')}.json.gz"] = gzip.compress(
            json.dumps(request).encode(), mtime=0)
    return objects


def day_objects(day: dt.date, lines: Sequence[str], input_format: str) -> dict[str, bytes]:
    """The day's lines (valid and planted) as the objects of ``input_format`` (key → bytes)."""
    if input_format in ("own", "openai-chat"):
        return synthetic.jsonl_objects(day, lines, input_format)
    if input_format == "litellm":
        return dict([_litellm(day, i, line) for i, line in enumerate(lines)]) | _skipped_calls(day)
    return _otel(day, lines)
