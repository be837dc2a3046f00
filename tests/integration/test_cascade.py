"""Cascade judging on a labelled set: the local server answers as two judge models of known accuracy
(:class:`evaluation.testing.labelled.LabelledJudges`: ``gpt-4o-mini`` agrees with the labels 80% of
the time, ``gpt-4o`` 95%), after the offline judge as the cascade's first level. Each row is checked
against what its calls say (every level before the deciding one scored it inside its band, the
deciding one outside), its score against the responder's own score for the prompt, its cost against
the server's token counts at litellm's prices; a re-run makes no call at any level. A calibration of
the cascade fits the bands, measures it as one judge, and a run takes its bands."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import polars as pl
import pytest

from evaluation import stages, storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.run import run_calibration
from evaluation.calling.batch import state_key
from evaluation.cli.day import run_day
from evaluation.contract.config import CascadeLevel, InputRecord, RunConfig
from evaluation.contract.options import RUN_OPTIONS, build_config
from evaluation.contract.schemas import PARSED_SCHEMA
from evaluation.judges import parse_reply, score_table
from evaluation.stages import RunFailed, Stores, plan_day
from evaluation.stages.judge import judge_batch_level_step
from evaluation.testing.labelled import LabelledJudges, record_label
from evaluation.testing.openai_server import OpenAIServer, count_tokens

REPO = Path(__file__).resolve().parents[2]
SET = REPO / "data" / "golden" / "halueval-qa"
DAY = dt.date(2026, 1, 1)
ACCURACY = {"gpt-4o-mini": 0.8, "gpt-4o": 0.95}
CHEAP, STRONG = "openai/gpt-4o-mini", "openai/gpt-4o"
#: litellm's online prices (USD per token, input and output) of the two models, from its bundled map.
PRICES = {"offline/lexical": (0.0, 0.0), CHEAP: (1.5e-07, 6e-07), STRONG: (2.5e-06, 1e-05)}
CASCADE = "offline/lexical@0.2:0.95,openai/gpt-4o-mini@0.45:0.75"
BANDS = {"offline/lexical": (0.2, 0.95), CHEAP: (0.45, 0.75)}
MODELS = ["offline/lexical", CHEAP, STRONG]
RECORDS = 80


def _records(limit: int | None = None) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SET / "records.jsonl").read_text(encoding="utf-8").splitlines()[:limit]]


@pytest.fixture(scope="module")
def judges() -> LabelledJudges:
    return LabelledJudges.from_records(_records(), ACCURACY)


@pytest.fixture(scope="module")
def server(judges: LabelledJudges) -> Iterator[OpenAIServer]:
    with OpenAIServer(judges, models=("gpt-4o", "gpt-4o-mini")) as found:
        yield found


def _day(folder: Path, records: list[dict[str, Any]]) -> Path:
    day = folder / f"dt={DAY}"
    day.mkdir(parents=True)
    (day / "records.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "labels"}) + "\n"
                                               for r in records), encoding="utf-8")
    return folder


def _config(tmp_path: Path, server: OpenAIServer, run_id: str, cascade: str = CASCADE,
            judges: tuple[str, ...] = ("rag", "masis"), out: str = "out", **values: Any) -> RunConfig:
    return RunConfig.model_validate({"date": DAY, "input_uri": str(tmp_path / "in"), "output_uri": str(tmp_path / out),
                                     "run_id": run_id, "judges": list(judges), "judge_model": STRONG,
                                     "api_base": server.base_url, "cascade": cascade, **values})


def _run(tmp_path: Path, server: OpenAIServer, run_id: str, cascade: str = CASCADE) -> Any:
    cfg = _config(tmp_path, server, run_id, cascade)
    return run_day(cfg, Stores.open(cfg), api_key="test-key")


def _level_score(judge: str, record: InputRecord, raw: str) -> float | None:
    """A level's score of one reply, as its rules make it."""
    parsed = pl.DataFrame([parse_reply(judge, record, raw)], schema=PARSED_SCHEMA)  # type: ignore[arg-type]
    row = score_table(parsed).row(0, named=True)
    return row["score"] if row["judge_status"] == "ok" else None


def _inside(score: float | None, band: tuple[float, float]) -> bool:
    return score is None or band[0] <= score <= band[1]


