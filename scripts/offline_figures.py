"""The offline judge's agreement with people, in-sample and out of sample: the figures of the
README's offline-judge table and of docs/calibration.md.

**In-sample** are the two sets the offline judge's constants were fitted on, its declared tuning
set (:data:`evaluation.calling.offline.TUNING_SETS`): HaluEval QA and BEGIN (Wizard of Wikipedia part),
read from the reshaped public files that ``scripts/golden_sets.py`` converts. **Out of sample**
are public, human-labelled sets that played no part in the fitting, of other sources and shapes.
Their sources, licences, labels and how each becomes golden records are in docs/calibration.md,
"The offline judge, measured"; beside it, the fields and files read:

* ``q2-dialogue`` — Q², 150 responses per system and label: the previous turn (``message``) is the
  question, the human's original turn (``gold``) is dropped.
* ``qags-cnndm`` and ``qags-xsum`` — QAGS.
* ``attributionbench`` — AttributionBench, gathered by its authors from seven attribution sets; read
  are its two test files (:data:`ATTRIBUTIONBENCH_FILES`; the in-distribution one a seeded sample),
  each passage (``references``) a context.
* ``summedits`` — SummEdits (``data/summedits/summedits_*.json``): a verified seed summary and
  edits of it, in eight domains (:data:`SUMMEDITS_DOMAINS`: news, podcasts, dialogues, meetings,
  earnings calls, sales calls and e-mails, science).

Every set is written as a golden set (docs/golden-sets.md) and calibrated with ``offline/lexical``
through the product's own job (:func:`evaluation.calibration.run.run_calibration`: the daily
stages), so the judge's figures are the product's; two trivial baselines, answer length and word
overlap, are scored beside them with the calibration's own metric functions. ``--fit`` refits the
constants :data:`evaluation.calling.offline.FITTED_CONSTANTS` names on the fit half of the tuning set
(:func:`tuning_split`) and measures the held-out half; it never reads an out-of-sample set. Both,
and their settings: docs/calibration.md.

    python -m scripts.offline_figures --q2 ~/src/q-squared --qags ~/src/qags --summedits ~/src/factualNLG \
        --attributionbench ~/src/AttributionBench
    python -m scripts.offline_figures --fit

A source is a checkout of the repository, or a bare clone (read with ``git show HEAD:<path>``); a
set whose source is not given is left out of the table.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import itertools
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from evaluation import storage
from evaluation.calibration import CalibrationSpec
from evaluation.calibration.metrics import Detection, auroc, auroc_interval, best_cut
from evaluation.calibration.run import run_calibration
from evaluation.calling import offline
from evaluation.contract.config import OFFLINE_JUDGE_MODEL, JudgeName
from scripts import golden_sets
from scripts.golden_sets import DEFAULT_SOURCE

#: The judges measured (``prompt`` applies to none of the sets: no reference, no expected outcome).
JUDGES: tuple[JudgeName, ...] = ("rag", "masis")
SEED = 0
SUMMARY_REQUEST = {"article": "Summarize the article.", "document": "Summarize the document."}
Q2_FILES = ("dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent")
#: The SummEdits domains measured: eight of its ten (BillSum and Shakespeare, whose files are the
#: largest, were not in the copy measured, and are left out so that the figures reproduce).
SUMMEDITS_DOMAINS = ("news", "podcast", "samsum", "sales_call", "sales_email", "scitldr", "qmsumm", "ectsum")
#: SummEdits' labels: 1 consistent, 0 inconsistent (any other value is no label and is left out).
SUMMEDITS_FAITHFUL = {1: True, 0: False}
#: AttributionBench's files read (``data/<name>.jsonl``): its out-of-distribution test split, and
#: the authors' 500-record sample of its in-distribution test split (the full one is not read).
ATTRIBUTIONBENCH_FILES = ("test_ood_all_subset_balanced", "test_all_subset_balanced_sampled500")
#: AttributionBench's sources left out: BEGIN is a tuning set of the offline judge.
ATTRIBUTIONBENCH_LEFT_OUT = ("BEGIN",)
#: AttributionBench's labels (any other value is no label and is left out).
ATTRIBUTIONBENCH_FAITHFUL = {"attributable": True, "not attributable": False}
#: The grid ``--fit`` searches (every pair), and the objective it maximises: the mean over the
#: tuning sets' fit halves of the rag verdict's κ (``fail`` against not faithful).
FIT_GRID = {"SUPPORT_DECAY": (0.6, 0.7, 0.8, 0.9, 1.0), "UNSUPPORTED_BELOW": (0.5, 0.6, 0.7, 0.8, 0.9)}

_WORD = re.compile(r"[a-z0-9]+")

SETS: dict[str, dict[str, Any]] = {
    "halueval-qa": {
        "title": "HaluEval QA", "shape": "QA", "sample": "in-sample (tuning set)",
        "licence": "MIT (HaluEval); HotpotQA CC BY-SA 4.0",
        "label_origin": "construction: gold answer = faithful, generated hallucinated answer = not faithful",
    },
    "begin-wow": {
        "title": "BEGIN (WoW)", "shape": "dialogue", "sample": "in-sample (tuning set)",
        "licence": "CC-BY-4.0",
        "label_origin": "crowd: 'Fully attributable' = faithful; 'Not fully attributable', 'Generic' = not",
    },
    "q2-dialogue": {
        "title": "Q²", "shape": "dialogue", "sample": "out of sample",
        "description": "Q²: knowledge-grounded dialogue responses of DodecaDialogue and MemNet on Wizard of "
                       "Wikipedia, annotated for factual consistency with the knowledge sentence; the previous "
                       "turn is the question.",
        "source": "https://github.com/orhonovich/q-squared (third_party/data/{dodeca,memnet}_{consistent,"
                  "inconsistent}.csv)",
        "licence": "MIT (third_party/data/LICENSE.txt, Copyright (c) Facebook, Inc. and its affiliates)",
        "label_origin": "authors' annotation: *_consistent = faithful, *_inconsistent = not faithful",
        "citation": "Honovich et al., Q²: Evaluating Factual Consistency in Knowledge-Grounded Dialogues via "
                    "Question Generation and Question Answering, EMNLP 2021",
    },
    "qags-cnndm": {
        "title": "QAGS CNN/DM", "shape": "summarization", "sample": "out of sample",
        "description": "QAGS, CNN/DailyMail part: model summaries with three crowd judgements per sentence.",
        "source": "https://github.com/W4ngatang/qags (data/mturk_cnndm.jsonl)",
        "licence": "none stated (measured, not redistributed)",
        "label_origin": "crowd (3 per sentence): faithful when a majority supports every sentence",
        "citation": "Wang et al., Asking and Answering Questions to Evaluate the Factual Consistency of "
                    "Summaries, ACL 2020",
    },
    "qags-xsum": {
        "title": "QAGS XSum", "shape": "summarization", "sample": "out of sample",
        "description": "QAGS, XSum part: one-sentence model summaries with three crowd judgements.",
        "source": "https://github.com/W4ngatang/qags (data/mturk_xsum.jsonl)",
        "licence": "none stated (measured, not redistributed)",
        "label_origin": "crowd (3 per sentence): faithful when a majority supports the sentence",
        "citation": "Wang et al., Asking and Answering Questions to Evaluate the Factual Consistency of "
                    "Summaries, ACL 2020",
    },
    "summedits": {
        "title": "SummEdits", "shape": "summarization", "sample": "out of sample",
        "description": "SummEdits: seed summaries and edits of them in several domains, each labelled "
                       "consistent or inconsistent with its document by annotators.",
        "source": "https://github.com/salesforce/factualNLG (data/summedits/summedits_*.json)",
        "licence": "Apache-2.0 repository; documents from third-party corpora (measured, not redistributed)",
        "label_origin": "annotators: label 1 = faithful, 0 = not faithful",
        "citation": "Laban et al., SummEdits: Measuring LLM Ability at Factual Reasoning Through The Lens of "
                    "Summarization, EMNLP 2023",
    },
    "attributionbench": {
        "title": "AttributionBench", "shape": "QA", "sample": "out of sample",
        "description": "AttributionBench: claims from LLM and generative-search answers to questions, each with "
                       "the passages it cites and a human judgement of whether they support it (HAGRID, "
                       "AttrScore-GenSearch, ExpertQA, Stanford-GenSearch, AttributedQA, LFQA; BEGIN left out).",
        "source": "https://github.com/OSU-NLP-Group/AttributionBench (data/test_ood_all_subset_balanced.jsonl, "
                  "data/test_all_subset_balanced_sampled500.jsonl)",
        "licence": "none stated in the repository; sources under their own (measured, not redistributed)",
        "label_origin": "the source sets' human annotators: 'attributable' = faithful, 'not attributable' = not",
        "citation": "Li et al., AttributionBench: How Hard is Automatic Attribution Evaluation?, Findings of "
                    "ACL 2024",
    },
}


# --------------------------------------------------------------------------------------------
# Converters: the source's rows -> golden records (CONTRACT §1 plus ``labels``)


def q2_records(files: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
    """Q²'s four files (keyed by name, e.g. ``dodeca_inconsistent``) as golden records: the file
    gives the system and the label (``consistent`` = faithful)."""
    records: list[dict[str, Any]] = []
    for name in Q2_FILES:
        system, kind = name.split("_", 1)
        for row in files.get(name, []):
            records.append(golden_sets.golden_record(
                "q2-dialogue", len(records), model=system, question=row["message"].strip() or row["topic"],
                answer=row["response"], contexts=[row["knowledge"]],
                metadata={"source_id": f"{name}:{row.get('', '')}", "episode_idx": row["episode_idx"],
                          "round": row["round"], "topic": row["topic"]},
                labels={"faithful": kind == "consistent", "source_label": kind}))
    return records


def _supported(responses: list[dict[str, Any]]) -> bool:
    """A QAGS sentence is supported when more than half of its annotators answered yes."""
    return 2 * sum(1 for r in responses if str(r["response"]).strip().lower() == "yes") > len(responses)


def qags_records(rows: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """QAGS rows (one article, its summary's sentences and their annotators' yes/no) as golden
    records: faithful when every sentence is supported; the share supported is ``scores.faithfulness``."""
    set_name = f"qags-{part}"
    records: list[dict[str, Any]] = []
    for number, row in enumerate(rows):
        sentences = row["summary_sentences"]
        supported = [_supported(s["responses"]) for s in sentences]
        records.append(golden_sets.golden_record(
            set_name, len(records), model=f"qags-{part}", question=SUMMARY_REQUEST["article"],
            answer=" ".join(s["sentence"].strip() for s in sentences), contexts=[row["article"]],
            metadata={"source_id": f"mturk_{part}.jsonl:{number + 1}"},
            labels={"faithful": all(supported), "scores": {"faithfulness": round(sum(supported) / len(supported), 4)},
                    "source_label": f"{sum(supported)} of {len(supported)} sentences supported by a majority"}))
    return records


def summedits_records(domains: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """SummEdits samples (keyed by domain) as golden records; a sample whose label is neither 0
    nor 1 is left out."""
    records: list[dict[str, Any]] = []
    for domain in SUMMEDITS_DOMAINS:
        for row in domains.get(domain, []):
            faithful = SUMMEDITS_FAITHFUL.get(row["label"])
            if faithful is None:
                continue
            records.append(golden_sets.golden_record(
                "summedits", len(records), model=f"summedits-{domain}", question=SUMMARY_REQUEST["document"],
                answer=row["summary"], contexts=[row["doc"]],
                metadata={"source_id": row["id"], "domain": domain},
                labels={"faithful": faithful, "source_label": "consistent" if faithful else "inconsistent"}))
    return records


def attributionbench_records(files: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """AttributionBench rows (keyed by file name) as golden records, one context per passage; a
    row of :data:`ATTRIBUTIONBENCH_LEFT_OUT`, without a passage, or with another label is left out."""
    records: list[dict[str, Any]] = []
    for name in ATTRIBUTIONBENCH_FILES:
        for row in files.get(name, []):
            faithful = ATTRIBUTIONBENCH_FAITHFUL.get(row["attribution_label"])
            passages = [p for p in row["references"] if p.strip()]
            if faithful is None or not passages or row["src_dataset"] in ATTRIBUTIONBENCH_LEFT_OUT:
                continue
            records.append(golden_sets.golden_record(
                "attributionbench", len(records), model=f"attributionbench-{row['src_dataset']}",
                question=row["question"], answer=row["claim"], contexts=passages,
                metadata={"source_id": row["id"], "source_set": row["src_dataset"], "file": name},
                labels={"faithful": faithful, "source_label": row["attribution_label"]}))
    return records


# --------------------------------------------------------------------------------------------
# Sources


def read_source(root: Path, path: str) -> str | None:
    """The text of ``path`` in a source: a checkout (the file), or a bare clone (``git show
    HEAD:path``); None when it has no such file."""
    if (root / path).is_file():
        return (root / path).read_text(encoding="utf-8")
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        shown = subprocess.run(["git", "--git-dir", str(root), "show", f"HEAD:{path}"],
                               capture_output=True, text=True, check=False)
        return shown.stdout if shown.returncode == 0 and shown.stdout else None
    return None


def _required(root: Path, path: str, checkout: str) -> str:
    """``path`` of the source at ``root`` (:func:`read_source`); FileNotFoundError naming it when absent."""
    text = read_source(root, path)
    if text is None:
        raise FileNotFoundError(f"{root}: no {path} (is it a {checkout} checkout?)")
    return text


def read_q2(root: Path) -> list[dict[str, Any]]:
    """Q² from a q-squared checkout."""
    return q2_records({name: list(csv.DictReader(io.StringIO(_required(root, f"third_party/data/{name}.csv",
                                                                        "q-squared"))))
                       for name in Q2_FILES})


def read_qags(root: Path, part: str) -> list[dict[str, Any]]:
    """One QAGS part (``cnndm`` or ``xsum``) from a qags checkout."""
    return qags_records(golden_sets.jsonl(_required(root, f"data/mturk_{part}.jsonl", "qags")), part)


def read_summedits(root: Path) -> list[dict[str, Any]]:
    """SummEdits from a factualNLG checkout: the domains of :data:`SUMMEDITS_DOMAINS`."""
    return summedits_records({domain: json.loads(_required(root, f"data/summedits/summedits_{domain}.json",
                                                           "factualNLG"))
                              for domain in SUMMEDITS_DOMAINS})


def read_attributionbench(root: Path) -> list[dict[str, Any]]:
    """AttributionBench from a checkout: the files of :data:`ATTRIBUTIONBENCH_FILES`."""
    return attributionbench_records({name: golden_sets.jsonl(_required(root, f"data/{name}.jsonl", "AttributionBench"))
                                     for name in ATTRIBUTIONBENCH_FILES})


def read_tuning(public: Path) -> dict[str, list[dict[str, Any]]]:
    """The tuning sets, every record, as ``scripts/golden_sets.py`` converts them."""
    return {name: convert(golden_sets.jsonl((public / golden_sets.SETS[name]["file"]).read_text(encoding="utf-8")), 0, SEED)
            for name, convert in golden_sets.CONVERTERS.items()}


def tuning_split(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The fit and the held-out half of a tuning set: by a seeded hash of the question, so that
    every answer to one question (a HaluEval pair, BEGIN's generators on one turn) is on one side."""
    fit: list[dict[str, Any]] = []
    held_out: list[dict[str, Any]] = []
    for record in records:
        digest = hashlib.sha256(f"{SEED}\x1f{record['question']}".encode()).digest()
        (fit if digest[0] % 2 == 0 else held_out).append(record)
    return fit, held_out


