"""Golden sets from public, human-labelled data: the converter behind ``data/golden/``.

Reads the reshaped public files (``halueval_qa_rag.jsonl`` and ``begin_wow_rag.jsonl``, one
``{id, source, question, contexts[], answer, reference, gold{...}, meta{...}}`` object a line)
and writes each as a golden set in the project's format (``docs/golden-sets.md``): input records
exactly as CONTRACT §1, each with its ``labels``, one ``records.jsonl`` per set, plus ``set.json``.

* ``halueval-qa`` (MIT; questions, passages and gold answers from HotpotQA, CC BY-SA 4.0): each
  HotpotQA question twice, once with its gold answer (``faithful: true``) and once with the
  ChatGPT-generated hallucinated answer (``faithful: false``), labels by construction. The
  ``reference`` field is dropped (null): a judge must not get the gold answer to compare with.
* ``begin-wow`` (CC-BY-4.0): dialogue responses of four generators (gpt2, t5, doha, ctrl) with
  crowd attribution labels. "Fully attributable" is ``faithful: true``; "Not fully attributable"
  and "Generic" are ``faithful: false``. The previous dialogue turn is the ``question``.

Records get neutral ids (``halueval-qa-00000``), one fixed timestamp, and ``model`` the set's
source (HaluEval) or the response's generator (BEGIN); the source id and label text are kept in
``metadata`` and ``labels.source_label``. Judges never see ids, models or metadata.

The shipped sets are a seeded subset (``--limit``, whole HaluEval question pairs, BEGIN stratified
by label); ``--limit 0`` converts every record (the figures in docs/calibration.md).

    python -m scripts.golden_sets --source ../shared/data/public --out data/golden --limit 300
    python -m scripts.golden_sets --source ../shared/data/public --out /tmp/golden-full --limit 0
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "public"
DEFAULT_OUT = REPO / "data" / "golden"
#: Every record of a set gets this timestamp: a golden set is not a day of logs.
TIMESTAMP = "2026-01-01T00:00:00Z"
#: BEGIN's human labels and what they mean here.
BEGIN_FAITHFUL = {"Fully attributable": True, "Not fully attributable": False, "Generic": False}

SETS: dict[str, dict[str, Any]] = {
    "halueval-qa": {
        "file": "halueval_qa_rag.jsonl",
        "description": "HaluEval QA: HotpotQA questions with their knowledge passage, each answered once with "
                       "the gold answer and once with a ChatGPT-generated hallucinated answer. Reference dropped.",
        "source": "https://github.com/RUCAIBox/HaluEval (generation/qa/qa_one-turn_data.json)",
        "licence": "MIT (HaluEval); questions, passages and gold answers from HotpotQA, CC BY-SA 4.0",
        "label_origin": "construction: gold answer = faithful, generated hallucinated answer = not faithful",
        "citation": "Li et al., HaluEval: A Large-Scale Hallucination Evaluation Benchmark for Large Language "
                    "Models, EMNLP 2023 (arXiv:2305.11747)",
    },
    "begin-wow": {
        "file": "begin_wow_rag.jsonl",
        "description": "BEGIN (Wizard of Wikipedia part): knowledge-grounded dialogue responses of gpt2, t5, doha "
                       "and ctrl with human attribution labels; the previous turn is the question.",
        "source": "https://github.com/google/BEGIN-dataset (wow/begin_test_wow.tsv, wow/begin_dev_wow.tsv)",
        "licence": "CC-BY-4.0 (BEGIN annotations: Google; Wizard of Wikipedia: Facebook, Inc. and its affiliates)",
        "label_origin": "human (crowd) attribution: 'Fully attributable' = faithful; 'Not fully attributable' "
                        "and 'Generic' = not faithful",
        "citation": "Dziri et al., Evaluating Attribution in Dialogue Systems: The BEGIN Benchmark, TACL 2022",
    },
}


def _rank(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\x1f{key}".encode()).hexdigest()


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def golden_record(set_name: str, index: int, *, model: str, question: str, answer: str, contexts: list[str],
                  metadata: dict[str, Any], labels: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """A golden record (CONTRACT §1 plus ``labels``) with a neutral id and no reference: a judge
    must not get the gold answer to compare with. ``source``, when given, is every context's."""
    return {
        "record_id": f"{set_name}-{index:05d}",
        "timestamp": TIMESTAMP,
        "model": model,
        "question": question,
        "answer": answer,
        "contexts": [{"id": f"ctx-{n}", "text": text} | ({"source": source} if source else {})
                     for n, text in enumerate(contexts, start=1)],
        "reference": None,
        "metadata": metadata,
        "labels": labels,
    }


