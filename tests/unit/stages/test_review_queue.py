"""The review queue's draw: strata, inclusion probabilities, never a record twice, the same draw on
a re-run (evaluation.contract.review_queue, evaluation.stages.review)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from evaluation import storage
from evaluation.contract.review import ReviewSpec
from evaluation.contract.review_queue import allocate, draw_seed, record_strata, select_queue
from evaluation.stages.review import queue_day, read_queues

DAY = dt.date(2026, 3, 2)


def _evaluations(records: int = 200) -> pl.DataFrame:
    """rag and masis rows per record: every 7th record the judges disagree, every 5th rag says
    borderline, every 11th a cascade escalated, models a/b/c in turn."""
    rows = []
    for i in range(records):
        rag = "borderline" if i % 5 == 0 else "pass"
        masis = "fail" if i % 7 == 0 else rag
        for judge, verdict in (("rag", rag), ("masis", masis)):
            rows.append({"run_id": "r1", "record_id": f"rec-{i:04d}", "model": "abc"[i % 3], "judge": judge,
                         "verdict": verdict, "cascade_calls": 2 if i % 11 == 0 and judge == "rag" else 1})
    return pl.DataFrame(rows)


@pytest.mark.parametrize(("slots", "sizes", "expected"), [
    (10, [5, 5, 5, 5], [3, 3, 2, 2]),
    (10, [1, 0, 20, 20], [1, 0, 5, 4]),
    (10, [2, 2, 2, 2], [2, 2, 2, 2]),
    (0, [4, 4], [0, 0]),
    (7, [0, 0], [0, 0]),
])
def test_allocate_splits_slots_evenly_within_each_stratum_size(slots: int, sizes: list[int], expected: list[int]) -> None:
    assert allocate(slots, sizes) == expected


def test_record_strata_marks_each_targeted_stratum() -> None:
    strata = record_strata(_evaluations(30), flagged_models=["b"]).sort("record_id")
    row = {r["record_id"]: r for r in strata.iter_rows(named=True)}
    assert row["rec-0007"]["disagreement"] and not row["rec-0001"]["disagreement"]
    assert row["rec-0005"]["borderline"] and not row["rec-0006"]["borderline"]
    assert row["rec-0011"]["escalated"] and not row["rec-0012"]["escalated"]
    assert row["rec-0001"]["flagged"] and not row["rec-0000"]["flagged"]  # rec-1 is model b


def test_the_uniform_slice_and_each_stratum_record_their_inclusion_probability() -> None:
    strata = record_strata(_evaluations(), flagged_models=["c"])
    queue = select_queue(strata, size=50, uniform_share=0.5, seed=draw_seed(DAY, "r1", 0))
    assert queue.height == 50 and queue["record_id"].n_unique() == 50
    uniform = queue.filter(pl.col("stratum") == "uniform")
    assert uniform.height == 25 and uniform["inclusion_probability"].unique().to_list() == [25 / 200]
    # each targeted stratum: its picks over its members outside the uniform slice (first stratum wins)
    rest = strata.filter(~pl.col("record_id").is_in(uniform["record_id"].implode()))
    order = ["flagged", "disagreement", "escalated", "borderline"]
    for position, name in enumerate(order):
        members = rest.filter(pl.col(name) & ~pl.any_horizontal([pl.col(o) for o in order[:position]] or [pl.lit(False)]))
        picked = queue.filter(pl.col("stratum") == name)
        assert picked.height > 0
        assert set(picked["record_id"]) <= set(members["record_id"])
        assert picked["inclusion_probability"].unique().to_list() == [picked.height / members.height]


def test_a_uniform_records_frequency_over_draws_is_its_inclusion_probability() -> None:
    strata = record_strata(_evaluations(40))
    hits = np.zeros(40)
    draws = 2000
    for seed in range(draws):
        queue = select_queue(strata, size=20, uniform_share=0.5, seed=seed)
        ids = queue.filter(pl.col("stratum") == "uniform")["record_id"].to_list()
        hits[[int(i.split("-")[1]) for i in ids]] += 1
    assert queue.filter(pl.col("stratum") == "uniform")["inclusion_probability"][0] == pytest.approx(10 / 40)
    assert np.abs(hits / draws - 10 / 40).max() < 0.04  # sd of one record's frequency is 0.0097


def test_slots_the_strata_cannot_fill_go_to_the_uniform_slice() -> None:
    frame = _evaluations(100).with_columns(verdict=pl.lit("pass"), cascade_calls=pl.lit(1))  # no targeted record
    queue = select_queue(record_strata(frame), size=30, uniform_share=0.5, seed=1)
    assert queue["stratum"].unique().to_list() == ["uniform"] and queue.height == 30
    assert queue["inclusion_probability"][0] == pytest.approx(30 / 100)


def test_excluded_records_are_never_picked_and_a_small_day_is_queued_whole() -> None:
    strata = record_strata(_evaluations(20))
    excluded = {f"rec-{i:04d}" for i in range(0, 20, 2)}
    queue = select_queue(strata, size=50, uniform_share=0.5, seed=3, exclude=excluded)
    assert set(queue["record_id"]) == {f"rec-{i:04d}" for i in range(1, 20, 2)}
    assert queue["eligible"].unique().to_list() == [10]


def _landed_day(tmp_path: Path) -> storage.LocalStore:
    """A landed day of evaluations, written as a landing writes it (the day's commit record)."""
    store = storage.LocalStore(tmp_path / "out")
    key = storage.landing_key("evaluations", DAY, "r1")
    storage.write_parquet(store, key, _evaluations())
    storage.commit_day(store, DAY, "r1", {"evaluations": key})
    return store


def test_a_rerun_queues_the_same_records_and_another_queue_never_repeats_them(tmp_path: Path) -> None:
    store = _landed_day(tmp_path)
    spec = ReviewSpec(review_size=40)
    first = queue_day(spec, store, DAY, "scheduled__2026-03-03")
    again = queue_day(spec, store, DAY, "scheduled__2026-03-03")
    assert not first.reused and again.reused and again.queued == first.queued == 40
    other = queue_day(spec, store, DAY, "manual-2")
    queues = read_queues(store)
    assert other.queued == 40 and queues.height == 80
    assert queues["record_id"].n_unique() == 80  # never a record queued twice
    assert other.eligible == 200 - 40


def test_the_same_day_and_run_draw_the_same_records() -> None:
    strata = record_strata(_evaluations())
    one = select_queue(strata, size=30, uniform_share=0.5, seed=draw_seed(DAY, "r", 0))
    two = select_queue(strata, size=30, uniform_share=0.5, seed=draw_seed(DAY, "r", 0))
    three = select_queue(strata, size=30, uniform_share=0.5, seed=draw_seed(DAY, "other", 0))
    assert one.equals(two) and not one.equals(three)


def test_the_flagged_stratum_is_the_models_the_days_report_says_regressed(tmp_path: Path) -> None:
    store = _landed_day(tmp_path)
    before = queue_day(ReviewSpec(review_size=40), store, DAY, "before-the-report")
    assert "flagged" not in before.by_stratum  # no report yet: no model is flagged
    storage.write_json(store, storage.report_key(DAY, "summary.json"), {"alerting": ["b"]})
    queue_day(ReviewSpec(review_size=40), store, DAY, "after-the-report")
    queue = read_queues(store).filter(pl.col("queue_id") == "after-the-report")
    flagged = queue.filter(pl.col("stratum") == "flagged")
    assert flagged.height > 0 and set(flagged["model"]) == {"b"}
    named = queue_day(ReviewSpec(review_size=40, flagged_models=["c"]), store, DAY, "named")
    assert named.by_stratum.get("flagged", 0) > 0
    assert set(read_queues(store).filter((pl.col("queue_id") == "named") & (pl.col("stratum") == "flagged"))["model"]) \
        == {"c"}  # a named list wins over the report
