"""Model comparisons (evaluation.compare): statistics, pairing, determinism, and the landed tables
on generated days where assistant-v2 is clearly better than assistant-lite."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evaluation import compare, storage
from evaluation.cli.day import run_day
from evaluation.compare import ComparisonError, ComparisonSpec, run_comparison
from evaluation.compare.compute import JUDGE_METRICS, compare_verdicts, permutation_count
from evaluation.compare.render import render_report
from evaluation.contract.config import JUDGES, RunConfig
from evaluation.stages import Stores
from evaluation.testing import synthetic

DAYS = (dt.date(2026, 11, 1), dt.date(2026, 11, 2))
RECORDS = 300  # per day, spread over the three models


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two generated days evaluated by the pipeline with the offline judge."""
    root = tmp_path_factory.mktemp("compare")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        synthetic.write_day(storage.open_store(raw_uri), day, RECORDS)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"test-{day}")
        run_day(cfg, Stores.open(cfg))
    return {"raw": storage.open_store(raw_uri), "out": storage.open_store(out_uri), "root": root}


def _spec(**overrides: Any) -> ComparisonSpec:
    values: dict[str, Any] = {"start_date": DAYS[0], "end_date": DAYS[-1], "models": ["assistant-lite", "assistant-v2"]}
    values.update(overrides)
    return ComparisonSpec(**values)


def _table(store: storage.Store, comparison_id: str, name: str) -> pl.DataFrame:
    return storage.read_parquet(store, storage.comparison_key(comparison_id, name))


def _row(metrics: pl.DataFrame, judge: str, metric: str, model: str) -> dict[str, Any]:
    rows = metrics.filter((pl.col("judge") == judge) & (pl.col("metric") == metric) & (pl.col("model") == model))
    assert rows.height == 1
    return rows.row(0, named=True)


# --------------------------------------------------------------------------------------------
# On landed data


def test_better_model_has_a_positive_delta_whose_interval_excludes_zero(landed) -> None:
    result = run_comparison(landed["out"], _spec(), comparison_id="v2-vs-lite")
    metrics = _table(landed["out"], "v2-vs-lite", "metrics.parquet")
    for judge in ("rag", "masis"):
        for metric in ("score", "faithfulness", "pass_rate"):
            row = _row(metrics, judge, metric, "assistant-v2")
            assert row["test"] == "paired"  # both models answered the same generated questions
            assert row["delta"] > 0 and row["delta_ci_low"] > 0, row
            assert row["delta_ci_low"] <= row["delta"] <= row["delta_ci_high"]
            assert row["p_value"] < 0.05 and row["significant"]
            assert row["ci_low"] <= row["mean"] <= row["ci_high"]
    assert result["source"] == "landed"
    assert result["records_per_model"] == {"assistant-lite": 200, "assistant-v2": 200}
    summary = {(d["judge"], d["metric"]): d for d in result["deltas"]}
    assert summary[("rag", "score")]["delta"] > 0 and summary[("rag", "score")]["test"] == "paired"

    # The baseline swapped: the same difference, the other sign.
    run_comparison(landed["out"], _spec(baseline="assistant-v2"), comparison_id="lite-vs-v2")
    swapped = _row(_table(landed["out"], "lite-vs-v2", "metrics.parquet"), "rag", "score", "assistant-lite")
    assert swapped["delta"] == pytest.approx(-_row(metrics, "rag", "score", "assistant-v2")["delta"])
    assert swapped["delta_ci_high"] < 0


def test_means_agree_with_the_landed_ok_rows(landed) -> None:
    run_comparison(landed["out"], _spec(), comparison_id="means")
    metrics = _table(landed["out"], "means", "metrics.parquet")
    evaluations = storage.scan_table(landed["out"], "evaluations").filter(pl.col("dt").is_in(DAYS)).collect()
    ok = evaluations.filter((pl.col("judge_status") == "ok") & (pl.col("judge") == "masis"))
    for model in ("assistant-lite", "assistant-v2"):
        scores = ok.filter(pl.col("model") == model)["score"]
        row = _row(metrics, "masis", "score", model)
        assert row["n"] == scores.len() and row["mean"] == pytest.approx(scores.mean())
    base = _row(metrics, "masis", "score", "assistant-lite")
    assert base["is_baseline"] and base["delta"] is None and base["test"] is None