def halueval_records(rows: list[dict[str, Any]], limit: int, seed: int) -> list[dict[str, Any]]:
    """HaluEval QA rows as golden records: whole question pairs (gold and hallucinated answer),
    ``limit`` records at most (0: all), picked by a seeded hash of the question row."""
    by_row: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        by_row.setdefault(int(row["meta"]["row"]), []).append(row)
    chosen = sorted(by_row)
    if limit:
        chosen = sorted(sorted(by_row, key=lambda r: _rank(seed, f"halueval-{r}"))[: limit // 2])
    records: list[dict[str, Any]] = []
    for number in chosen:
        for row in sorted(by_row[number], key=lambda r: not r["gold"]["faithful"]):
            faithful = bool(row["gold"]["faithful"])
            records.append(golden_record(
                "halueval-qa", len(records), model="halueval-qa", question=row["question"], answer=row["answer"],
                contexts=row["contexts"], source="HotpotQA (Wikipedia)",
                metadata={"source_id": row["id"], "hotpotqa_row": number},
                labels={"faithful": faithful, "source_label": "gold answer" if faithful else "hallucinated answer"}))
    return records


def begin_records(rows: list[dict[str, Any]], limit: int, seed: int) -> list[dict[str, Any]]:
    """BEGIN rows as golden records, ``limit`` at most (0: all), stratified by the human label
    (each label keeps its share, at least one record) and picked by a seeded hash of the id."""
    chosen = rows
    if limit:
        by_label: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_label.setdefault(row["gold"]["begin_label"], []).append(row)
        takes = {label: max(1, round(limit * len(members) / len(rows))) for label, members in by_label.items()}
        largest = max(takes, key=lambda label: takes[label])
        takes[largest] -= sum(takes.values()) - min(limit, len(rows))  # rounding: exactly `limit` in all
        chosen = []
        for label, members in sorted(by_label.items()):
            chosen += sorted(members, key=lambda r: _rank(seed, r["id"]))[: takes[label]]
        order = {row["id"]: index for index, row in enumerate(rows)}
        chosen.sort(key=lambda r: order[r["id"]])
    records: list[dict[str, Any]] = []
    for row in chosen:
        label = row["gold"]["begin_label"]
        records.append(golden_record(
            "begin-wow", len(records), model=row["meta"]["generator"], question=row["question"], answer=row["answer"],
            contexts=row["contexts"], source="Wikipedia (Wizard of Wikipedia)",
            metadata={"source_id": row["id"], "split": row["meta"]["split"]},
            labels={"faithful": BEGIN_FAITHFUL[label], "source_label": label}))
    return records


CONVERTERS = {"halueval-qa": halueval_records, "begin-wow": begin_records}


def write_golden(folder: Path, records: list[dict[str, Any]], info: dict[str, Any]) -> Path:
    """A golden set folder: ``records.jsonl`` and ``set.json`` (``info``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "records.jsonl").write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records),
                                          encoding="utf-8")
    (folder / "set.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def write_set(out: Path, name: str, records: list[dict[str, Any]], *, full: bool) -> Path:
    """Write one set: ``<out>/<name>/records.jsonl`` and ``set.json``."""
    info = {k: v for k, v in SETS[name].items() if k != "file"}
    labels = [r["labels"]["faithful"] for r in records]
    info.update(name=name, records=len(records), faithful=sum(labels), not_faithful=len(labels) - sum(labels),
                subset="all records" if full else "a seeded subset (scripts/golden_sets.py)")
    return write_golden(out / name, records, info)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of the reshaped public files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder to write the golden sets to")
    parser.add_argument("--limit", type=int, default=300, help="records per set (0: every record)")
    parser.add_argument("--seed", type=int, default=12, help="seed of the subset")
    parser.add_argument("--sets", default=",".join(SETS), help="sets to write, comma-separated")
    args = parser.parse_args(argv)
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if name not in SETS:
            parser.error(f"unknown set {name!r} (sets: {', '.join(SETS)})")
        path = args.source / SETS[name]["file"]
        if not path.exists():
            print(f"{path} not found: give --source", file=sys.stderr)
            return 1
        records = CONVERTERS[name](jsonl(path.read_text(encoding="utf-8")), args.limit, args.seed)
        folder = write_set(args.out, name, records, full=args.limit == 0)
        print(f"{name}: {len(records)} records -> {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
