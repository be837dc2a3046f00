"""Validation: the Great Expectations suites decide every row and table rule of CONTRACT §1."""

from __future__ import annotations

import datetime as dt
import functools
import gzip
import io
import json
import subprocess
import sys
from typing import Any

import polars as pl
import pytest

from evaluation.storage.ingest import IngestResult, ingest_objects
from evaluation.storage.validation import (
    SUITE_NAME,
    TABLE_SUITE_NAME,
    VALID_COLUMNS,
    ValidationError,
    ValidationOutcome,
    build_suite,
    build_table_suite,
    validate,
)
from tests.factories import jsonl, raw_record

DAY = dt.date(2026, 11, 25)
URI = "s3://llm-logs/raw/dt=2026-11-25/part-000.jsonl"


record = functools.partial(raw_record, keep_none=True)


def without(*names: str) -> dict[str, Any]:
    return {k: v for k, v in record().items() if k not in names}


def run(
    objects: list[tuple[str, bytes]], *, max_record_chars: int = 200_000, **options: Any
) -> tuple[IngestResult, ValidationOutcome]:
    """Ingest and validate, and check the counts reconcile (CONTRACT §4) whatever the scenario."""
    ingested = ingest_objects(objects, DAY)
    outcome = validate(
        ingested.rows,
        day=DAY,
        max_record_chars=max_record_chars,
        ingest_rejects=len(ingested.rejects),
        input_objects=len(objects),
        **options,
    )
    rejected = len(ingested.rejects) + len(outcome.rejects)
    assert ingested.input_records == outcome.valid.height + rejected
    assert (outcome.input_records, outcome.rejected_records) == (ingested.input_records, rejected)
    json.dumps(outcome.result_json)  # landable as is
    return ingested, outcome


def reasons_of(outcome: ValidationOutcome) -> dict[str, list[str]]:
    return {f"{r.source_uri.rsplit('/', 1)[-1]}:{r.line_no}": r.reasons for r in outcome.rejects}


# --------------------------------------------------------------------------------------------
# Row rules, one record at a time, next to a valid record


OTHER_DAY = "timestamp: falls outside 2026-11-25"


