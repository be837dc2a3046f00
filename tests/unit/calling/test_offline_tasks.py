"""The offline judge recognises requests about the contexts themselves (summarise, rewrite,
translate, continue, list) and does not score their context relevance against the question's words."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from evaluation.calling.offline import context_relevance, is_open_request, respond
from evaluation.contract.config import InputRecord
from evaluation.judges import parse_reply, render
from evaluation.testing import synthetic
from tests.unit.judges.judge_oracle import score_row


@pytest.mark.parametrize(("question", "goal", "open_request"), [
    ("Summarize the document.", "balanced", True),
    ("Please summarise this report in two sentences.", "balanced", True),
    ("Can you summarize the meeting notes?", "balanced", True),
    ("Rewrite this in plain English", "balanced", True),
    ("Translate the passage into French", "balanced", True),
    ("Continue the story", "balanced", True),
    ("Paraphrase the second paragraph.", "balanced", True),
    ("List the main points of the article.", "balanced", True),
    ("Give me a short summary of the contract.", "balanced", True),
    ("What does the email say? tl;dr please", "balanced", True),
    ("What is the height of Mount Everest?", "balanced", False),
    ("How do I continue my subscription after it lapses?", "balanced", False),
    ("Which list of countries does the Danube flow through?", "recall", False),
    ("Is the summary on the back cover accurate?", "balanced", False),
    ("Write a poem about the sea.", "precision", True),  # `creative` normalises to precision
])
def test_open_requests_are_recognised(question: str, goal: str, open_request: bool) -> None:
    assert is_open_request(question, goal) is open_request


def test_the_generated_questions_are_not_open_requests() -> None:
    """The generated QA records keep the question-term measures (their goal aside)."""
    questions = {json.loads(line)["question"] for line in synthetic.generate_day(dt.date(2026, 3, 1), 300, bad=False)}
    assert questions and not any(is_open_request(q) for q in questions)


def _summaries(kind: str) -> list[dict[str, Any]]:
    """Generated records turned into summarization requests: a faithful, extractive summary of the
    first context (its sentences, reordered), or one that adds facts the contexts do not hold."""
    records = []
    for line in synthetic.generate_day(dt.date(2026, 3, 2), 80, bad=False, seed=5):
        data = json.loads(line)
        data.pop("metadata")
        data.pop("evaluation_goal", None)
        first, second = data["contexts"][0]["text"].split(". ", 1)
        summary = f"{second.rstrip('.')}. {first}."
        if kind == "made-up-number":
            summary += " It was first surveyed by Portuguese sailors in 1502."
        elif kind == "made-up-words":
            summary += " Portuguese sailors painted it green, and merchants sold tickets to watch."
        records.append({**data, "question": "Summarize the document.", "answer": summary, "reference": None})
    return records


def _rag_rows(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = []
    for data in records:
        record = InputRecord(**data)
        prompt = render("rag", record)
        assert prompt is not None
        raw = respond(prompt.messages)
        rows.append((json.loads(raw), score_row(parse_reply("rag", record, raw, prompt))))
    return rows


def test_faithful_summaries_pass_rag_and_their_contexts_are_relevant() -> None:
    rows = _rag_rows(_summaries("faithful"))
    assert len(rows) == 80
    for reply, row in rows:
        assert row["judge_status"] == "ok"
        assert row["context_relevance"] == 1.0, reply
        assert row["faithfulness"] == 1.0 and row["answer_relevance"] == 1.0, reply
        assert row["verdict"] == "pass", row
        assert reply["context_relevance_explanation"] == (
            "1.00: the request is about the context itself, and the context is there (open request)")
    # the question's own words are not in the document: read as a question, it would score 0
    record = _summaries("faithful")[0]
    assert context_relevance(record["question"], record["contexts"][0]["text"], "balanced") == 0.0


@pytest.mark.parametrize("kind", ["made-up-number", "made-up-words"])
def test_unfaithful_summaries_still_fail_faithfulness(kind: str) -> None:
    for reply, row in _rag_rows(_summaries(kind)):
        assert row["context_relevance"] == 1.0
        assert row["faithfulness"] < 0.5, reply
        assert row["verdict"] == "fail", row
        assert reply["faithfulness_explanation"].startswith(f"{row['faithfulness']:.2f}: the context ")


def test_a_summary_request_without_contexts_has_no_relevant_context() -> None:
    record = {**_summaries("faithful")[0], "contexts": []}
    [(reply, row)] = _rag_rows([record])
    assert row["context_relevance"] == 0.0 and row["faithfulness"] == 0.0 and row["verdict"] == "fail"
    assert reply["context_relevance_explanation"] == (
        "0.00: the request is about a context, and none was given (open request)")
    assert reply["answer_relevance_explanation"] == (
        "0.00: the answer does not draw on the context the request is about")


def test_masis_relevance_of_a_summary_is_its_use_of_the_evidence() -> None:
    record = InputRecord(**_summaries("faithful")[0])
    prompt = render("masis", record)
    assert prompt is not None
    reply = json.loads(respond(prompt.messages))
    assert reply["relevance"] == 1.0 and reply["faithfulness"] == 1.0
    assert "Address the question's key terms directly." not in reply["improvement_suggestions"]
