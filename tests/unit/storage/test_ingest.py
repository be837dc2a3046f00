"""Ingest: reading raw objects (JSONL, gzip, Parquet) and normalising records (CONTRACT §1)."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import random
import string
from typing import Any

import polars as pl
import pytest

from evaluation.contract.normalise import normalise
from evaluation.storage.ingest import (
    MAX_RAW_CHARS,
    ROW_SCHEMA,
    ObjectRows,
    Reject,
    ingest_objects,
    read_object,
    truncate_raw,
)
from tests.factories import jsonl, raw_record

DAY = dt.date(2026, 11, 25)
URI = "s3://llm-logs/raw/dt=2026-11-25/part-000.jsonl"


record = raw_record


def assert_reconciles(parsed: ObjectRows, lines: int) -> None:
    assert len(parsed.rows) + len(parsed.rejects) == lines


# --------------------------------------------------------------------------------------------
# read_object: JSONL


def test_jsonl_rows_keep_line_numbers_and_raw_text() -> None:
    first, second = record(record_id="a"), record(record_id="b")
    parsed = read_object(URI, jsonl(first, second))
    assert [(no, obj) for no, obj, _ in parsed.rows] == [(1, first), (2, second)]
    assert parsed.rows[0][2] == json.dumps(first)
    assert parsed.rejects == []


def test_blank_lines_are_skipped_but_keep_numbering() -> None:
    data = b"\n" + jsonl(record(record_id="a")) + b"   \n\t\n" + jsonl(record(record_id="b")).rstrip(b"\n")
    parsed = read_object(URI, data)
    assert [(no, obj["record_id"]) for no, obj, _ in parsed.rows] == [(2, "a"), (5, "b")]
    assert parsed.rejects == []


def test_crlf_line_endings_and_a_leading_bom_are_accepted() -> None:
    data = (
        b"\xef\xbb\xbf"
        + json.dumps(record(record_id="a")).encode()
        + b"\r\n"
        + json.dumps(record()).encode()
        + b"\r\n"
    )
    parsed = read_object(URI, data)
    assert [obj["record_id"] for _, obj, _ in parsed.rows] == ["a", "r-1"]
    assert not parsed.rows[0][2].endswith("\r")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            b'{"record_id": "r-1", "question": "unterminated',
            "not valid JSON: Unterminated string starting at: column 34",
        ),
        (b"not json at all", "not valid JSON: Expecting value: column 1"),
        (b'{"a": 1} trailing', "not valid JSON: Extra data: column 10"),
        (b'{"a": 1,}', "not valid JSON: Expecting property name enclosed in double quotes: column 9"),
        (b'{"score": NaN}', "not valid JSON: NaN is not allowed"),
        (b'{"score": Infinity}', "not valid JSON: Infinity is not allowed"),
        (b'{"score": -Infinity}', "not valid JSON: -Infinity is not allowed"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'"just a string"', "not a JSON object"),
        (b"42", "not a JSON object"),
        (b"null", "not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON: nesting too deep"),
        (b'{"question": "caf\xe9"}', "invalid UTF-8"),
        (b'{"record_id": "r-9", "question": "\\ud800 alone"}', "invalid UTF-8: unpaired surrogate escape"),
    ],
    ids=[
        "unterminated",
        "garbage",
        "trailing-data",
        "trailing-comma",
        "nan",
        "infinity",
        "minus-infinity",
        "array",
        "string",
        "number",
        "null",
        "deep-nesting",
        "latin-1-byte",
        "lone-surrogate",
    ],
)
def test_bad_lines_become_rejects_and_good_lines_survive(line: bytes, reason: str) -> None:
    data = jsonl(record(record_id="before")) + line + b"\n" + jsonl(record(record_id="after"))
    parsed = read_object(URI, data)
    assert [(no, obj["record_id"]) for no, obj, _ in parsed.rows] == [(1, "before"), (3, "after")]
    assert len(parsed.rejects) == 1
    reject = parsed.rejects[0]
    assert (reject.source_uri, reject.line_no, reject.reasons) == (URI, 2, [reason])
    assert reject.raw == truncate_raw(line.decode("utf-8", errors="backslashreplace"))
    assert_reconciles(parsed, 3)


def test_invalid_utf8_reject_keeps_the_bytes_visible() -> None:
    parsed = read_object(URI, b'{"q": "\xff\xfe"}\n')
    assert parsed.rejects[0].raw == '{"q": "\\xff\\xfe"}'


def test_unpaired_surrogate_reject_keeps_the_record_id() -> None:
    parsed = read_object(URI, b'{"record_id": "r-9", "answer": "\\udc00"}\n')
    assert parsed.rejects[0].record_id == "r-9"


def test_a_paired_surrogate_escape_is_fine() -> None:
    parsed = read_object(
        URI, jsonl(record(answer="\U0001f600 ok")).replace("\U0001f600".encode(), b"\\ud83d\\ude00")
    )
    assert parsed.rejects == []
    assert parsed.rows[0][1]["answer"] == "\U0001f600 ok"


def test_empty_object_is_parsed_for_validation_to_reject() -> None:
    parsed = read_object(URI, b"{}\n")
    assert parsed.rows == [(1, {}, "{}")]


def test_long_raw_text_is_truncated_with_a_count() -> None:
    line = "x" * (MAX_RAW_CHARS + 2_500)
    parsed = read_object(URI, line.encode() + b"\n")
    raw = parsed.rejects[0].raw
    assert raw == "x" * MAX_RAW_CHARS + "…[truncated 2500 chars]"
    assert truncate_raw("short") == "short"


def test_empty_object_file_yields_nothing() -> None:
    parsed = read_object(URI, b"")
    assert (parsed.rows, parsed.rejects) == ([], [])


@pytest.mark.parametrize(
    "uri", ["s3://b/dt=2026-11-25/notes.csv", "s3://b/dt=2026-11-25/data.ndjson", "/tmp/x.jsonl.bz2"]
)
def test_unsupported_object_is_one_reject(uri: str) -> None:
    parsed = read_object(uri, jsonl(record()))
    assert parsed.rows == []
    assert [r.model_dump() for r in parsed.rejects] == [
        {
            "source_uri": uri,
            "line_no": None,
            "record_id": None,
            "raw": "",
            "reasons": ["unsupported object type"],
        }
    ]


# --------------------------------------------------------------------------------------------
# read_object: gzip


def _varied_lines(count: int) -> list[dict[str, Any]]:
    rng = random.Random(3)  # random text so that compressed size tracks the line position
    return [
        record(record_id=f"r-{i}", answer="".join(rng.choices(string.ascii_letters, k=400)))
        for i in range(count)
    ]


def test_gzip_reads_like_plain_jsonl() -> None:
    lines = _varied_lines(50)
    parsed = read_object(URI + ".gz", gzip.compress(jsonl(*lines)))
    assert [obj for _, obj, _ in parsed.rows] == lines
    assert parsed.rejects == []


def test_concatenated_gzip_members_are_read_in_full() -> None:
    lines = _varied_lines(4)
    data = gzip.compress(jsonl(*lines[:2])) + gzip.compress(jsonl(*lines[2:]))
    parsed = read_object(URI + ".gz", data)
    assert [obj["record_id"] for _, obj, _ in parsed.rows] == ["r-0", "r-1", "r-2", "r-3"]


def test_truncated_gzip_keeps_lines_before_the_damage_and_rejects_the_object() -> None:
    lines = _varied_lines(200)
    compressed = gzip.compress(jsonl(*lines))
    parsed = read_object(URI + ".gz", compressed[: len(compressed) // 2])
    kept = len(parsed.rows)
    assert 50 < kept < 150  # about half the lines come before the cut
    assert [(no, obj) for no, obj, _ in parsed.rows] == list(enumerate(lines[:kept], start=1))
    assert len(parsed.rejects) == 1
    reject = parsed.rejects[0]
    assert reject.line_no == kept + 1  # the first line not read
    (reason,) = reject.reasons
    assert reason.startswith(f"object damaged: {URI}.gz is a truncated or corrupt gzip: read up to line {kept} "
                             f"(the last read whole); the {len(reject.raw.encode())} decompressed bytes after it")
    assert reason.endswith("(Compressed file ended before the end-of-stream marker was reached)")
    # The partial line after the last complete one is the evidence of where the damage starts.
    assert json.dumps(lines[kept]).startswith(reject.raw)


def test_gzip_missing_only_its_trailer_keeps_every_line() -> None:
    lines = _varied_lines(20)
    compressed = gzip.compress(jsonl(*lines))
    parsed = read_object(URI + ".gz", compressed[:-8])
    assert [obj for _, obj, _ in parsed.rows] == lines
    assert [r.line_no for r in parsed.rejects] == [21]
    assert parsed.rejects[0].reasons[0].startswith(f"object damaged: {URI}.gz is a truncated or corrupt gzip: ")


def test_corrupt_gzip_body_is_rejected_not_raised() -> None:
    compressed = bytearray(gzip.compress(jsonl(*_varied_lines(200))))
    middle = len(compressed) // 2
    compressed[middle : middle + 64] = bytes(64)
    parsed = read_object(URI + ".gz", bytes(compressed))
    assert len(parsed.rejects) >= 1
    assert parsed.rejects[-1].line_no == len(parsed.rows) + len(parsed.rejects)
    assert parsed.rejects[-1].reasons[0].startswith(f"object damaged: {URI}.gz is a truncated or corrupt gzip: ")
    assert [no for no, _, _ in parsed.rows] == list(range(1, len(parsed.rows) + 1))


def test_plain_bytes_named_gzip_are_one_reject() -> None:
    parsed = read_object(URI + ".gz", jsonl(record()))
    assert parsed.rows == []
    (reasons,) = [r.reasons for r in parsed.rejects]
    assert reasons[0].startswith(f"object damaged: {URI}.gz is a truncated or corrupt gzip: read up to its first line")
    assert reasons[0].endswith("(Not a gzipped file (b'{\"'))")


# --------------------------------------------------------------------------------------------
# read_object: Parquet


def parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def test_parquet_rows_are_numbered_from_one() -> None:
    frame = pl.DataFrame({"record_id": ["a", "b"], "question": ["q1", "q2"]})
    parsed = read_object("s3://b/dt=2026-11-25/p.parquet", parquet(frame))
    assert [(no, obj) for no, obj, _ in parsed.rows] == [
        (1, {"record_id": "a", "question": "q1"}),
        (2, {"record_id": "b", "question": "q2"}),
    ]
    assert json.loads(parsed.rows[0][2]) == {"record_id": "a", "question": "q1"}


def test_unreadable_parquet_is_one_reject() -> None:
    parsed = read_object("s3://b/dt=2026-11-25/p.parquet", b"PAR1 this is not parquet")
    assert parsed.rows == []
    assert len(parsed.rejects) == 1
    assert parsed.rejects[0].line_no is None
    assert parsed.rejects[0].reasons[0].startswith("unreadable Parquet: ")


def test_parquet_timestamps_naive_is_utc_and_zoned_is_converted() -> None:
    frame = pl.DataFrame(
        {
            "naive": [dt.datetime(2026, 11, 25, 10, 0)],
            "zoned": [dt.datetime(2026, 11, 25, 1, 30)],
        }
    ).with_columns(pl.col("zoned").dt.replace_time_zone("Europe/Berlin"))
    ((_, obj, _),) = read_object("s3://b/p.parquet", parquet(frame)).rows
    naive = normalise({**record(), "timestamp": obj["naive"]})
    zoned = normalise({**record(), "timestamp": obj["zoned"]})
    assert naive["timestamp"] == dt.datetime(2026, 11, 25, 10, 0, tzinfo=dt.UTC)
    assert zoned["timestamp"] == dt.datetime(2026, 11, 25, 0, 30, tzinfo=dt.UTC)
    assert (naive["timestamp_day"], zoned["timestamp_day"]) == ("2026-11-25", "2026-11-25")


# --------------------------------------------------------------------------------------------
# normalise


def test_a_valid_record_normalises_without_problems() -> None:
    row = normalise(record(metadata={"app": "web", "n": 2}))
    assert row == {
        "record_id": "r-1",
        "conversation_id": "c-1",
        "timestamp": dt.datetime(2026, 11, 25, 10, 0, tzinfo=dt.UTC),
        "timestamp_day": "2026-11-25",
        "model": "assistant-v1",
        "question": "What is the capital of France?",
        "answer": "Paris [doc-1].",
        "contexts_json": (
            '[{"id": "doc-1", "text": "Paris is the capital of France.", "source": "wiki", "score": 0.9}]'
        ),
        "reference": "Paris",
        "expected_outcome": None,
        "rubrics_json": None,
        "evaluation_goal": None,
        "metadata_json": '{"app": "web", "n": 2}',
        "text_chars": 30 + 14 + 31 + 5,
        "problems": [],
    }


@pytest.mark.parametrize(
    ("fields", "column", "value", "problems"),
    [
        ({"record_id": None}, "record_id", None, []),
        ({"record_id": ""}, "record_id", None, []),
        ({"record_id": "   "}, "record_id", None, []),
        ({"record_id": 42}, "record_id", None, ["record_id: not a string (got number)"]),
        ({"record_id": " r-1 "}, "record_id", " r-1 ", []),
        ({"model": None}, "model", None, []),
        ({"model": "\t"}, "model", None, []),
        ({"model": ["a"]}, "model", None, ["model: not a string (got array)"]),
        ({"question": None}, "question", None, []),
        ({"question": "  \n "}, "question", None, []),
        ({"question": {"text": "q"}}, "question", None, ["question: not a string (got object)"]),
        ({"question": True}, "question", None, ["question: not a string (got boolean)"]),
        ({"answer": ""}, "answer", "", []),
        ({"answer": "   "}, "answer", "   ", []),
        ({"answer": None}, "answer", None, []),
        ({"answer": 3}, "answer", None, ["answer: not a string (got number)"]),
        ({"conversation_id": 7}, "conversation_id", None, ["conversation_id: not a string (got number)"]),
        ({"reference": None}, "reference", None, []),
        ({"reference": " None "}, "reference", " None ", []),
        ({"reference": ["Paris"]}, "reference", None, ["reference: not a string (got array)"]),
        ({"expected_outcome": "Says Paris."}, "expected_outcome", "Says Paris.", []),
        (
            {"expected_outcome": 1.5},
            "expected_outcome",
            None,
            ["expected_outcome: not a string (got number)"],
        ),
        ({"evaluation_goal": " Medical "}, "evaluation_goal", " Medical ", []),
        (
            {"evaluation_goal": False},
            "evaluation_goal",
            None,
            ["evaluation_goal: not a string (got boolean)"],
        ),
        ({"metadata": None}, "metadata_json", None, []),
        ({"metadata": {"é": [1, None]}}, "metadata_json", '{"é": [1, null]}', []),
        ({"metadata": "app=web"}, "metadata_json", None, ["metadata: not an object (got string)"]),
        ({"metadata": [1]}, "metadata_json", None, ["metadata: not an object (got array)"]),
        ({"metadata": {"x": 1e400}}, "metadata_json", None, ["metadata: holds a non-finite number"]),
    ],
)
def test_field_types(fields: dict[str, Any], column: str, value: Any, problems: list[str]) -> None:
    obj = record(**{k: v for k, v in fields.items() if v is not None})
    for name, given in fields.items():
        if given is None:
            obj.pop(name, None)
    row = normalise(obj)
    assert (row[column], row["problems"]) == (value, problems)


def test_explicit_null_is_like_missing() -> None:
    assert normalise({**record(), "answer": None, "record_id": None}) == normalise(
        {k: v for k, v in record().items() if k not in ("answer", "record_id")}
    )


@pytest.mark.parametrize(
    ("timestamp", "utc", "problems"),
    [
        ("2026-11-25T10:00:00Z", dt.datetime(2026, 11, 25, 10, 0), []),
        ("2026-11-25t10:00:00z", dt.datetime(2026, 11, 25, 10, 0), []),
        ("2026-11-25 10:00:00+00:00", dt.datetime(2026, 11, 25, 10, 0), []),
        ("2026-11-25T10:00:00.123456789Z", dt.datetime(2026, 11, 25, 10, 0, 0, 123456), []),
        ("2026-11-25T01:30:00+02:00", dt.datetime(2026, 11, 24, 23, 30), []),
        ("2026-11-24T23:30:00-01:00", dt.datetime(2026, 11, 25, 0, 30), []),
        ("yesterday", None, ["timestamp: not RFC 3339: 'yesterday'"]),
        ("2026-11-25T10:00:00", None, ["timestamp: not RFC 3339: '2026-11-25T10:00:00'"]),
        ("2026-11-25", None, ["timestamp: not RFC 3339: '2026-11-25'"]),
        ("2026-13-25T10:00:00Z", None, ["timestamp: not RFC 3339: '2026-13-25T10:00:00Z'"]),
        ("2026-11-25T10:00:60Z", None, ["timestamp: not RFC 3339: '2026-11-25T10:00:60Z'"]),
        ("２０２６-11-25T10:00:00Z", None, ["timestamp: not RFC 3339: '２０２６-11-25T10:00:00Z'"]),
        ("x" * 100, None, [f"timestamp: not RFC 3339: {'x' * 60 + '…'!r}"]),
        (1764064800, None, ["timestamp: not an RFC 3339 string or a timestamp (got number)"]),
        (dt.date(2026, 11, 25), None, ["timestamp: not an RFC 3339 string or a timestamp (got date)"]),
    ],
)
def test_timestamps(timestamp: Any, utc: dt.datetime | None, problems: list[str]) -> None:
    row = normalise(record(timestamp=timestamp))
    expected = None if utc is None else utc.replace(tzinfo=dt.UTC)
    assert (row["timestamp"], row["problems"]) == (expected, problems)
    assert row["timestamp_day"] == (None if utc is None else utc.date().isoformat())
    if expected is not None:
        assert row["timestamp"].tzinfo is dt.UTC


@pytest.mark.parametrize(
    ("contexts", "expected", "problems"),
    [
        (None, [], []),
        ([], [], []),
        (
            [{"text": "a"}, {"id": "doc-9", "text": "b"}, {"text": "c", "score": 1}],
            [
                {"id": "ctx-1", "text": "a", "source": None, "score": None},
                {"id": "doc-9", "text": "b", "source": None, "score": None},
                {"id": "ctx-3", "text": "c", "source": None, "score": 1.0},
            ],
            [],
        ),
        (
            [{"id": "x", "text": "", "source": "kb", "extra": 1}],
            [{"id": "x", "text": "", "source": "kb", "score": None}],
            [],
        ),
        ("Paris is the capital.", None, ["contexts: not a list (got string)"]),
        ({"text": "a"}, None, ["contexts: not a list (got object)"]),
        ([{"text": "a"}, {"id": "c2"}], None, ["contexts: item 2 has no string text"]),
        ([{"text": None}], None, ["contexts: item 1 has no string text"]),
        ([{"text": 5}], None, ["contexts: item 1 has no string text"]),
        (
            ["Paris is the capital.", {"id": "doc-2", "text": "b"}, "c"],
            [
                {"id": "ctx-1", "text": "Paris is the capital.", "source": None, "score": None},
                {"id": "doc-2", "text": "b", "source": None, "score": None},
                {"id": "ctx-3", "text": "c", "source": None, "score": None},
            ],
            [],
        ),
        (["a", 5], None, ["contexts: item 2 is not a string or an object"]),
        ([["a"]], None, ["contexts: item 1 is not a string or an object"]),
        ([{"text": "a", "id": 3}], None, ["contexts: item 1 has a non-string id"]),
        ([{"text": "a", "source": ["x"]}], None, ["contexts: item 1 has a non-string source"]),
        ([{"text": "a", "score": "high"}], None, ["contexts: item 1 has a non-numeric score"]),
        ([{"text": "a", "score": True}], None, ["contexts: item 1 has a non-numeric score"]),
        ([{"text": "a", "score": 1e400}], None, ["contexts: item 1 has a non-numeric score"]),
        ([{"text": "a", "score": 10**400}], None, ["contexts: item 1 has a non-numeric score"]),  # no float holds it
    ],
)
def test_contexts(contexts: Any, expected: list[dict[str, Any]] | None, problems: list[str]) -> None:
    row = normalise({**record(), "contexts": contexts})
    assert row["problems"] == problems
    assert (None if row["contexts_json"] is None else json.loads(row["contexts_json"])) == expected


@pytest.mark.parametrize(
    ("rubrics", "expected", "problems"),
    [
        (None, None, []),
        ([], [], []),
        (
            [
                {"description": "Names Paris"},
                {"id": "tone", "description": "Polite", "weight": 2, "required": False},
            ],
            [
                {"id": "rubric-1", "description": "Names Paris", "weight": 1.0, "required": True},
                {"id": "tone", "description": "Polite", "weight": 2.0, "required": False},
            ],
            [],
        ),
        (
            [{"description": "free", "weight": 0}],
            [{"id": "rubric-1", "description": "free", "weight": 0.0, "required": True}],
            [],
        ),
        (
            [{"description": "a"}, {"description": "b"}, {"weight": 1}],
            None,
            ["rubrics: item 3 has no description"],
        ),
        ([{"description": "   "}], None, ["rubrics: item 1 has no description"]),
        ([{"description": "a", "weight": -0.5}], None, ["rubrics: item 1 has a negative weight"]),
        (
            [{"weight": -1}],
            None,
            ["rubrics: item 1 has no description", "rubrics: item 1 has a negative weight"],
        ),
        ([{"description": "a", "weight": "2"}], None, ["rubrics: item 1 has a non-numeric weight"]),
        ([{"description": "a", "weight": True}], None, ["rubrics: item 1 has a non-numeric weight"]),
        ([{"description": "a", "weight": 10**400}], None, ["rubrics: item 1 has a non-numeric weight"]),
        ([{"description": "a", "required": "yes"}], None, ["rubrics: item 1 has a non-boolean required"]),
        ([{"description": "a", "id": 1}], None, ["rubrics: item 1 has a non-string id"]),
        (["be nice"], None, ["rubrics: item 1 is not an object"]),
        ({"description": "a"}, None, ["rubrics: not a list (got object)"]),
    ],
)
def test_rubrics(rubrics: Any, expected: list[dict[str, Any]] | None, problems: list[str]) -> None:
    row = normalise({**record(), "rubrics": rubrics})
    assert row["problems"] == problems
    assert (None if row["rubrics_json"] is None else json.loads(row["rubrics_json"])) == expected


def test_text_chars_counts_every_judged_text() -> None:
    obj = record(
        question="q" * 10,
        answer="a" * 20,
        contexts=[{"text": "c" * 30}, {"text": "d" * 40}],
        reference="r" * 5,
        expected_outcome="e" * 6,
        rubrics=[{"description": "x" * 7}],
        evaluation_goal="not counted",
        metadata={"not": "counted"},
    )
    assert normalise(obj)["text_chars"] == 10 + 20 + 30 + 40 + 5 + 6 + 7


def test_empty_object_normalises_to_nulls() -> None:
    row = normalise({})
    assert row["problems"] == []
    assert row["contexts_json"] == "[]"
    assert row["text_chars"] == 0
    assert all(row[name] is None for name in ("record_id", "timestamp", "model", "question", "answer"))


def test_problems_follow_contract_field_order() -> None:
    row = normalise({"record_id": 1, "timestamp": "soon", "model": 2, "contexts": "x", "metadata": 3})
    assert row["problems"] == [
        "record_id: not a string (got number)",
        "timestamp: not RFC 3339: 'soon'",
        "model: not a string (got number)",
        "contexts: not a list (got string)",
        "metadata: not an object (got number)",
    ]


# --------------------------------------------------------------------------------------------
# ingest_objects


def test_ingest_objects_builds_the_row_frame_in_input_order() -> None:
    second_uri = "s3://llm-logs/raw/dt=2026-11-25/part-001.jsonl.gz"
    result = ingest_objects(
        [
            (URI, jsonl(record(record_id="a"), "oops", record(record_id="b"))),
            (second_uri, gzip.compress(jsonl(record(record_id="c")))),
            ("s3://llm-logs/raw/dt=2026-11-25/readme.txt", b"hello"),
        ],
        DAY,
    )
    assert result.rows.schema == pl.Schema(ROW_SCHEMA)
    assert result.rows.select("source_uri", "line_no", "record_id").rows() == [
        (URI, 1, "a"),
        (URI, 3, "b"),
        (second_uri, 1, "c"),
    ]
    assert result.rows["raw"][0] == json.dumps(record(record_id="a"))
    assert [(r.line_no, r.reasons[0]) for r in result.rejects] == [
        (2, "not valid JSON: Expecting value: column 1"),
        (None, "unsupported object type"),
    ]
    assert (result.objects, result.input_records) == (3, 5)


def test_ingest_objects_of_nothing_is_an_empty_typed_frame() -> None:
    result = ingest_objects([], DAY)
    assert result.rows.schema == pl.Schema(ROW_SCHEMA)
    assert (result.rows.height, result.rejects, result.objects) == (0, [], 0)


def test_ingest_keeps_problems_as_a_list_column() -> None:
    result = ingest_objects([(URI, jsonl(record(), record(record_id=5, contexts="x")))], DAY)
    assert result.rows["problems"].to_list() == [
        [],
        ["record_id: not a string (got number)", "contexts: not a list (got string)"],
    ]


def test_a_number_no_float_holds_in_a_log_line_is_a_problem_of_its_record() -> None:
    """A 401-digit integer, as a log line writes it: Python's JSON decoder reads it whole, and its
    record gets a problem instead of stopping the day's ingest."""
    line = json.dumps(record(record_id="big", contexts=[{"text": "a", "score": 0}], rubrics=[{"description": "d", "weight": 0}]))
    huge = "1" + "0" * 400
    line = line.replace('"score": 0', f'"score": {huge}').replace('"weight": 0', f'"weight": {huge}')
    result = ingest_objects([(URI, jsonl(line, record(record_id="fine")))], DAY)
    assert result.rows.select("record_id", "problems").rows() == [
        ("big", ["contexts: item 1 has a non-numeric score", "rubrics: item 1 has a non-numeric weight"]),
        ("fine", []),
    ]


def test_reject_model_requires_a_reason() -> None:
    with pytest.raises(ValueError):
        Reject(source_uri=URI, line_no=1, raw="x", reasons=[])
