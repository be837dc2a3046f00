"""The records the daily report shows in full: each judge's lowest-scored ``ok`` rows (with their
question and answer from the day's ``judge_calls`` prompts), its empty answers, and the day's
rejects by rule and reason with the first few records. Texts are cut to a page's length."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import polars as pl

from evaluation.report.distributions import judge_order
from evaluation.report.evidence import QUESTION_LIMIT, asked, read_prompts, shorten
from evaluation.report.summary import EmptyAnswers, ReasonCount, Rejects, RejectSample, RuleCount, WorstRecord

RAW_LIMIT = 600
REJECT_SAMPLES = 20


def _texts(values: Iterable[Any] | None) -> list[str]:
    return [shorten(str(v)) or "" for v in (values or [])]


def _rule_of(reason: str) -> str:
    """The rule a reject reason names: the text before its first colon (``question: missing`` →
    ``question``), or the whole reason."""
    head = reason.split(":", 1)[0].strip()
    return head or reason.strip() or "(empty reason)"


#: The ``evaluations`` columns a worst record shows (those of the day's table): its fields but the texts asked.
_WORST_COLUMNS = tuple(name for name in WorstRecord.model_fields if name not in ("question", "answer"))
_WORST_ORDER = ["score", "model", "record_id"]
#: The clamp an empty answer lands with (CONTRACT §2.5).
EMPTY_ANSWER = "empty_answer"
#: Record ids of a judge's empty answers named in the report (the count covers them all).
EMPTY_IDS_SHOWN = 10


def _explanations(text: str | None) -> dict[str, str] | str | None:
    """The per-metric explanations (a JSON object in the table) as a dict of cut texts; the cut
    raw text when it is not a JSON object."""
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return shorten(text)
    if not isinstance(parsed, dict):
        return shorten(text)
    return {str(k): shorten(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) or "" for k, v in parsed.items()}


def _asked(judge_calls: pl.LazyFrame | None, record_ids: list[str]) -> dict[str, tuple[str | None, str | None]]:
    """(question, answer) of each record, read from its judge calls' prompts
    (:func:`evaluation.report.evidence.read_prompts`). Records without a call are absent."""
    wanted = pl.DataFrame({"record_id": record_ids}, schema={"record_id": pl.String})
    return {record_id: asked(blocks) for (_, record_id), blocks in read_prompts(judge_calls, wanted).items()}


def worst_records(evaluations: pl.LazyFrame, judge_calls: pl.LazyFrame | None, judges: list[str],
                  per_judge: int) -> tuple[list[WorstRecord], list[EmptyAnswers]]:
    """The ``per_judge`` lowest-scored ok rows of each judge whose answer is not empty, each with
    the question and the answer it was judged on; and per judge the empty answers, counted once.

    The texts come from the day's ``judge_calls``: the prompts the judges were sent hold the
    question and the answer as the judge saw them (redacted when the run redacted), and they are
    landed, and kept, with the day's other tables, unlike the staged records under ``_work/``
    (working data, deleted by the retention job). A record no judge was called for (an empty
    answer, which no judge is sent) has no prompt: its question and answer are None."""
    schema = evaluations.collect_schema()
    ok = evaluations.filter((pl.col("judge_status") == "ok") & pl.col("score").is_not_null())
    chosen, texts, empties = _lowest(ok, schema, judge_calls, judges, per_judge)
    columns = [c for c in _WORST_COLUMNS if c in schema]
    wanted = pl.DataFrame(chosen, schema={"judge": pl.String, "record_id": pl.String}, orient="row")
    rows = ok.join(wanted.lazy(), on=["judge", "record_id"], how="semi").select(columns).collect() if chosen else None
    out = []
    for row in sorted(rows.iter_rows(named=True) if rows is not None else [],
                      key=lambda r: (judge_order(r["judge"]), *(r[c] for c in _WORST_ORDER))):
        question, answer = texts.get(row["record_id"], (None, None))
        out.append(WorstRecord(**{name: _shown(name, row[name]) for name in columns},
                               question=shorten(question, QUESTION_LIMIT), answer=shorten(answer)))
    empty = [EmptyAnswers(judge=judge, count=len(ids), record_ids=ids[:EMPTY_IDS_SHOWN])
             for judge, ids in sorted(empties.items(), key=lambda kv: judge_order(kv[0])) if ids]
    return out, empty


def _lowest(ok: pl.LazyFrame, schema: pl.Schema, judge_calls: pl.LazyFrame | None, judges: list[str], per_judge: int
            ) -> tuple[list[tuple[str, str]], dict[str, tuple[str | None, str | None]], dict[str, list[str]]]:
    """The (judge, record id) of each judge's ``per_judge`` lowest non-empty answers, the texts
    read on the way, and each judge's empty answers.

    An empty answer is a row with the ``empty_answer`` clamp, or (days landed before that rule)
    one whose prompt holds a blank answer; the latter are found among the lowest rows read, so
    the bottom-k widens until ``per_judge`` non-empty rows are found or the judge's rows run out.
    A bottom-k over four narrow columns finds the rows; only those rows' texts are read."""
    clamped = pl.col("clamps_applied").list.contains(EMPTY_ANSWER) if "clamps_applied" in schema else pl.lit(False)
    empty_ids = (ok.filter(clamped).select("judge", *_WORST_ORDER).sort("judge", "model", "record_id")
                 .group_by("judge", maintain_order=True).agg(pl.col("record_id")).collect(engine="streaming"))
    empties: dict[str, list[str]] = dict(empty_ids.iter_rows())
    candidates = ok.filter(~clamped)
    chosen: list[tuple[str, str]] = []
    texts: dict[str, tuple[str | None, str | None]] = {}
    for judge in judges:
        k = 2 * per_judge
        while True:
            keys = candidates.filter(pl.col("judge") == judge).select(*_WORST_ORDER).bottom_k(k, by=_WORST_ORDER).collect()
            ids = keys["record_id"].to_list()
            texts.update(_asked(judge_calls, [i for i in ids if i not in texts]))
            blank = [i for i in ids if i in texts and not (texts[i][1] or "").strip()]
            kept = [i for i in ids if i not in blank]
            if len(kept) >= per_judge or keys.height < k:
                break
            k *= 4
        chosen += [(judge, i) for i in kept[:per_judge]]
        empties[judge] = sorted(set(empties.get(judge, [])) | set(blank))
    return chosen, texts, empties