# --------------------------------------------------------------------------------------------
# Baselines


def words(text: str) -> list[str]:
    """Lowercased runs of letters and digits: every word, stop words included."""
    return _WORD.findall(text.lower())


def answer_length(record: dict[str, Any]) -> float:
    """Minus the answer's word count: shorter reads as more faithful."""
    return -float(len(words(record["answer"])))


def word_overlap(record: dict[str, Any]) -> float:
    """The share of the answer's words that its contexts hold (0 for an answer with none)."""
    answer = words(record["answer"])
    vocabulary = {w for c in record["contexts"] for w in words(c["text"] if isinstance(c, dict) else c)}
    return sum(1 for w in answer if w in vocabulary) / len(answer) if answer else 0.0


BASELINES: dict[str, Callable[[dict[str, Any]], float]] = {"length": answer_length, "overlap": word_overlap}


def _arrays(records: list[dict[str, Any]], baseline: str) -> tuple[np.ndarray, np.ndarray]:
    values = np.array([BASELINES[baseline](r) for r in records], dtype=np.float64)
    good = np.array([bool(r["labels"]["faithful"]) for r in records])
    return values, good


def baseline_cuts(tuning: list[dict[str, Any]]) -> dict[str, float]:
    """Each baseline's cut, fitted on the tuning records: the best κ of ``value < cut`` against
    not faithful."""
    cuts = {}
    for name in BASELINES:
        cut = best_cut(*_arrays(tuning, name))
        assert cut is not None, "the tuning records have both classes"
        cuts[name] = cut.threshold
    return cuts