def test_each_row_is_decided_by_the_first_level_sure_of_it_and_a_rerun_pays_nothing(
        tmp_path: Path, server: OpenAIServer, judges: LabelledJudges) -> None:
    records = _records(RECORDS)
    _day(tmp_path / "in", records)
    before = server.request_count
    # the plan: level 0 judges every row; what reaches the next levels is unknown with bands given by hand
    planned = plan_day(_config(tmp_path, server, "plan"), Stores.open(_config(tmp_path, server, "plan"))).cascade
    assert planned is not None and [level.calls for level in planned] == [RECORDS * 2, None, None]
    first = _run(tmp_path, server, "first")
    requests = server.request_count - before
    assert first.statuses["ok"] == RECORDS * 2 and first.rows == RECORDS * 2

    evaluations = pl.read_parquet(tmp_path / "out" / "evaluations")
    calls = pl.read_parquet(tmp_path / "out" / "judge_calls")
    by_id = {r["record_id"]: r for r in records}
    decided_at = {model: 0 for model in MODELS}
    for row in evaluations.iter_rows(named=True):
        record = InputRecord.model_validate({k: v for k, v in by_id[row["record_id"]].items()
                                             if k not in ("labels", "metadata")})
        pair = calls.filter((pl.col("record_id") == row["record_id"]) & (pl.col("judge") == row["judge"]))
        order = {model: level for level, model in enumerate(MODELS)}
        pair = pair.sort(pl.col("judge_model").replace_strict(order, return_dtype=pl.Int64))
        # one call per level reached, in the cascade's order; the last of them decided, and the row is its judgement
        assert pair["judge_model"].to_list() == MODELS[:row["cascade_calls"]]
        assert row["decided_by"] == row["judge_model"] == MODELS[row["cascade_calls"] - 1]
        decided_at[row["decided_by"]] += 1
        cost = 0.0
        for level, call in enumerate(pair.iter_rows(named=True)):
            score = _level_score(row["judge"], record, call["raw_response"])
            if call["judge_model"] != "offline/lexical":  # the model's own score for this very prompt
                expected = judges.score(call["judge_model"], bool(record_label(by_id[row["record_id"]])),
                                        call["system_prompt"] + "\n" + call["user_prompt"])
                if row["judge"] == "rag":  # masis caps faithfulness for uncited claims
                    assert score == expected
            band = BANDS.get(call["judge_model"])
            if level < row["cascade_calls"] - 1:
                assert _inside(score, band), (row, call["judge_model"], score)
            elif band is not None:
                assert not _inside(score, band), (row, call["judge_model"], score)
            price_in, price_out = PRICES[call["judge_model"]]
            cost += (count_tokens(call["system_prompt"] + call["user_prompt"]) * price_in
                     + count_tokens(call["raw_response"]) * price_out)
            assert call["cost_usd"] == pytest.approx(count_tokens(call["system_prompt"] + call["user_prompt"]) * price_in
                                                     + count_tokens(call["raw_response"]) * price_out, rel=1e-9)
        assert row["score"] == _level_score(row["judge"], record, pair["raw_response"][-1])
        assert row["cost_usd"] == pytest.approx(cost, rel=1e-9, abs=1e-12)
        assert row["input_tokens"] == pair["input_tokens"].sum() and row["attempts"] == pair["attempts"].sum()
    # every level decided some rows, and the server was asked only the models' calls
    assert all(decided_at.values()), decided_at
    assert requests == calls.filter(pl.col("judge_model") != "offline/lexical").height
    summary = json.loads(pl.read_parquet(tmp_path / "out" / "runs")["cascade"][0])
    assert [level["decided"] for level in summary["levels"]] == [decided_at[m] for m in MODELS]
    assert [level["calls"] for level in summary["levels"]] == [calls.filter(pl.col("judge_model") == m).height
                                                              for m in MODELS]
    assert summary["cost_usd"] == pytest.approx(evaluations["cost_usd"].sum(), abs=1e-6)  # to 6 decimals
    assert summary["rows_called"] == RECORDS * 2 and 0 < summary["saved_share"] < 1
    report = Path(first.report).read_text(encoding="utf-8")  # the day's report shows the levels and the saving
    assert "<h3>Cascade</h3>" in report and f"{summary['saved_share'] * 100:.1f}% saved" in report
    strong_calls = calls.filter(pl.col("judge_model") == STRONG)
    assert summary["levels"][2]["cost_usd"] == pytest.approx(strong_calls["cost_usd"].sum(), abs=1e-6)

    # after the run the ledger decides every row's path: the plan of a re-run is exact, and nothing
    replanned = plan_day(_config(tmp_path, server, "plan"), Stores.open(_config(tmp_path, server, "plan"))).cascade
    assert replanned is not None and [(level.calls, level.cost_usd) for level in replanned] == [(0, 0.0)] * 3
    again = _run(tmp_path, server, "again")
    assert server.request_count - before == requests  # not one call at any level
    assert again.calls_made == 0 and again.cost_usd == 0.0
    rerun = pl.read_parquet(tmp_path / "out" / "evaluations")
    same = ["record_id", "judge", "decided_by", "cascade_calls", "score", "verdict", "input_tokens"]
    assert rerun.select(same).sort("record_id", "judge").equals(evaluations.select(same).sort("record_id", "judge"))
    assert rerun["cached"].all() and rerun["cost_usd"].sum() == 0.0
    runs = pl.read_parquet(tmp_path / "out" / "runs").sort("finished_at")
    again_summary = json.loads(runs["cascade"][-1])
    assert again_summary["cost_usd"] == 0.0 and again_summary["list_cost_usd"] == summary["list_cost_usd"]


