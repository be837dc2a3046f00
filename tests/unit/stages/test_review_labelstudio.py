"""What the Label Studio round trip sends and reads back, without a server: the answer as people
read it (citations marked), a task's data, annotations of an export (the round trip against a real
Label Studio is tests/system/test_label_studio.py)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from evaluation.stages.labelstudio import LABEL_CONFIG, annotations_of, answer_html, task_of


@pytest.mark.parametrize(("answer", "ids", "expected"), [
    ("Paris [ctx-1].", {"ctx-1"}, "Paris <mark>[ctx-1]</mark>."),
    ("Paris [ctx-9].", {"ctx-1"}, "Paris <mark class='invalid' title='no context has this id'>[ctx-9]</mark>."),
    ("<b>x</b> [a] [b]", {"a", "b"}, "&lt;b&gt;x&lt;/b&gt; <mark>[a]</mark> <mark>[b]</mark>"),
    ("no citation", set(), "no citation"),
])
def test_the_answer_is_shown_with_its_citations_marked(answer: str, ids: set[str], expected: str) -> None:
    assert answer_html(answer, ids) == f"<div style='white-space:pre-wrap'>{expected}</div>"


def test_a_task_carries_the_record_and_its_texts() -> None:
    row = {"record_dt": dt.date(2026, 3, 2), "record_id": "r-1", "model": "m", "stratum": "uniform", "queue_id": "q",
           "question": "Where?", "answer": "There [c1].",
           "contexts": json.dumps([{"id": "c1", "text": "It is there & here."}])}
    data = task_of(row)["data"]
    assert data["record_key"] == "2026-03-02/r-1" and data["question"] == "Where?"
    assert "<mark>[c1]</mark>" in data["answer_html"] and "there &amp; here" in data["contexts_html"]
    for name in ("$question", "$answer_html", "$contexts_html", 'name="verdict"', 'name="supported"',
                 'name="answers"', 'name="note"'):
        assert name in LABEL_CONFIG


def test_annotations_of_an_export_skip_cancelled_and_older_ones() -> None:
    def annotation(ident: int, updated: str, *, cancelled: bool = False) -> dict[str, object]:
        return {"id": ident, "updated_at": updated, "was_cancelled": cancelled,
                "completed_by": {"id": 1, "email": "ann@x"},
                "result": [{"from_name": "verdict", "value": {"choices": ["fail"]}},
                           {"from_name": "note", "value": {"text": ["why"]}}]}

    tasks = [{"id": 7, "data": {"record_dt": "2026-03-02", "record_id": "r-1"},
              "annotations": [annotation(1, "2026-03-03T10:00:00Z"), annotation(2, "2026-03-04T10:00:00.5Z"),
                              annotation(3, "2026-03-05T10:00:00Z", cancelled=True)]}]
    found = annotations_of(tasks, 4)
    assert [(a.annotation_id, a.verdict, a.note, a.annotator, a.task_id, a.source) for a in found] == [
        ("1", "fail", "why", "ann@x", "7", "label-studio:4"), ("2", "fail", "why", "ann@x", "7", "label-studio:4")]
    later = annotations_of(tasks, 4, after=dt.datetime(2026, 3, 3, 10, tzinfo=dt.UTC))
    assert [a.annotation_id for a in later] == ["1", "2"]  # the watermark's own instant is read again (landed once)
    assert [a.annotation_id for a in annotations_of(tasks, 4, after=dt.datetime(2026, 3, 4, tzinfo=dt.UTC))] == ["2"]
    by_id = [{**tasks[0], "annotations": [{**annotation(5, "2026-03-03T10:00:00Z"), "completed_by": 9}]}]
    assert [a.annotator for a in annotations_of(by_id, 4, users={9: "bo@x"})] == ["bo@x"]  # an export names users by id
    assert [a.annotator for a in annotations_of(by_id, 4)] == ["user-9"]
