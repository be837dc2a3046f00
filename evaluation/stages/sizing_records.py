"""The size of a day of N records before there is one (``python -m evaluation plan --records N``),
computed from the code's own figures and the run's options, as docs/deploy.md's sizing tables are.

What each figure rests on:

* **calls** — every record judged by every selected judge (each judge applies, no answer empty,
  no sample, no reply in the ledger: the most a day of N records asks for).
* **input tokens** — per judge, its prompt's own text (the judge's template rendered around a
  record of one-character texts, counted by litellm's tokenizer for the judge model) plus
  ``record_tokens``, the tokens of a record's question, answer, contexts and reference (an
  assumption about the logs: ``plan --date`` measures a real day).
* **output tokens** — :data:`~evaluation.calling.cost.TYPICAL_REPLY_TOKENS` per call of each judge,
  the figure ``plan --date`` and a batch's budget use.
* **chunks, batches** — as :func:`~evaluation.stages.plan.chunk_layout` cuts the day and
  :func:`~evaluation.calling.batch.split_parts` packs a chunk's batch within the provider's limits (a line
  is the judge's request line, its record's text at four bytes a token).
* **time** — :func:`~evaluation.stages.sizing.judging_time` at the run's ``concurrency``,
  ``pool_slots`` chunks at once, ``latency_s`` a call and ``judge_rpm`` / ``judge_tpm``; the rates
  and pool slots needed to finish in 24 h and in 8 h (TPM counts input and output tokens, as the
  judge's budget does).
* **cost** — litellm's price map for the judge model, online and at batch prices.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass

from evaluation.calling.batch import BATCH_PROVIDERS, limits_for, provider_of, request_line, split_parts
from evaluation.calling.client import count_tokens, price_per_token
from evaluation.calling.cost import TYPICAL_REPLY_TOKENS, tokens_cost
from evaluation.contract.config import Context, InputRecord, JudgeName, RunConfig
from evaluation.judges import RenderedPrompt, route
from evaluation.stages.plan import batch_cost, chunk_layout
from evaluation.stages.sizing import DEFAULT_LATENCY_S, duration_text, judging_time

#: Tokens of a record's own texts (question, answer, contexts, reference) a day of N records is
#: sized with when none is given: a RAG turn with a few retrieved passages.
RECORD_TOKENS = 800
#: Bytes of a token in a batch line's record text (the estimate the rate budget makes too).
BYTES_PER_TOKEN = 4
#: The hours within which the sizing says what finishing a day takes.
FINISH_IN_H = (24, 8)

_BLANK = InputRecord(record_id="r", timestamp=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), model="m", question="?",
                     answer=".", contexts=[Context(id="ctx-1", text=".")], reference=".", expected_outcome=".",
                     evaluation_goal=".")


@dataclass(frozen=True)
class JudgeCall:
    """One judge's call for a record: tokens in and out, and bytes of its batch line."""

    judge: JudgeName
    input_tokens: int
    output_tokens: int
    line_bytes: int


def judge_call(cfg: RunConfig, judge: JudgeName, record_tokens: int) -> JudgeCall:
    """The call ``judge`` makes for a record of ``record_tokens`` tokens (its prompt rendered
    around one-character texts, plus the record's tokens)."""
    prompt = route(judge, _BLANK)
    if not isinstance(prompt, RenderedPrompt):
        raise ValueError(f"judge {judge} makes no call for a record with every field")
    line = request_line(cfg.judge_model, prompt, "r-0000000000", temperature=cfg.temperature, json_mode=True)
    return JudgeCall(judge=judge, input_tokens=count_tokens(cfg.judge_model, prompt) + record_tokens,
                     output_tokens=TYPICAL_REPLY_TOKENS[judge],
                     line_bytes=len(json.dumps(line)) + 1 + BYTES_PER_TOKEN * record_tokens)


def _batches(cfg: RunConfig, calls: list[JudgeCall], chunk_records: int) -> list[int]:
    """Requests of each batch a chunk of ``chunk_records`` records is sent as."""
    sizes = [call.line_bytes for _ in range(chunk_records) for call in calls]
    parts, too_large = split_parts(sizes, limits_for(cfg, provider_of(cfg.judge_model)))
    if too_large:
        raise ValueError(f"a request of {max(sizes):,} bytes is larger than a batch may be")
    return [len(part) for part in parts]