def test_a_calibration_fits_the_bands_measures_the_cascade_and_a_run_takes_its_bands(
        tmp_path: Path, server: OpenAIServer) -> None:
    spec = CalibrationSpec(golden_uri=str(SET), judges=["rag"], judge_model=STRONG, api_base=server.base_url,
                           cascade="offline/lexical,openai/gpt-4o-mini", concurrency=16)
    out = storage.LocalStore(tmp_path / "out")
    before = server.request_count
    result = run_calibration(out, storage.LocalStore(SET), spec, calibration="cal-cascade", api_key="test-key")
    paid = server.request_count - before
    assert paid == 2 * 300  # both models judged the whole set once: the bands are fitted on it
    key = storage.calibration_key("cal-cascade", "cascade.parquet")
    table = storage.read_parquet(out, key).sort("level")
    assert table["judge_model"].to_list() == MODELS and table["band_source"].to_list() == ["fitted", "fitted", None]
    alone = dict(zip(table["judge_model"], table["kappa_alone"], strict=True))
    assert alone[STRONG] > alone[CHEAP] + 0.15  # 95% and 80% agreement, as served
    strong = table.row(2, named=True)
    # the fitted bands passed the fixed sequence: the fit split's disagreement bound is within band_loss
    assert strong["band_confidence"] == spec.band_confidence == 0.9
    assert strong["disagreement_fit"] <= strong["disagreement_bound"] <= spec.band_loss
    assert table["decided"].sum() == strong["rows"] == 300 and table["reached"][0] == 300
    assert table["cost_usd"].sum() < strong["cost_alone_usd"]
    # measured as one judge: the calibration's figures are the cascade's rows'
    score = storage.read_parquet(out, storage.calibration_key("cal-cascade", "calibration.parquet")).filter(
        pl.col("metric") == "score").row(0, named=True)
    assert score["judge_model"] == "offline/lexical > openai/gpt-4o-mini > openai/gpt-4o"
    assert score["kappa"] == pytest.approx(strong["kappa_cascade"])
    evaluations = storage.read_parquet(out, storage.calibration_key("cal-cascade", "evaluations.parquet"))
    assert evaluations.group_by("decided_by").len().sort("decided_by").rows() == sorted(
        (model, n) for model, n in zip(table["judge_model"], table["decided"], strict=True) if n)
    assert "Cascade" in (tmp_path / "out" / storage.calibration_key("cal-cascade", "report.html")).read_text()
    assert [level["judge_model"] for level in result["cascade"]] == MODELS

    run_calibration(out, storage.LocalStore(SET), spec, calibration="cal-cascade", api_key="test-key")
    assert server.request_count - before == paid  # a re-run of the calibration pays nothing

    # a run over the set's records takes the fitted bands
    _day(tmp_path / "in", _records())
    bands = {row["judge_model"]: (row["band_low"], row["band_high"]) for row in table.head(2).iter_rows(named=True)}
    cfg = _config(tmp_path, server, "banded", "offline/lexical@cal-cascade,openai/gpt-4o-mini@cal-cascade", ("rag",))
    # the plan estimates each level from the shares the calibration sent on (the calibration's replies
    # are in this ledger: the plan takes their path exactly, so it finds the calibration's own counts)
    planned = plan_day(cfg, Stores.open(cfg)).cascade
    assert planned is not None and [level.calls for level in planned] == [0, 0, 0]
    sent_on = table["share_sent_on"].to_list()
    assert [level.share_sent_on for level in planned] == [pytest.approx(sent_on[0], abs=1e-4),
                                                           pytest.approx(sent_on[1], abs=1e-4), None]
    run_day(cfg, Stores.open(cfg), api_key="test-key")
    landed = pl.read_parquet(tmp_path / "out" / "evaluations")
    for model, (low, high) in bands.items():
        decided = landed.filter(pl.col("decided_by") == model)
        assert not decided.filter(pl.col("score").is_between(low, high)).height
    assert landed.group_by("decided_by").len().sort("decided_by").rows() == sorted(
        (model, n) for model, n in zip(table["judge_model"], table["decided"], strict=True) if n)