def test_same_seed_gives_identical_tables(landed) -> None:
    spec = _spec(models=["assistant-lite", "assistant-v2", "assistant-v1"], bootstrap=500)
    run_comparison(landed["out"], spec, comparison_id="repeat")
    first = {n: _table(landed["out"], "repeat", n) for n in ("metrics.parquet", "verdicts.parquet")}
    spec_json = landed["out"].read_bytes(storage.comparison_key("repeat", "spec.json"))
    run_comparison(landed["out"], ComparisonSpec.model_validate(spec.model_dump()), comparison_id="repeat")
    for name, frame in first.items():
        assert_frame_equal(frame, _table(landed["out"], "repeat", name))
    assert landed["out"].read_bytes(storage.comparison_key("repeat", "spec.json")) == spec_json

    # Another seed: same estimates, other resamples.
    run_comparison(landed["out"], spec.model_copy(update={"seed": 1}), comparison_id="other-seed")
    other = _table(landed["out"], "other-seed", "metrics.parquet")
    assert other["delta"].to_list() == first["metrics.parquet"]["delta"].to_list()
    assert other["delta_ci_low"].to_list() != first["metrics.parquet"]["delta_ci_low"].to_list()


def test_win_tie_loss_counts_add_up_to_the_shared_questions(landed) -> None:
    run_comparison(landed["out"], _spec(models=["assistant-lite", "assistant-v2", "assistant-v1"]), comparison_id="wtl")
    others = _table(landed["out"], "wtl", "metrics.parquet").filter(~pl.col("is_baseline"))
    assert others.height > 0
    assert (others["wins"] + others["ties"] + others["losses"] == others["n_pairs"]).all()
    score = _row(others, "rag", "score", "assistant-v2")
    assert score["wins"] > score["losses"]


def test_verdict_shifts_sum_to_zero(landed) -> None:
    run_comparison(landed["out"], _spec(models=["assistant-lite", "assistant-v2", "assistant-v1"]), comparison_id="mix")
    verdicts = _table(landed["out"], "mix", "verdicts.parquet")
    sums = verdicts.group_by("judge", "model").agg(pl.col("share_pct").sum(), pl.col("shift_pp").sum(), pl.col("n").sum(),
                                                    pl.col("n_ok").first())
    assert sums.height == 9
    assert np.allclose(sums["share_pct"].to_numpy(), 100.0)
    assert np.allclose(sums["shift_pp"].to_numpy(), 0.0, atol=1e-9)
    assert (sums["n"] == sums["n_ok"]).all()
    rag_pass = verdicts.filter((pl.col("judge") == "rag") & (pl.col("model") == "assistant-v2") & (pl.col("verdict") == "pass"))
    assert rag_pass["shift_pp"][0] > 0


def test_report_is_a_self_contained_page(landed) -> None:
    result = run_comparison(landed["out"], _spec(), comparison_id="page")
    page = Path(result["report_uri"]).read_text()
    assert page.lower().startswith("<!doctype html>") and "<style>" in page
    assert page.count("<svg") >= 4  # a delta chart and a verdict chart per judge
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "http://" not in page and "https://" not in page
    assert "assistant-v2" in page and "paired" in page
    spec = json.loads(Path(result["spec_uri"]).read_text())
    assert spec["comparison_id"] == "page" and spec["spec"]["baseline"] == "assistant-lite"


def test_sample_per_model_is_seeded(landed) -> None:
    run_comparison(landed["out"], _spec(sample_per_model=25, seed=7), comparison_id="sample-a")
    again = run_comparison(landed["out"], _spec(sample_per_model=25, seed=7), comparison_id="sample-b")
    assert again["records_per_model"] == {"assistant-lite": 25, "assistant-v2": 25}
    first = _table(landed["out"], "sample-a", "metrics.parquet").drop("comparison_id")
    assert_frame_equal(first, _table(landed["out"], "sample-b", "metrics.parquet").drop("comparison_id"))


def test_rejudging_tells_its_progress_row_by_row(landed) -> None:
    """The re-judging starts one progress (what, how many (record, judge) rows) and tells it every
    row done; the command line draws it as a bar."""
    started: list[tuple[str, int]] = []
    done: list[int] = []

    def progress(what: str, total: int) -> Callable[[int], None]:
        started.append((what, total))
        return done.append

    spec = _spec(judge_model="offline/lexical", sample_per_model=10, seed=5)
    run_comparison(landed["out"], spec, comparison_id="progress", raw_store=landed["raw"], progress=progress)
    assert started == [("re-judging 20 records with offline/lexical", 20 * 3)] and sum(done) == 20 * 3


