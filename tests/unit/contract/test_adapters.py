"""Input adapters (CONTRACT §1, other log shapes): paths, mappings, the openai-chat format, options
refused when the run is configured, and reject reasons that name the fields as the log does."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from evaluation import storage
from evaluation.contract.adapters import (
    InputAdapter,
    MappingError,
    adapt_chat,
    adapter_for,
    parse_mapping,
    parse_path,
    read_timestamp,
    resolve,
)
from evaluation.contract.options import build_config
from evaluation.stages.ingest import raw_objects, validated_batches
from evaluation.storage.ingest import ingest_objects
from evaluation.storage.validation import DayValidator
from evaluation.testing import synthetic

DAY = dt.date(2026, 11, 25)
TS = "2026-11-25T10:00:00Z"
CREATED = 1795600800  # 2026-11-25T10:00:00Z
BASE = {"input_uri": "/in", "output_uri": "/out"}


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("question", ("question",)),
        ("request.messages[-1].content", ("request", "messages", -1, "content")),
        ("a[0][2].b", ("a", 0, 2, "b")),
        ("docs[*].text", ("docs", None, "text")),
        ("meta.x-request-id", ("meta", "x-request-id")),
    ],
)
def test_paths_parse(text: str, steps: tuple[Any, ...]) -> None:
    assert parse_path(text) == steps


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "the path is empty"),
        ("request..content", "expected a key at character 9"),
        ("[0].content", "expected a key at character 1"),
        ("messages[last]", "expected [N] or [*] at character 9"),
        ("messages[-1]content", "expected '.' or '[' at character 13"),
        ("a b", "expected '.' or '[' at character 2"),
        ("a.", "expected a key at character 3"),
    ],
)
def test_malformed_paths_name_the_character(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("[", r"\[").replace("]", r"\]").replace("*", r"\*")):
        parse_path(text)


DOC = {"request": {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
       "docs": [{"text": "x"}, {"text": "y"}], "name": "s"}


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        ("request.messages[-1].content", "b", None),
        ("request.messages[0].content", "a", None),
        ("request.messages[-3].content", None, None),  # out of range: absent
        ("request.messages[5].content", None, None),
        ("request.missing.content", None, None),
        ("docs[*].text", ["x", "y"], None),
        ("docs[*].nothing", [None, None], None),
        ("name.first", None, "name is not an object (got string)"),
        ("name[0]", None, "name is not a list (got string)"),
        ("request[0]", None, "request is not a list (got object)"),
        ("docs[*].text.x", None, "docs[*].text is not an object (got string)"),
    ],
)
def test_resolve(path: str, value: Any, problem: str | None) -> None:
    assert resolve(DOC, parse_path(path)) == (value, problem)


def test_a_mapping_parses_from_text_and_from_a_dict() -> None:
    text = " question = request.messages[-1].content ,\nanswer=response.text,, "
    expected = {"question": "request.messages[-1].content", "answer": "response.text"}
    assert parse_mapping(text) == expected
    assert parse_mapping(expected) == expected
    assert parse_mapping("") == parse_mapping(None) == {}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"input_mapping": "questoin=request.messages[-1].content"},
         "input_mapping: unknown field 'questoin'; did you mean question? fields: record_id, conversation_id,"),
        ({"input_mapping": "question=request..content"},
         "input_mapping: malformed path 'request..content' for question: expected a key at character 9"),
        ({"input_mapping": "question"}, "input_mapping: 'question' is not field=path"),
        ({"input_mapping": "question=a,question=b"}, "input_mapping: question is mapped twice"),
        ({"input_format": "openai"}, "input_format: unknown format 'openai'; did you mean openai-chat? formats: own, "
                                     "openai-chat"),
    ],
)
def test_bad_format_or_mapping_is_refused_when_the_run_is_configured(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as error:
        build_config({**BASE, **values}, date=DAY, run_id="r", trigger="cli")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_format_and_mapping_reach_the_run_config() -> None:
    cfg = build_config({**BASE, "input_format": "openai-chat", "input_mapping": "contexts=metadata.documents"},
                       date=DAY, run_id="r", trigger="cli")
    assert (cfg.input_format, cfg.input_mapping) == ("openai-chat", {"contexts": "metadata.documents"})
    assert json.loads(cfg.model_dump_json())["input_mapping"] == {"contexts": "metadata.documents"}
    assert adapter_for(cfg.input_format, cfg.input_mapping) == InputAdapter("openai-chat",
                                                                            {"contexts": "metadata.documents"})
    default = build_config(BASE, date=DAY, run_id="r", trigger="cli")
    assert adapter_for(default.input_format, default.input_mapping) is None


# --------------------------------------------------------------------------------------------
# openai-chat


def chat(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "model": "gpt-4o", "created": CREATED, "messages": list(messages), **fields}


SYSTEM = {"role": "system", "content": "Be brief."}
EARLIER = [SYSTEM, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
CALL = {"role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]}


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            chat(*EARLIER, {"role": "user", "content": "Capital of France?"}, CALL,
                 {"role": "tool", "tool_call_id": "c1", "name": "search", "content": "Paris is the capital."},
                 {"role": "assistant", "content": "Paris [ctx-1]."}, metadata={"app": "web"}),
            {"question": "Capital of France?", "answer": "Paris [ctx-1].",
             "contexts": [{"text": "Paris is the capital.", "source": "search"}],
             "metadata": {"app": "web", "conversation_history": EARLIER}},
        ),
        (  # the tool returns documents as a JSON array; a retrieval message adds more
            chat({"role": "user", "content": "q"},
                 {"role": "tool", "content": json.dumps([{"id": "d1", "text": "a"}, "b"])},
                 {"role": "retrieval", "content": "c"}, {"role": "assistant", "content": "ans"}),
            {"question": "q", "answer": "ans", "contexts": [{"id": "d1", "text": "a"}, "b", "c"], "metadata": None},
        ),
        (  # content parts: text parts joined, images left out
            chat({"role": "user", "content": [{"type": "text", "text": "What is"},
                                              {"type": "image_url", "image_url": {"url": "x"}},
                                              {"type": "text", "text": "this?"}]},
                 {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}),
            {"question": "What is\nthis?", "answer": "A cat.", "contexts": [], "metadata": None},
        ),
        (  # a request with the response beside it: the reply is choices[0].message.content
            chat({"role": "user", "content": "q"},
                 choices=[{"index": 0, "message": {"role": "assistant", "content": "from choices"}}]),
            {"question": "q", "answer": "from choices", "contexts": [], "metadata": None},
        ),
        (  # the reply is the last assistant turn after the question; tool-only turns are not replies
            chat({"role": "user", "content": "q"}, {"role": "assistant", "content": "first"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}),
            {"question": "q", "answer": "first", "contexts": [], "metadata": None},
        ),
        (  # an empty reply is an answer (it lands as a deterministic fail)
            chat({"role": "user", "content": "q"}, {"role": "assistant", "content": ""}),
            {"question": "q", "answer": "", "contexts": [], "metadata": None},
        ),
        (  # tool messages before the question belong to the history, not to the contexts
            chat({"role": "user", "content": "a"}, {"role": "tool", "content": "old"},
                 {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}),
            {"question": "b", "answer": "c", "contexts": [],
             "metadata": {"conversation_history": [{"role": "user", "content": "a"},
                                                   {"role": "tool", "content": "old"}]}},
        ),
        (
            chat({"role": "assistant", "content": "unprompted"}),
            {"question": None, "answer": None, "contexts": [], "metadata": None},
        ),
    ],
    ids=["tool-call-and-history", "json-documents-and-retrieval", "content-parts", "choices", "last-reply",
         "empty-reply", "earlier-tool-output", "no-user-turn"],
)
def test_openai_chat_records(record: dict[str, Any], expected: dict[str, Any]) -> None:
    adapted, problems = adapt_chat(record)
    assert problems == []
    assert {k: adapted[k] for k in expected} == expected
    assert (adapted["record_id"], adapted["model"]) == ("chatcmpl-1", "gpt-4o")
    assert adapted["timestamp"] == dt.datetime(2026, 11, 25, 10, tzinfo=dt.UTC)


def test_openai_chat_timestamp_and_own_fields() -> None:
    record = {"id": "r", "model": "m", "timestamp": TS, "messages": [{"role": "user", "content": "q"}],
              "reference": "ref", "rubrics": [{"description": "d"}], "evaluation_goal": "legal",
              "expected_outcome": "e", "conversation_id": "c"}
    adapted, _ = adapt_chat(record)
    assert adapted["timestamp"] == TS  # RFC 3339 text goes to normalisation as it is
    assert {k: adapted[k] for k in ("reference", "rubrics", "evaluation_goal", "expected_outcome",
                                    "conversation_id")} == {k: record[k] for k in ("reference", "rubrics",
                                                                                   "evaluation_goal",
                                                                                   "expected_outcome",
                                                                                   "conversation_id")}
    _, problems = adapt_chat({**record, "timestamp": 1e30})
    assert problems == ["timestamp: not a Unix time: 1e+30"]
    _, problems = adapt_chat({"id": "r", "messages": {"role": "user"}})
    assert problems == ["messages: not a list (got object)"]


def test_a_mapping_applies_on_top_of_the_format() -> None:
    adapter = InputAdapter("openai-chat", {"contexts": "metadata.documents[*].page_content",
                                           "record_id": "metadata.request_id", "timestamp": "metadata.ts"})
    record = chat({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                  metadata={"request_id": "req-7", "ts": CREATED,
                            "documents": [{"page_content": "one"}, {"page_content": "two"}]})
    adapted, problems = adapter.adapt(record)
    assert problems == []
    assert (adapted["record_id"], adapted["contexts"], adapted["question"]) == ("req-7", ["one", "two"], "q")
    assert adapted["timestamp"] == dt.datetime(2026, 11, 25, 10, tzinfo=dt.UTC)


# --------------------------------------------------------------------------------------------
# Rejects name the original field


def rejects_of(tmp_path: Path, lines: list[dict[str, Any]], adapter: InputAdapter | None) -> dict[str, list[str]]:
    store = storage.open_store(str(tmp_path))
    store.write_bytes(f"{storage.raw_prefix(DAY)}part-000.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode())
    validator = DayValidator(DAY, max_reject_ratio=1.0)
    reasons: dict[str, list[str]] = {}
    for batch in validated_batches(store, raw_objects(store, DAY), validator, adapter=adapter):
        reasons.update({f"line {r.line_no}": r.reasons for r in batch.rule_rejects})
    return reasons


def test_rejects_name_the_mapped_paths(tmp_path: Path) -> None:
    adapter = InputAdapter("own", parse_mapping(
        "record_id=request_id,model=app.version,timestamp=received_at,question=request.messages[-1].content,"
        "answer=response.output_text,contexts=retrieval.documents"))

    def line(**changes: Any) -> dict[str, Any]:
        base = {"request_id": "r-1", "app": {"version": "v1"}, "received_at": TS,
                "request": {"messages": [{"role": "user", "content": "q"}]},
                "response": {"output_text": "a"}, "retrieval": {"documents": ["x"]}}
        return {**base, **changes}

    reasons = rejects_of(tmp_path, [
        line(),
        line(request_id="r-2", request={"messages": [{"role": "user", "content": " "}]}),
        line(request_id="r-3", request={"messages": {"role": "user"}}),
        line(request_id="r-4", received_at="2026-11-20T10:00:00Z", retrieval={"documents": [3]}),
        line(request_id="r-1"),
        line(request_id="r-6", app={"version": 2}),
    ], adapter)
    assert reasons == {
        "line 2": ["request.messages[-1].content: missing or blank"],
        "line 3": ["request.messages[-1].content: request.messages is not a list (got object)"],
        "line 4": ["received_at: falls outside 2026-11-25 (UTC 2026-11-20T10:00:00Z)",
                   "retrieval.documents: item 1 is not a string or an object"],
        "line 5": [f"request_id: repeated (first kept: {tmp_path}/dt=2026-11-25/part-000.jsonl line 1)"],
        "line 6": ["app.version: not a string (got number)"],
    }


def test_openai_chat_rejects_name_the_messages(tmp_path: Path) -> None:
    good = chat({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"})
    reasons = rejects_of(tmp_path, [
        good,
        chat({"role": "user", "content": "   "}, {"role": "assistant", "content": "a"}, id="c-2"),
        chat(SYSTEM, {"role": "user", "content": "q"}, id="c-3"),
        chat({"role": "assistant", "content": "a"}, id="c-4"),
        chat({"role": "user", "content": 5}, {"role": "tool", "content": "[{\"id\": \"d\"}]"},
             {"role": "assistant", "content": "a"}, id="c-5", created="yesterday"),
        {k: v for k, v in good.items() if k not in ("id", "model")},
    ], InputAdapter("openai-chat"))
    assert reasons == {
        "line 2": ["messages[0].content: missing or blank"],
        "line 3": ["messages[role=assistant].content: missing"],
        "line 4": ["messages[role=user].content: missing or blank", "messages[role=assistant].content: missing"],
        "line 5": ["created: not RFC 3339: 'yesterday'", "messages[0].content: not a string (got number)",
                   "messages[role=tool]: item 1 has no string text"],
        "line 6": ["id: missing or blank", "model: missing or blank"],
    }


def test_openai_chat_reads_the_same_from_parquet(tmp_path: Path) -> None:
    """Parquet gives every message every field of the list's struct (null where a message has none)."""
    lines = [synthetic.to_openai_chat(line) for line in synthetic.generate_day(DAY, 30, bad=False)]
    buffer = io.BytesIO()
    pl.DataFrame([json.loads(line) for line in lines]).write_parquet(buffer)
    adapter = InputAdapter("openai-chat")
    from_jsonl = ingest_objects([("p.jsonl", "\n".join(lines).encode())], DAY, adapter=adapter).rows
    from_parquet = ingest_objects([("p.parquet", buffer.getvalue())], DAY, adapter=adapter).rows
    columns = ["record_id", "timestamp", "model", "question", "answer", "contexts_json", "reference", "problems"]
    assert from_parquet.select(columns).equals(from_jsonl.select(columns))
    assert from_jsonl["problems"].list.len().sum() == 0 and from_jsonl["contexts_json"].str.contains("ctx-1").all()


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-12-01 14:22:10", dt.datetime(2026, 12, 1, 14, 22, 10, tzinfo=dt.UTC)),  # space, no zone: UTC
    ("2026-12-01T14:22:10", dt.datetime(2026, 12, 1, 14, 22, 10, tzinfo=dt.UTC)),
    ("2026-12-01 15:22:10+01:00", dt.datetime(2026, 12, 1, 14, 22, 10, tzinfo=dt.UTC)),
    (1796133200, dt.datetime(2026, 12, 1, 13, 53, 20, tzinfo=dt.UTC)),  # seconds
    (1796133200000, dt.datetime(2026, 12, 1, 13, 53, 20, tzinfo=dt.UTC)),  # milliseconds
    ("1796133200000", dt.datetime(2026, 12, 1, 13, 53, 20, tzinfo=dt.UTC)),
    (1796133200000000, dt.datetime(2026, 12, 1, 13, 53, 20, tzinfo=dt.UTC)),  # microseconds
    (1796133200000000000, dt.datetime(2026, 12, 1, 13, 53, 20, tzinfo=dt.UTC)),  # nanoseconds
    ("2026-12-01T14:22:10Z", "2026-12-01T14:22:10Z"),  # RFC 3339 proper: normalisation reads it
    ("yesterday", "yesterday"),
])
def test_read_timestamp_takes_the_common_forms(value: object, expected: object) -> None:
    problems: list[str] = []
    assert read_timestamp(value, problems) == expected and problems == []


def test_a_mapping_may_hand_messages_to_the_chat_rules_and_wrap_a_string_context() -> None:
    adapter = InputAdapter("own", {"messages": "request.messages", "response": "response", "contexts": "doc"})
    record, problems = adapter.adapt({
        "request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "Q?"}]}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "A."}}]}, "doc": "one passage"})
    assert (record["question"], record["answer"], record["contexts"], problems) == ("Q?", "A.", ["one passage"], [])
    assert adapter.source_names({"request": {"messages": [{"role": "user", "content": "Q?"}]}})["question"] == \
        "request.messages[0].content"


def test_an_unknown_mapping_target_names_the_targets() -> None:
    with pytest.raises(MappingError, match=r"unknown field 'mesages'; did you mean messages\?"):
        parse_mapping("mesages=request.messages")
    with pytest.raises(MappingError, match="not available with input_format otel"):
        InputAdapter("otel", {"question": "q"})