def baseline_figures(records: list[dict[str, Any]], cuts: dict[str, float]) -> dict[str, dict[str, Any]]:
    """AUROC (with its bootstrap interval), κ and F1 of each baseline on ``records``."""
    figures = {}
    for name in BASELINES:
        values, good = _arrays(records, name)
        low, high = auroc_interval(values, good, np.random.default_rng(SEED)) or (None, None)
        detection = Detection.of(values < cuts[name], ~good)
        figures[name] = {"auroc": auroc(values, good), "auroc_ci_low": low, "auroc_ci_high": high,
                         "kappa": detection.kappa, "f1": detection.f1, "cut": cuts[name]}
    return figures


# --------------------------------------------------------------------------------------------
# The offline judge, through the calibration job


def write_golden(folder: Path, records: list[dict[str, Any]], info: dict[str, Any]) -> Path:
    """A golden set folder: ``records.jsonl`` and ``set.json`` (what ``info`` says of the set's source)."""
    keys = ("description", "source", "licence", "label_origin", "citation")
    return golden_sets.write_golden(folder, records, {k: info[k] for k in keys if k in info})


def judge_figures(golden: Path, output: Path) -> dict[str, dict[str, Any]]:
    """Calibrate ``offline/lexical`` on a golden set folder; the score rows of each judge."""
    spec = CalibrationSpec(golden_uri=str(golden), judges=list(JUDGES), judge_model=OFFLINE_JUDGE_MODEL, seed=SEED)
    store, golden_store = storage.open_stores(str(output), spec.golden_uri)
    result = run_calibration(store, golden_store, spec)
    rows = {(row["judge"], row["metric"]): row for row in result["figures"]}
    return {judge: rows[(judge, "score")] for judge in JUDGES}