def test_rejudging_a_sample_with_a_judge_model(landed) -> None:
    spec = _spec(judge_model="offline/lexical", sample_per_model=20, seed=3)
    result = run_comparison(landed["out"], spec, comparison_id="rejudged", raw_store=landed["raw"])
    assert result["source"] == "rejudged"
    assert result["records_per_model"] == {"assistant-lite": 20, "assistant-v2": 20}
    evaluations = _table(landed["out"], "rejudged", "evaluations.parquet")
    assert evaluations.height == 40 * 3  # every (sampled record, judge) pair has one row
    assert evaluations.select("dt", "record_id", "judge").is_duplicated().sum() == 0
    assert set(evaluations["judge_model"].unique()) == {"offline/lexical"}
    assert evaluations["question_key"].null_count() == 0
    assert landed["out"].exists(storage.comparison_key("rejudged", "judge_calls.parquet"))
    assert not [o for o in landed["out"].list("_work/") if "comparison-rejudged" in o.key]
    # The offline judge is deterministic: the landed sample's scores are the ones re-judged.
    landed_scores = (storage.scan_table(landed["out"], "evaluations").filter(pl.col("dt").is_in(DAYS))
                     .select("dt", "record_id", "judge", "score").collect())
    joined = evaluations.join(landed_scores, on=["dt", "record_id", "judge"], suffix="_landed")
    assert joined.height == evaluations.height
    assert joined.filter(pl.col("score").ne_missing(pl.col("score_landed"))).height == 0
    # The landed sample is reused for the same spec, without the raw input.
    again = run_comparison(landed["out"], spec, comparison_id="rejudged")
    assert again["deltas"] == result["deltas"]
    with pytest.raises(ComparisonError, match="no re-judged sample"):
        run_comparison(landed["out"], spec.model_copy(update={"seed": 4}), comparison_id="rejudged")


def test_unknown_model_and_empty_range_fail_with_a_clear_message(landed) -> None:
    with pytest.raises(ComparisonError, match="no records of assistant-v9.*models found: assistant-lite"):
        run_comparison(landed["out"], _spec(models=["assistant-lite", "assistant-v9"]))
    with pytest.raises(ComparisonError, match="no landed evaluations"):
        run_comparison(landed["out"], _spec(start_date="2026-10-01", end_date="2026-10-02"))


def test_cli_compare_prints_a_short_table_and_the_report(landed, capsys) -> None:
    from evaluation.cli.main import main

    argv = ["compare", "--from", str(DAYS[0]), "--to", str(DAYS[1]), "--models", "assistant-lite,assistant-v2",
            "--judges", "rag", "--seed", "2", "--bootstrap", "300", "--output", landed["out"].root]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(lines) <= 20 and lines[-1] == f"report: {summary['report_uri']}"
    assert lines[0].startswith(f"comparison {summary['comparison_id']}: baseline assistant-lite;")
    assert lines[1].split() == ["judge", "metric", "model", "n", "mean", "delta", "95%", "interval", "p", "adj."]
    score_line = next(line for line in lines if line.split()[:3] == ["rag", "score", "assistant-v2"])
    score_delta = next(d for d in summary["deltas"] if d["metric"] == "score")
    assert f"{score_delta['delta']:+.4f}" in score_line
    assert summary["status"] == "success" and summary["report_uri"].endswith("report.html")
    score = next(d for d in summary["deltas"] if d["metric"] == "score")
    assert score["judge"] == "rag" and score["delta"] > 0 and score["delta_ci_low"] > 0
    assert {"delta_ci_high", "p_value", "test"} <= set(score)


