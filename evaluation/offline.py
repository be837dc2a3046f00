"""The built-in offline judge: a deterministic *lexical baseline*, not an LLM.

It reads the fenced data blocks of a rendered judge prompt and answers with a JSON object in that
judge's exact output contract, computed from word overlap:

* **support** of an answer sentence: the share of its content words (lowercased, stop words and
  words under three letters dropped; numbers kept) that occur in the contexts;
* faithfulness: the mean support over the answer's sentences, 0.0 when the answer's numbers or
  most of its words are absent from the contexts (a contradiction of a critical fact reads, to a
  lexical baseline, as words the evidence does not hold); an answer that declines for lack of
  evidence is faithful (1.0), as seed 003 asks;
* context relevance: the share of the question's content words found in the contexts (recall),
  blended with the contexts' share of words the question or answer uses (precision) by the goal;
* answer relevance: the share of the question's content words the answer uses, with a floor for
  answers that address the question at length; a refusal scores 1.0 when the contexts do not cover
  the question and 0.2 when they do;
* semantic similarity: token F1 between answer and reference (null without a reference);
* prompt judge: freeform score = token F1 against the reference or expected outcome; a rubric item
  is satisfied when at least half of its description's content words occur in the answer.

The same input always gives the same output. Scores land with ``judge_model = offline/lexical``
so nobody mistakes them for an LLM's. Use it for wiring, demos and regression baselines.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from evaluation.judges import read_fenced_blocks

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CITATION = re.compile(r"\[[^\]\n]*\]")
_STOP = frozenset(
    """the and for are was were with that this from have has had not but you your our their they
    them his her its into than then there these those what which who whom whose when where why how
    all any can could would should will shall may might must been being does did done also about
    over under more most some such only just very each other like one two per via onto upon""".split()
)
_REFUSALS = (
    "cannot answer",
    "can't answer",
    "unable to answer",
    "i don't know",
    "i do not know",
    "insufficient evidence",
    "not provided",
    "cannot provide",
    "lack sufficient evidence",
    "no information",
    "not enough information",
    "does not contain",
    "doesn't contain",
)


def content_words(text: str) -> list[str]:
    """Lowercased words of three letters or more that are not stop words, and every number."""
    return [w for w in _WORD.findall(text.lower()) if (len(w) >= 3 and w not in _STOP) or w.isdigit()]


def _share(words: list[str], vocabulary: set[str]) -> float:
    return sum(1 for w in words if w in vocabulary) / len(words) if words else 0.0


def _f1(candidate: list[str], reference: list[str]) -> float:
    if not candidate or not reference:
        return 0.0
    overlap = sum((Counter(candidate) & Counter(reference)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(candidate), overlap / len(reference)
    return 2 * precision * recall / (precision + recall)


def is_refusal(answer: str) -> bool:
    """Whether the answer declines to answer."""
    lowered = answer.lower()
    return any(phrase in lowered for phrase in _REFUSALS)


def _sentences(answer: str) -> list[str]:
    pieces = [_CITATION.sub(" ", s).strip() for s in _SENTENCE.split(answer)]
    return [p for p in pieces if content_words(p)]


def faithfulness(answer: str, context: str) -> float:
    """Mean support of the answer's sentences by the context (see the module docstring)."""
    if is_refusal(answer):
        return 1.0
    vocabulary = set(content_words(context))
    if not vocabulary:
        return 0.0
    sentences = _sentences(answer)
    if not sentences:
        return 0.0
    supports = [_share(content_words(s), vocabulary) for s in sentences]
    context_numbers = set(_NUMBER.findall(context))
    foreign_numbers = [n for n in _NUMBER.findall(_CITATION.sub(" ", answer)) if n not in context_numbers]
    mean = sum(supports) / len(supports)
    if foreign_numbers or mean < 0.35:
        return 0.0  # a critical fact the evidence does not hold
    return mean


def _round(value: float) -> float:
    return round(min(max(value, 0.0), 1.0), 2)


