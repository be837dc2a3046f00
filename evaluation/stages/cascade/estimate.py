"""Each level of a cascade in the plan (:func:`size_cascade`): the calls it is expected to make,
their tokens and cost, walked chunk by chunk through the same levels and escalation step as a run,
without a call."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pydantic import Field

from evaluation import storage
from evaluation.calling.client import call_parameters, count_tokens, price_per_token
from evaluation.calling.cost import mean_reply_tokens, tokens_cost
from evaluation.contract.config import RunConfig
from evaluation.stages._run import ChunkPlan, StageResult, Stores
from evaluation.stages.cascade.bands import Bands, level_bands, mean_share, shares_sent_on
from evaluation.stages.cascade.escalation import Pair, sent_on
from evaluation.stages.chunk import judged_rows, prepare_chunk


class LevelSize(StageResult):
    """One level of a cascade in the plan: the calls it is expected to make and their cost."""

    judge_model: str
    calls: int | None = Field(description="Calls expected (None: unknown, see ``calls_known``).")
    calls_known: int = Field(description="Of them, calls of rows whose path to this level the ledger already "
                             "decides (exact); the rest is estimated from the bands' calibration.")
    share_sent_on: float | None = Field(description="Share of the rows reaching the level it is expected to send on "
                                        "(its calibration's; None: a band given by hand, unknown before a run; "
                                        "the judge model sends on nothing).")
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None = Field(description="At the level's model's online prices; None when its calls are unknown.")


@dataclass
class _Walk:
    """Per level, over the chunks walked: the calls known exactly, those estimated (None:
    unknown), and the sampled prompts' tokens and count."""

    known: list[int]
    estimated: list[float | None]
    tokens: list[list[int]]


def size_cascade(cfg: RunConfig, stores: Stores, chunks: list[ChunkPlan], *, token_sample: int,
                 ledger_store: storage.Store | None = None) -> list[LevelSize]:
    """Each level's expected calls, tokens and cost. Level 0's calls are exact (every row that needs
    a call, less the replies the ledger holds). A row whose reply at a level is in the ledger takes
    a known path: its reply is scored and its band decides whether it reaches the next level (a
    re-run of a judged day is exact at every level: no call). The other rows reaching a level are
    sent on in the share its calibration measured (``share_sent_on``); without one (a band given
    by hand) the calls of the levels after it are unknown. Each level's input tokens a call are
    counted on up to ``token_sample`` of its prompts."""
    bands = level_bands(cfg, ledger_store or stores.out)
    shares = shares_sent_on(cfg, ledger_store or stores.out)
    levels = len(cfg.cascade) + 1
    walk = _Walk([0] * levels, [0.0] * levels, [[0, 0] for _ in range(levels)])
    for chunk in chunks:
        _walk_chunk(cfg, stores, chunk, bands, shares, walk, token_sample=token_sample, ledger_store=ledger_store)
    return [_level_size(cfg, level, walk, shares) for level in range(levels)]


def _walk_chunk(cfg: RunConfig, stores: Stores, chunk: ChunkPlan, bands: list[Bands],
                shares: list[dict[str, float | None]], walk: _Walk, *, token_sample: int,
                ledger_store: storage.Store | None) -> None:
    """One chunk through the levels: each level's calls to make (exact), the rows estimated to reach
    it (``extra``, None once a level's share is unknown), and its sampled prompts' tokens."""
    open_pairs: set[Pair] | None = None
    extra: dict[str, float] | None = dict.fromkeys(cfg.judges, 0.0)  # rows estimated to reach the level
    for level in range(len(cfg.cascade) + 1):
        level_cfg = cfg.level_config(level)
        parameters = None if level == len(cfg.cascade) else call_parameters(level_cfg)
        prepared = prepare_chunk(level_cfg, stores, chunk.index, ledger_store=ledger_store, parameters=parameters,
                                 pairs=open_pairs)
        walk.known[level] += len(prepared.to_call)
        so_far = walk.estimated[level]
        walk.estimated[level] = None if extra is None or so_far is None else so_far + sum(extra.values())
        tokens = walk.tokens[level]
        for item in prepared.to_call[: max(0, token_sample - tokens[1])]:
            tokens[0] += count_tokens(level_cfg.judge_model, item.prompt)
            tokens[1] += 1
        if level == len(cfg.cascade):
            break
        # a row whose reply is in the ledger takes a known path; the others go on in the calibration's share
        prepared.rows = []  # settled without a call: never sent on
        rows, _ = judged_rows(prepared, [None] * len(prepared.to_call))
        open_pairs = {(row["record_id"], row["judge"])
                      for row, go in zip(rows, sent_on(rows, bands[level], cfg.thresholds), strict=True) if go}
        uncalled = Counter(p.judge for p in prepared.pending if p.request_hash not in prepared.cached)
        reaching = None if extra is None else {j: uncalled[j] + extra[j] for j in cfg.judges}
        if reaching is None or any(n and shares[level][j] is None for j, n in reaching.items()):
            extra = None
        else:
            extra = {j: n * (shares[level][j] or 0.0) for j, n in reaching.items()}


def _level_size(cfg: RunConfig, level: int, walk: _Walk, shares: list[dict[str, float | None]]) -> LevelSize:
    """A level's calls (known, plus the estimated rounded), their tokens and cost at its model's prices."""
    model = cfg.level_config(level).judge_model
    extra_calls = walk.estimated[level]
    calls = None if extra_calls is None else walk.known[level] + round(extra_calls)
    sampled, count = walk.tokens[level]
    per_call = sampled / count if count else 0.0
    reply = mean_reply_tokens(cfg.judges)
    input_tokens = None if calls is None else round(calls * per_call)
    output_tokens = None if calls is None else round(calls * reply)
    share = None if level == len(cfg.cascade) else mean_share(shares[level])
    return LevelSize(
        judge_model=model, calls=calls, calls_known=walk.known[level], share_sent_on=share,
        input_tokens=input_tokens, output_tokens=output_tokens,
        cost_usd=None if input_tokens is None or output_tokens is None
        else round(tokens_cost(input_tokens, output_tokens, price_per_token(model)), 6))
