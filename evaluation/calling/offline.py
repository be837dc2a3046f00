"""The built-in offline judge: a deterministic *lexical baseline*, not an LLM.

It reads the fenced data blocks of a rendered judge prompt and answers with a JSON object in that
judge's exact output contract, computed from the overlap of *content words* (:func:`content_words`).
Its constants were fitted on its declared tuning set (:data:`TUNING_SETS`); its agreement with human
labels there and on sets that played no part is in docs/calibration.md, which also describes it.

* **Faithfulness** — the share of the answer's content words the contexts hold, times
  :data:`SUPPORT_DECAY` per word they do not; an unsupported answer (below
  :data:`UNSUPPORTED_BELOW`) scores under :data:`UNSUPPORTED_CEILING`, and a number the contexts do
  not hold scores 0.0. A refusal for lack of evidence is faithful, as is a yes or no to a yes/no question.
* **Answer relevance** — 1.0 for a short, direct answer (:data:`DIRECT_ANSWER_WORDS`) or a yes/no
  to a yes/no question, else the share of its sentences that use a word of the question or of the
  evidence; a refusal scores 1.0 when the contexts do not cover the question, 0.2 when they do.
* **Context relevance** — recall of the question's words in the contexts, blended by the goal with
  the share of context sentences about it.
* **Open requests** (:func:`is_open_request`: summarise, rewrite, translate, list the contexts, or a
  ``precision`` goal) — context relevance is whether there are contexts, answer relevance how much
  of the answer draws on them; faithfulness as for any answer.
* **Semantic similarity** — token F1 between answer and reference (null without a reference).
* **Explanations** — the value, then the text of its :func:`band`, so the two never disagree.
* **MASIS** — faithfulness and relevance as above; completeness is relevance × faithfulness;
  reasoning quality 0.4 for a coherent answer plus 0.6 × faithfulness.
* **prompt** — freeform: the share of the target's key terms the answer holds, halved for a number
  the target does not give; rubric: an item holds when the answer has every number of its
  description and at least half of its other key terms.

The same input always gives the same output. Scores land with ``judge_model = offline/lexical``
so nobody mistakes them for an LLM's.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from evaluation.contract.config import OFFLINE_JUDGE_MODEL
from evaluation.judges import RAG_METRICS, read_fenced_blocks

#: The offline judge models there are (litellm routes any ``offline/<name>`` here).
OFFLINE_MODELS = (OFFLINE_JUDGE_MODEL,)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CITATION = re.compile(r"\[[^\]\n]*\]")
#: English function words, and the discourse words of conversation, which carry no claim.
_STOP = frozenset(
    """the and for are was were with that this from have has had not but you your yours our ours their theirs
    they them his her hers its into than then there these those what which who whom whose when where why how
    all any can could would should will shall may might must been being does did done doing also about over
    under more most some such only just very each other like one two per via onto upon own same too both few
    further once here again against between through during before after above below off out down until while
    because itself myself yourself himself herself themselves ourselves yourselves nor now
    yes yeah yep yup nope okay actually really indeed sure true well lol wow haha hmm""".split()
)
#: Contractions whose second part makes them function words (``they're``, ``haven't``, ``i'm``).
_CONTRACTIONS = frozenset({"t", "re", "ve", "ll", "d", "m"})
#: Words that describe an answer rather than hold a term of it (prompt judge targets and rubrics).
_META = frozenset(
    """answer answers answered gives give given states state stated mentions mention mentioned names name named
    provides provide includes include says say explains explain response responds cites cite""".split()
)
_POLAR_QUESTION = re.compile(
    r"^\W*(?:is|are|was|were|am|do|does|did|can|could|will|would|should|shall|has|have|had|may|might|must)"
    r"(?:n't)?\b", re.IGNORECASE)
_POLAR_ANSWER = re.compile(r"^\W*(?:yes|no|yeah|yep|nope|correct|right|true|false)\b", re.IGNORECASE)
_POLITE = r"^\W*(?:please\s+|(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
#: A request about the contexts themselves rather than a question they answer (see the docstring).
_OPEN_REQUEST = re.compile(
    _POLITE + r"(?:summari[sz]e|sum\s+up|rewrite|re-?word|rephrase|paraphrase|translate|continue|list|outline"
    r"|condense|shorten|simplify|(?:give|write|provide|make|produce)\s+(?:me\s+|us\s+)?an?\s+(?:\w+\s+)?"
    r"(?:summary|translation|paraphrase|rewrite|continuation|list|outline))\b"
    r"|\bsummari[sz](?:e|es|ed|ing|ation)\b|\btl;?dr\b", re.IGNORECASE)
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

#: The declared tuning set: the only data the constants below were fitted on (and the stop words
#: chosen against): HaluEval QA and BEGIN (Wizard of Wikipedia part), the golden sets of
#: ``scripts/golden_sets.py``. Figures on them are in-sample; the out-of-sample figures, on
#: human-labelled sets of other sources and shapes that played no part, are in docs/calibration.md
#: (``python -m scripts.offline_figures``).
TUNING_SETS = ("halueval-qa", "begin-wow")
#: The constants fitted on :data:`TUNING_SETS`: ``python -m scripts.offline_figures --fit`` searches a
#: grid of them on the fit half of each set (the rag verdict's κ) and measures the held-out half.
FITTED_CONSTANTS = ("SUPPORT_DECAY", "UNSUPPORTED_BELOW")
#: Each content word of the answer that the contexts do not hold multiplies its support by this
#: (fitted on :data:`TUNING_SETS`).
SUPPORT_DECAY = 0.8
#: Support below this reads as an unsupported answer: its faithfulness is scaled below
#: :data:`UNSUPPORTED_CEILING`, low enough that every judge's verdict is ``fail`` (fitted on
#: :data:`TUNING_SETS`).
UNSUPPORTED_BELOW = 0.6
UNSUPPORTED_CEILING = 0.15
#: An answer of at most this many content words is a direct answer (relevant as it stands).
DIRECT_ANSWER_WORDS = 5


def content_words(text: str) -> list[str]:
    """Lowercased words of three letters or more that are not stop words, and every number;
    ``'s`` is cut off and function-word contractions are dropped."""
    words = []
    for word in _WORD.findall(text.lower()):
        if "'" in word:
            base, suffix = word.split("'", 1)
            if suffix in _CONTRACTIONS:
                continue
            if suffix == "s":
                word = base
        if word.isdigit() or (len(word) >= 3 and word not in _STOP):
            words.append(word)
    return words