def _batch_line(cfg: RunConfig, calls: list[JudgeCall], records: int, chunk_size: int, chunks: int) -> str:
    if provider_of(cfg.judge_model) not in BATCH_PROVIDERS:
        return f"none: {cfg.judge_model}'s provider has no batch API"
    full = _batches(cfg, calls, chunk_size)
    last_records = records - chunk_size * (chunks - 1)
    last = _batches(cfg, calls, last_records) if last_records != chunk_size else full
    count = len(full) * (chunks - 1) + len(last)
    sizes = sorted({*full, *last}, reverse=True)
    limits = limits_for(cfg, provider_of(cfg.judge_model))
    return (f"{count:,} (one a chunk, split within {limits.max_requests:,} requests and "
            f"{limits.max_bytes / 1e6:g} MB): {', '.join(f'{n:,}' for n in sizes)} requests each")


def _finish_rows(cfg: RunConfig, calls: int, tokens: int, latency_s: float) -> list[tuple[str, str]]:
    rows = []
    for hours in FINISH_IN_H:
        per_s = calls / (hours * 3600)
        slots = math.ceil(per_s * latency_s / cfg.concurrency)
        rows.append((f"to finish in {hours} h",
                     f"{calls / (hours * 60):,.0f} RPM, {tokens / (hours * 60) / 1e6:,.1f}M TPM (input + output); "
                     f"{per_s * latency_s:,.0f} calls in flight = {slots:,} pool slots at concurrency {cfg.concurrency}"))
    return rows


def records_table(cfg: RunConfig, records: int, *, record_tokens: int = RECORD_TOKENS, pool_slots: int = 1,
                  latency_s: float | None = None) -> str:
    """The sizing of a day of ``records`` records as a Markdown table (see the module)."""
    calls = [judge_call(cfg, judge, record_tokens) for judge in cfg.judges]
    total_calls = records * len(calls)
    input_tokens = records * sum(c.input_tokens for c in calls)
    output_tokens = records * sum(c.output_tokens for c in calls)
    chunk_size, chunks = chunk_layout(cfg, records)
    latency = (0.0 if cfg.judge_model.startswith("offline/") else DEFAULT_LATENCY_S) if latency_s is None else latency_s
    parallel = min(max(1, pool_slots), max(1, chunks))
    seconds, bound = judging_time(cfg.model_copy(update={"batch": False}), calls=total_calls,
                                  tokens=input_tokens + output_tokens, parallel=parallel, latency_s=latency)
    online = tokens_cost(input_tokens, output_tokens, price_per_token(cfg.judge_model))
    batch = batch_cost(cfg.judge_model, input_tokens, output_tokens)
    limits = ", ".join(f"{name} {value:,.0f}" for name, value in (("judge_rpm", cfg.judge_rpm),
                                                                  ("judge_tpm", cfg.judge_tpm)) if value)
    each = ", ".join(f"{c.judge} {c.input_tokens:,} + {c.output_tokens:,}" for c in calls)
    rows = [
        ("records", f"{records:,}; judges {', '.join(cfg.judges)}; judge model {cfg.judge_model}"),
        ("calls", f"{total_calls:,} (records × judges)"),
        ("tokens a call", f"{each} (input: the judge's prompt + {record_tokens:,} of the record; output: its "
                          "typical reply)"),
        ("input tokens", f"{input_tokens / 1e9:,.2f} B"),
        ("output tokens", f"{output_tokens / 1e9:,.2f} B"),
        ("chunks", f"{chunks:,} of up to {chunk_size:,} records"
                   + (f" (chunk_size {cfg.chunk_size:,} raised to stay within max_map_length {cfg.max_map_length:,})"
                      if chunk_size != cfg.chunk_size else "")),
        ("batches (batch mode)", _batch_line(cfg, calls, records, chunk_size, chunks)),
        ("judging time", f"{duration_text(seconds)}, bound by {bound} (concurrency {cfg.concurrency}, {parallel} pool "
                         f"slot{'s' if parallel != 1 else ''}, {latency:g} s a call"
                         + (f", {limits}" if limits else "") + ")"),
        *_finish_rows(cfg, total_calls, input_tokens + output_tokens, latency),
        ("cost online", f"${online:,.0f} (litellm's price map)"),
        ("cost in batch mode", "no batch API" if batch is None else f"${batch:,.0f}"),
    ]
    return "\n".join(["| figure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])
