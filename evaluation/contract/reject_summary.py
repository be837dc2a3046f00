"""Why a day's records were rejected, in a few lines: counts by reason with a few examples each
(record id, file:line). A run that fails on its rejects says this where the failure is reported
(the run's error, its ``runs`` row, the failure notification); the rejects themselves stay
queryable (``sql``'s ``failed_rejects``)."""

from __future__ import annotations

import json

import polars as pl
from pydantic import BaseModel, Field

#: Reasons listed, most frequent first; examples per reason.
TOP_REASONS = 8
EXAMPLES = 3


class ReasonCount(BaseModel):
    """One kind of reject and how often it occurred."""

    reason: str = Field(description="The reason, without what differs from record to record (positions, values).")
    count: int = Field(description="Rejected records giving this reason.")
    examples: list[str] = Field(description="A few of them: `<record id> at <file>:<line>`.")


def summarise_rejects(rejects: pl.LazyFrame | pl.DataFrame) -> list[ReasonCount]:
    """The :data:`TOP_REASONS` commonest reasons among ``rejects`` (the ``rejects`` table's columns),
    each with its count and :data:`EXAMPLES` examples in input order."""
    example = (pl.coalesce(pl.col("record_id"), pl.lit("(no id)")) + " at "
               + pl.col("source_uri").str.split("/").list.last() + ":" + pl.col("line_no").cast(pl.String))
    # A reason with its per-record details dropped, so that like rejects count together:
    # ``(UTC 2026-11-22T12:00:00Z)`` tails and ``column 39`` positions.
    kind = (pl.col("reasons").str.replace(r"\s*\([^)]*\)\s*$", "")
            .str.replace_all(r"\b(line|column|char|item|position) \d+", "$1 N"))
    frame = (
        rejects.lazy()
        .select(pl.col("reasons"), example.alias("example"))
        .explode("reasons")
        .drop_nulls("reasons")
        .with_columns(kind.alias("reason"))
        .group_by("reason", maintain_order=True)
        .agg(pl.len().alias("count"), pl.col("example").head(EXAMPLES).alias("examples"))
        .sort("count", "reason", descending=[True, False])
        .head(TOP_REASONS)
        .collect()
    )
    return [ReasonCount.model_validate(row) for row in frame.iter_rows(named=True)]


def reason_lines(reasons: list[ReasonCount]) -> str:
    """``reason (count: e.g. a, b); ...`` on one line."""
    return "; ".join(f"{r.reason} ({r.count}: e.g. {', '.join(r.examples)})" for r in reasons)


def as_json(reasons: list[ReasonCount]) -> str:
    """The summary as the ``runs`` table's ``reject_reasons`` JSON text."""
    return json.dumps([r.model_dump() for r in reasons])
