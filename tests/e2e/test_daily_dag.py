"""End to end: daily_evaluation under Airflow (dag.test) against an S3 API on loopback."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest

from evaluation import storage
from evaluation.testing import synthetic
from scripts import airflow_local

pytestmark = pytest.mark.e2e

DAY = dt.date(2026, 11, 20)
RECORDS = 150
INPUT_URI = "s3://llm-logs/raw"
#: Rows of a blank answer: no judge was called (CONTRACT §2.5).
EMPTY_ANSWER = pl.col("clamps_applied").list.contains("empty_answer")


def _run(conf: dict) -> object:
    return airflow_local.run_dag("daily_evaluation", DAY, conf)


def _tables(s3, output_uri: str) -> dict[str, pl.DataFrame]:
    out = storage.open_store(output_uri, s3.access())
    tables = {t: storage.read_day(out, t, DAY) for t in storage.TABLES if t != "runs"}
    tables["runs"] = storage.scan_table(out, "runs").filter(pl.col("dt") == DAY).collect()  # type: ignore[union-attr]
    return tables


@pytest.fixture(scope="module")
def raw_day(local_s3) -> None:
    raw = storage.open_store(INPUT_URI, local_s3.access())
    synthetic.write_day(raw, DAY, RECORDS)


def test_offline_judge_end_to_end_and_rerun(airflow_db, local_s3, raw_day) -> None:
    output_uri = "s3://llm-evaluation/offline"
    conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "offline/lexical", "chunk_size": 40}
    dag_run = _run(conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert sum(1 for task in states if task.startswith("judge[")) == 4  # 150 records / 40 per chunk

    tables = _tables(local_s3, output_uri)
    evaluations, rejects = tables["evaluations"], tables["rejects"]
    planted = len(synthetic.bad_lines(DAY)) + 1  # + the repeated record_id
    # CONTRACT §4: input = valid + rejected; rows = valid × judges; one status per row.
    assert rejects.height == planted
    valid = evaluations["record_id"].n_unique()
    assert valid == RECORDS
    assert evaluations.height == valid * 3
    assert evaluations.select("record_id", "judge").is_duplicated().sum() == 0
    assert evaluations["judge_status"].is_in(["ok", "parse_error", "judge_failed", "call_error", "skipped"]).all()
    run = tables["runs"].row(0, named=True)
    assert run["input_records"] == run["valid_records"] + run["rejected_records"] == RECORDS + planted
    assert run["trigger"] == "manual" and run["status"] == "success"

    reasons = {row["record_id"]: " ".join(row["reasons"]) for row in rejects.iter_rows(named=True)}
    assert "question" in reasons["bad-no-question"]
    assert "timestamp" in reasons["bad-other-day"]
    assert "rubrics" in reasons["bad-rubric"]
    assert "contexts" in reasons["bad-contexts"]
    assert any("not valid JSON" in r for r in reasons.values())
    assert any("repeated" in r for r in reasons.values())

    _assert_rules_hold(evaluations)
    # prompt judge: a record with neither rubrics, expected outcome nor reference is skipped.
    skipped = evaluations.filter(pl.col("judge_status") == "skipped")
    assert skipped.height > 0 and (skipped["judge"] == "prompt").all()
    assert skipped["reason"].eq("not_applicable").all() and skipped["score"].is_null().all()

    # A re-run of the same day replaces it whole and pays for no call twice.
    second = _run(conf)
    assert str(second.state) == "success"
    again = _tables(local_s3, output_uri)
    assert again["evaluations"].height == evaluations.height
    assert again["evaluations"]["run_id"].n_unique() == 1
    assert again["evaluations"]["run_id"][0] == second.run_id
    judged = again["evaluations"].filter((pl.col("judge_status") != "skipped") & ~EMPTY_ANSWER)
    assert judged["cached"].all() and judged["attempts"].eq(0).all()
    assert again["rejects"].height == planted
    assert again["runs"].height == 2  # the runs table keeps one row per run
    latest = again["runs"].filter(pl.col("run_id") == second.run_id).row(0, named=True)
    assert latest["calls_made"] == 0 and latest["calls_reused"] == judged.height
    summary = again["daily_summary"]
    assert summary.height == 9 and summary["rows"].sum() == evaluations.height


def _assert_empty_answers(evaluations: pl.DataFrame) -> None:
    """CONTRACT §2.5: every judge lands a blank answer ok, score 0, verdict fail, with no call."""
    empty = evaluations.filter(EMPTY_ANSWER)
    assert empty.height > 0, "the day plants empty answers"
    assert set(empty["judge"]) == {"rag", "masis", "prompt"}
    assert empty["judge_status"].eq("ok").all() and empty["score"].eq(0.0).all() and empty["verdict"].eq("fail").all()
    assert empty["attempts"].eq(0).all() and empty["cost_usd"].eq(0.0).all() and not empty["cached"].any()


def _assert_rules_hold(evaluations: pl.DataFrame) -> None:
    """Clamps and verdicts hold on the landed table (CONTRACT §2.3–2.5)."""
    _assert_empty_answers(evaluations)
    scored = evaluations.filter(pl.col("score").is_not_null())
    for row in scored.iter_rows(named=True):
        expected = "pass" if row["score"] >= 0.8 else "borderline" if row["score"] >= 0.6 else "fail"
        if row["verdict"] != expected:
            assert row["verdict"] == "fail", row
            assert (any(c.endswith(":verdict") or c == "empty_answer" for c in row["clamps_applied"])
                    or row["judge_status"] == "parse_error")
    masis = evaluations.filter((pl.col("judge") == "masis") & (pl.col("judge_status") == "ok"))
    assert masis.height > 0
    for row in masis.iter_rows(named=True):
        if row["invalid_citations"]:
            assert row["hallucination_detected"] and row["faithfulness"] <= 0.4
        if row["uncited_claim_count"] >= 10:
            assert row["faithfulness"] <= 0.3
        elif row["uncited_claim_count"] >= 5:
            assert row["faithfulness"] <= 0.5
        total = row["faithfulness"] * 0.35 + row["relevance"] * 0.25 + row["completeness"] * 0.25
        assert row["score"] == round(total + row["reasoning_quality"] * 0.15, 3)
    assert masis.filter(pl.col("invalid_citations").list.len() > 0).height > 0, "the day plants invalid citations"
    rag = evaluations.filter((pl.col("judge") == "rag") & (pl.col("judge_status") == "ok"))
    assert rag.filter(pl.col("faithfulness") == 0.0)["verdict"].eq("fail").all()
    for judge in ("rag", "masis", "prompt"):
        no_call = evaluations.filter((pl.col("judge") == judge) & pl.col("judge_status").is_in(["call_error", "skipped"]))
        assert no_call["score"].is_null().all() and no_call["verdict"].is_null().all()


def _scripted_reply(body: dict) -> str:
    system = body["messages"][0]["content"]
    kind = system.split("\n", 1)[0].removeprefix("judge: ")
    if kind == "rag":
        return ("Here is my evaluation:\n```json\n" + json.dumps({
            "faithfulness": 1.5, "context_relevance": 0.125, "answer_relevance": 0.8,
            "semantic_similarity": 0.9, "evaluation_status": "success", "reason": None, "error": None,
        }) + "\n```")
    if kind == "masis":
        return json.dumps({"faithfulness": 90, "relevance": 0.8, "completeness": 0.7, "reasoning_quality": 0.6,
                           "overall_score": 0.99, "improvement_suggestions": ["cite more"]})
    if kind == "prompt/rubric":
        return json.dumps({"checks": [{"id": "states-value", "satisfied": True, "reasoning": "states it"},
                                      {"id": "cites", "satisfied": False, "reasoning": "no"}]})
    return json.dumps({"score": 85, "hits": ["a", " ", "b", 3, "c", "d", "e"], "misses": "none", "reasoning": "ok"})


def test_openai_compatible_judge_end_to_end(airflow_db, local_s3, raw_day) -> None:
    from evaluation.testing.openai_server import OpenAIServer

    output_uri = "s3://llm-evaluation/openai"
    with OpenAIServer(responder=_scripted_reply) as server:
        conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "openai/mock-judge",
                "api_base": server.base_url, "chunk_size": 75, "concurrency": 8}
        dag_run = _run(conf)
        assert str(dag_run.state) == "success", airflow_local.task_states(dag_run)
        requests = server.request_count
    evaluations = _tables(local_s3, output_uri)["evaluations"]
    _assert_empty_answers(evaluations)
    evaluations = evaluations.filter(~EMPTY_ANSWER)  # what the judge was sent
    judged = evaluations.filter(pl.col("judge_status") != "skipped")
    assert judged["judge_status"].eq("ok").all(), judged.filter(pl.col("judge_status") != "ok")["error"].head(3).to_list()
    # One call per distinct prompt, no retries: identical prompts (repeated records) are reused.
    assert requests == judged.filter(~pl.col("cached")).height
    assert judged.filter(pl.col("cached")).height < judged.height / 4

    rag = evaluations.filter(pl.col("judge") == "rag")
    assert rag["faithfulness"].eq(1.0).all() and rag["context_relevance"].eq(0.12).all()
    assert rag["answer_relevance"].eq(0.8).all()
    for row in rag.iter_rows(named=True):
        assert "clamp_0_1:faithfulness" in row["clamps_applied"]
        if row["semantic_similarity"] is None:
            assert "no_reference_null:semantic_similarity" in row["clamps_applied"]
            assert row["score"] == round((0.4 * 1.0 + 0.3 * 0.8 + 0.15 * 0.12) / (0.4 + 0.3 + 0.15), 3)
        else:
            assert row["score"] == round((0.4 * 1.0 + 0.3 * 0.8 + 0.15 * 0.12 + 0.15 * 0.9) / 1.0, 3)
    assert rag["semantic_similarity"].is_null().sum() > 0 and rag["semantic_similarity"].is_not_null().sum() > 0

    masis = evaluations.filter(pl.col("judge") == "masis")
    for row in masis.iter_rows(named=True):
        cap = 0.9
        if row["invalid_citations"]:
            cap = min(cap, 0.4)
        if row["uncited_claim_count"] >= 10:
            cap = min(cap, 0.3)
        elif row["uncited_claim_count"] >= 5:
            cap = min(cap, 0.5)
        assert row["faithfulness"] == cap
        assert row["score"] == round(cap * 0.35 + 0.8 * 0.25 + 0.7 * 0.25 + 0.6 * 0.15, 3)
        assert row["clamps_applied"][0] == "scale_100:faithfulness"
        assert row["improvement_suggestions"] == ["cite more"]

    prompt = evaluations.filter((pl.col("judge") == "prompt") & (pl.col("judge_status") == "ok"))
    rubric = prompt.filter(pl.col("hits").list.len() == 1)
    freeform = prompt.filter(pl.col("hits").list.len() == 4)
    assert rubric.height + freeform.height == prompt.height > 0
    assert freeform["score"].eq(1.0).all() and freeform["verdict"].eq("pass").all()
    assert freeform["hits"].to_list()[0] == ["a", "b", "c", "d"] and freeform["misses"].list.len().eq(0).all()
    assert rubric["score"].eq(2 / 3).all() and rubric["verdict"].eq("borderline").all()


def test_an_unknown_conf_key_fails_the_first_task_naming_it(airflow_db, local_s3, raw_day, capfd) -> None:
    conf = {"input_uri": INPUT_URI, "output_uri": "s3://llm-evaluation/typo", "judge_modle": "openai/gpt-4o-mini"}
    capfd.readouterr()
    dag_run = _run(conf)
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed"
    assert states["check_run"] == "failed", states
    assert all(state == "upstream_failed" for task, state in states.items() if task != "check_run"), states
    message = "".join(capfd.readouterr())  # dag.test() logs the task's failure to the console
    assert "unknown conf key 'judge_modle' for DAG daily_evaluation" in message
    assert "the known keys are: " in message and "judge_model" in message.split("the known keys are: ", 1)[1]
    out = storage.open_store("s3://llm-evaluation/typo", local_s3.access())
    assert out.list("") == []  # nothing staged, judged or landed


def test_a_bad_judge_model_fails_before_paying_and_keeps_the_landed_day(airflow_db, local_s3, raw_day) -> None:
    output_uri = "s3://llm-evaluation/bad-model"
    conf = {"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "offline/lexical", "chunk_size": 75}
    assert str(_run(conf).state) == "success"
    out = storage.open_store(output_uri, local_s3.access())
    landed = {t: out.read_bytes(storage.landed_key(out, t, DAY) or t) for t in ("evaluations", "judge_calls", "rejects")}

    dag_run = _run({**conf, "judge_model": "nope/not-a-model"})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed" and states["check_run"] == "failed", states
    assert states["ingest_validate"] == "upstream_failed" and not any(t.startswith("judge[") for t in states)
    assert {t: out.read_bytes(storage.landed_key(out, t, DAY) or t) for t in landed} == landed
    runs = _tables(local_s3, output_uri)["runs"]
    failed = runs.filter(pl.col("run_id") == dag_run.run_id).row(0, named=True)
    assert failed["status"] == "failed" and "judge model 'nope/not-a-model' cannot be used" in failed["message"]
    assert failed["trigger"] == "manual"


def test_a_dry_run_stops_after_planning_and_an_offline_typo_leaves_its_runs_row(
    airflow_db, local_s3, raw_day, caplog
) -> None:
    output_uri = "s3://llm-evaluation/dry-run"
    out = storage.open_store(output_uri, local_s3.access())
    caplog.set_level("INFO", logger="evaluation_airflow")
    dag_run = _run({"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "offline/lexical",
                    "chunk_size": 40, "dry_run": True})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "success", states
    assert states["plan"] == "success" and states["score_land"] == "skipped" and states["report"] == "skipped", states
    assert not any(task.startswith("judge[") and state != "skipped" for task, state in states.items()), states
    logged = caplog.text
    assert "dry run, nothing judged or landed" in logged and "judge calls: " in logged
    keys = [found.key for found in out.list("")]
    assert all(key.startswith("_claims/") for key in keys), keys  # no table, no work files

    dag_run = _run({"input_uri": INPUT_URI, "output_uri": output_uri, "judge_model": "offline/lexcal"})
    states = airflow_local.task_states(dag_run)
    assert str(dag_run.state) == "failed" and states["check_run"] == "failed", states
    runs = storage.scan_table(out, "runs").filter(pl.col("run_id") == dag_run.run_id).collect()  # type: ignore[union-attr]
    assert runs["status"].to_list() == ["failed"]
    assert "the offline judge models are: offline/lexical" in runs["message"][0]