@pytest.mark.parametrize(
    ("line", "reasons"),
    [
        (without("record_id"), ["record_id: missing or blank"]),
        (record(record_id="  "), ["record_id: missing or blank"]),
        (record(record_id=17), ["record_id: not a string (got number)"]),
        (without("model"), ["model: missing or blank"]),
        (record(model=""), ["model: missing or blank"]),
        (record(model={"name": "x"}), ["model: not a string (got object)"]),
        (without("question"), ["question: missing or blank"]),
        (record(question=" \n "), ["question: missing or blank"]),
        (record(question=["q"]), ["question: not a string (got array)"]),
        (without("answer"), ["answer: missing"]),
        (record(answer=None), ["answer: missing"]),
        (record(answer=0), ["answer: not a string (got number)"]),
        (without("timestamp"), ["timestamp: missing"]),
        (record(timestamp="yesterday"), ["timestamp: not RFC 3339: 'yesterday'"]),
        (record(timestamp="2026-11-25T10:00:00"), ["timestamp: not RFC 3339: '2026-11-25T10:00:00'"]),
        (record(timestamp=1764064800), ["timestamp: not an RFC 3339 string or a timestamp (got number)"]),
        (record(timestamp="2026-11-24T12:00:00Z"), [f"{OTHER_DAY} (UTC 2026-11-24T12:00:00Z)"]),
        (record(timestamp="2026-11-26T00:00:00Z"), [f"{OTHER_DAY} (UTC 2026-11-26T00:00:00Z)"]),
        # 01:30 at +02:00 is 23:30 UTC the day before: the offset moves it across midnight.
        (record(timestamp="2026-11-25T01:30:00+02:00"), [f"{OTHER_DAY} (UTC 2026-11-24T23:30:00Z)"]),
        (record(contexts="Paris is the capital."), ["contexts: not a list (got string)"]),
        (record(contexts=[{"id": "doc-1"}]), ["contexts: item 1 has no string text"]),
        (record(contexts=[{"text": "a"}, None]), ["contexts: item 2 is not a string or an object"]),
        (record(rubrics=[{"description": "a"}, {"weight": 2}]), ["rubrics: item 2 has no description"]),
        (record(rubrics=[{"description": "a", "weight": -1}]), ["rubrics: item 1 has a negative weight"]),
        (record(rubrics={"description": "a"}), ["rubrics: not a list (got object)"]),
        (record(conversation_id=12), ["conversation_id: not a string (got number)"]),
        (record(reference=False), ["reference: not a string (got boolean)"]),
        (record(metadata="web"), ["metadata: not an object (got string)"]),
        (
            {},
            [
                "record_id: missing or blank",
                "timestamp: missing",
                "model: missing or blank",
                "question: missing or blank",
                "answer: missing",
            ],
        ),
        (
            {
                "record_id": 5,
                "timestamp": "2026-11-25T01:00:00+02:00",
                "model": " ",
                "question": "q",
                "answer": 3,
                "contexts": [{"id": "c"}, 7],
                "rubrics": [{"weight": -1}],
            },
            [
                "model: missing or blank",
                f"{OTHER_DAY} (UTC 2026-11-24T23:00:00Z)",
                "record_id: not a string (got number)",
                "answer: not a string (got number)",
                "contexts: item 1 has no string text",
                "contexts: item 2 is not a string or an object",
                "rubrics: item 1 has no description",
                "rubrics: item 1 has a negative weight",
            ],
        ),
    ],
    ids=[
        "record_id-missing",
        "record_id-blank",
        "record_id-number",
        "model-missing",
        "model-empty",
        "model-object",
        "question-missing",
        "question-blank",
        "question-array",
        "answer-missing",
        "answer-null",
        "answer-number",
        "timestamp-missing",
        "timestamp-words",
        "timestamp-no-offset",
        "timestamp-epoch",
        "timestamp-day-before",
        "timestamp-day-after",
        "timestamp-offset-crosses-midnight",
        "contexts-string",
        "context-without-text",
        "context-not-object",
        "rubric-without-description",
        "rubric-negative-weight",
        "rubrics-object",
        "conversation_id-number",
        "reference-boolean",
        "metadata-string",
        "empty-object",
        "every-reason-at-once",
    ],
)
def test_row_rule_rejects_with_every_reason(line: dict[str, Any], reasons: list[str]) -> None:
    good = record(record_id="good")
    ingested, outcome = run([(URI, jsonl(good, line))])
    assert outcome.valid["record_id"].to_list() == ["good"]
    assert ingested.rejects == []
    assert reasons_of(outcome) == {"part-000.jsonl:2": reasons}
    (reject,) = outcome.rejects
    assert reject.raw == json.dumps(line)
    assert reject.record_id == (
        line.get("record_id")
        if isinstance(line.get("record_id"), str) and line["record_id"].strip()
        else None
    )


@pytest.mark.parametrize(
    ("line", "column", "value"),
    [
        (record(answer=""), "answer", ""),
        (record(reference=None), "reference", None),
        (record(reference=" None "), "reference", " None "),
        (
            record(timestamp="2026-11-24T23:30:00-01:00"),
            "timestamp",
            dt.datetime(2026, 11, 25, 0, 30, tzinfo=dt.UTC),
        ),
        (
            record(timestamp="2026-11-25T23:59:59.999999Z"),
            "timestamp",
            dt.datetime(2026, 11, 25, 23, 59, 59, 999999, tzinfo=dt.UTC),
        ),
        (without("contexts"), "contexts", "[]"),
        (
            record(contexts=[{"text": "a"}, {"id": "doc-2", "text": "b", "score": 1}]),
            "contexts",
            '[{"id": "ctx-1", "text": "a", "source": null, "score": null}, '
            '{"id": "doc-2", "text": "b", "source": null, "score": 1.0}]',
        ),
        (
            record(contexts=["Paris is the capital of France.", "It lies on the Seine."]),
            "contexts",
            '[{"id": "ctx-1", "text": "Paris is the capital of France.", "source": null, "score": null}, '
            '{"id": "ctx-2", "text": "It lies on the Seine.", "source": null, "score": null}]',
        ),
        (
            record(
                rubrics=[{"description": "Names Paris"}, {"id": "tone", "description": "Polite", "weight": 0}]
            ),
            "rubrics",
            '[{"id": "rubric-1", "description": "Names Paris", "weight": 1.0, "required": true}, '
            '{"id": "tone", "description": "Polite", "weight": 0.0, "required": true}]',
        ),
        (record(rubrics=None), "rubrics", None),
        (record(metadata={"app": "web"}), "metadata", '{"app": "web"}'),
        (record(evaluation_goal=" Medical "), "evaluation_goal", " Medical "),
    ],
    ids=[
        "empty-answer",
        "reference-null",
        "reference-none-text",
        "negative-offset-into-day",
        "last-microsecond",
        "contexts-default",
        "context-ids-default",
        "contexts-strings",
        "rubric-defaults",
        "rubrics-null",
        "metadata-json",
        "goal-raw",
    ],
)
def test_accepted_records_are_kept_as_given(line: dict[str, Any], column: str, value: Any) -> None:
    _, outcome = run([(URI, jsonl(line))])
    assert outcome.rejects == []
    assert outcome.valid[column].to_list() == [value]