def _share(words: list[str], vocabulary: set[str]) -> float:
    return sum(1 for w in words if w in vocabulary) / len(words) if words else 0.0


def _f1(candidate: list[str], reference: list[str]) -> float:
    overlap = sum((Counter(candidate) & Counter(reference)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(candidate), overlap / len(reference)
    return 2 * precision * recall / (precision + recall)


def is_refusal(answer: str) -> bool:
    lowered = answer.lower()
    return any(phrase in lowered for phrase in _REFUSALS)


def is_polar_answer(question: str, answer: str) -> bool:
    """A yes or no (and nothing that claims more) to a yes/no question."""
    return bool(_POLAR_QUESTION.match(question) and _POLAR_ANSWER.match(answer))


def is_open_request(question: str, goal: str = "balanced") -> bool:
    """Whether the request is about the contexts themselves (summarise, rewrite, paraphrase, translate,
    continue, list them) or its normalised goal is ``precision`` (a ``creative`` request)."""
    return goal == "precision" or bool(_OPEN_REQUEST.search(question))


def _uncited(text: str) -> str:
    return _CITATION.sub(" ", text)


def _sentences(text: str) -> list[list[str]]:
    """The content words of each sentence that has any."""
    return [words for words in (content_words(s) for s in _SENTENCE.split(_uncited(text))) if words]


def faithfulness(answer: str, context: str, question: str = "") -> float:
    """How much of the answer the context holds (see the module docstring)."""
    if is_refusal(answer):
        return 1.0
    vocabulary = set(content_words(context))
    if not vocabulary:
        return 0.0
    uncited = _uncited(answer)
    words = content_words(uncited)
    if not words:
        return 1.0 if is_polar_answer(question, answer) else 0.0
    context_numbers = set(_NUMBER.findall(context))
    if any(n not in context_numbers for n in _NUMBER.findall(uncited)):
        return 0.0  # a figure the evidence does not hold: a critical fact
    missing = sum(1 for w in words if w not in vocabulary)
    value = (len(words) - missing) / len(words) * SUPPORT_DECAY**missing
    if value < UNSUPPORTED_BELOW:  # unsupported: kept in order, below anything a supported answer gets
        return UNSUPPORTED_CEILING * value / UNSUPPORTED_BELOW
    return value


def answer_relevance(question: str, answer: str, context: str, *, open_request: bool = False) -> float:
    """Whether the answer addresses the question, or for an open request whether it draws on the
    contexts (see the module docstring)."""
    if open_request and not is_refusal(answer):
        vocabulary = set(content_words(context))
        sentences = _sentences(answer)
        if not vocabulary or not sentences:
            return 0.0
        return sum(1 for s in sentences if vocabulary.intersection(s)) / len(sentences)
    question_words = set(content_words(question))
    if is_refusal(answer):
        covered = _share(list(question_words), set(content_words(context)))
        return 1.0 if covered < 0.5 else 0.2
    if is_polar_answer(question, answer):
        return 1.0
    words = content_words(_uncited(answer))
    if not words:
        return 0.0
    if len(words) <= DIRECT_ANSWER_WORDS:
        return 1.0
    about = question_words.union(content_words(context))
    sentences = _sentences(answer)
    return sum(1 for s in sentences if about.intersection(s)) / len(sentences)


def context_relevance(question: str, context: str, goal: str, *, open_request: bool = False) -> float:
    """Whether the contexts hold what the question asks: recall of its words, and the share of
    context sentences about it, blended by the goal (recall 0.8, precision 0.2, else 0.5). For an
    open request, which is about the contexts themselves: 1.0 when they hold any content word."""
    sentences = _sentences(context)
    if open_request:
        return 1.0 if sentences else 0.0
    question_words = set(content_words(question))
    if not question_words or not sentences:
        return 0.0
    recall = _share(list(question_words), {w for s in sentences for w in s})
    precision = sum(1 for s in sentences if question_words.intersection(s)) / len(sentences)
    weight = {"recall": 0.8, "precision": 0.2}.get(goal, 0.5)
    return weight * recall + (1 - weight) * precision


def _round(value: float) -> float:
    return round(min(max(value, 0.0), 1.0), 2)


#: The lowest value of the high and the partial band; any other value above 0 is low, 0 is none.
#: Every explanation is derived from the value returned beside it, so the two cannot disagree.
HIGH_BAND, PARTIAL_BAND = 0.8, 0.5
_EXPLANATIONS = {
    "faithfulness": {
        "high": "the context holds the answer's content",
        "partial": "the context holds part of the answer's content",
        "low": "the context holds little of the answer: unsupported claims or figures",
        "none": "the context does not hold the answer: unsupported claims or figures",
    },
    "answer_relevance": {
        "high": "the answer addresses the question's terms",
        "partial": "some of the answer's sentences address the question's terms",
        "low": "little of the answer addresses the question",
        "none": "the answer does not address the question",
    },
    "context_relevance": {
        "high": "the context holds what the question asks",
        "partial": "the context holds part of what the question asks",
        "low": "the context holds little of what the question asks",
        "none": "the context holds nothing the question asks",
    },
    "semantic_similarity": {
        "high": "the answer says what the reference says",
        "partial": "the answer shares part of the reference's words",
        "low": "the answer shares few of the reference's words",
        "none": "the answer shares no word with the reference",
    },
}
_REFUSAL_EXPLANATIONS = {
    "faithfulness": {"high": "a refusal for lack of evidence claims nothing unsupported"},
    "answer_relevance": {"high": "a refusal, and the context does not cover the question",
                         "low": "a refusal although the context covers the question"},
}


#: An open request is about the contexts themselves: these texts replace the question-term ones.
_OPEN_EXPLANATIONS = {
    "context_relevance": {
        "high": "the request is about the context itself, and the context is there",
        "none": "the request is about a context, and none was given",
    },
    "answer_relevance": {
        "high": "the answer's sentences draw on the context the request is about",
        "partial": "part of the answer draws on the context the request is about",
        "low": "little of the answer draws on the context the request is about",
        "none": "the answer does not draw on the context the request is about",
    },
}


def band(value: float) -> str:
    """The band of a metric value: high (≥ :data:`HIGH_BAND`), partial (≥ :data:`PARTIAL_BAND`),
    low (above 0) or none."""
    if value >= HIGH_BAND:
        return "high"
    if value >= PARTIAL_BAND:
        return "partial"
    return "low" if value > 0 else "none"


def explain(metric: str, value: float, *, refusal: bool = False, open_request: bool = False, detail: str = "") -> str:
    """The explanation of a returned metric value: the value, then the text of its band (a refusal's
    or an open request's own text where it has one), then ``detail`` (how it was measured)."""
    name = band(value)
    text = ((_REFUSAL_EXPLANATIONS.get(metric, {}).get(name) if refusal else None)
            or (_OPEN_EXPLANATIONS.get(metric, {}).get(name) if open_request else None)
            or _EXPLANATIONS[metric][name])
    return f"{value:.2f}: {text}" + (f" ({detail})" if detail else "")


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
    missing_reference = reference.strip().lower() in ("", "none", "(none)")
    answer_words = content_words(_uncited(answer))
    similarity = None if missing_reference else _round(_f1(answer_words, content_words(reference)))
    open_request = is_open_request(question, goal)
    faith = _round(faithfulness(answer, context, question))
    relevance = _round(answer_relevance(question, answer, context, open_request=open_request))
    coverage = _round(context_relevance(question, context, goal, open_request=open_request))
    refusal = is_refusal(answer)
    task = "open request" if open_request else f"{goal} goal"
    return {
        "faithfulness": faith,
        "faithfulness_explanation": explain("faithfulness", faith, refusal=refusal, detail="lexical support"),
        "context_relevance": coverage,
        "context_relevance_explanation": explain("context_relevance", coverage, open_request=open_request,
                                                  detail=task),
        "answer_relevance": relevance,
        "answer_relevance_explanation": explain("answer_relevance", relevance, refusal=refusal,
                                                open_request=open_request),
        "semantic_similarity": similarity,
        "semantic_similarity_explanation": ("No reference answer provided." if similarity is None
                                            else explain("semantic_similarity", similarity, detail="token F1")),
        "evaluation_status": "success",
        "reason": None,
        "error": None,
    }


def _rag_failed(reason: str) -> dict[str, Any]:
    reply: dict[str, Any] = {m: None for m in RAG_METRICS}
    reply.update({f"{m}_explanation": None for m in RAG_METRICS})
    reply.update(evaluation_status="failed", reason=reason, error=None)
    return reply


def _masis(blocks: dict[str, str]) -> dict[str, Any]:
    question, answer = blocks.get("question", ""), blocks.get("answer", "")
    evidence = blocks.get("evidence", "")
    evidence = "" if evidence == "(no context retrieved)" else evidence
    faith = faithfulness(answer, evidence, question)
    open_request = is_open_request(question)  # the masis prompt carries no goal
    relevance = answer_relevance(question, answer, evidence, open_request=open_request) if answer.strip() else 0.0
    coherent = bool(_sentences(answer)) or is_polar_answer(question, answer) or is_refusal(answer)
    # the suggestions follow the values returned (rounded), as every explanation does
    suggestions = []
    if not _CITATION.search(answer):
        suggestions.append("Cite the evidence ids that support each claim.")
    if _round(faith) < 1.0:
        suggestions.append("Keep to what the evidence says.")
    if band(_round(relevance)) in ("low", "none"):
        suggestions.append("Draw on the evidence the request is about." if open_request
                           else "Address the question's key terms directly.")
    return {
        "faithfulness": _round(faith),
        "relevance": _round(relevance),
        "completeness": _round(relevance * faith),
        "reasoning_quality": _round(0.4 + 0.6 * faith) if coherent else 0.0,
        "overall_score": None,
        "improvement_suggestions": suggestions,
    }


def _key_terms(text: str) -> list[str]:
    return [w for w in dict.fromkeys(content_words(text)) if w not in _META]


def _freeform(blocks: dict[str, str]) -> dict[str, Any]:
    answer = blocks.get("candidate_answer", "")
    target = blocks.get("reference_answer", "") or blocks.get("expected_outcome", "")
    present = set(content_words(_uncited(answer)))
    terms = _key_terms(target)
    hits = [t for t in terms if t in present]
    misses = [t for t in terms if t not in present]
    score = len(hits) / len(terms) if terms else 0.0
    target_numbers = set(_NUMBER.findall(target))
    foreign = [n for n in _NUMBER.findall(_uncited(answer)) if target_numbers and n not in target_numbers]
    if foreign:
        score /= 2  # a figure the target does not give contradicts it
    score = round(score, 2)
    reasoning = f"{len(hits)} of {len(terms)} key terms of the target" + (
        f"; figures the target does not give: {', '.join(dict.fromkeys(foreign))}" if foreign else "")
    return {"score": score, "hits": hits[:4], "misses": misses[:4], "reasoning": reasoning}


_RUBRIC_LINE = re.compile(r"^- \[(?P<id>[^\]]*)\](?: \(REQUIRED\))?(?: \(weight: [^)]*\))?: (?P<description>.*)$")


def _rubric(blocks: dict[str, str]) -> dict[str, Any]:
    answer = blocks.get("candidate_answer", "")
    answer_words = set(content_words(answer))
    checks = []
    for line in blocks.get("rubrics", "").splitlines():
        match = _RUBRIC_LINE.match(line)
        if not match:
            continue
        terms = _key_terms(match.group("description"))
        numbers = [t for t in terms if t.isdigit()]
        words = [t for t in terms if not t.isdigit()]
        share = _share(words, answer_words) if words else 1.0
        numbers_held = all(n in answer_words for n in numbers)
        checks.append({
            "id": match.group("id"),
            "satisfied": numbers_held and share >= 0.5 and bool(terms),
            "reasoning": f"{share:.0%} of the item's key words appear in the answer"
                         + ("" if numbers_held else "; a figure of the item is missing"),
        })
    satisfied = sum(1 for c in checks if c["satisfied"])
    return {"checks": checks, "overall_reasoning": f"{satisfied} of {len(checks)} items satisfied"}


def unknown_model(model: str) -> str | None:
    """Why ``model`` names no offline judge (``offline/lexcal``), listing the ones there are; None
    for a model of another provider or an offline judge that exists."""
    if not model.startswith("offline/") or model in OFFLINE_MODELS:
        return None
    return f"there is no offline judge model {model!r}; the offline judge models are: {', '.join(OFFLINE_MODELS)}"


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