def test_an_empty_compare_option_takes_its_variable(landed, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """EVALUATION_<OPTION> fills what the command line leaves out; the runs' EVALUATION_JUDGE_MODEL
    does not make a comparison re-judge (its own variable is EVALUATION_COMPARE_JUDGE_MODEL)."""
    from evaluation.cli.main import main

    for name, value in {"EVALUATION_JUDGES": "rag", "EVALUATION_BOOTSTRAP": "150", "EVALUATION_MIN_PAIRS": "3",
                        "EVALUATION_P_ADJUST": "bh", "EVALUATION_JUDGE_MODEL": "openai/not-for-comparisons"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("EVALUATION_COMPARE_JUDGE_MODEL", raising=False)
    argv = ["compare", "--from", str(DAYS[0]), "--to", str(DAYS[1]), "--models", "assistant-lite,assistant-v2",
            "--seed", "2", "--output", landed["out"].root, "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    landed_spec = storage.read_json(landed["out"], storage.comparison_key(summary["comparison_id"], "spec.json"))
    spec = ComparisonSpec.model_validate(landed_spec["spec"])
    assert (spec.judges, spec.bootstrap, spec.min_pairs, spec.p_adjust, spec.seed) == (["rag"], 150, 3, "bh", 2)
    assert landed_spec["source"] == "landed" and not spec.rejudges


# --------------------------------------------------------------------------------------------
# Pairing and statistics on hand-made rows


def _rows(answers: dict[str, list[tuple[str, float]]]) -> pl.DataFrame:
    """Evaluation-like rows: per model, (question, score) pairs; all ok, judge prompt."""
    records = []
    for model, items in answers.items():
        for index, (question, score) in enumerate(items):
            records.append({"dt": DAYS[0], "record_id": f"{model}-{index}", "model": model, "judge": "prompt",
                            "judge_status": "ok", "verdict": "pass" if score >= 0.8 else "fail", "score": score,
                            "question": question})
    frame = pl.DataFrame(records)
    return frame.with_columns(question_key=pl.col("question").map_elements(compare.question_key, pl.String)).drop("question")


def _compare(rows: pl.DataFrame, **overrides: Any) -> dict[str, Any]:
    spec = _spec(models=["a", "b"], judges=["prompt"], bootstrap=400, **overrides)
    return _row(compare.compare_metrics(rows, spec, "t"), "prompt", "score", "b")


@pytest.mark.parametrize(
    "shared, expected",
    [(20, "paired"), (0, "unpaired"), (5, "unpaired")],
    ids=["same-questions", "disjoint-questions", "too-few-shared"],
)
def test_paired_only_when_the_models_answered_the_same_questions(shared: int, expected: str) -> None:
    rng = np.random.default_rng(0)
    a = [(f"Question {i}?", float(rng.uniform(0.3, 0.6))) for i in range(20)]
    b = [(f"  QUESTION   {i} " if i < shared else f"other question {i}", float(rng.uniform(0.6, 0.9))) for i in range(20)]
    row = _compare(_rows({"a": a, "b": b}))
    assert row["test"] == expected
    assert row["n_pairs"] == shared
    assert row["wins"] + row["ties"] + row["losses"] == shared
    assert row["delta"] > 0 and row["delta_ci_low"] > 0


def test_paired_delta_is_the_mean_of_per_question_differences() -> None:
    a = [("q1", 0.2), ("q1", 0.4), ("q2", 0.5), ("q3", 0.9)] + [(f"q{i}", 0.5) for i in range(4, 12)]
    b = [("q1", 0.5), ("q2", 0.5), ("q3", 0.6)] + [(f"q{i}", 0.6) for i in range(4, 12)]
    row = _compare(_rows({"a": a, "b": b}))
    differences = [0.5 - 0.3, 0.0, 0.6 - 0.9] + [0.1] * 8
    assert row["test"] == "paired"
    assert row["delta"] == pytest.approx(np.mean(differences))
    assert (row["wins"], row["ties"], row["losses"]) == (9, 1, 1)


@pytest.mark.parametrize(
    "question, text",
    [
        ("What is the height of Mount Everest?", "what is the height of mount everest"),
        ("  what IS the\theight of\n Mount Everest ?!  ", "what is the height of mount everest"),
        ("¿Qué hora es?", "qué hora es"),
        ("«Quoted», inside: kept", "quoted», inside: kept"),
        ("...", ""),
    ],
)
def test_question_key_normalises_case_space_and_end_punctuation(question: str, text: str) -> None:
    assert compare.question_key(question) == compare.question_key(text)
    assert compare.question_key(question) != compare.question_key(text + " again")


def test_statistics_on_known_samples() -> None:
    rng = compare.rng_for(0, "test")
    zero = compare.paired_test(np.zeros(30), rng, 500)
    assert (zero.delta, zero.ci_low, zero.ci_high, zero.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = compare.paired_test(np.full(30, 0.1) + np.linspace(-0.01, 0.01, 30), rng, 500)
    assert shifted.ci_low > 0 and shifted.p_value == pytest.approx(1 / 501)
    same = compare.unpaired_test(np.linspace(0, 1, 50), np.linspace(0, 1, 50), rng, 500)
    assert same.delta == pytest.approx(0.0) and same.ci_low < 0 < same.ci_high and same.p_value > 0.5
    apart = compare.unpaired_test(np.linspace(0.6, 1, 40), np.linspace(0, 0.4, 60), rng, 500)
    assert apart.test == "unpaired" and apart.ci_low > 0.4 and apart.p_value == pytest.approx(1 / 501)
    # Batches never change the draws' distribution shape: a large sample still works.
    big = compare.bootstrap_means(np.linspace(0, 1, 50_000), compare.rng_for(0, "big"), 100)
    assert big.shape == (100,) and abs(big.mean() - 0.5) < 0.01


def test_sample_records_is_seeded_and_order_independent() -> None:
    keys = pl.DataFrame({"dt": [DAYS[0]] * 60, "record_id": [f"r{i}" for i in range(60)],
                         "model": ["a", "b", "c"] * 20})
    first = compare.sample_records(keys, 5, seed=1)
    assert first.group_by("model").len().sort("model")["len"].to_list() == [5, 5, 5]
    assert_frame_equal(first, compare.sample_records(keys.reverse(), 5, seed=1))
    assert not first.equals(compare.sample_records(keys, 5, seed=2))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"models": ["a"]}, "at least 2"),
        ({"models": ["a", "a"]}, "repeated"),
        ({"models": ["a", "b"], "baseline": "c"}, "baseline"),
        ({"start_date": DAYS[1], "end_date": DAYS[0]}, "before start_date"),
        ({"judges": ["rag", "nope"]}, "judges"),
        ({"sample_per_model": 0}, "sample_per_model"),
    ],
)
def test_spec_refuses_bad_values(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _spec(**values)


def test_spec_defaults_and_id() -> None:
    spec = _spec(models="assistant-v2, assistant-lite", judges="rag,masis", judge_model=" ")
    assert spec.baseline == "assistant-v2" and spec.judges == ["rag", "masis"] and not spec.rejudges
    assert spec.model_dump()["judge_model"] is None  # as the spec was written before it had every judge setting
    assert spec.default_id() == _spec(models=["assistant-v2", "assistant-lite"], judges=["rag", "masis"]).default_id()
    assert spec.default_id() != _spec(models=["assistant-v2", "assistant-lite"], seed=1).default_id()
    assert len(spec.days()) == 2
    assert _spec(api_base="http://judge:8000/v1").api_base is None  # ignored without a judge model
    assert _spec(api_base="http://judge:8000/v1", judge_model="openai/m").api_base == "http://judge:8000/v1"


def test_ids_of_comparisons_named_before_the_judge_settings_stay() -> None:
    """The ids the spec had when it declared only judge_model, api_base and concurrency (computed
    with that code): the settings added since leave them unchanged at their defaults."""
    rng = {"start_date": dt.date(2026, 1, 1), "end_date": dt.date(2026, 1, 3), "models": ["a", "b"]}
    assert ComparisonSpec(**rng).default_id() == "cmp-6d46850a549a725a"
    rejudged = ComparisonSpec(**rng, judge_model="openai/x", api_base="http://h", concurrency=4, p_adjust="bh")
    assert rejudged.default_id() == "cmp-cf769a366beceee2"
    assert rejudged.model_copy(update={"judge_rpm": 60.0, "timeout_s": 5.0}).default_id() == "cmp-cf769a366beceee2"
    assert rejudged.model_copy(update={"structured_output": "off"}).default_id() != "cmp-cf769a366beceee2"


def test_landed_tables_read_back_as_written(landed) -> None:
    run_comparison(landed["out"], _spec(), comparison_id="schema")
    data = landed["out"].read_bytes(storage.comparison_key("schema", "metrics.parquet"))
    metrics = pl.read_parquet(io.BytesIO(data))
    assert dict(metrics.schema) == compare.METRICS_SCHEMA
    verdicts = _table(landed["out"], "schema", "verdicts.parquet")
    assert dict(verdicts.schema) == compare.VERDICTS_SCHEMA


@pytest.fixture(scope="module")
def whole_days(landed: dict[str, Any]) -> pl.DataFrame:
    """The oracle of the streamed sample: each day read whole and validated at once (once for every sample)."""
    from evaluation.contract.schemas import RECORD_SCHEMA
    from evaluation.storage.ingest import ingest_objects
    from evaluation.storage.validation import validate

    raw = landed["raw"]
    whole = []
    for day in DAYS:
        objects = [o for o in raw.list(storage.raw_prefix(day)) if o.key.endswith(storage.RAW_SUFFIXES)]
        ingested = ingest_objects(((raw.uri(o.key), raw.read_bytes(o.key)) for o in objects), day)
        valid = validate(ingested.rows, day=day, max_reject_ratio=1.0, allow_empty=True).valid
        whole.append(valid.select([pl.col(c).cast(t) for c, t in RECORD_SCHEMA.items()]).with_columns(dt=pl.lit(day)))
    return pl.concat(whole)


@pytest.mark.parametrize("per_model", [None, 1, 17])
def test_streamed_sample_is_the_whole_day_sample(landed, whole_days: pl.DataFrame, per_model: int | None) -> None:
    """Streaming the days in small batches picks the records the whole days would pick."""
    raw = landed["raw"]
    spec = _spec(sample_per_model=per_model, seed=5)
    records = whole_days.filter(pl.col("model").is_in(spec.models))
    keys = compare.sample_records(records, per_model, spec.seed)
    expected = records.join(keys, on=["dt", "record_id", "model"], how="semi").sort("dt", "record_id")

    streamed = compare.sampled_valid_records(raw, spec, batch_rows=23)
    assert_frame_equal(streamed, expected)
    per = streamed.group_by("model").len().sort("model")["len"].to_list()
    assert per == ([per_model, per_model] if per_model else [len(expected.filter(pl.col("model") == m)) for m in sorted(spec.models)])


# --------------------------------------------------------------------------------------------
# Sampling by question, multiplicity and effect sizes


def _same_questions(models: tuple[str, ...], questions: int, extra: int = 0) -> pl.DataFrame:
    """Every model answered the same ``questions`` once; each also ``extra`` questions of its own."""
    rows = [(DAYS[0], f"{m}-{q}", m, f"q{q:04d}") for m in models for q in range(questions)]
    rows += [(DAYS[1], f"{m}-own-{i}", m, f"{m}-own-{i}") for m in models for i in range(extra)]
    return pl.DataFrame(rows, schema={"dt": pl.Date, "record_id": pl.String, "model": pl.String,
                                      "question_key": pl.String}, orient="row")


@pytest.mark.parametrize("models, questions, extra, per_model", [
    (("a", "b"), 500, 0, 200),   # the case: by records only ~64 of 200 would pair
    (("a", "b", "c"), 300, 0, 50),
    (("a", "b"), 100, 400, 80),  # most records are unpaired: the shared questions come first
])
def test_sampling_by_question_pairs_every_sampled_question(
    models: tuple[str, ...], questions: int, extra: int, per_model: int
) -> None:
    records = _same_questions(models, questions, extra)
    keys = compare.sample_records(records, per_model, seed=11)
    sampled = records.join(keys, on=["dt", "record_id", "model"], how="semi")
    assert sampled.group_by("model").len()["len"].to_list() == [per_model] * len(models)
    assert compare.paired_questions(sampled, list(models)) == per_model
    first = set(sampled.filter(pl.col("model") == models[0])["question_key"])
    assert all(set(sampled.filter(pl.col("model") == m)["question_key"]) == first for m in models)


def test_sampling_by_question_fills_up_with_unpaired_records() -> None:
    records = _same_questions(("a", "b"), 30, 100)
    sampled = records.join(compare.sample_records(records, 50, seed=2), on=["dt", "record_id", "model"], how="semi")
    assert compare.paired_questions(sampled, ["a", "b"]) == 30  # every shared question, then 20 of its own
    assert sampled.group_by("model").len()["len"].to_list() == [50, 50]


def test_rejudged_comparison_pairs_every_sampled_question(landed) -> None:
    """Both models of the generated days answer from the same questions: the sample pairs them all."""
    spec = _spec(judge_model="offline/lexical", sample_per_model=12, seed=4, judges=["rag"])
    result = run_comparison(landed["out"], spec, comparison_id="paired-sample", raw_store=landed["raw"])
    assert result["paired_questions"] == 12 and result["records_per_model"] == {"assistant-lite": 12, "assistant-v2": 12}
    score = _row(_table(landed["out"], "paired-sample", "metrics.parquet"), "rag", "score", "assistant-v2")
    ok = _table(landed["out"], "paired-sample", "evaluations.parquet").filter(pl.col("judge_status") == "ok")
    assert score["test"] == "paired" and score["n_pairs"] == compare.paired_questions(ok, spec.models) >= 10
    assert json.loads(Path(result["spec_uri"]).read_text())["paired_questions"] == 12
    assert "12 questions were answered by every compared model" in Path(result["report_uri"]).read_text()


def _holm_by_definition(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    m, out, running = len(p), [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def _bh_by_definition(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    m, out = len(p), [0.0] * len(p)
    for rank, i in enumerate(order):
        out[i] = min(min(1.0, m * p[j] / (later + 1)) for later, j in enumerate(order) if later >= rank)
    return out


@pytest.mark.parametrize("p, holm, bh", [
    ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02], [0.02, 0.04, 0.04, 0.02]),
    ([0.05], [0.05], [0.05]),
    ([0.5, 0.5, 0.5], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5]),
    ([0.001, 0.002, 0.003, 0.9], [0.004, 0.006, 0.006, 0.9], [0.004, 0.004, 0.004, 0.9]),
    ([0.2, 0.01, 0.3, 0.04, 0.6], [0.6, 0.05, 0.6, 0.16, 0.6], [1 / 3, 0.05, 0.375, 0.1, 0.6]),
])
def test_p_value_adjustments_known_values(p: list[float], holm: list[float], bh: list[float]) -> None:
    assert compare.holm(np.array(p)) == pytest.approx(holm)
    assert compare.benjamini_hochberg(np.array(p)) == pytest.approx(bh)
    assert compare.adjust_p_values(np.array(p), "holm") == pytest.approx(holm)
    assert compare.adjust_p_values(np.array(p), "bh") == pytest.approx(bh)


@pytest.mark.parametrize("seed", range(8))
def test_p_value_adjustments_match_their_definitions_and_are_monotone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=int(rng.integers(1, 40))) ** rng.uniform(0.5, 3)
    holm, bh = compare.holm(p), compare.benjamini_hochberg(p)
    assert holm == pytest.approx(_holm_by_definition(p.tolist()))
    assert bh == pytest.approx(_bh_by_definition(p.tolist()))
    order = np.argsort(p)
    for adjusted in (holm, bh):
        assert np.all(np.diff(adjusted[order]) >= -1e-15)  # the order of the raw p-values is kept
        assert np.all(adjusted >= p - 1e-15) and np.all(adjusted <= 1.0)
    assert np.all(bh <= holm + 1e-15)  # BH never adjusts more than Holm


