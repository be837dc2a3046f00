"""Judge models of known accuracy on a labelled set, for the local OpenAI-compatible server
(:class:`~evaluation.testing.openai_server.OpenAIServer`): what tests and the bench judge a cascade
with.

:class:`LabelledJudges` is a responder. It knows the labels of a golden set (each record's binary
label: faithful, else an expected verdict other than ``fail``) and, per model name, an accuracy
``p``. It answers a judge prompt about one of the set's records as a model whose ``fail`` verdict
agrees with the label with probability ``p``, and whose score says how sure it is (a probit
model): a latent ``z = ±d + N(0, 1)``, ``+d`` for a faithful record, with ``d`` chosen so that
``P(z ≥ 0 | faithful) = P(z < 0 | not faithful) = p``, is mapped monotonically onto [0, 1] with
``z = 0`` at ``cut`` (the borderline threshold, default 0.6): a score below ``cut`` is a ``fail``.
Its mistakes are therefore mostly close to the cut, as a calibrated model's are, which is what an
uncertainty band can catch. The noise is drawn from a hash of (seed, model, prompt): the same
request gets the same reply, every time and in any order.

The reply is the offline judge's reply to the same prompt (each judge's exact output contract) with
every metric it gives set to that score, so each judge's score is that value (masis's citation caps
aside). A prompt about a record the set does not hold, or a model without an accuracy, fails the
request (a 500 naming it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Any

import numpy as np

from evaluation.calling import offline
from evaluation.judges import read_fenced_blocks
from evaluation.testing.replies import prompt_text

#: Metrics of the judges' replies set to the model's score (null ones stay null).
SCORED_FIELDS = ("faithfulness", "context_relevance", "answer_relevance", "semantic_similarity", "relevance",
                 "completeness", "reasoning_quality", "score")
_NORMAL = NormalDist()
_CDF = np.vectorize(_NORMAL.cdf, otypes=[np.float64])


def scores_of(latent: np.ndarray, cut: float) -> np.ndarray:
    """The scores (2 decimals, as the judges' prompts ask) of a judge's latents: one monotone map onto
    [0, 1] with latent 0 at ``cut``, a score below ``cut`` exactly when its latent is below 0."""
    tail = _CDF(latent)
    below = np.minimum(np.floor(cut * 2 * tail * 100) / 100, round(cut - 0.01, 2))
    return np.where(latent < 0, below, np.round(cut + (1 - cut) * (2 * tail - 1), 2))


def _key(question: str, answer: str) -> tuple[str, str]:
    """A record's question and answer, white space collapsed (as ingest may leave it)."""
    return " ".join(question.split()), " ".join(answer.split())


def record_label(record: Mapping[str, Any]) -> bool | None:
    """A golden record's binary label: ``faithful``, else its expected verdict is not ``fail``."""
    labels = record.get("labels") or {}
    if labels.get("faithful") is not None:
        return bool(labels["faithful"])
    if labels.get("verdict") is not None:
        return labels["verdict"] != "fail"
    return None


def _model_name(model: str) -> str:
    """``openai/gpt-4o`` and ``gpt-4o`` (what litellm sends) name the same model."""
    return model.rsplit("/", 1)[-1]


class LabelledJudges:
    """The responder (see the module docstring). ``accuracy``: per model name (with or without its
    provider, ``openai/gpt-4o`` or ``gpt-4o``), the probability that its verdict agrees with the
    label; ``cut``: the score of ``z = 0`` (a score below it is a ``fail``)."""

    def __init__(self, labels: Mapping[tuple[str, str], bool], accuracy: Mapping[str, float], *, cut: float = 0.6,
                 seed: int = 0) -> None:
        if not 0.0 < cut < 1.0:
            raise ValueError(f"cut {cut} is not in (0, 1)")
        if any(not 0.5 <= p < 1.0 for p in accuracy.values()):
            raise ValueError(f"accuracies must be in [0.5, 1), got {dict(accuracy)}")
        self.labels = {_key(*key): good for key, good in labels.items()}
        self.separation = {_model_name(m): _NORMAL.inv_cdf(p) for m, p in accuracy.items()}
        self.cut = cut
        self.seed = seed

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], accuracy: Mapping[str, float], *, cut: float = 0.6,
                     seed: int = 0) -> LabelledJudges:
        """From golden records (``question``, ``answer`` and ``labels``); unlabelled ones left out."""
        labels = {(r["question"], r["answer"]): label for r in records if (label := record_label(r)) is not None}
        return cls(labels, accuracy, cut=cut, seed=seed)

    def score(self, model: str, good: bool, token: str) -> float:
        """The score ``model`` gives a record labelled ``good`` for the request ``token`` (2 decimals, as
        the judges' prompts ask; below :attr:`cut` exactly when its latent is below 0)."""
        d = self.separation[_model_name(model)]
        digest = hashlib.blake2b(f"{self.seed}\x1f{_model_name(model)}\x1f{token}".encode(), digest_size=8).digest()
        u = (int.from_bytes(digest, "big") + 0.5) / 2.0**64
        z = (d if good else -d) + _NORMAL.inv_cdf(u)
        return float(scores_of(np.array([z]), self.cut)[0])

    def __call__(self, body: dict[str, Any]) -> str:
        model = str(body.get("model") or "")
        if _model_name(model) not in self.separation:
            raise KeyError(f"LabelledJudges: no accuracy for model {model!r}")
        text = prompt_text(body, sep="\n")
        blocks = read_fenced_blocks(text)
        question, answer = blocks.get("question", ""), blocks.get("answer", blocks.get("candidate_answer", ""))
        good = self.labels.get(_key(question, answer))
        if good is None:
            raise KeyError(f"LabelledJudges: no labelled record with question {question[:60]!r}")
        value = self.score(model, good, text)
        reply = json.loads(offline.respond(body.get("messages") or []))
        for name in SCORED_FIELDS:
            if reply.get(name) is not None:
                reply[name] = value
        return json.dumps(reply, ensure_ascii=False)
