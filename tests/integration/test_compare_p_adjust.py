"""A comparison's p-value adjustment is chosen by its spec: Holm (default) or Benjamini–Hochberg."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import polars as pl
import pytest

from evaluation import compare, storage
from evaluation.cli.day import run_day
from evaluation.compare import ComparisonSpec, run_comparison
from evaluation.contract.config import RunConfig
from evaluation.contract.options import COMPARE_OPTIONS
from evaluation.stages import Stores
from evaluation.testing import synthetic

DAYS = (dt.date(2026, 11, 1), dt.date(2026, 11, 2))
RECORDS = 240


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> storage.Store:
    root = tmp_path_factory.mktemp("p-adjust")
    raw_uri, out_uri = str(root / "raw"), str(root / "out")
    for day in DAYS:
        synthetic.write_day(storage.open_store(raw_uri), day, RECORDS)
        cfg = RunConfig(date=day, input_uri=raw_uri, output_uri=out_uri, run_id=f"test-{day}")
        run_day(cfg, Stores.open(cfg))
    return storage.open_store(out_uri)


def _spec(**overrides: Any) -> ComparisonSpec:
    values: dict[str, Any] = {"start_date": DAYS[0], "end_date": DAYS[-1], "bootstrap": 400,
                              "models": ["assistant-lite", "assistant-v2", "assistant-v1"]}
    values.update(overrides)
    return ComparisonSpec(**values)


#: Worked by hand: m = 6 p-values, sorted 0.001 0.008 0.012 0.02 0.04 0.3.
#: BH: p_(i) * m / i = 0.006 0.024 0.024 0.03 0.048 0.3, then the running minimum from the top.
#: Holm: p_(i) * (m - i + 1) = 0.006 0.04 0.048 0.06 0.08 0.3, then the running maximum from the bottom.
HAND_P = [0.04, 0.001, 0.3, 0.012, 0.008, 0.02]
HAND_BH = [0.048, 0.006, 0.3, 0.024, 0.024, 0.03]
HAND_HOLM = [0.08, 0.006, 0.3, 0.048, 0.04, 0.06]


def test_bh_and_holm_on_a_hand_computed_example() -> None:
    assert compare.adjust_p_values(np.array(HAND_P), "bh") == pytest.approx(HAND_BH)
    assert compare.adjust_p_values(np.array(HAND_P), "holm") == pytest.approx(HAND_HOLM)
    # At 0.05, BH keeps five discoveries where Holm keeps three.
    assert sum(p < 0.05 for p in HAND_BH) == 5 and sum(p < 0.05 for p in HAND_HOLM) == 3


@pytest.mark.parametrize("seed", range(6))
def test_bh_matches_scipy(seed: int) -> None:
    from scipy.stats import false_discovery_control

    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.3, size=int(rng.integers(1, 60))) ** rng.uniform(0.5, 3)
    assert compare.benjamini_hochberg(p) == pytest.approx(false_discovery_control(p, method="bh"))
    assert compare.benjamini_hochberg(np.array(HAND_P)) == pytest.approx(
        false_discovery_control(np.array(HAND_P), method="bh"))


@pytest.mark.parametrize("seed", range(6))
def test_holm_matches_its_definition(seed: int) -> None:
    """Holm (1979): sorted ascending, p_(i) times (m - i + 1), made monotone by a running maximum, capped at 1."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, 0.2, size=int(rng.integers(1, 40)))
    order = np.argsort(p, kind="stable")
    expected = np.empty_like(p)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[index]))
        expected[index] = running
    assert compare.holm(p) == pytest.approx(expected)


def test_spec_defaults_to_holm_and_refuses_other_methods() -> None:
    assert _spec().p_adjust == "holm"
    assert _spec(p_adjust="bh").p_adjust == "bh"
    with pytest.raises(ValueError, match="p_adjust"):
        _spec(p_adjust="bonferroni")
    # The default keeps the id a spec had before the choice existed; BH is another comparison.
    before = _spec().model_dump(mode="json", exclude={"p_adjust"})
    assert _spec().default_id() == ComparisonSpec.model_validate(before).default_id()
    assert _spec(p_adjust="bh").default_id() != _spec().default_id()


def test_the_comparison_form_offers_the_choice() -> None:
    (field,) = [o for o in COMPARE_OPTIONS if o.name == "p_adjust"]
    assert field.fallback == "holm" and field.schema["enum"] == ["", "holm", "bh"]  # empty: $EVALUATION_P_ADJUST
    assert "Benjamini–Hochberg" in field.description


def test_a_bh_comparison_adjusts_lands_and_names_its_method(landed: storage.Store) -> None:
    results = {method: run_comparison(landed, _spec(p_adjust=method), comparison_id=f"adjust-{method}")
               for method in ("holm", "bh")}
    tables = {method: storage.read_parquet(landed, storage.comparison_key(f"adjust-{method}", "metrics.parquet"))
              .filter(pl.col("p_value").is_not_null()) for method in results}
    holm, bh = tables["holm"], tables["bh"]
    assert holm["p_value"].to_list() == bh["p_value"].to_list()  # same data, same seed: the same raw p-values
    raw = bh["p_value"].to_numpy()
    assert set(bh["p_adjust_method"]) == {"bh"} and set(holm["p_adjust_method"]) == {"holm"}
    assert set(bh["n_tests"]) == {bh.height} and bh.height > 10
    assert bh["p_adjusted"].to_list() == pytest.approx(compare.benjamini_hochberg(raw).tolist())
    assert holm["p_adjusted"].to_list() == pytest.approx(compare.holm(raw).tolist())
    assert (bh["p_adjusted"] <= holm["p_adjusted"] + 1e-12).all()
    assert bh["significant"].to_list() == (bh["p_adjusted"] < compare.ALPHA).to_list()
    assert bh["significant"].sum() >= holm["significant"].sum()

    assert results["bh"]["p_adjust"] == "bh" and results["holm"]["p_adjust"] == "holm"
    spec_json = storage.read_json(landed, storage.comparison_key("adjust-bh", "spec.json"))
    assert spec_json["p_adjust"] == "bh" and spec_json["spec"]["p_adjust"] == "bh"
    page = landed.read_bytes(storage.comparison_key("adjust-bh", "report.html")).decode()
    assert "p (Benjamini–Hochberg)" in page and "p_adjust=bh" in page and "false discovery rate" in page
    assert "<code>p_adjust=bh</code>" in page  # markup, not escaped text
    page = landed.read_bytes(storage.comparison_key("adjust-holm", "report.html")).decode()
    assert "p (Holm)" in page and "p_adjust=holm" in page and "family-wise error rate" in page


def test_cli_compare_takes_the_method(landed: storage.Store, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from evaluation.cli.main import main

    code = main(["compare", "--from", DAYS[0].isoformat(), "--to", DAYS[-1].isoformat(),
                 "--models", "assistant-lite,assistant-v2", "--bootstrap", "200", "--p-adjust", "bh",
                 "--output", landed.root, "--comparison-id", "cli-bh", "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["p_adjust"] == "bh"
    metrics = storage.read_parquet(landed, storage.comparison_key("cli-bh", "metrics.parquet"))
    assert set(metrics["p_adjust_method"].drop_nulls()) == {"bh"}