def test_unknown_adjustment_is_refused() -> None:
    with pytest.raises(ValueError, match="holm"):
        compare.adjust_p_values(np.array([0.1]), "bonferroni-ish")


def test_effect_sizes_on_known_samples() -> None:
    differences = np.array([0.1, 0.3, 0.2, 0.4, 0.0, 0.2] * 5)
    paired = compare.paired_test(differences, compare.rng_for(0, "effect"), 1000)
    assert paired.effect_size == pytest.approx(differences.mean() / differences.std(ddof=1))
    assert paired.effect_ci_low < paired.effect_size < paired.effect_ci_high
    sample, baseline = np.linspace(0.5, 1.0, 40), np.linspace(0.0, 0.6, 60)
    pooled = np.sqrt((39 * sample.var(ddof=1) + 59 * baseline.var(ddof=1)) / 98)
    unpaired = compare.unpaired_test(sample, baseline, compare.rng_for(0, "effect"), 1000)
    assert unpaired.effect_size == pytest.approx((sample.mean() - baseline.mean()) / pooled)
    assert unpaired.effect_ci_low < unpaired.effect_size < unpaired.effect_ci_high
    constant = compare.paired_test(np.full(20, 0.1), compare.rng_for(0, "effect"), 200)
    assert constant.effect_size is None and constant.effect_ci_low is None  # no spread, no d


