"""A day's size before anything is paid for: records, rejects, judge calls, tokens, cost and time.

:func:`plan_day` reads and validates the day and plans its chunks as a run would, but in a
scratch folder (nothing is written under the output root, the day's claim is left alone), then
asks, chunk by chunk, the judge stage's own :func:`~evaluation.stages.chunk.prepare_chunk` which
(record, judge) pairs need a call: sampled-out records, judges that do not apply, the rows the
judge stage settles without a call, replies the day's ledger already holds and prompts repeated
within a chunk are not calls. No judge is called. :func:`size_chunks` does the counting for
chunks a run has already staged (the daily DAG's ``dry_run``).

The figures and what they rest on:

* **calls** — exactly the calls ``python -m evaluation run`` makes for the same day, options and
  ledger, when every call succeeds (with ``budget_usd`` the calls the budget is expected to allow
  are given too, at the batch price in batch mode). The DAG may make a few more: chunks judged at
  once do not see each other's replies, so a prompt repeated across a chunk boundary can be called
  in both.
* **input tokens** — litellm's token counter for the judge model on up to
  :data:`TOKEN_SAMPLE` rendered prompts per judge, scaled to all of that judge's prompts by their
  characters. Checked against a real run of a generated day within :data:`TOKEN_MARGIN`.
* **output tokens** — :data:`~evaluation.calling.cost.TYPICAL_REPLY_TOKENS` per call of each judge (an
  assumption: a reply's length is the judge model's choice).
* **cost** — those tokens at litellm's price map for the model, online and at batch prices (none
  when the provider has no batch API; zero for a model without a price, such as the offline judge).
* **time** — the slowest of three bounds on the calls spread over the chunks judged at once
  (``pool_slots``, the ``llm_judge`` pool's slots in the DAG; one for ``python -m evaluation
  run``): ``concurrency`` calls in flight per chunk at ``latency_s`` a call, ``judge_rpm`` and
  ``judge_tpm`` per chunk. In batch mode the provider's batch window (24 h) bounds it instead.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from evaluation import storage
from evaluation.calling import offline
from evaluation.calling.client import count_tokens, price_per_token
from evaluation.calling.cost import reply_tokens, tokens_cost
from evaluation.contract.config import RunConfig
from evaluation.stages._run import ChunkPlan, RunFailed, StageResult, Stores, read_manifest, where
from evaluation.stages.cascade.estimate import LevelSize, size_cascade
from evaluation.stages.chunk import prepare_chunk
from evaluation.stages.ingest import ingest_and_validate
from evaluation.stages.plan import batch_cost, plan_chunks

logger = logging.getLogger(__name__)

#: Prompts per judge whose tokens are counted by the judge model's tokenizer.
TOKEN_SAMPLE = 400
#: How close the input-token estimate comes to a real run's usage (tested on a generated day).
TOKEN_MARGIN = 0.15
#: Seconds a judge call is assumed to take when the caller gives none (a hosted model's JSON reply).
DEFAULT_LATENCY_S = 2.0


class JudgeSize(StageResult):
    """One judge's share of the day."""

    judge: str
    pairs: int = Field(description="(valid record, judge) pairs: the judge's rows in `evaluations`.")
    calls: int = Field(description="Calls a run makes (online, no budget stop).")
    no_call: dict[str, int] = Field(description="Pairs settled without a call, by why: sampled_out, "
                                    "not_applicable, a rule such as empty_answer, cached (the ledger "
                                    "holds the reply), repeated (the same prompt is called once).")
    input_tokens: int = Field(description="Estimated prompt tokens of the calls.")
    output_tokens: int = Field(description="Estimated completion tokens of the calls.")