def test_valid_frame_has_the_landing_columns_and_types() -> None:
    _, outcome = run([(URI, jsonl(record(record_id="a"), record(record_id="b")))])
    assert outcome.valid.columns == list(VALID_COLUMNS)
    assert outcome.valid.schema["timestamp"] == pl.Datetime("us", "UTC")
    assert outcome.valid.select("record_id", "source_uri", "line_no").rows() == [("a", URI, 1), ("b", URI, 2)]
    assert outcome.table_failures == []
    assert outcome.success


def test_repeated_record_id_keeps_the_first_occurrence() -> None:
    second = "s3://llm-logs/raw/dt=2026-11-25/part-001.jsonl"
    _, outcome = run(
        [
            (URI, jsonl(record(record_id="a"), record(record_id="b"), record(record_id="a", answer="again"))),
            (second, jsonl(record(record_id="b"), record(record_id="c"), record(record_id="a"))),
        ]
    )
    assert outcome.valid.select("record_id", "source_uri", "line_no").rows() == [
        ("a", URI, 1),
        ("b", URI, 2),
        ("c", second, 2),
    ]
    assert reasons_of(outcome) == {
        "part-000.jsonl:3": [f"record_id: repeated (first kept: {URI} line 1)"],
        "part-001.jsonl:1": [f"record_id: repeated (first kept: {URI} line 2)"],
        "part-001.jsonl:3": [f"record_id: repeated (first kept: {URI} line 1)"],
    }


def test_repeat_of_a_rejected_first_occurrence_is_still_a_repeat() -> None:
    _, outcome = run([(URI, jsonl(record(record_id="a", timestamp="soon"), record(record_id="a")))])
    assert outcome.valid.height == 0
    assert reasons_of(outcome) == {
        "part-000.jsonl:1": ["timestamp: not RFC 3339: 'soon'"],
        "part-000.jsonl:2": [f"record_id: repeated (first kept: {URI} line 1)"],
    }


def test_rows_without_record_id_are_not_repeats_of_each_other() -> None:
    _, outcome = run([(URI, jsonl(without("record_id"), without("record_id")))], max_reject_ratio=1.0)
    assert [r.reasons for r in outcome.rejects] == [["record_id: missing or blank"]] * 2


@pytest.mark.parametrize(
    ("chars", "rejected"),
    [(100, False), (101, True)],
    ids=["at-limit", "over-limit"],
)
def test_max_record_chars(chars: int, rejected: bool) -> None:
    # question 40 + answer 30 + context 20 + reference + expected_outcome + rubric descriptions
    line = record(
        question="q" * 40,
        answer="a" * 30,
        contexts=[{"text": "c" * 20}],
        reference="r" * 4,
        expected_outcome="e" * 3,
        rubrics=[{"description": "d" * (chars - 97)}],
    )
    _, outcome = run([(URI, jsonl(line))], max_record_chars=100, max_reject_ratio=1.0)
    assert outcome.valid.height == (0 if rejected else 1)
    assert [r.reasons for r in outcome.rejects] == (
        [[f"text: {chars} chars exceeds max_record_chars 100"]] if rejected else []
    )