def test_metrics_carry_adjusted_p_values_and_effect_sizes(landed) -> None:
    run_comparison(landed["out"], _spec(), comparison_id="adjusted")
    metrics = _table(landed["out"], "adjusted", "metrics.parquet")
    tested = metrics.filter(pl.col("p_value").is_not_null())
    assert tested.height == metrics.filter(~pl.col("is_baseline")).height
    assert set(tested["p_adjust_method"]) == {"holm"} and set(tested["n_tests"]) == {tested.height}
    assert tested["p_adjusted"].to_list() == pytest.approx(compare.holm(tested["p_value"].to_numpy()).tolist())
    assert (tested["p_adjusted"] >= tested["p_value"]).all()
    assert tested["significant"].to_list() == (tested["p_adjusted"] < compare.ALPHA).to_list()
    score = _row(metrics, "rag", "score", "assistant-v2")
    assert score["effect_size"] > 0 and score["effect_size_ci_low"] > 0
    page = _table_text(landed["out"], "adjusted")
    assert "p (Holm)" in page and f"adjusted for the {tested.height} tests" in page and "effect size" in page


def _table_text(store: storage.Store, comparison_id: str) -> str:
    return store.read_bytes(storage.comparison_key(comparison_id, "report.html")).decode()


# --------------------------------------------------------------------------------------------
# Tests that can reject, and a delta the page shows as the difference of its means


