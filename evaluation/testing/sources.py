"""Logs as the systems that write them write them, for tests and the bench: LiteLLM's standard
logging payloads made by LiteLLM itself (a callback on mocked completions) under the keys its S3
logger gives them, and OpenTelemetry traces made with the SDK and encoded with its OTLP encoder.

Each conversation is a record in the project's own shape (``record_id``, ``model``, ``question``,
``answer``, ``contexts``, ...); the helpers return what the other system wrote for it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["litellm_key", "litellm_payloads", "otel_export", "otlp_json"]


def _chat_messages(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The request a RAG app sends for a record: a system prompt, the question, the retrieval
    tool call and its result (the contexts as a JSON array)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Answer from the passages; cite them."},
                                      {"role": "user", "content": record["question"]}]
    if record.get("contexts"):
        call = {"id": "call_1", "type": "function",
                "function": {"name": "search_kb", "arguments": json.dumps({"query": record["question"]})}}
        messages += [{"role": "assistant", "content": None, "tool_calls": [call]},
                     {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(record["contexts"])}]
    return messages


class _Capture:
    """A LiteLLM ``CustomLogger`` keeping every ``standard_logging_object`` it is given."""

    def __init__(self) -> None:
        # litellm: test-only here, imported when payloads are made
        from litellm.integrations.custom_logger import CustomLogger

        self.payloads: list[dict[str, Any]] = []
        self.arrived = threading.Condition()
        capture = self

        class Logger(CustomLogger):  # type: ignore[misc]
            def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
                capture.add(kwargs["standard_logging_object"])

            log_failure_event = log_success_event

        self.logger = Logger()

    def add(self, payload: dict[str, Any]) -> None:
        with self.arrived:
            self.payloads.append(json.loads(json.dumps(payload, default=str)))
            self.arrived.notify_all()

    def wait_for(self, count: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.payloads) >= count, timeout_s):
                raise TimeoutError(f"LiteLLM logged {len(self.payloads)} of {count} calls")
            return list(self.payloads)


def litellm_payloads(records: Sequence[dict[str, Any]], *, failed: int = 0, embeddings: int = 0) -> list[dict[str, Any]]:
    """LiteLLM's standard logging payload of one mocked chat completion per record (model
    ``openai/<record model>``, its conversation as the session, logged with
    ``request_correlation_in_logs``), then of ``failed`` failed calls
    and ``embeddings`` embedding calls; in that order."""
    from evaluation.calling.client import callbacks_restored  # imports litellm: test-only here

    capture = _Capture()
    with callbacks_restored() as litellm:
        saved_correlation = litellm.request_correlation_in_logs
        # the proxy setting that logs the caller's session id as session_id (else it is the trace id)
        litellm.callbacks, litellm.request_correlation_in_logs = [capture.logger], True
        try:
            for record in records:
                litellm.completion(model=f"openai/{record['model']}", messages=_chat_messages(record),
                                   mock_response=record["answer"], litellm_session_id=record.get("conversation_id"))
            for _ in range(failed):
                with contextlib.suppress(Exception):  # the failure is what is logged
                    litellm.completion(model="openai/assistant-v1", messages=[{"role": "user", "content": "Hi?"}],
                                       mock_response=Exception("upstream unavailable"), num_retries=0)
            for _ in range(embeddings):
                litellm.embedding(model="openai/text-embedding-3-small", input=["a passage"],
                                  mock_response=[0.1, 0.2])
            payloads = capture.wait_for(len(records) + failed + embeddings)
        finally:
            litellm.request_correlation_in_logs = saved_correlation
    chats = [p for p in payloads if p["call_type"] in ("completion", "acompletion") and p["status"] == "success"]
    order = {json.dumps(_chat_messages(r)): i for i, r in enumerate(records)}
    chats.sort(key=lambda p: order.get(json.dumps(p["messages"]), len(records)))
    return chats + [p for p in payloads if p not in chats]


def litellm_key(payload: dict[str, Any], *, hourly: bool = False) -> str:
    """The key LiteLLM's S3 logger writes ``payload`` under (its own functions make it)."""
    import litellm  # test-only here
    from litellm.integrations.s3 import get_s3_object_key

    start = dt.datetime.fromtimestamp(payload["startTime"], dt.UTC).replace(tzinfo=None)
    name = litellm.utils.get_logging_id(start, payload) or ""
    return str(get_s3_object_key("", "", start, name, "hour" if hourly else "day"))