def test_long_raw_text_is_truncated_in_rejects() -> None:
    line = record(question="q" * 250_000)
    _, outcome = run([(URI, jsonl(line))], max_reject_ratio=1.0)
    (reject,) = outcome.rejects
    assert reject.reasons == [f"text: {250_000 + 14 + 31 + 5} chars exceeds max_record_chars 200000"]
    raw = json.dumps(line)
    assert reject.raw == raw[:10_000] + f"…[truncated {len(raw) - 10_000} chars]"


# --------------------------------------------------------------------------------------------
# Malformed input next to good input


def test_invalid_utf8_and_deep_nesting_are_ingest_rejects_counted_in_the_ratio() -> None:
    lines = [record(record_id=f"r-{i}") for i in range(18)]
    data = jsonl(*lines[:9]) + b'{"question": "\xff"}\n' + b"[" * 50_000 + b"\n" + jsonl(*lines[9:])
    ingested, outcome = run([(URI, data)], max_reject_ratio=0.1)
    assert [(r.line_no, r.reasons) for r in ingested.rejects] == [
        (10, ["invalid UTF-8"]),
        (11, ["not valid JSON: nesting too deep"]),
    ]
    assert outcome.valid.height == 18
    assert outcome.rejects == []
    assert outcome.table_failures == []  # 2 of 20 = 0.1, at the ceiling