def test_batch_mode_judges_one_level_at_a_time_and_lands_what_online_judging_lands(
        tmp_path: Path, server: OpenAIServer) -> None:
    _day(tmp_path / "in", _records(30))
    cfg = _config(tmp_path, server, "batched", batch=True, batch_poll_s=0.05)
    stores = Stores.open(cfg)
    stages.ingest_and_validate(cfg, stores)
    stages.plan_chunks(cfg, stores)
    server.batches.delay_s = 3600.0
    # level 0, the offline judge, has no batch API: judged at once; level 1's batch is submitted, level 2's not yet
    result, waiting, level = judge_batch_level_step(cfg, stores, 0, api_key="test-key")
    assert result is None and level.judge_model == CHEAP and len(waiting) == 1
    assert stores.out.exists(state_key(cfg, 0, 1)) and not stores.out.exists(state_key(cfg, 0, 2))
    again = judge_batch_level_step(cfg, stores, 0, api_key="test-key")  # a task's next look: the same batch
    assert (again[0], again[1], again[2].judge_model) == (None, waiting, CHEAP) and len(server.batches.batches) == 1
    server.batches.delay_s = 0.0
    deadline = time.monotonic() + 120  # a hang guard, not a timing bound
    while level.judge_model == CHEAP:
        assert time.monotonic() < deadline
        time.sleep(0.05)
        result, waiting, level = judge_batch_level_step(cfg, stores, 0, api_key="test-key")
    assert result is None and level.judge_model == STRONG and stores.out.exists(state_key(cfg, 0, 2))
    while result is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
        result, waiting, level = judge_batch_level_step(cfg, stores, 0, api_key="test-key")
    assert len(server.batches.batches) == 2 and result.calls_made > 0
    stages.score_and_land(cfg, stores)
    batched = pl.read_parquet(tmp_path / "out" / "evaluations")

    online = _config(tmp_path, server, "online", out="online")
    run_day(online, Stores.open(online), api_key="test-key")
    rows = pl.read_parquet(tmp_path / "online" / "evaluations")
    same = ["record_id", "judge", "decided_by", "cascade_calls", "score", "verdict"]
    assert batched.select(same).sort("record_id", "judge").equals(rows.select(same).sort("record_id", "judge"))
    assert 0 < batched["cost_usd"].sum() < rows["cost_usd"].sum()  # batch prices
    # the command line waits for each level's batches in the process, and lands the same rows
    waited = _config(tmp_path, server, "waited", out="waited", batch=True, batch_poll_s=0.05)
    run_day(waited, Stores.open(waited), api_key="test-key")
    cli_rows = pl.read_parquet(tmp_path / "waited" / "evaluations")
    assert cli_rows.select(same).sort("record_id", "judge").equals(rows.select(same).sort("record_id", "judge"))
    assert len(server.batches.batches) == 4
    # judged in steps or waited for, the run paid the same calls: every level's, the earlier steps' too
    assert batched["cost_usd"].sum() == pytest.approx(cli_rows["cost_usd"].sum())
    assert not batched.filter(pl.col("cascade_calls") >= 2)["cached"].any()