def measure(sets: dict[str, list[dict[str, Any]]], cuts: dict[str, float], work: Path) -> dict[str, dict[str, Any]]:
    """Every figure of every set: counts, the judges' score rows, the baselines."""
    figures = {}
    for name, records in sets.items():
        folder = write_golden(work / "golden" / name, records, SETS.get(name.split("/")[0], {}))
        good = sum(1 for r in records if r["labels"]["faithful"])
        print(f"{name}: {len(records)} records, calibrating ...", file=sys.stderr)
        figures[name] = {"records": len(records), "faithful": good, "not_faithful": len(records) - good,
                         "judges": judge_figures(folder, work / "calibrations" / name.replace("/", "-")),
                         "baselines": baseline_figures(records, cuts)}
    return figures


def fit(tuning: dict[str, list[dict[str, Any]]], work: Path) -> dict[str, Any]:
    """Search :data:`FIT_GRID` on the tuning sets' fit halves (the rag verdict's κ, averaged over
    the sets); the chosen values (ties: the nearest the current ones) and every grid point's figures."""
    halves = {name: tuning_split(records)[0] for name, records in tuning.items()}
    folders = {name: write_golden(work / "fit" / name, records, SETS[name]) for name, records in halves.items()}
    grid: list[dict[str, Any]] = []
    names = list(FIT_GRID)
    assert tuple(names) == offline.FITTED_CONSTANTS, "the grid searches the constants offline.py declares fitted"
    for point in itertools.product(*FIT_GRID.values()):
        values: dict[str, Any] = dict(zip(names, point, strict=True))
        tag = "-".join(f"{v:g}" for v in point)
        with mock.patch.multiple(offline, **values):  # the judge reads its constants when called
            kappas = {name: judge_figures(folder, work / "fit-calibrations" / tag / name)["rag"]["kappa"]
                      for name, folder in folders.items()}
        # an undefined κ (every record flagged, or none) agrees no better than chance: 0
        grid.append({**values, "kappa": kappas, "objective": float(np.mean([k or 0.0 for k in kappas.values()]))})
        print(f"fit {values}: {kappas}", file=sys.stderr)
    current = {name: getattr(offline, name) for name in names}
    best = max(grid, key=lambda g: (round(g["objective"], 6),
                                    -sum(abs(g[n] - current[n]) for n in names)))
    return {"grid": grid, "chosen": {n: best[n] for n in names}, "current": current,
            "fit_records": {name: len(records) for name, records in halves.items()}}