def _rag(blocks: dict[str, str], user: str) -> dict[str, Any]:
    question, answer = blocks.get("question", ""), blocks.get("answer", "")
    context = blocks.get("context", "")
    context = "" if context == "(no context retrieved)" else context
    reference = blocks.get("reference", "(none)")
    goal_match = re.search(r"\*\*Evaluation Goal\*\*: (\w+)", user)
    goal = goal_match.group(1) if goal_match else "balanced"
    if not answer.strip():
        return _rag_failed("empty_answer: the generated answer is empty")
    if not question.strip():
        return _rag_failed("missing_field_question")
    question_words, answer_words = content_words(question), content_words(answer)
    context_words = content_words(context)
    recall = _share(question_words, set(context_words))
    precision = _share(context_words, set(question_words) | set(answer_words))
    weight = {"recall": 0.8, "precision": 0.2}.get(goal, 0.5)
    context_relevance = weight * recall + (1 - weight) * precision
    if is_refusal(answer):
        answer_relevance = 1.0 if recall < 0.5 else 0.2
    else:
        answer_relevance = max(_share(question_words, set(answer_words)), 0.5 if len(answer_words) >= 5 else 0.0)
    missing_reference = reference.strip().lower() in ("", "none", "(none)")
    similarity = None if missing_reference else _round(_f1(answer_words, content_words(reference)))
    faith = _round(faithfulness(answer, context))
    return {
        "faithfulness": faith,
        "faithfulness_explanation": f"lexical support of the answer's sentences by the context: {faith}",
        "context_relevance": _round(context_relevance),
        "context_relevance_explanation": f"question words found in the context ({goal} goal)",
        "answer_relevance": _round(answer_relevance),
        "answer_relevance_explanation": "refusal" if is_refusal(answer) else "question words the answer uses",
        "semantic_similarity": similarity,
        "semantic_similarity_explanation": "No reference answer provided." if similarity is None else "token F1",
        "evaluation_status": "success",
        "reason": None,
        "error": None,
    }


def _rag_failed(reason: str) -> dict[str, Any]:
    metrics = ("faithfulness", "context_relevance", "answer_relevance", "semantic_similarity")
    reply: dict[str, Any] = {m: None for m in metrics}
    reply.update({f"{m}_explanation": None for m in metrics})
    reply.update(evaluation_status="failed", reason=reason, error=None)
    return reply


def _masis(blocks: dict[str, str]) -> dict[str, Any]:
    question, answer = blocks.get("question", ""), blocks.get("answer", "")
    evidence = blocks.get("evidence", "")
    evidence = "" if evidence == "(no context retrieved)" else evidence
    question_words, answer_words = content_words(question), content_words(answer)
    relevance = _share(question_words, set(answer_words))
    sentences = _sentences(answer)
    completeness = min(1.0, 0.5 * relevance + 0.15 * len(sentences)) if answer_words else 0.0
    reasoning = min(1.0, 0.3 + 0.1 * len(sentences) + (0.2 if _CITATION.search(answer) else 0.0)) if sentences else 0.0
    suggestions = []
    if not _CITATION.search(answer):
        suggestions.append("Cite the evidence ids that support each claim.")
    if relevance < 0.5:
        suggestions.append("Address the question's key terms directly.")
    return {
        "faithfulness": _round(faithfulness(answer, evidence)),
        "relevance": _round(relevance),
        "completeness": _round(completeness),
        "reasoning_quality": _round(reasoning),
        "overall_score": None,
        "improvement_suggestions": suggestions,
    }


def _freeform(blocks: dict[str, str]) -> dict[str, Any]:
    answer = blocks.get("candidate_answer", "")
    target = blocks.get("reference_answer", "") or blocks.get("expected_outcome", "")
    answer_words, target_words = content_words(answer), content_words(target)
    present = set(answer_words)
    key_terms = list(dict.fromkeys(target_words))
    hits = [t for t in key_terms if t in present][:4]
    misses = [t for t in key_terms if t not in present][:4]
    score = round(_f1(answer_words, target_words), 2)
    return {"score": score, "hits": hits, "misses": misses, "reasoning": f"token F1 against the target: {score}"}


_RUBRIC_LINE = re.compile(r"^- \[(?P<id>[^\]]*)\](?: \(REQUIRED\))?(?: \(weight: [^)]*\))?: (?P<description>.*)$")


def _rubric(blocks: dict[str, str]) -> dict[str, Any]:
    answer_words = set(content_words(blocks.get("candidate_answer", "")))
    checks = []
    for line in blocks.get("rubrics", "").splitlines():
        match = _RUBRIC_LINE.match(line)
        if not match:
            continue
        words = content_words(match.group("description"))
        share = _share(words, answer_words)
        checks.append({
            "id": match.group("id"),
            "satisfied": share >= 0.5,
            "reasoning": f"{share:.0%} of the item's key words appear in the answer",
        })
    satisfied = sum(1 for c in checks if c["satisfied"])
    return {"checks": checks, "overall_reasoning": f"{satisfied} of {len(checks)} items satisfied"}


def respond(messages: list[dict[str, Any]]) -> str:
    """The offline judge's reply (JSON text) to a rendered judge prompt."""
    system = next((str(m.get("content", "")) for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
    blocks = read_fenced_blocks(user)
    kind = system.split("\n", 1)[0].removeprefix("judge: ").strip()
    if kind == "rag":
        reply = _rag(blocks, user)
    elif kind == "masis":
        reply = _masis(blocks)
    elif kind == "prompt/rubric":
        reply = _rubric(blocks)
    elif kind == "prompt/freeform":
        reply = _freeform(blocks)
    else:
        return "The offline judge only answers this project's judge prompts."
    return json.dumps(reply, ensure_ascii=False)
