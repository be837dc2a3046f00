"""The escalation step of a cascade: which of a level's rows go to the next level
(:func:`sent_on`), and what the rows that stay land as (:func:`escalate`: the
deciding level's row, with the pair's spending over its levels, :class:`PairSpending`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from evaluation.contract.config import JudgeName, Thresholds
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import score_table
from evaluation.judges.row import ParsedRow
from evaluation.stages.cascade.bands import Bands

#: A (record id, judge) pair: what a cascade decides, level by level.
Pair = tuple[str, JudgeName]


def sent_on(rows: list[ParsedRow], bands: Bands, thresholds: Thresholds) -> list[bool]:
    """For each of a level's parsed ``rows``, whether it goes to the next level: scored at
    ``thresholds``, it is not ``ok``, has no score, or has a score inside its judge's band; a row
    stopped by the budget is not sent on: nothing more may be spent."""
    if not rows:
        return []
    inside = pl.lit(False)
    for judge, (low, high) in bands.items():
        inside = inside | ((pl.col("judge") == judge) & pl.col("score").is_between(low, high, closed="both"))
    rule = (pl.col("judge_status") != "ok") | pl.col("score").is_null() | inside
    scored = score_table(pl.DataFrame(rows, schema=PARSED_SCHEMA), thresholds)
    return [go and row["reason"] != "budget_exhausted"
            for go, row in zip(scored.select(rule.fill_null(True)).to_series().to_list(), rows, strict=True)]


@dataclass
class PairSpending:
    """A pair's spending summed over the levels it was sent to, and its calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 0
    calls: int = 0
    cached: bool = True  #: every level's reply came from the ledger

    def add(self, row: ParsedRow) -> bool:
        """Add one level's row; whether a call was made for it (a reply, or a call that failed)."""
        called = row.get("judged_at") is not None or row["judge_status"] == "call_error"
        self.input_tokens += row.get("input_tokens", 0)
        self.output_tokens += row.get("output_tokens", 0)
        self.cost_usd += row.get("cost_usd", 0.0)
        self.latency_ms += row.get("latency_ms", 0.0)
        self.attempts += row.get("attempts", 0)
        self.calls += 1 if called else 0
        self.cached = self.cached and bool(row.get("cached"))
        return called

    def onto(self, row: ParsedRow, decided_by: str | None) -> None:
        """Make ``row`` the pair's landed row: the sums, the calls and the model that decided."""
        row["input_tokens"], row["output_tokens"] = self.input_tokens, self.output_tokens
        row["cost_usd"], row["latency_ms"], row["attempts"] = self.cost_usd, round(self.latency_ms, 1), self.attempts
        row["cached"], row["cascade_calls"], row["decided_by"] = self.cached and self.calls > 0, self.calls, decided_by


@dataclass
class Decisions:
    """What a chunk's levels decided so far: the landed rows, each pair's spending over the levels
    it reached, and how many rows each judge model decided."""

    rows: list[ParsedRow] = field(default_factory=list)
    spending: dict[Pair, PairSpending] = field(default_factory=dict)
    decided: Counter[str] = field(default_factory=Counter)


def escalate(rows: list[ParsedRow], bands: Bands | None, thresholds: Thresholds, judge_model: str,
             decisions: Decisions) -> set[Pair]:
    """One level's escalation step: every row of the level adds to its pair's spending; a row that
    stays (:func:`sent_on`; at the last level, ``bands`` None, every row) lands in ``decisions`` as
    the pair's row, decided by ``judge_model`` when a call was made for it at some level. Returns
    the pairs sent to the next level."""
    onward = [False] * len(rows) if bands is None else sent_on(rows, bands, thresholds)
    next_pairs: set[Pair] = set()
    for row, go in zip(rows, onward, strict=True):
        pair = (row["record_id"], row["judge"])
        total = decisions.spending.setdefault(pair, PairSpending())
        called = total.add(row)
        if go:
            next_pairs.add(pair)
            continue
        total.onto(row, judge_model if called else None)
        if called:
            decisions.decided[judge_model] += 1
        decisions.rows.append(row)
    return next_pairs
