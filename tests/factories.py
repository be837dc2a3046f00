"""Builders shared by the tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from evaluation.contract import InputRecord


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
