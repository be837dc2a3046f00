"""The converters behind the offline judge's out-of-sample figures (``scripts/offline_figures.py``):
each source's label mapping on a few lines written in the source's own format, the records valid
golden records, the tuning split, the two baselines, and the whole script on tiny sources through
the real calibration job."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from evaluation.calibration.golden import label_problems
from evaluation.calling import offline
from scripts import offline_figures as figures

REPO = Path(__file__).resolve().parents[3]
Q2_HEADER = ["", "episode_idx", "round", "topic", "message", "response", "knowledge", "gold"]


def _q2_row(index: int, message: str, response: str, knowledge: str, topic: str = "Gardening") -> dict[str, str]:
    return {"": str(index), "episode_idx": str(10 + index), "round": "1", "topic": topic, "message": message,
            "response": response, "knowledge": knowledge, "gold": "the human's own turn, never used"}


def _qags_row(article: str, sentences: list[tuple[str, list[str]]]) -> dict[str, Any]:
    return {"article": article, "summary_sentences": [
        {"sentence": text, "responses": [{"worker_id": i, "response": r} for i, r in enumerate(votes)]}
        for text, votes in sentences]}


def _summedits_row(sample: str, label: int) -> dict[str, Any]:
    return {"id": sample, "doc": "The council approved the new park budget on Monday.", "label": label,
            "summary": "The council approved the park budget.", "original_summary": "The council approved the budget.",
            "edit_types": [], "split": "test"}


def _attributionbench_row(source: str, label: str, references: list[str], claim: str = "Anna won the race.") -> dict[str, Any]:
    return {"question": "Who won the race?", "claim": claim, "claim_raw_string": claim,
            "response": f"{claim} It was a sunny day.", "references": references, "citation_links": [],
            "webpage_references": [], "attribution_label": label, "src_dataset": source, "id": f"{source}_{len(claim)}"}


def _valid(records: list[dict[str, Any]]) -> None:
    for record in records:
        labels, problems = label_problems(record["labels"])
        assert problems == [] and labels is not None
        assert record["question"].strip() and record["answer"].strip() and record["contexts"][0]["text"].strip()
        assert record["reference"] is None  # no gold answer to compare with


def test_q2_files_give_system_and_label_and_a_first_turn_takes_its_topic() -> None:
    files = {
        "dodeca_consistent": [_q2_row(0, "I like gardening.", "gardening is relaxing .", "Gardening is relaxing.")],
        "dodeca_inconsistent": [_q2_row(1, "", "purple is between green and red .", "Purple is between blue and red.",
                                        topic="Purple")],
        "memnet_consistent": [_q2_row(2, "Tell me more", "it aired on pbs .", "It aired on PBS.")],
        "memnet_inconsistent": [_q2_row(3, "ok", "it aired on cbs .", "It aired on PBS.")],
    }
    records = figures.q2_records(files)
    assert [(r["model"], r["labels"]["faithful"], r["labels"]["source_label"]) for r in records] == [
        ("dodeca", True, "consistent"), ("dodeca", False, "inconsistent"),
        ("memnet", True, "consistent"), ("memnet", False, "inconsistent")]
    assert records[1]["question"] == "Purple"  # round 0 has no previous turn: the topic is the question
    assert records[0]["question"] == "I like gardening." and records[0]["contexts"][0]["text"] == "Gardening is relaxing."
    assert records[3]["metadata"]["source_id"] == "memnet_inconsistent:3"
    assert len({r["record_id"] for r in records}) == 4
    _valid(records)


def test_qags_summary_is_faithful_only_when_a_majority_supports_every_sentence() -> None:
    rows = [
        _qags_row("Anna won the race in Paris.", [("Anna won the race.", ["yes", "yes", "no"]),
                                                  ("It was in Paris.", ["yes", "yes", "yes"])]),
        _qags_row("Anna won the race in Paris.", [("Anna won the race.", ["yes", "no", "yes"]),
                                                  ("It was in Rome.", ["no", "yes", "no"])]),
        _qags_row("Anna won.", [("Anna lost.", ["yes", "no", "yes", "no"])]),  # a tie is no majority
    ]
    records = figures.qags_records(rows, "cnndm")
    assert [r["labels"]["faithful"] for r in records] == [True, False, False]
    assert [r["labels"]["scores"]["faithfulness"] for r in records] == [1.0, 0.5, 0.0]
    assert records[1]["labels"]["source_label"] == "1 of 2 sentences supported by a majority"
    assert records[0]["answer"] == "Anna won the race. It was in Paris."
    assert records[0]["question"] == "Summarize the article." and records[0]["record_id"] == "qags-cnndm-00000"
    _valid(records)


def test_summedits_label_one_is_faithful_zero_is_not_and_anything_else_is_left_out() -> None:
    records = figures.summedits_records({"news": [_summedits_row("a", 1), _summedits_row("b", 0)],
                                         "podcast": [_summedits_row("c", -1), _summedits_row("d", 0)]})
    assert [(r["metadata"]["source_id"], r["model"], r["labels"]["faithful"]) for r in records] == [
        ("a", "summedits-news", True), ("b", "summedits-news", False), ("d", "summedits-podcast", False)]
    assert records[0]["question"] == "Summarize the document."
    _valid(records)


def test_attributionbench_claim_answers_the_question_from_its_passages_and_begin_is_left_out() -> None:
    ood, sampled = figures.ATTRIBUTIONBENCH_FILES
    files = {
        ood: [_attributionbench_row("HAGRID", "attributable", ["[1] Anna won the race in Paris.", "[2] It rained."]),
              _attributionbench_row("BEGIN", "attributable", ["Anna won the race."]),  # a tuning set
              _attributionbench_row("HAGRID", "not attributable", [" "]),  # no passage
              _attributionbench_row("AttrScore-GenSearch", "not attributable", ["Anna lost the race."])],
        sampled: [_attributionbench_row("ExpertQA", "extrapolatory", ["Anna ran."]),  # no label
                  _attributionbench_row("ExpertQA", "not attributable", ["Bob won the race."], claim="Anna won it.")],
    }
    records = figures.attributionbench_records(files)
    assert [(r["model"], r["labels"]["faithful"], r["labels"]["source_label"]) for r in records] == [
        ("attributionbench-HAGRID", True, "attributable"),
        ("attributionbench-AttrScore-GenSearch", False, "not attributable"),
        ("attributionbench-ExpertQA", False, "not attributable")]
    first = records[0]
    assert first["question"] == "Who won the race?" and first["answer"] == "Anna won the race."  # the claim, not the response
    assert first["contexts"] == [{"id": "ctx-1", "text": "[1] Anna won the race in Paris."},
                                 {"id": "ctx-2", "text": "[2] It rained."}]
    assert records[2]["metadata"] == {"source_id": "ExpertQA_12", "source_set": "ExpertQA", "file": sampled}
    assert [r["record_id"] for r in records] == [f"attributionbench-0000{n}" for n in range(3)]
    _valid(records)


def test_sources_are_read_from_a_checkout(tmp_path: Path) -> None:
    data = tmp_path / "q-squared" / "third_party" / "data"
    data.mkdir(parents=True)
    for number, name in enumerate(figures.Q2_FILES):
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=Q2_HEADER)
        writer.writeheader()
        writer.writerow(_q2_row(number, "hello", "it aired on pbs .", "It aired on PBS."))
        (data / f"{name}.csv").write_text(buffer.getvalue(), encoding="utf-8")
    assert [r["labels"]["faithful"] for r in figures.read_q2(tmp_path / "q-squared")] == [True, False, True, False]
    with pytest.raises(FileNotFoundError, match="qags checkout"):
        figures.read_qags(tmp_path / "q-squared", "xsum")
    bench = tmp_path / "AttributionBench" / "data"
    bench.mkdir(parents=True)
    for name in figures.ATTRIBUTIONBENCH_FILES:
        row = _attributionbench_row("HAGRID", "attributable", ["Anna won the race."])
        (bench / f"{name}.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert [r["metadata"]["file"] for r in figures.read_attributionbench(tmp_path / "AttributionBench")] == list(
        figures.ATTRIBUTIONBENCH_FILES)
    with pytest.raises(FileNotFoundError, match="AttributionBench checkout"):
        figures.read_attributionbench(tmp_path / "q-squared")


def test_tuning_split_keeps_every_answer_to_a_question_on_one_side() -> None:
    records = [{"question": f"q{n // 2}", "answer": str(n)} for n in range(400)]
    fit, held_out = figures.tuning_split(records)
    assert 120 < len(fit) < 280 and len(fit) + len(held_out) == 400
    assert not {r["question"] for r in fit} & {r["question"] for r in held_out}
    assert figures.tuning_split(records) == (fit, held_out)  # seeded: the same every time


def test_baselines_count_words_and_the_share_the_contexts_hold() -> None:
    record = {"answer": "The park opened in 1990, in Paris!", "contexts": [{"id": "ctx-1", "text": "the park opened"},
                                                                         "Paris, 1990"]}
    assert figures.answer_length(record) == -7.0  # the park opened in 1990 in paris
    assert figures.word_overlap(record) == pytest.approx(5 / 7)  # "in" twice is not in the contexts
    assert figures.word_overlap({"answer": "...", "contexts": []}) == 0.0
    good = [{"answer": "the park", "contexts": ["the park opened"], "labels": {"faithful": True}}] * 3
    bad = [{"answer": "a new zoo in rome was built", "contexts": ["the park opened"], "labels": {"faithful": False}}] * 3
    cuts = figures.baseline_cuts(good + bad)
    result = figures.baseline_figures(good + bad, cuts)
    assert result["overlap"]["auroc"] == 1.0 and result["overlap"]["kappa"] == 1.0
    assert result["length"]["auroc"] == 1.0


def _public(folder: Path) -> Path:
    """Tiny reshaped public files in the shape ``scripts/golden_sets.py`` reads."""
    folder.mkdir(parents=True)
    halueval, begin = [], []
    for n in range(20):
        passage = f"Harbour {n} opened in 19{n:02d} and serves the northern coast of Norland."
        for faithful in (True, False):
            halueval.append({"id": f"h{n}-{faithful}", "question": f"When did harbour {n} open?", "contexts": [passage],
                             "answer": f"19{n:02d}" if faithful else f"It opened in 17{n:02d} after a royal decree.",
                             "reference": f"19{n:02d}", "gold": {"faithful": faithful}, "meta": {"row": n}})
        label = "Fully attributable" if n % 2 else "Not fully attributable"
        begin.append({"id": f"b{n}", "question": f"tell me about harbour {n}", "contexts": [passage],
                      "answer": passage if n % 2 else "they sell ice cream on the pier every sunday",
                      "gold": {"begin_label": label}, "meta": {"generator": "gpt2", "split": "test"}})
    for name, rows in (("halueval_qa_rag.jsonl", halueval), ("begin_wow_rag.jsonl", begin)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_the_script_measures_every_set_through_the_calibration_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qags = tmp_path / "qags" / "data"
    qags.mkdir(parents=True)
    for part in ("cnndm", "xsum"):
        rows = [_qags_row(f"Mayor {n} opened the bridge in Osterby.",
                          [(f"Mayor {n} opened the bridge." if n % 2 else f"Mayor {n} closed the airport in Vienna.",
                            ["yes"] * 3 if n % 2 else ["no"] * 3)]) for n in range(12)]
        (qags / f"mturk_{part}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "figures.json"
    assert figures.main(["--public", str(_public(tmp_path / "public")), "--qags", str(tmp_path / "qags"),
                         "--work", str(tmp_path / "work"), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["tuning_sets"] == ["halueval-qa", "begin-wow"]
    assert list(report["figures"]) == ["halueval-qa", "begin-wow", "qags-cnndm", "qags-xsum"]
    cnndm = report["figures"]["qags-cnndm"]
    assert (cnndm["records"], cnndm["faithful"]) == (12, 6)
    assert cnndm["judges"]["rag"]["n"] == 12 and cnndm["judges"]["rag"]["auroc"] == 1.0  # judged, not skipped
    assert set(cnndm["baselines"]) == {"length", "overlap"}
    printed = capsys.readouterr().out
    assert "| QAGS XSum | summarization | out of sample | 12 (6) |" in printed
    assert "| HaluEval QA | QA | in-sample (tuning set) | 40 (20) |" in printed


def test_the_fit_searches_the_grid_on_the_fit_halves_and_measures_the_held_out_halves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(figures, "FIT_GRID", {"SUPPORT_DECAY": (0.8,), "UNSUPPORTED_BELOW": (0.6, 0.9)})
    out = tmp_path / "fit.json"
    assert figures.main(["--public", str(_public(tmp_path / "public")), "--fit", "--work", str(tmp_path / "work"),
                         "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [(g["SUPPORT_DECAY"], g["UNSUPPORTED_BELOW"]) for g in report["fit"]["grid"]] == [(0.8, 0.6), (0.8, 0.9)]
    assert report["fit"]["chosen"]["SUPPORT_DECAY"] == 0.8
    assert report["fit"]["current"] == {"SUPPORT_DECAY": offline.SUPPORT_DECAY,
                                        "UNSUPPORTED_BELOW": offline.UNSUPPORTED_BELOW}
    assert (offline.SUPPORT_DECAY, offline.UNSUPPORTED_BELOW) == (0.8, 0.6)  # restored after the grid
    fit_records = report["fit"]["fit_records"]
    for which in ("current", "refitted"):
        held = report["held_out"][which]
        assert list(held) == ["halueval-qa/held-out", "begin-wow/held-out"]
        assert held["halueval-qa/held-out"]["records"] + fit_records["halueval-qa"] == 40
    assert "| HaluEval QA | " in capsys.readouterr().out


def test_the_readme_and_the_docs_carry_the_tables_the_script_prints() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    docs = (REPO / "docs" / "calibration.md").read_text(encoding="utf-8")
    assert figures.table({}) in readme
    assert figures.table({}, detailed=True) in docs and figures.intervals({}) in docs
    assert figures.held_out_table({}, {}) in docs
    for info in figures.SETS.values():
        assert f"| {info['title']} | {info['shape']} | {info['sample']} |" in readme
