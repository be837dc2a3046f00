"""Judge calibration end to end in one process: golden sets read and validated, judged through the
stages and the ledger, measured, landed as ``calibrations/`` and a page. The landed figures are
recomputed here from the landed judged rows and labels with scipy and plain formulas."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import polars as pl
import pytest
from scipy import stats

from evaluation import storage
from evaluation.calibration import CalibrationError, CalibrationSpec
from evaluation.calibration.golden import label_problems
from evaluation.calibration.run import calibration_id, run_calibration
from evaluation.cli import main as cli
from evaluation.judges import read_fenced_blocks
from evaluation.testing.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "data" / "golden"


def _write_set(folder: Path, records: list[dict[str, Any]], name: str = "records.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


def _shipped(name: str, limit: int | None = None) -> list[dict[str, Any]]:
    lines = (SHIPPED / name / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:limit]]


def _landed(out: Path, calibration: str, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / storage.calibration_key(calibration, name))


# --------------------------------------------------------------------------------------------
# Labels


@pytest.mark.parametrize(
    "labels, reasons",
    [
        ({"faithful": True}, []),
        ({"rating": 3, "verdict": "borderline", "source_label": "ok-ish"}, []),
        ({"scores": {"faithfulness": 0.25, "score": None}}, []),
        (None, ["labels: missing"]),
        ([True], ["labels: not an object (got array)"]),
        ({}, ["labels: no label (give faithful, rating, scores or verdict)"]),
        ({"scores": {"score": None}}, ["labels: no label (give faithful, rating, scores or verdict)"]),
        ({"faithful": "yes"}, ["labels.faithful: not a boolean (got string)"]),
        ({"faithfull": True}, ["labels: unknown field 'faithfull' (known: faithful, rating, scores, verdict, source_label)"]),
        ({"rating": 2.5}, ["labels.rating: not an integer (got number 2.5)"]),
        ({"rating": True}, ["labels.rating: not an integer (got boolean True)"]),
        ({"scores": {"faithfulness": 1.5}}, ["labels.scores.faithfulness: 1.5 is outside [0, 1]"]),
        ({"scores": {"helpfulness": 0.5}}, ["labels.scores: unknown metric 'helpfulness' (known: score, faithfulness, "
                                            "context_relevance, answer_relevance, semantic_similarity, relevance, "
                                            "completeness, reasoning_quality)"]),
        ({"scores": [0.5]}, ["labels.scores: not an object (got array)"]),
        ({"verdict": "good"}, ["labels.verdict: 'good' is not one of pass, borderline, fail"]),
        ({"faithful": 1, "verdict": "ok"}, ["labels.faithful: not a boolean (got number)",
                                            "labels.verdict: 'ok' is not one of pass, borderline, fail"]),
    ],
)
def test_label_rules(labels: Any, reasons: list[str]) -> None:
    checked, problems = label_problems(labels)
    assert problems == reasons
    assert (checked is None) == bool(reasons)


def test_bad_records_and_bad_labels_are_rejected_with_every_reason(tmp_path: Path) -> None:
    records = _shipped("halueval-qa", 12)
    records[1]["labels"] = {"faithful": "no"}
    records[2]["labels"] = {}
    del records[3]["labels"]
    records[4]["question"] = " "  # CONTRACT §1 and a bad label at once
    records[4]["labels"] = {"verdict": "meh"}
    golden = _write_set(tmp_path / "golden" / "mixed", records)
    (golden / "broken.jsonl").write_text('{"record_id": "x", \n', encoding="utf-8")
    spec = CalibrationSpec(golden_uri=str(golden), judges=["rag"], max_reject_ratio=1.0)
    out = tmp_path / "out"
    result = run_calibration(storage.LocalStore(out), storage.LocalStore(golden), spec)
    assert result["records"] == 8 and result["rejected"] == 5
    rejects = _landed(out, result["calibration_id"], "rejects.parquet")
    reasons = {r: list(v) for r, v in zip(rejects["record_id"], rejects["reasons"], strict=True)}
    ids = [r["record_id"] for r in records]
    assert reasons[ids[1]] == ["labels.faithful: not a boolean (got string)"]
    assert reasons[ids[2]] == ["labels: no label (give faithful, rating, scores or verdict)"]
    assert reasons[ids[3]] == ["labels: missing"]
    assert any("question" in r for r in reasons[ids[4]]) and reasons[ids[4]][-1].startswith("labels.verdict")
    assert any("not valid JSON" in r or "JSON" in r for r in reasons[None])
    evaluations = _landed(out, result["calibration_id"], "evaluations.parquet")
    assert set(evaluations["record_id"]) == {ids[0], *ids[5:]}


def test_too_many_rejects_fail_the_calibration_after_landing_them(tmp_path: Path) -> None:
    records = _shipped("begin-wow", 10)
    for record in records[:3]:
        record["labels"] = {"faithful": None}
    golden = _write_set(tmp_path / "golden" / "bad", records)
    spec = CalibrationSpec(golden_uri=str(golden), judges=["rag"])
    with pytest.raises(CalibrationError, match=r"3 of 10 records rejected \(30.0%\), above max_reject_ratio 5.0%"):
        run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(golden), spec)
    rejects = pl.read_parquet(tmp_path / "out" / storage.calibration_key(calibration_id(spec), "rejects.parquet"))
    assert rejects.height == 3
    assert not (tmp_path / "out" / storage.calibration_key(calibration_id(spec), "calibration.parquet")).exists()


def test_an_empty_folder_is_no_golden_set(tmp_path: Path) -> None:
    (tmp_path / "golden" / "empty").mkdir(parents=True)
    spec = CalibrationSpec(golden_uri=str(tmp_path / "golden" / "empty"))
    with pytest.raises(CalibrationError, match="no records"):
        run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(spec.golden_uri), spec)


# --------------------------------------------------------------------------------------------
# The shipped set with the offline judge, through the CLI


def _recompute(evaluations: pl.DataFrame, labels: pl.DataFrame, judge: str, metric: str) -> dict[str, Any]:
    """The table's figures, independently: scipy's Mann-Whitney U and Spearman, κ by its formula."""
    frame = (evaluations.filter((pl.col("judge") == judge) & (pl.col("judge_status") == "ok") & pl.col(metric).is_not_null())
             .join(labels, on="record_id"))
    values = frame[metric].to_numpy()
    good = frame["faithful"].to_numpy().astype(bool)
    u = stats.mannwhitneyu(values[good], values[~good]).statistic
    flagged = frame["verdict"].to_numpy() == "fail" if metric == "score" else values < 0.6
    n = len(good)
    tp, fp = int((flagged & ~good).sum()), int((flagged & good).sum())
    fn, tn = int((~flagged & ~good).sum()), int((~flagged & good).sum())
    observed = (tp + tn) / n
    expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2
    return {"n": n, "auroc": u / (good.sum() * (~good).sum()),
            "spearman": stats.spearmanr(values, good.astype(float)).statistic,
            "kappa": (observed - expected) / (1 - expected), "f1": 2 * tp / (2 * tp + fp + fn)}


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """``python -m evaluation calibrate`` on the shipped HaluEval set with the offline judge, twice."""
    out = tmp_path_factory.mktemp("calibrations")
    args = ["calibrate", "--golden", str(SHIPPED / "halueval-qa"), "--output", str(out), "--judge-model",
            "offline/lexical", "--judges", "rag,masis,prompt", "--seed", "3", "--bootstrap", "500"]
    results = []
    for _ in range(2):
        import contextlib
        import io

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert cli.main(args) == 0
        results.append(json.loads(printed.getvalue()))
    return out, results[0], results[1]


def test_calibrate_lands_the_table_and_the_page(shipped_run: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    out, first, _ = shipped_run
    assert first["status"] == "success" and first["set"] == "halueval-qa" and first["records"] == 300
    calibration = first["calibration_id"]
    table = _landed(out, calibration, "calibration.parquet")
    assert table.select("judge", "metric").rows() == [
        ("rag", "score"), ("rag", "faithfulness"), ("rag", "context_relevance"), ("rag", "answer_relevance"),
        ("rag", "semantic_similarity"), ("masis", "score"), ("masis", "faithfulness"), ("masis", "relevance"),
        ("masis", "completeness"), ("masis", "reasoning_quality"), ("prompt", "score")]
    assert set(table["set_name"]) == {"halueval-qa"} and set(table["judge_model"]) == {"offline/lexical"}
    assert all(v.startswith(j + "@") for j, v in zip(table["judge"], table["prompt_version"], strict=True))
    rag = table.row(0, named=True)
    assert rag["n_records"] == 300 and rag["rate_ok"] == 1.0 and rag["n_good"] == rag["n_bad"] == 150
    prompt = table.filter(pl.col("judge") == "prompt").row(0, named=True)
    assert prompt["rate_skipped"] == 1.0 and prompt["n"] == 0 and prompt["auroc"] is None  # no reference: not applicable
    assert table.filter(pl.col("metric") == "semantic_similarity")["n"].item() == 0
    page = (out / storage.calibration_key(calibration, "report.html")).read_text()
    assert page.count("<svg") == 2 and "ROC — rag" in page and "ROC — masis" in page
    assert "https://" not in page.replace("https://github.com/RUCAIBox/HaluEval", "") and "<script" not in page
    assert "HaluEval" in page  # the set's description and licence


def test_landed_figures_agree_with_an_independent_computation(
    shipped_run: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, first, _ = shipped_run
    calibration = first["calibration_id"]
    table = _landed(out, calibration, "calibration.parquet")
    evaluations = _landed(out, calibration, "evaluations.parquet")
    labels = _landed(out, calibration, "labels.parquet").select("record_id", "faithful")
    for judge, metric in itertools.product(("rag", "masis"), ("score", "faithfulness")):
        row = table.filter((pl.col("judge") == judge) & (pl.col("metric") == metric)).row(0, named=True)
        expected = _recompute(evaluations, labels, judge, metric)
        assert row["n"] == expected["n"]
        assert row["spearman_label"] == "faithful"
        for name in ("auroc", "spearman", "kappa", "f1"):
            assert row[name] == pytest.approx(expected[name], abs=1e-9), (judge, metric, name)
        assert row["auroc_ci_low"] <= row["auroc"] <= row["auroc_ci_high"]
        if metric == "faithfulness":  # no forcing rule on a metric: the best cut by brute force
            frame = (evaluations.filter((pl.col("judge") == judge) & (pl.col("judge_status") == "ok"))
                     .join(labels, on="record_id"))
            values, bad = frame[metric].to_numpy(), ~frame["faithful"].to_numpy().astype(bool)
            kappas = {}
            for cut in sorted(set(values.tolist())):
                flagged = values < cut
                n, tp, fp = len(bad), int((flagged & bad).sum()), int((flagged & ~bad).sum())
                fn, tn = int((~flagged & bad).sum()), int((~flagged & ~bad).sum())
                chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n**2
                kappas[cut] = ((tp + tn) / n - chance) / (1 - chance)
            assert row["best_kappa"] == pytest.approx(max(kappas.values()), abs=1e-12)
            assert kappas[row["best_borderline"]] == pytest.approx(row["best_kappa"], abs=1e-12)


def test_the_offline_judge_agrees_with_the_labels_on_the_shipped_set(
    shipped_run: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, first, _ = shipped_run
    table = _landed(out, first["calibration_id"], "calibration.parquet").filter(pl.col("metric") == "score")
    for row in table.filter(pl.col("judge") != "prompt").iter_rows(named=True):
        assert row["auroc"] >= 0.85 and row["kappa"] >= 0.5, row


def test_a_rerun_pays_nothing_and_gives_the_same_figures(
    shipped_run: tuple[Path, dict[str, Any], dict[str, Any]],
) -> None:
    out, first, second = shipped_run
    assert first["calls_made"] == 600 and first["calls_reused"] == 0  # rag and masis; prompt is skipped
    assert second["calls_made"] == 0 and second["calls_reused"] == 600
    assert second["calibration_id"] == first["calibration_id"] and second["figures"] == first["figures"]


# --------------------------------------------------------------------------------------------
# A judge that knows the labels


def _judge_by_label(records: list[dict[str, Any]]) -> Any:
    """A judge model that answers by the label: every metric 1.0 for a faithful record, 0.0 else."""
    faithful = {(r["question"], r["answer"]): r["labels"]["faithful"] for r in records}

    def respond(body: dict[str, Any]) -> str:
        system, user = (m["content"] for m in body["messages"])
        blocks = read_fenced_blocks(user)
        value = 1.0 if faithful[(blocks["question"], blocks["answer"])] else 0.0
        if system.startswith("judge: rag"):
            return json.dumps({"faithfulness": value, "context_relevance": value, "answer_relevance": value,
                               "semantic_similarity": None, "evaluation_status": "success"})
        return json.dumps({"faithfulness": value, "relevance": value, "completeness": value,
                           "reasoning_quality": value, "improvement_suggestions": []})

    return respond


def test_a_judge_that_answers_by_the_label_gets_auroc_one_and_kappa_one(tmp_path: Path) -> None:
    records = _shipped("begin-wow", 60)
    golden = _write_set(tmp_path / "golden" / "begin-small", records)
    with OpenAIServer(responder=_judge_by_label(records)) as server:
        spec = CalibrationSpec(golden_uri=str(golden), judges=["rag", "masis"], judge_model="openai/mock-judge",
                               api_base=server.base_url)
        result = run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(golden), spec,
                                 api_key="test-key")
        assert len(server.probes) == 1  # one probe before paying, then one call per distinct prompt
        assert server.request_count == result["calls_made"] and result["calls_made"] + result["calls_reused"] == 120
        rerun = run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(golden), spec,
                                api_key="test-key")
        assert rerun["calls_made"] == 0 and len(server.probes) == 1  # the ledger holds every reply: no probe either
        assert server.request_count == result["calls_made"]
    table = _landed(tmp_path / "out", result["calibration_id"], "calibration.parquet")
    scores = table.filter(pl.col("metric") == "score")
    assert scores["auroc"].to_list() == [1.0, 1.0]
    assert scores["kappa"].to_list() == [1.0, 1.0] and scores["f1"].to_list() == [1.0, 1.0]
    assert scores["auroc_ci_low"].to_list() == [1.0, 1.0]
    assert scores["suggested_kappa_holdout"].to_list() == [1.0, 1.0]


# --------------------------------------------------------------------------------------------
# Ratings, per-metric scores and expected verdicts


def test_expected_verdicts_ratings_and_scores_are_measured(tmp_path: Path) -> None:
    records = _shipped("halueval-qa", 40)
    for index, record in enumerate(records):
        faithful = record["labels"]["faithful"]
        record["labels"] = {"rating": (4 if faithful else 1) - index % 2, "verdict": "pass" if faithful else "fail",
                            "scores": {"faithfulness": 0.9 if faithful else 0.1 + 0.01 * index}}
    golden = _write_set(tmp_path / "golden" / "graded", records)
    spec = CalibrationSpec(golden_uri=str(golden), judges=["rag"], bootstrap=200)
    result = run_calibration(storage.LocalStore(tmp_path / "out"), storage.LocalStore(golden), spec)
    calibration = result["calibration_id"]
    table = _landed(tmp_path / "out", calibration, "calibration.parquet")
    by_metric = {row["metric"]: row for row in table.iter_rows(named=True)}
    assert by_metric["faithfulness"]["spearman_label"] == "scores.faithfulness"
    assert by_metric["score"]["spearman_label"] == "rating"
    assert by_metric["score"]["suggested_by"] == "verdict" and by_metric["score"]["n_expected"] == 40
    evaluations = _landed(tmp_path / "out", calibration, "evaluations.parquet").filter(pl.col("judge") == "rag")
    labels = _landed(tmp_path / "out", calibration, "labels.parquet")
    joined = evaluations.join(labels.rename({"verdict": "expected"}), on="record_id")
    predicted, expected = joined["verdict"].to_list(), joined["expected"].to_list()
    n = len(predicted)
    observed = sum(p == e for p, e in zip(predicted, expected, strict=True)) / n
    chance = sum(predicted.count(c) * expected.count(c) for c in ("pass", "borderline", "fail")) / n**2
    assert by_metric["score"]["verdict_kappa"] == pytest.approx((observed - chance) / (1 - chance), abs=1e-12)
    assert by_metric["score"]["verdict_accuracy"] == pytest.approx(observed)
    ratings = joined["rating"].to_numpy().astype(float)
    assert by_metric["score"]["spearman"] == pytest.approx(stats.spearmanr(joined["score"].to_numpy(), ratings).statistic)
    assert by_metric["score"]["n_good"] + by_metric["score"]["n_bad"] == 40  # the binary label from the verdict


def test_the_calibrations_table_is_queryable(shipped_run: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    from evaluation.storage import sql

    out, first, _ = shipped_run
    result = sql.run_sql(storage.LocalStore(out), "SELECT judge, auroc, kappa FROM calibrations "
                                                  "WHERE metric = 'score' AND judge <> 'prompt' ORDER BY judge")
    table = _landed(out, first["calibration_id"], "calibration.parquet")
    expected = table.filter((pl.col("metric") == "score") & (pl.col("judge") != "prompt")).sort("judge")
    assert result.rows() == expected.select("judge", "auroc", "kappa").rows()


def test_calibrate_lands_beside_the_golden_sets_without_an_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "golden"
    _write_set(root / "tiny", _shipped("halueval-qa", 10))
    monkeypatch.delenv("EVALUATION_OUTPUT_URI", raising=False)
    monkeypatch.chdir(root)
    assert cli.main(["calibrate", "--golden", "tiny", "--judges", "rag", "--bootstrap", "100"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert Path(result["table_uri"]).is_file() and Path(result["table_uri"]).is_relative_to(root / "calibrations")
    assert [p.name for p in (root / "tiny").iterdir()] == ["records.jsonl"]  # the set's folder is left alone


def test_an_empty_calibrate_option_takes_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _write_set(tmp_path / "golden" / "tiny", _shipped("halueval-qa", 10))
    for name, value in {"EVALUATION_JUDGES": "rag", "EVALUATION_BOOTSTRAP": "100", "EVALUATION_CONCURRENCY": "3",
                        "EVALUATION_HOLDOUT_SHARE": "0.4", "EVALUATION_JUDGE_MODEL": "offline/lexical",
                        "EVALUATION_STRUCTURED_OUTPUT": "off"}.items():
        monkeypatch.setenv(name, value)
    args = ["calibrate", "--golden", str(tmp_path / "golden" / "tiny"), "--output", str(tmp_path / "out"),
            "--no-progress", "--holdout-share", "0.6"]
    assert cli.main(args) == 0
    result = json.loads(capsys.readouterr().out)
    out = storage.LocalStore(tmp_path / "out")
    spec = CalibrationSpec.model_validate(
        storage.read_json(out, storage.calibration_key(result["calibration_id"], "judging.json"))["spec"])
    assert (spec.judges, spec.bootstrap, spec.concurrency, spec.structured_output) == (["rag"], 100, 3, "off")
    assert spec.holdout_share == 0.6  # a flag given wins over its variable


def test_calibrate_draws_a_progress_bar_per_model_on_stderr_unless_told_not_to(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bar for the model judging the set (one per model with a cascade), counting its (record,
    judge) rows to the last; stdout keeps the JSON alone; ``--no-progress`` draws none."""
    _write_set(tmp_path / "golden" / "tiny", _shipped("halueval-qa", 10))
    args = ["calibrate", "--golden", str(tmp_path / "golden" / "tiny"), "--judges", "rag,masis", "--bootstrap", "100",
            "--output", str(tmp_path / "out"), "--judge-model", "offline/lexical"]
    assert cli.main(args) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["status"] == "success"
    finals = [line for line in printed.err.replace("\r", "\n").splitlines() if "20/20" in line]
    assert any(line.startswith("tiny with offline/lexical: 100%") for line in finals), printed.err
    assert cli.main([*args, "--calibration-id", "quiet", "--no-progress"]) == 0
    assert "judgement" not in capsys.readouterr().err
