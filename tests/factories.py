"""Builders shared by the tests."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from evaluation.contract.config import InputRecord


def make_record(**overrides: Any) -> InputRecord:
    """A valid, grounded and cited record; keyword arguments replace its fields."""
    data: dict[str, Any] = {
        "record_id": "rec-1",
        "conversation_id": "conv-1",
        "timestamp": datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        "model": "model-a",
        "question": "At what temperature does water boil at sea level?",
        "answer": "Water boils at 100 degrees Celsius at sea level [ctx-1].",
        "contexts": [{"id": "ctx-1", "text": "At sea level, water boils at 100 degrees Celsius."}],
        "reference": "100 degrees Celsius.",
    }
    data.update(overrides)
    return InputRecord(**data)


def raw_record(*, keep_none: bool = False, **fields: Any) -> dict[str, Any]:
    """A valid raw log record (JSON-ready) of 2026-11-25; keyword arguments replace fields.

    ``None`` as a value removes the field, or with ``keep_none`` writes it as a JSON null."""
    base: dict[str, Any] = {
        "record_id": "r-1",
        "conversation_id": "c-1",
        "timestamp": "2026-11-25T10:00:00Z",
        "model": "assistant-v1",
        "question": "What is the capital of France?",
        "answer": "Paris [doc-1].",
        "contexts": [{"id": "doc-1", "text": "Paris is the capital of France.", "source": "wiki", "score": 0.9}],
        "reference": "Paris",
    }
    base.update(fields)
    return base if keep_none else {k: v for k, v in base.items() if v is not None}


def jsonl(*lines: dict[str, Any] | str) -> bytes:
    """JSON Lines bytes: dicts dumped as JSON, strings written as they are."""
    return "".join((json.dumps(line) if isinstance(line, dict) else line) + "\n" for line in lines).encode()


class FakeClock:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.epoch = time.time()
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        """The seconds passed (a wait's :class:`~evaluation.stages.wait.Clock`)."""
        return self.now

    def time(self) -> float:
        """The epoch time: when the clock was made, plus the seconds passed."""
        return self.epoch + self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