class DaySize(StageResult):
    """What a day will take: ``python -m evaluation plan`` and the daily DAG's ``dry_run``."""

    dt: str
    judge_model: str
    records: int = Field(description="Input records.")
    valid: int
    rejected: int
    sampled: int = Field(description="Valid records the run judges (after sampling).")
    chunks: int
    judges: list[JudgeSize]
    calls: int
    calls_within_budget: int | None = Field(description="Calls ``budget_usd`` is expected to allow, at the batch "
                                            "price in batch mode (None: no budget).")
    input_tokens: int
    output_tokens: int
    token_method: str = Field(description="How the input tokens were estimated.")
    cost_usd: float = Field(description="At the model's online prices (litellm's price map).")
    batch_cost_usd: float | None = Field(description="At its batch prices; None when its provider has no batch API.")
    priced: bool = Field(description="Whether litellm's price map has a price for the model.")
    concurrency: int
    pool_slots: int
    latency_s: float
    judge_rpm: float | None
    judge_tpm: float | None
    seconds: float = Field(description="Estimated judging time of the day.")
    bound: str = Field(description="What sets that time: latency, judge_rpm, judge_tpm or batch window.")
    cascade: list[LevelSize] | None = Field(
        default=None, description="With a cascade, each level (the judge model last); the figures above are then "
        "the judge model alone's, for every row.")
    cascade_cost_usd: float | None = Field(default=None, description="The cascade's expected cost (None: unknown).")


def plan_day(cfg: RunConfig, stores: Stores, *, pool_slots: int = 1, latency_s: float | None = None) -> DaySize:
    """Read, validate and plan the day in a scratch folder, and size it (see the module
    docstring). Raises :class:`RunFailed` when the day breaks a table rule, as its run would."""

    unknown = offline.unknown_model(cfg.judge_model)
    if unknown is not None:
        raise RunFailed(f"{where(cfg)}: judge model {cfg.judge_model!r} cannot be used: {unknown}")
    with tempfile.TemporaryDirectory(prefix="evaluation-plan-") as folder:
        scratch = Stores(raw=stores.raw, out=storage.LocalStore(Path(folder)))
        try:
            ingest_and_validate(cfg, scratch)
        except RunFailed as exc:
            raise RunFailed(f"{exc} (a plan: nothing was written under {stores.out.root})") from exc
        chunks = plan_chunks(cfg, scratch)
        return size_chunks(cfg, scratch, chunks, ledger_store=stores.out, pool_slots=pool_slots, latency_s=latency_s)


def size_chunks(cfg: RunConfig, stores: Stores, chunks: list[ChunkPlan], *, ledger_store: storage.Store | None = None,
                pool_slots: int = 1, latency_s: float | None = None) -> DaySize:
    """Size the staged ``chunks`` of a planned run: each chunk's calls as the judge stage decides
    them (:func:`prepare_chunk`, the ledger of ``ledger_store``, default the output store's), their
    tokens, cost and judging time, and with a cascade each level's."""

    manifest = read_manifest(cfg, stores)
    if manifest.ingest is None or manifest.plan is None:
        raise RunFailed(f"{where(cfg)}: nothing ingested and planned to size")
    counts = manifest.ingest.counts
    judges = _judge_sizes(cfg, count_calls(cfg, stores, chunks, ledger_store=ledger_store), counts.valid)
    total_calls = sum(j.calls for j in judges)
    input_tokens = sum(j.input_tokens for j in judges)
    output_tokens = sum(j.output_tokens for j in judges)
    prices = price_per_token(cfg.judge_model)
    cost = tokens_cost(input_tokens, output_tokens, prices)
    at_batch_price = batch_cost(cfg.judge_model, input_tokens, output_tokens)
    within_budget = calls_within_budget(cfg, total_calls, at_batch_price if cfg.batch and at_batch_price is not None
                                        else cost)  # what the budget pays
    latency = (0.0 if cfg.judge_model.startswith("offline/") else DEFAULT_LATENCY_S) if latency_s is None else latency_s
    seconds, bound = judging_time(cfg, calls=within_budget if within_budget is not None else total_calls,
                                  tokens=input_tokens + output_tokens, parallel=min(max(1, pool_slots), max(1, len(chunks))),
                                  latency_s=latency)
    cascade = (size_cascade(cfg, stores, chunks, token_sample=TOKEN_SAMPLE, ledger_store=ledger_store)
               if cfg.cascade else None)
    return DaySize(
        cascade=cascade,
        cascade_cost_usd=(round(sum(level.cost_usd or 0.0 for level in cascade), 6)
                          if cascade and all(level.cost_usd is not None for level in cascade) else None),
        dt=cfg.date.isoformat(), judge_model=cfg.judge_model,
        records=counts.input, valid=counts.valid, rejected=counts.rejected, sampled=manifest.plan.sampled,
        chunks=len(chunks), judges=judges, calls=total_calls, calls_within_budget=within_budget,
        input_tokens=input_tokens, output_tokens=output_tokens,
        token_method=(f"litellm token_counter for {cfg.judge_model} on up to {TOKEN_SAMPLE} prompts per judge, "
                      "scaled by characters to all prompts"),
        cost_usd=round(cost, 6), batch_cost_usd=at_batch_price, priced=prices != (0.0, 0.0),
        concurrency=cfg.concurrency, pool_slots=max(1, pool_slots), latency_s=latency,
        judge_rpm=cfg.judge_rpm, judge_tpm=cfg.judge_tpm, seconds=round(seconds, 1), bound=bound,
    )