def test_truncated_gzip_keeps_earlier_lines_and_rejects_the_object() -> None:
    lines = [record(record_id=f"r-{i}", answer=f"{i} " + "x" * (i * 37 % 300)) for i in range(300)]
    compressed = gzip.compress(jsonl(*lines))
    uri = URI + ".gz"
    ingested, outcome = run([(uri, compressed[: len(compressed) * 2 // 3])], max_reject_ratio=0.5)
    kept = outcome.valid.height
    assert 0 < kept < 300
    assert outcome.valid["record_id"].to_list() == [f"r-{i}" for i in range(kept)]
    assert [(r.source_uri, r.line_no) for r in ingested.rejects] == [(uri, kept + 1)]  # the line the cut fell in
    assert ingested.rejects[0].reasons[0].startswith(f"object damaged: {uri} is a truncated or corrupt gzip: ")


def parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def test_parquet_with_contract_schema_is_validated_like_jsonl() -> None:
    frame = pl.DataFrame(
        {
            "record_id": ["p-1", "p-2", "p-3"],
            "timestamp": [
                dt.datetime(2026, 11, 25, 8),
                dt.datetime(2026, 11, 24, 23),
                dt.datetime(2026, 11, 25, 9),
            ],
            "model": ["m", "m", "m"],
            "question": ["q1", "q2", "q3"],
            "answer": ["a1", "a2", "a3"],
            "contexts": [[{"id": None, "text": "t", "source": None, "score": None}], [], None],
            "rubrics": [None, None, [{"id": None, "description": "d", "weight": None, "required": None}]],
        }
    )
    uri = "s3://llm-logs/raw/dt=2026-11-25/part-002.parquet"
    _, outcome = run([(uri, parquet(frame))], max_reject_ratio=0.5)
    assert outcome.valid.select("record_id", "timestamp", "contexts", "rubrics").rows() == [
        (
            "p-1",
            dt.datetime(2026, 11, 25, 8, tzinfo=dt.UTC),
            '[{"id": "ctx-1", "text": "t", "source": null, "score": null}]',
            None,
        ),
        (
            "p-3",
            dt.datetime(2026, 11, 25, 9, tzinfo=dt.UTC),
            "[]",
            '[{"id": "rubric-1", "description": "d", "weight": 1.0, "required": true}]',
        ),
    ]
    assert reasons_of(outcome) == {"part-002.parquet:2": [f"{OTHER_DAY} (UTC 2026-11-24T23:00:00Z)"]}


def test_parquet_with_a_foreign_schema_rejects_every_row_with_reasons() -> None:
    frame = pl.DataFrame({"id": [1, 2, 3], "text": ["a", "b", "c"], "record_id": [10, 11, 12]})
    uri = "s3://llm-logs/raw/dt=2026-11-25/export.parquet"
    ingested, outcome = run([(uri, parquet(frame))])
    assert ingested.rejects == []
    assert outcome.valid.height == 0
    assert [r.line_no for r in outcome.rejects] == [1, 2, 3]
    assert outcome.rejects[0].reasons == [
        "timestamp: missing",
        "model: missing or blank",
        "question: missing or blank",
        "answer: missing",
        "record_id: not a string (got number)",
    ]
    assert json.loads(outcome.rejects[0].raw) == {"id": 1, "text": "a", "record_id": 10}
    assert outcome.table_failures == ["2026-11-25: reject ratio 1 (3 of 3) exceeds max_reject_ratio 0.05"]


# --------------------------------------------------------------------------------------------
# Table rules


def test_a_day_of_only_bad_records_fails_naming_the_day_and_cause() -> None:
    ingested, outcome = run(
        [(URI, jsonl(without("question"), "not json", record(timestamp="2026-11-20T10:00:00Z")))]
    )
    assert outcome.valid.height == 0
    assert (len(ingested.rejects), len(outcome.rejects)) == (1, 2)
    assert outcome.table_failures == ["2026-11-25: reject ratio 1 (3 of 3) exceeds max_reject_ratio 0.05"]
    assert not outcome.success


@pytest.mark.parametrize(
    ("objects", "allow_empty", "failures"),
    [
        ([], False, ["2026-11-25: no input objects"]),
        ([], True, []),
        (
            [(URI, b""), (URI + ".gz", gzip.compress(b"\n\n"))],
            False,
            ["2026-11-25: no input records (2 objects, all empty)"],
        ),
        ([(URI, b"")], True, []),
    ],
    ids=["no-objects", "no-objects-allowed", "empty-objects", "empty-object-allowed"],
)
def test_no_input(objects: list[tuple[str, bytes]], allow_empty: bool, failures: list[str]) -> None:
    _, outcome = run(objects, allow_empty=allow_empty)
    assert outcome.valid.height == 0
    assert outcome.table_failures == failures


def test_no_input_without_object_count_says_no_input_objects() -> None:
    outcome = validate(ingest_objects([], DAY).rows, day=DAY)
    assert outcome.table_failures == ["2026-11-25: no input objects"]


@pytest.mark.parametrize(
    ("bad", "max_reject_ratio", "failures"),
    [
        (5, 0.05, []),
        (6, 0.05, ["2026-11-25: reject ratio 0.06 (6 of 100) exceeds max_reject_ratio 0.05"]),
        (12, 0.05, ["2026-11-25: reject ratio 0.12 (12 of 100) exceeds max_reject_ratio 0.05"]),
        (12, 0.2, []),
        (1, 0.0, ["2026-11-25: reject ratio 0.01 (1 of 100) exceeds max_reject_ratio 0"]),
        (0, 0.0, []),
    ],
)
def test_reject_ratio_ceiling(bad: int, max_reject_ratio: float, failures: list[str]) -> None:
    # Half the bad records are malformed lines (ingest rejects), half fail a row rule.
    malformed = bad // 2
    lines: list[dict[str, Any] | str] = [record(record_id=f"r-{i}") for i in range(100 - bad)]
    lines += ["{broken"] * malformed
    lines += [record(record_id=f"bad-{i}", model=None) for i in range(bad - malformed)]
    ingested, outcome = run([(URI, jsonl(*lines))], max_reject_ratio=max_reject_ratio)
    assert (outcome.valid.height, len(ingested.rejects), len(outcome.rejects)) == (
        100 - bad,
        malformed,
        bad - malformed,
    )
    assert outcome.table_failures == failures


# --------------------------------------------------------------------------------------------
# The suites and the landed result


def test_row_suite_carries_each_rule() -> None:
    suite = build_suite(DAY, 1234)
    assert suite.name == SUITE_NAME
    rules = [
        (e.expectation_type, getattr(e, "column", None), (e.meta or {})["rule"]) for e in suite.expectations
    ]
    assert rules == [
        ("expect_column_values_to_not_be_null", "record_id", "present"),
        ("expect_column_values_to_not_be_null", "timestamp", "present"),
        ("expect_column_values_to_not_be_null", "model", "present"),
        ("expect_column_values_to_not_be_null", "question", "present"),
        ("expect_column_values_to_not_be_null", "answer", "present"),
        ("expect_column_values_to_be_in_set", "timestamp_day", "on_day"),
        ("expect_column_values_to_be_between", "text_chars", "within_size"),
        ("expect_column_values_to_be_between", "problem_count", "no_problems"),
        ("expect_column_values_to_be_in_set", "is_repeat", "unique"),
    ]
    on_day, within_size, no_problems, unique = suite.expectations[5:]
    assert on_day.value_set == ["2026-11-25"]  # type: ignore[attr-defined]
    assert (within_size.min_value, within_size.max_value) == (0, 1234)  # type: ignore[attr-defined]
    assert (no_problems.min_value, no_problems.max_value) == (0, 0)  # type: ignore[attr-defined]
    assert unique.value_set == [False]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("allow_empty", "has_records", "types"),
    [
        (False, True, ["expect_table_row_count_to_be_between", "expect_column_mean_to_be_between"]),
        (True, True, ["expect_column_mean_to_be_between"]),
        (False, False, ["expect_table_row_count_to_be_between"]),
        (True, False, []),
    ],
)
def test_table_suite(allow_empty: bool, has_records: bool, types: list[str]) -> None:
    suite = build_table_suite(max_reject_ratio=0.07, allow_empty=allow_empty, has_records=has_records)
    assert suite.name == TABLE_SUITE_NAME
    assert [e.expectation_type for e in suite.expectations] == types
    if has_records:
        assert suite.expectations[-1].max_value == 0.07  # type: ignore[attr-defined]


def test_result_json_lists_the_failing_rows_ge_found() -> None:
    _, outcome = run(
        [(URI, jsonl(record(record_id="a"), without("model"), record(record_id="a"), record(record_id="b")))],
        max_reject_ratio=1.0,
    )
    result = outcome.result_json
    assert (result["day"], result["success"]) == ("2026-11-25", False)
    assert result["row_rules"]["suite_name"] == SUITE_NAME
    assert result["table_rules"]["suite_name"] == TABLE_SUITE_NAME
    failing = {
        (item["expectation_config"]["type"], item["expectation_config"]["kwargs"]["column"]): item["result"]
        for item in result["row_rules"]["results"]
        if not item["success"]
    }
    assert set(failing) == {
        ("expect_column_values_to_not_be_null", "model"),
        ("expect_column_values_to_be_in_set", "is_repeat"),
    }
    assert failing[("expect_column_values_to_not_be_null", "model")]["unexpected_index_list"] == [
        {"_row": [1]}
    ]
    assert failing[("expect_column_values_to_be_in_set", "is_repeat")]["unexpected_index_list"] == [
        {"_row": [2]}
    ]
    assert [r.line_no for r in outcome.rejects] == [2, 3]
    mean = result["table_rules"]["results"][-1]
    assert (mean["expectation_config"]["type"], mean["result"]["observed_value"]) == (
        "expect_column_mean_to_be_between",
        0.5,
    )


def test_result_json_of_a_bad_day_lists_every_failing_row_and_a_short_partial_list() -> None:
    _, outcome = run([(URI, jsonl(*[without("answer") for _ in range(30)]))])
    (answer_rule,) = [
        item["result"]
        for item in outcome.result_json["row_rules"]["results"]
        if item["expectation_config"]["kwargs"].get("column") == "answer"
    ]
    assert answer_rule["unexpected_count"] == 30
    assert answer_rule["unexpected_index_list"] == [{"_row": list(range(30))}]
    assert answer_rule["partial_unexpected_index_list"] == [{"_row": list(range(20))}]
    assert "unexpected_index_query" not in answer_rule


def test_rows_missing_a_column_are_a_run_error() -> None:
    rows = ingest_objects([(URI, jsonl(record()))], DAY).rows.drop("problems")
    with pytest.raises(ValidationError, match=r"2026-11-25: rows lack columns \['problems'\]"):
        validate(rows, day=DAY)


def test_validation_imports_neither_airflow_nor_litellm() -> None:
    code = (
        "import datetime as dt, sys\n"
        "from evaluation.storage.ingest import ingest_objects\n"
        "from evaluation.storage.validation import validate\n"
        "day = dt.date(2026, 11, 25)\n"
        "validate(ingest_objects([], day).rows, day=day, allow_empty=True)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'litellm'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