def _shown(name: str, value: Any) -> Any:
    """A worst record's value as shown: explanations parsed, texts cut, non-finite numbers None."""
    if name == "explanations":
        return _explanations(value)
    if isinstance(value, list):
        return _texts(value)
    if isinstance(value, str):
        return shorten(value)
    return (value if math.isfinite(value) else None) if isinstance(value, float) else value


def rejects_summary(rejects: pl.LazyFrame | None) -> Rejects:
    """Rejects by rule and reason (their ``reasons`` column: rejects are bounded by the run's
    ``max_reject_ratio``) and the first few records in full."""
    if rejects is None:
        return Rejects(landed=False, total=0, by_rule=[], by_reason=[], samples=[])
    schema = rejects.collect_schema()
    lists = rejects.select("reasons").collect()["reasons"].to_list() if "reasons" in schema else []
    total = len(lists) if "reasons" in schema else int(rejects.select(pl.len()).collect().item())
    rules: Counter[str] = Counter()
    by_reason: Counter[str] = Counter()
    for row in lists:
        by_reason.update(row or [])
        rules.update({_rule_of(r) for r in (row or [])})  # records per rule (a record breaking a rule twice counts once)
    order = [c for c in ("source_uri", "line_no") if c in schema]
    first = rejects.sort(order, nulls_last=True, maintain_order=True) if order else rejects
    samples = [RejectSample(source_uri=row.get("source_uri"), line_no=row.get("line_no"),
                            record_id=shorten(row.get("record_id"), 120), reasons=_texts(row.get("reasons")),
                            raw=shorten(row.get("raw"), RAW_LIMIT))
               for row in first.head(REJECT_SAMPLES).collect().iter_rows(named=True)]
    return Rejects(
        landed=True, total=total,
        by_rule=[RuleCount(rule=k, records=v) for k, v in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))],
        by_reason=[ReasonCount(reason=shorten(k) or "", count=v) for k, v in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[:50]],
        distinct_reasons=len(by_reason), samples=samples)