def test_a_budget_in_batch_mode_is_shared_by_the_levels_in_order(tmp_path: Path, server: OpenAIServer) -> None:
    """The chunk's budget pays the cheap level's batch first; the strong level gets what is left, so
    rows that would have reached it are ``budget_exhausted`` and the run pays no more than the budget
    (the replies are no longer than a typical one)."""
    _day(tmp_path / "in", _records(30))
    free = _config(tmp_path, server, "free", out="free", batch=True, batch_poll_s=0.05)
    run_day(free, Stores.open(free), api_key="test-key")
    paid = pl.read_parquet(tmp_path / "free" / "judge_calls")
    cheap = float(paid.filter(pl.col("judge_model") == CHEAP)["cost_usd"].sum())
    strong = float(paid.filter(pl.col("judge_model") == STRONG)["cost_usd"].sum())
    assert cheap > 0 and strong > 0
    budget = cheap + strong / 2  # the cheap level's calls and about half the strong level's
    cfg = _config(tmp_path, server, "budget", out="budget", batch=True, batch_poll_s=0.05, budget_usd=budget)
    result = run_day(cfg, Stores.open(cfg), api_key="test-key")
    rows = pl.read_parquet(tmp_path / "budget" / "evaluations")
    calls = pl.read_parquet(tmp_path / "budget" / "judge_calls")
    assert float(calls.filter(pl.col("judge_model") == CHEAP)["cost_usd"].sum()) == pytest.approx(cheap)
    spent_strong = float(calls.filter(pl.col("judge_model") == STRONG)["cost_usd"].sum())
    assert 0 < spent_strong < strong
    assert result["cost_usd"] <= budget
    assert rows.filter(pl.col("reason") == "budget_exhausted").height > 0


def test_a_missing_band_calibration_fails_the_run_before_anything_is_paid(tmp_path: Path,
                                                                          server: OpenAIServer) -> None:
    _day(tmp_path / "in", _records(5))
    before, probes = server.request_count, len(server.probes)
    with pytest.raises(RunFailed, match="cascade level openai/gpt-4o-mini@cal-none: no calibration of a cascade"):
        _run(tmp_path, server, "nothing", cascade="openai/gpt-4o-mini@cal-none")
    assert (server.request_count, len(server.probes)) == (before, probes)
    assert not (tmp_path / "out" / "evaluations").exists()


@pytest.mark.parametrize(("text", "levels"), [
    ("offline/lexical@0.2:0.9", [("offline/lexical", (0.2, 0.9), None)]),
    ("offline/lexical@0.2:0.9, openai/gpt-4o-mini@cal-1", [("offline/lexical", (0.2, 0.9), None),
                                                          ("openai/gpt-4o-mini", None, "cal-1")]),
    ("vertex_ai/claude@20240620@0:1", [("vertex_ai/claude@20240620", (0.0, 1.0), None)]),
    ("", []),
])
def test_the_cascade_option_reads_its_levels(text: str, levels: list[tuple[str, Any, Any]]) -> None:
    cfg = build_config({"input_uri": "in", "output_uri": "out", "judge_model": STRONG, "cascade": text},
                       date=DAY, run_id="r", trigger="cli")
    assert [(level.judge_model, level.band, level.band_from) for level in cfg.cascade] == levels
    assert RunConfig.model_validate_json(cfg.model_dump_json()).cascade == cfg.cascade
    assert next(o for o in RUN_OPTIONS if o.name == "cascade").flags == ("--cascade",)


@pytest.mark.parametrize(("text", "message"), [
    ("offline/lexical", "level offline/lexical has no band"),
    ("offline/lexical@0.9:0.2", "band 0.9:0.2 is not 0 <= low <= high <= 1"),
    ("offline/lexical@0.2:0.9,offline/lexical@0.1:0.8", "a model is named twice"),
    ("openai/gpt-4o@0.2:0.9", "a model is named twice"),
    ("offline/lexical@0.2", "band 0.2: expected low:high"),
])
def test_a_cascade_that_cannot_work_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(date=DAY, input_uri="in", output_uri="out", judge_model=STRONG, cascade=text)


def test_a_calibration_may_leave_bands_to_fit_and_keeps_the_ids_of_calibrations_without_a_cascade() -> None:
    spec = CalibrationSpec(golden_uri=str(SET), judge_model=STRONG, cascade="offline/lexical")
    assert spec.cascade == [CascadeLevel(judge_model="offline/lexical")]
    plain = CalibrationSpec(golden_uri=str(SET))
    assert plain.default_id({}) == CalibrationSpec(golden_uri=str(SET), band_loss=0.02).default_id({})
    assert spec.default_id({}) != CalibrationSpec(golden_uri=str(SET), judge_model=STRONG).default_id({})