@pytest.mark.parametrize("models, judges", [(8, None), (8, ["rag", "masis"]), (3, ["prompt"]), (2, ["prompt"])])
def test_permutation_floor_is_below_the_holm_threshold_of_the_models_compared(
        models: int, judges: list[str] | None, caplog: pytest.LogCaptureFixture) -> None:
    chosen = list(judges or JUDGES)
    spec = _spec(models=[f"m{i}" for i in range(models)], judges=chosen, bootstrap=100)  # the least the option takes
    tests = sum(len(JUDGE_METRICS[judge]) for judge in chosen) * (models - 1)
    with caplog.at_level("INFO", logger="evaluation.compare.compute"):
        permutations = permutation_count(spec)
    assert 1 / (permutations + 1) < compare.ALPHA / tests
    assert f"{permutations} permutations a delta instead of bootstrap=100" in caplog.text  # raised, and said so
    if models == 8 and judges is None:  # 14 tests a compared model: Holm's first threshold over 8 × 14 too
        assert 1 / (permutations + 1) < compare.ALPHA / (8 * 14)
    # a larger option is kept as it is
    assert permutation_count(spec.model_copy(update={"bootstrap": permutations + 5000})) == permutations + 5000


def test_a_clear_effect_stays_significant_with_eight_models_and_the_least_resamples() -> None:
    rng = np.random.default_rng(3)
    questions = [f"question {i}" for i in range(30)]
    answers = {"m0": [(q, float(rng.uniform(0.2, 0.4))) for q in questions]}
    answers.update({f"m{k}": [(q, float(rng.uniform(0.6, 0.9))) for q in questions] for k in range(1, 8)})
    spec = _spec(models=list(answers), judges=["prompt"], bootstrap=100)
    metrics = compare.compare_metrics(_rows(answers), spec, "eight")
    tested = metrics.filter(~pl.col("is_baseline"))
    assert tested.height == 14 and set(tested["n_tests"]) == {14}
    # every question better in every model: at 100 permutations Holm's adjusted p could not go below 14/101
    assert tested["significant"].all(), tested.select("metric", "model", "p_value", "p_adjusted")
    assert set(tested["permutations"]) == {permutation_count(spec)}