def b64_ids_to_hex(request: dict[str, Any]) -> dict[str, Any]:
    """A request from protobuf's JSON mapping (base64 ids) with hex ids, as OTLP/JSON writes them."""
    for resource_spans in request.get("resourceSpans", []):
        for scope in resource_spans.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return request


def _ns(timestamp: str) -> int:
    moment = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _openinference(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    retriever: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": record["question"]}
    for index, context in enumerate(record.get("contexts") or []):
        retriever[f"retrieval.documents.{index}.document.content"] = context["text"]
        if context.get("source"):
            retriever[f"retrieval.documents.{index}.document.id"] = context["source"]
        if context.get("score") is not None:
            retriever[f"retrieval.documents.{index}.document.score"] = context["score"]
    llm: dict[str, Any] = {
        "openinference.span.kind": "LLM", "llm.model_name": record["model"], "session.id": record["conversation_id"],
        "llm.input_messages.0.message.role": "system", "llm.input_messages.0.message.content": "Cite passages.",
        "llm.input_messages.1.message.role": "user", "llm.input_messages.1.message.content": record["question"],
        "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": record["answer"],
    }
    return retriever, llm


def _genai(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    documents = [{k: v for k, v in {"content": c["text"], "source_id": c.get("source"), "score": c.get("score")}.items()
                  if v is not None} for c in record.get("contexts") or []]
    retriever = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": record["question"],
                 "gen_ai.retrieval.documents": json.dumps(documents)}
    llm = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": record["model"],
        "gen_ai.response.model": record["model"], "gen_ai.conversation.id": record["conversation_id"],
        "gen_ai.input.messages": json.dumps([
            {"role": "system", "parts": [{"type": "text", "content": "Cite passages."}]},
            {"role": "user", "parts": [{"type": "text", "content": record["question"]}]}]),
        "gen_ai.output.messages": json.dumps([
            {"role": "assistant", "parts": [{"type": "text", "content": record["answer"]}], "finish_reason": "stop"}]),
    }
    return retriever, llm


def otel_export(records: Sequence[dict[str, Any]], family: str) -> tuple[list[Any], dict[str, str]]:
    """The spans of one trace per record (a root, a retriever span with the contexts, an LLM span
    with the question and answer, in the ``genai`` or ``openinference`` attribute family), made
    with the OpenTelemetry SDK; returns the finished spans and, per record id, the record id the
    trace yields (``<traceId>-<spanId>`` of its LLM span)."""
    # OpenTelemetry's SDK: test-only here
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import set_span_in_context

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    ids: dict[str, str] = {}
    for record in records:
        start = _ns(record["timestamp"])
        retriever_attrs, llm_attrs = (_genai if family == "genai" else _openinference)(record)
        root = tracer.start_span("rag.query", start_time=start - 2_000_000)
        context = set_span_in_context(root)
        retriever = tracer.start_span("retrieve", context=context, start_time=start - 1_000_000,
                                      attributes=retriever_attrs)
        retriever.end(end_time=start - 500_000)
        llm = tracer.start_span("chat", context=context, start_time=start, attributes=llm_attrs)
        llm.end(end_time=start + 900_000_000)
        root.end(end_time=start + 1_000_000_000)
        span_context = llm.get_span_context()
        ids[record["record_id"]] = f"{span_context.trace_id:032x}-{span_context.span_id:016x}"
    provider.shutdown()
    return list(exporter.get_finished_spans()), ids


def otlp_json(spans: Sequence[Any], *, hex_ids: bool = True) -> bytes:
    """``spans`` as one OTLP JSON export request, as the collector's S3 exporter writes one object:
    the SDK's OTLP encoder, protobuf's JSON mapping (camelCase), hex ids unless ``hex_ids`` is off."""
    # protobuf and OpenTelemetry's encoder: test-only here
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    request = json.loads(MessageToJson(encode_spans(spans)))
    return json.dumps(b64_ids_to_hex(request) if hex_ids else request).encode()
