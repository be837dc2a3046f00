"""What a judge calibration is asked (:class:`CalibrationSpec`); light enough for a DAG file to import."""

from __future__ import annotations

import hashlib
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaluation.contract.config import (
    JUDGES,
    RULES_VERSION,
    CascadeLevels,
    Cli,
    JudgeList,
    Thresholds,
    cascade_name,
    check_cascade,
)
from evaluation.contract.errors import ConfigurationError
from evaluation.contract.judge_settings import JudgeSettings


class CalibrationError(ConfigurationError, RuntimeError):
    """A calibration cannot run as asked: the message names the set, the judge model and the cause."""


class _GoldenSet(BaseModel):
    """The set a calibration judges, and its judges (its first fields)."""

    golden_uri: Annotated[str, Cli(flags=("--golden", "--golden-uri"))] = Field(
        description="The golden set's folder: `s3://bucket/prefix/<set name>` or a directory.")
    judges: JudgeList = Field(default_factory=lambda: list(JUDGES), min_length=1,
                                    description="Judges to calibrate.")


class CalibrationSpec(JudgeSettings, _GoldenSet):
    """What to calibrate. The ``judge_calibration`` DAG's form and ``python -m evaluation calibrate``
    map onto it; the set is judged with the judge's settings (:class:`JudgeSettings`) as a run's
    calls are, so a reply a run paid for is reused here and the other way round."""

    model_config = ConfigDict(extra="forbid")

    #: The golden set (what is asked) has no variable: the DAG's EVALUATION_GOLDEN_URI is the sets' root.
    OPTION_CLI: ClassVar[dict[str, Cli]] = {"golden_uri": Cli(env="")}

    seed: int = Field(default=0, ge=0, description="Seeds the held-out split and the bootstrap.")
    bootstrap: int = Field(default=2000, ge=100, le=100_000, description="Bootstrap resamples of the AUROC interval.")
    holdout_share: float = Field(default=0.5, gt=0.0, lt=1.0,
                                 description="Share of each label class held out from the threshold search.")
    thresholds: Thresholds = Field(default_factory=Thresholds,
                                   description="The verdict thresholds the judges are run and measured at.")
    max_reject_ratio: float = Field(default=0.05, ge=0.0, le=1.0,
                                    description="Fail the calibration when more of the set than this is rejected.")
    max_record_chars: int = Field(default=200_000, ge=1, description="Reject records whose texts exceed this.")
    chunk_size: int = Field(default=500, ge=1, description="Records per judge chunk.")
    cascade: CascadeLevels = Field(
        default="", validate_default=True,
        description="Cheaper judge models tried before the judge model, cheapest first, comma-separated: model "
        "(its band fitted here), model@low:high or model@<calibration id>. The set is judged with every model, the "
        "bands not given are fitted on the fit split, and the cascade is measured as one judge. Empty: none.")
    band_loss: float = Field(
        default=0.02, ge=0.0, le=1.0,
        description="With a cascade: the share of records on which the fitted cascade's verdict may differ from the "
        "judge model's (fail or not), guaranteed at band_confidence for new records like the fit split's; the "
        "bands are the cheapest passed in a fixed sequence of candidates.")
    band_confidence: float = Field(
        default=0.9, gt=0.5, lt=1.0,
        description="With a cascade: the probability, over the fit split, that the fitted cascade's disagreement "
        "with the judge model is within band_loss (each candidate's Clopper-Pearson upper bound at this level).")

    @field_validator("golden_uri")
    @classmethod
    def _folder(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value or value.endswith(("s3:/", "s3:")):
            raise ValueError("golden_uri is blank: give the golden set's folder")
        return value

    @model_validator(mode="after")
    def _cascade(self) -> CalibrationSpec:
        check_cascade(self.cascade, self.judge_model, bands_required=False)
        return self

    @property
    def judge_name(self) -> str:
        """What was calibrated: the judge model, or the cascade ending with it (``a > b > c``)."""
        return cascade_name(self.cascade, self.judge_model)

    @property
    def models(self) -> list[str]:
        """Every level's judge model, cheapest first: the cascade's, then the judge model."""
        return [level.judge_model for level in self.cascade] + [self.judge_model]

    @property
    def set_name(self) -> str:
        """The set's name: the last segment of its folder."""
        return self.golden_uri.rsplit("/", 1)[-1]

    def default_id(self, prompt_versions: dict[str, str]) -> str:
        """``cal-`` and a hash of the spec, the judges' prompt versions and the rules version: the
        same calibration of the same prompts gets the same id (a re-run replaces it)."""
        # Without a cascade its options are left out: calibrations named before there were cascades keep their id.
        exclude = ({"concurrency", "chunk_size"} | self.left_out_of_id()
                   | (set() if self.cascade else {"cascade", "band_loss", "band_confidence"}))
        payload = self.model_dump_json(exclude=exclude) + repr(sorted(prompt_versions.items()))
        digest = hashlib.sha256((payload + RULES_VERSION).encode()).hexdigest()
        return f"cal-{digest[:16]}"

    def describe(self) -> str:
        """The set and the judge model (or the cascade), for messages."""
        return f"set {self.set_name} ({self.golden_uri}) with {self.judge_name}"


#: The human labels of a golden record (``labels`` object): see docs/golden-sets.md.
LABEL_FIELDS = ("faithful", "rating", "scores", "verdict", "source_label")