# --------------------------------------------------------------------------------------------
# The table


def _num(value: Any, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}".replace("-", "−")


def _cell(row: dict[str, Any], names: tuple[str, ...], auroc_digits: int) -> str:
    return " / ".join(_num(row[name], auroc_digits if name == "auroc" else 2) for name in names)


def table(figures: dict[str, dict[str, Any]], *, detailed: bool = False) -> str:
    """The README's table (``detailed``: docs/calibration.md's, with three-digit AUROCs and the
    baselines' F1): one row per set, the judges' score and verdict and the baselines side by side
    (the baselines' κ and F1 at their tuning-set cut)."""
    judged, baseline = ("auroc", "kappa", "f1"), ("auroc", "kappa", "f1") if detailed else ("auroc", "kappa")
    digits = 3 if detailed else 2
    suffix = " / F1" if detailed else ""
    lines = ["| set | shape | sample | records (faithful) | `rag` AUROC / κ / F1 | `masis` AUROC / κ / F1 | "
             f"answer length AUROC / κ{suffix} | word overlap AUROC / κ{suffix} |",
             "|---|---|---|---|---|---|---|---|"]
    for name, f in figures.items():
        info = SETS[name.split("/")[0]]
        judges, baselines = f["judges"], f["baselines"]
        lines.append(
            f"| {info['title']} | {info['shape']} | {info['sample']} | {f['records']:,} ({f['faithful']:,}) | "
            f"{_cell(judges['rag'], judged, digits)} | {_cell(judges['masis'], judged, digits)} | "
            f"{_cell(baselines['length'], baseline, digits)} | {_cell(baselines['overlap'], baseline, digits)} |")
    return "\n".join(lines)


