"""``evaluations.question_key``: one key per question, whatever its case, spacing, edge punctuation
or Unicode form; stable across processes and releases (a plain SHA-256 of the normalised text)."""

from __future__ import annotations

import hashlib

import pytest

from evaluation.contract.config import question_key


@pytest.mark.parametrize("variant", [
    "What is the capital of France?",
    "what is the capital of france",
    "  What  is the\tcapital of\nFrance ?! ",
    "«What is the capital of France»",
    "ＷＨＡＴ is the capital of France?",  # full-width letters: NFKC makes them ASCII
])
def test_variants_of_a_question_share_its_key(variant: str) -> None:
    expected = hashlib.sha256(b"what is the capital of france").hexdigest()[:16]
    assert question_key(variant) == expected


@pytest.mark.parametrize(("one", "other"), [
    ("What is the capital of France?", "What is the capital of Spain?"),
    ("Is C# typed?", "Is C typed?"),  # inner punctuation is kept
    ("2+2?", "2-2?"),
])
def test_different_questions_get_different_keys(one: str, other: str) -> None:
    assert question_key(one) != question_key(other)
