"""Each cascade level's uncertainty band per judge: given in the run's options, or fitted by a
calibration of a cascade (its ``cascade.parquet``, named by the level's ``band_from``), checked
before anything is paid for; and the share of the rows reaching a level its calibration sent on
(what the plan estimates the levels after it from)."""

from __future__ import annotations

import polars as pl

from evaluation import storage
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import CascadeLevel, JudgeName, RunConfig

#: A band per judge: [low, high], both ends inside it.
Bands = dict[JudgeName, tuple[float, float]]


def bands_of(store: storage.Store, level: CascadeLevel, judges: list[JudgeName]) -> Bands:
    """``level``'s band per judge: the one it gives, else the one a calibration of a cascade fitted
    for its judge model (the ``cascade.parquet`` of ``band_from``); :class:`CalibrationError` when
    that has none for one of ``judges``."""
    if level.band is not None:
        return {judge: level.band for judge in judges}
    calibration = level.band_from or ""
    key = storage.calibration_key(calibration, "cascade.parquet")
    if not store.exists(key):
        raise CalibrationError(f"cascade level {level.describe()}: no calibration of a cascade at {store.uri(key)}")
    rows = (storage.read_parquet(store, key)
            .filter((pl.col("judge_model") == level.judge_model) & pl.col("band_low").is_not_null()))
    bands: Bands = {row["judge"]: (row["band_low"], row["band_high"]) for row in rows.iter_rows(named=True)}
    missing = [judge for judge in judges if judge not in bands]
    if missing:
        models = ", ".join(sorted(set(storage.read_parquet(store, key)["judge_model"]))) or "none"
        raise CalibrationError(
            f"cascade level {level.describe()}: calibration {calibration} fitted no band for {level.judge_model} "
            f"and judge {missing[0]} (its models: {models})")
    return {judge: bands[judge] for judge in judges}


def level_bands(cfg: RunConfig, store: storage.Store) -> list[Bands]:
    """Each cascade level's band per selected judge (the judge model, the last level, has none)."""
    return [bands_of(store, level, list(cfg.judges)) for level in cfg.cascade]


def shares_sent_on(cfg: RunConfig, store: storage.Store) -> list[dict[str, float | None]]:
    """Per cascade level and judge, the share of the rows reaching it that its calibration sent on
    (None for a band given by hand)."""
    found: list[dict[str, float | None]] = []
    for level in cfg.cascade:
        shares: dict[str, float | None] = dict.fromkeys(cfg.judges)
        key = storage.calibration_key(level.band_from or "", "cascade.parquet")
        if level.band_from is not None and store.exists(key):
            rows = storage.read_parquet(store, key).filter(pl.col("judge_model") == level.judge_model)
            shares.update({row["judge"]: row["share_sent_on"] for row in rows.iter_rows(named=True)
                           if row["judge"] in shares})
        found.append(shares)
    return found


def mean_share(shares: dict[str, float | None]) -> float | None:
    """The mean of a level's shares over the judges (None when one is unknown)."""
    values = list(shares.values())
    return None if not values or any(v is None for v in values) else round(sum(v or 0.0 for v in values) / len(values), 4)