def intervals(figures: dict[str, dict[str, Any]]) -> str:
    """docs/calibration.md's table: each AUROC with its 95% bootstrap interval."""
    lines = ["| set | `rag` | `masis` | answer length | word overlap |", "|---|---|---|---|---|"]
    for name, f in figures.items():
        rows = [f["judges"]["rag"], f["judges"]["masis"], f["baselines"]["length"], f["baselines"]["overlap"]]
        lines.append(f"| {SETS[name]['title']} | " + " | ".join(
            f"{_num(r['auroc'], 3)} ({_num(r['auroc_ci_low'], 3)}–{_num(r['auroc_ci_high'], 3)})" for r in rows) + " |")
    return "\n".join(lines)


def held_out_table(current: dict[str, dict[str, Any]], refitted: dict[str, dict[str, Any]]) -> str:
    """docs/calibration.md's table of the held-out halves, the shipped and the refitted constants."""
    judged = ("auroc", "kappa", "f1")
    lines = ["| held-out half | records (faithful) | shipped constants `rag` AUROC / κ / F1 | refitted constants `rag` "
             "AUROC / κ / F1 | answer length AUROC / κ | word overlap AUROC / κ |", "|---|---|---|---|---|---|"]
    for name, f in current.items():
        baselines = f["baselines"]
        lines.append(
            f"| {SETS[name.split('/')[0]]['title']} | {f['records']:,} ({f['faithful']:,}) | "
            f"{_cell(f['judges']['rag'], judged, 3)} | {_cell(refitted[name]['judges']['rag'], judged, 3)} | "
            f"{_cell(baselines['length'], ('auroc', 'kappa'), 3)} | {_cell(baselines['overlap'], ('auroc', 'kappa'), 3)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--public", type=Path, default=DEFAULT_SOURCE,
                        help="folder of the reshaped public files of the tuning sets (halueval_qa_rag.jsonl, "
                             "begin_wow_rag.jsonl)")
    parser.add_argument("--q2", type=Path, help="a checkout (or bare clone) of github.com/orhonovich/q-squared")
    parser.add_argument("--qags", type=Path, help="a checkout (or bare clone) of github.com/W4ngatang/qags")
    parser.add_argument("--summedits", type=Path, help="a checkout (or bare clone) of github.com/salesforce/factualNLG")
    parser.add_argument("--attributionbench", type=Path,
                        help="a checkout (or bare clone) of github.com/OSU-NLP-Group/AttributionBench")
    parser.add_argument("--fit", action="store_true",
                        help="refit the offline judge's constants on the tuning sets' fit halves and measure the "
                             "held-out halves (reads no out-of-sample set)")
    parser.add_argument("--work", type=Path, help="folder for the golden sets and calibrations (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    for name in (info["file"] for info in golden_sets.SETS.values()):
        if not (args.public / name).exists():
            print(f"{args.public / name} not found: give --public", file=sys.stderr)
            return 1
    with tempfile.TemporaryDirectory(prefix="offline-figures-") as temporary:
        work = args.work or Path(temporary)
        tuning = read_tuning(args.public)
        cuts = baseline_cuts([r for records in tuning.values() for r in records])
        report: dict[str, Any] = {"tuning_sets": list(offline.TUNING_SETS), "baseline_cuts": cuts,
                                  "constants": {n: getattr(offline, n) for n in offline.FITTED_CONSTANTS}}
        if args.fit:
            report["fit"] = fit(tuning, work)
            halves = {name: tuning_split(records) for name, records in tuning.items()}
            cuts = report["baseline_cuts"] = baseline_cuts([r for fit_half, _ in halves.values() for r in fit_half])
            held_out = {f"{name}/held-out": held for name, (_, held) in halves.items()}
            report["held_out"] = {"current": measure(held_out, cuts, work / "current")}
            with mock.patch.multiple(offline, **report["fit"]["chosen"]):
                report["held_out"]["refitted"] = measure(held_out, cuts, work / "refitted")
            print(json.dumps({k: report["fit"][k] for k in ("chosen", "current", "fit_records")}, indent=2))
            print(held_out_table(report["held_out"]["current"], report["held_out"]["refitted"]))
        else:
            sets: dict[str, list[dict[str, Any]]] = dict(tuning)
            if args.q2:
                sets["q2-dialogue"] = read_q2(args.q2)
            if args.qags:
                sets["qags-cnndm"] = read_qags(args.qags, "cnndm")
                sets["qags-xsum"] = read_qags(args.qags, "xsum")
            if args.summedits:
                sets["summedits"] = read_summedits(args.summedits)
            if args.attributionbench:
                sets["attributionbench"] = read_attributionbench(args.attributionbench)
            report["figures"] = measure(sets, cuts, work)
            print("\n\n".join((table(report["figures"]), table(report["figures"], detailed=True),
                                intervals(report["figures"]))))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