@dataclass
class CallCounts:
    """Per judge, over a day's chunks: the pairs settled without a call (by why), the calls, their
    prompts' characters, and the characters and tokens of the prompts whose tokens were counted."""

    no_call: dict[str, Counter[str]]
    calls: Counter[str] = field(default_factory=Counter)
    chars: Counter[str] = field(default_factory=Counter)
    sampled_chars: Counter[str] = field(default_factory=Counter)
    sampled_tokens: Counter[str] = field(default_factory=Counter)
    sampled_prompts: Counter[str] = field(default_factory=Counter)


def count_calls(cfg: RunConfig, stores: Stores, chunks: list[ChunkPlan], *,
                ledger_store: storage.Store | None = None) -> CallCounts:
    """Each chunk's calls as the judge stage decides them, and why the other pairs need none; the
    tokens of up to :data:`TOKEN_SAMPLE` prompts per judge counted by the judge model's tokenizer."""
    found = CallCounts(no_call={judge: Counter() for judge in cfg.judges})
    # A prompt of the chunk before (the same question and answer across a chunk boundary: chunks
    # are in content-key order) is in the ledger by the time the next chunk is judged in one
    # process; those before it cannot hold the same prompt.
    before: set[str] = set()
    for chunk in chunks:
        prepared = prepare_chunk(cfg, stores, chunk.index, ledger_store=ledger_store)
        for row in prepared.rows:
            clamps = row.get("clamps_applied")
            why = row.get("reason") or (clamps[0] if isinstance(clamps, list) and clamps else "no_call")
            found.no_call[row["judge"]][str(why)] += 1
        to_call = {id(item) for item in prepared.to_call}
        for item in (item for item in prepared.pending if id(item) not in to_call):
            found.no_call[item.judge]["cached" if item.request_hash in prepared.cached else "repeated"] += 1
        for item in prepared.to_call:
            judge, prompt = item.judge, item.prompt
            if item.request_hash in before:
                found.no_call[judge]["repeated"] += 1
                continue
            size = len(prompt.system) + len(prompt.user)
            found.calls[judge] += 1
            found.chars[judge] += size
            if found.sampled_prompts[judge] < TOKEN_SAMPLE:
                found.sampled_prompts[judge] += 1
                found.sampled_chars[judge] += size
                found.sampled_tokens[judge] += count_tokens(cfg.judge_model, prompt)
        before = {item.request_hash for item in prepared.pending}
    return found


def _judge_sizes(cfg: RunConfig, counts: CallCounts, pairs: int) -> list[JudgeSize]:
    """Each judge's share: its calls, why its other pairs need none, and its tokens (the input
    scaled from the counted prompts by characters; the output at the judge's typical reply)."""
    judges = []
    for judge in cfg.judges:
        sampled = counts.sampled_chars[judge]
        ratio = counts.sampled_tokens[judge] / sampled if sampled else 0.0
        judges.append(JudgeSize(
            judge=judge,
            pairs=pairs,
            calls=counts.calls[judge],
            no_call={k: v for k, v in sorted(counts.no_call[judge].items())},
            input_tokens=round(counts.chars[judge] * ratio),
            output_tokens=counts.calls[judge] * reply_tokens(judge),
        ))
    return judges


def calls_within_budget(cfg: RunConfig, calls: int, paid: float) -> int | None:
    """The calls ``budget_usd`` is expected to allow of ``calls`` costing ``paid`` (None: no budget)."""
    if cfg.budget_usd is None:
        return None
    return calls if paid <= cfg.budget_usd else math.floor(calls * cfg.budget_usd / paid)


#: The provider's batch window: results within 24 hours (OpenAI's, Anthropic's).
BATCH_WINDOW_S = 24 * 3600.0


