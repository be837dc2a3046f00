"""The offline judge's explanations never contradict its numbers: over many generated records,
each explanation carries the value returned beside it, and its wording fits that value."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections import Counter
from typing import Any

import pytest

from evaluation.calling.offline import explain, respond
from evaluation.contract.config import InputRecord
from evaluation.judges import render
from evaluation.testing import synthetic

#: Wording that says a metric is good, and wording that says it is poor, per metric.
GOOD = {
    "faithfulness": ("holds the answer's content", "claims nothing unsupported"),
    "answer_relevance": ("the answer addresses the question's terms", "does not cover the question",
                         "the answer's sentences draw on the context"),
    "context_relevance": ("holds what the question asks", "the context is there"),
    "semantic_similarity": ("says what the reference says",),
}
POOR = ("does not address", "does not hold", "does not draw", "little", "few", "no word", "nothing the question asks", "unsupported claims",
        "although the context covers", "none was given")


def _records() -> list[dict[str, Any]]:
    """Generated records of several days, and variants that reach every band: an answer taken
    from another record (off the question and the evidence), answers cut short or padded with
    words no context holds, refusals, and requests to summarise the contexts (with and without
    contexts, answered by the record's answer)."""
    rng = random.Random(19)
    records = [json.loads(line) for day in range(1, 6)
               for line in synthetic.generate_day(dt.date(2026, 3, day), 60, bad=False, seed=day)]
    variants = []
    for i, record in enumerate(records):
        other = records[(i * 7 + 3) % len(records)]
        words = record["answer"].split()
        variants += [
            {**record, "record_id": f"{record['record_id']}-other", "answer": other["answer"]},
            {**record, "record_id": f"{record['record_id']}-cut", "answer": " ".join(words[: rng.randint(1, 6)])},
            {**record, "record_id": f"{record['record_id']}-pad",
             "answer": record["answer"] + " " + " ".join(rng.sample(["zeppelin", "marmalade", "quartz", "tundra",
                                                                      "violin", "glacier", "saffron"], rng.randint(1, 4)))},
            {**record, "record_id": f"{record['record_id']}-refuse", "answer": "I cannot answer that from the documents."},
            {**record, "record_id": f"{record['record_id']}-summary", "question": "Summarize the document."},
            {**record, "record_id": f"{record['record_id']}-summary-other", "question": "Please summarise this.",
             "answer": other["answer"], "contexts": record["contexts"] if i % 3 else []},
        ]
    return [r for r in records + variants if r["answer"].strip()]


def _replies(judge: str) -> list[dict[str, Any]]:
    replies = []
    for data in _records():
        fields = {k: v for k, v in data.items() if k != "metadata"}  # a free-form object; judges never read it
        prompt = render(judge, InputRecord(**fields))  # type: ignore[arg-type]
        assert prompt is not None
        replies.append(json.loads(respond(prompt.messages)))
    return replies


@pytest.fixture(scope="module")
def rag_replies() -> list[dict[str, Any]]:
    return _replies("rag")


def test_every_rag_explanation_carries_its_value_and_fits_it(rag_replies) -> None:
    seen: Counter[tuple[str, str]] = Counter()
    for reply in rag_replies:
        for metric in GOOD:
            value, text = reply[metric], reply[f"{metric}_explanation"]
            if value is None:
                assert metric == "semantic_similarity" and text == "No reference answer provided."
                continue
            assert float(text.split(":", 1)[0]) == value, (metric, value, text)
            good = any(phrase in text for phrase in GOOD[metric])
            poor = any(phrase in text for phrase in POOR)
            assert not (good and poor), text
            if good:
                assert value >= 0.8, (metric, value, text)
            if poor:
                assert value < 0.5, (metric, value, text)
            if value >= 0.8:
                assert good, (metric, value, text)
            elif value == 0:
                assert poor, (metric, value, text)
            seen[metric, "high" if value >= 0.8 else "mid" if value >= 0.5 else "low" if value > 0 else "zero"] += 1
    # the records reach every band of the two metrics a reader acts on
    for metric in ("faithfulness", "answer_relevance"):
        assert all(seen[metric, b] for b in ("high", "mid", "low", "zero")), seen


def test_the_issue_case_a_low_relevance_is_never_said_to_address_the_question(rag_replies) -> None:
    low = [r for r in rag_replies if r["answer_relevance"] is not None and r["answer_relevance"] <= 0.2]
    assert low
    assert not any("addresses the question's terms" in r["answer_relevance_explanation"] for r in low)


def test_masis_suggestions_follow_the_returned_values() -> None:
    for reply in _replies("masis"):
        suggestions = reply["improvement_suggestions"]
        assert ("Keep to what the evidence says." in suggestions) == (reply["faithfulness"] < 1.0), reply
        relevance_advice = {"Address the question's key terms directly.", "Draw on the evidence the request is about."}
        assert bool(relevance_advice.intersection(suggestions)) == (reply["relevance"] < 0.5), reply


@pytest.mark.parametrize(("metric", "value", "refusal", "expected"), [
    ("answer_relevance", 0.2, False, "0.20: little of the answer addresses the question"),
    ("answer_relevance", 0.0, False, "0.00: the answer does not address the question"),
    ("answer_relevance", 0.5, False, "0.50: some of the answer's sentences address the question's terms"),
    ("answer_relevance", 0.8, False, "0.80: the answer addresses the question's terms"),
    ("answer_relevance", 0.2, True, "0.20: a refusal although the context covers the question"),
    ("answer_relevance", 1.0, True, "1.00: a refusal, and the context does not cover the question"),
    ("faithfulness", 1.0, True, "1.00: a refusal for lack of evidence claims nothing unsupported"),
    ("faithfulness", 0.05, False, "0.05: the context holds little of the answer: unsupported claims or figures"),
])
def test_explain_bands(metric: str, value: float, refusal: bool, expected: str) -> None:
    assert explain(metric, value, refusal=refusal) == expected