def _page_cells(page: str, metric: str, model: str) -> list[str]:
    """The cells after ``metric`` and ``model`` of their row in the metrics table of a comparison page."""
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td>(.*?)</tr>", page)
    cells = [body for first, second, body in rows if first == metric and second == model]
    assert len(cells) == 1, rows
    return re.findall(r"<td[^>]*>(.*?)</td>", cells[0])


def test_page_shows_the_paired_delta_as_the_difference_of_the_means_beside_it() -> None:
    shared = [f"question {i}" for i in range(15)]
    a = [(q, 0.4 + 0.01 * i) for i, q in enumerate(shared)] + [(f"only a {i}", 0.1) for i in range(10)]
    b = [(q, 0.5 + 0.02 * i) for i, q in enumerate(shared)] + [(f"only b {i}", 0.95) for i in range(10)]
    rows = _rows({"a": a, "b": b})
    spec = _spec(models=["a", "b"], judges=["prompt"], bootstrap=200)
    metrics = compare.compare_metrics(rows, spec, "shown")
    row = _row(metrics, "prompt", "score", "b")
    assert row["test"] == "paired"
    # over all rows the means differ by much more than the paired delta: the page must not put them side by side alone
    assert abs((row["mean"] - row["baseline_mean"]) - row["delta"]) > 0.1
    page = render_report("shown", spec, "landed", metrics, compare_verdicts(rows, spec, "shown"), {"a": 25, "b": 25},
                         {}, 15)
    cells = _page_cells(page, "score", "b")
    header = re.findall(r"<th[^>]*>(.*?)</th>", page.split("<h3>Metrics</h3>", 1)[1].split("</tr>", 1)[0])
    shown = dict(zip(header[2:], cells, strict=True))  # the cells after the metric and the model
    tested, baseline, delta = (float(shown[k]) for k in ("tested mean", "baseline's tested mean", "delta"))
    assert delta == pytest.approx(tested - baseline, abs=0.0015)  # three decimals each
    assert tested == pytest.approx(np.mean([0.5 + 0.02 * i for i in range(15)]), abs=0.0005)
    assert baseline == pytest.approx(np.mean([0.4 + 0.01 * i for i in range(15)]), abs=0.0005)
    assert float(shown["mean"]) == pytest.approx(row["mean"], abs=0.0005)