def judging_time(cfg: RunConfig, *, calls: int, tokens: int, parallel: int, latency_s: float) -> tuple[float, str]:
    """Seconds to make ``calls`` (``tokens`` in all) over ``parallel`` chunks at once, and what
    bounds it: ``concurrency`` calls in flight per chunk at ``latency_s`` each, and ``judge_rpm``
    / ``judge_tpm``, the provider's limits for the whole deployment (shared by every chunk, so
    more chunks do not raise them); the batch window in batch mode."""
    if cfg.batch:
        return (BATCH_WINDOW_S if calls else 0.0), "batch window"
    bounds = {"latency": calls * latency_s / (cfg.concurrency * parallel)}
    if cfg.judge_rpm:
        bounds["judge_rpm"] = calls / cfg.judge_rpm * 60.0
    if cfg.judge_tpm:
        bounds["judge_tpm"] = tokens / cfg.judge_tpm * 60.0
    bound = max(bounds, key=lambda name: bounds[name])
    return bounds[bound], bound


def duration_text(seconds: float) -> str:
    """Seconds as a person reads a duration: s, min or h."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def size_text(size: DaySize) -> str:
    """The plan as lines for a person."""
    lines = [
        f"{size.dt}: {size.records:,} records, {size.valid:,} valid, {size.rejected:,} rejected; "
        f"{size.sampled:,} to judge in {size.chunks} chunks; judge model {size.judge_model}",
        f"judge calls: {size.calls:,}" + (f" ({size.calls_within_budget:,} within budget_usd)"
                                         if size.calls_within_budget is not None else ""),
    ]
    for judge in size.judges:
        skipped = ", ".join(f"{n:,} {why}" for why, n in judge.no_call.items() if n)
        lines.append(f"  {judge.judge:<7} {judge.calls:>10,} calls of {judge.pairs:,} pairs"
                     + (f" (no call: {skipped})" if skipped else "")
                     + f"; ~{judge.input_tokens:,} input + {judge.output_tokens:,} output tokens")
    lines.append(f"tokens: ~{size.input_tokens:,} input ({size.token_method}), ~{size.output_tokens:,} output "
                 f"(typical reply lengths per judge)")
    if size.priced:
        batch = (f"${size.batch_cost_usd:,.2f} with the batch API" if size.batch_cost_usd is not None
                 else "no batch API for this provider")
        lines.append(f"cost: ${size.cost_usd:,.2f} online, {batch} (litellm's price map)")
    else:
        lines.append(f"cost: $0.00 (litellm's price map has no price for {size.judge_model})")
    if size.cascade:
        lines.append(f"cascade (the figures above are {size.judge_model} alone, judging every row):")
        for number, level in enumerate(size.cascade):
            sent_on = "" if level.share_sent_on is None else f", sends on ~{level.share_sent_on:.0%} (its calibration)"
            if level.calls is None:
                lines.append(f"  level {number} {level.judge_model}: calls unknown before a run ({level.calls_known:,} "
                             "known; a band given by hand has no measured share sent on)")
                continue
            cost = f"${level.cost_usd:,.2f}" if level.cost_usd is not None else "unknown cost"
            lines.append(f"  level {number} {level.judge_model}: ~{level.calls:,} calls ({level.calls_known:,} certain)"
                         f"{sent_on}; {cost}")
        if size.cascade_cost_usd is not None and size.priced:
            saved = 1 - size.cascade_cost_usd / size.cost_usd if size.cost_usd else 0.0
            lines.append(f"  cascade: ~${size.cascade_cost_usd:,.2f} against ${size.cost_usd:,.2f} for "
                         f"{size.judge_model} alone ({saved:.0%} saved)")
    limits = ", ".join(f"{name} {value:g}" for name, value in (("judge_rpm", size.judge_rpm),
                                                              ("judge_tpm", size.judge_tpm)) if value)
    lines.append(f"time: ~{duration_text(size.seconds)} of judging, bound by {size.bound} (concurrency "
                 f"{size.concurrency}, {size.pool_slots} pool slot{'s' if size.pool_slots != 1 else ''}, "
                 f"{size.latency_s:g} s a call" + (f", {limits} per chunk" if limits else "") + ")")
    return "\n".join(lines)
