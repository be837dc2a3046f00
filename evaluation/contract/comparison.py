"""What a model comparison is asked (:class:`ComparisonSpec`); light enough for a DAG file to import."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_serializer, field_validator, model_validator

from evaluation.contract.config import JUDGES, Cli, JudgeList, Thresholds, comma_list
from evaluation.contract.errors import InputError
from evaluation.contract.judge_settings import JudgeSettings, OptionalText


class ComparisonError(InputError, RuntimeError):
    """A comparison cannot run as asked: the message names the range, the models and the cause."""


class _ComparedRange(BaseModel):
    """The days, models and judges a comparison compares (its first fields)."""

    start_date: Annotated[dt.date, Cli(flags=("--from",))] = Field(description="First day (dt) of the range, inclusive.")
    end_date: Annotated[dt.date, Cli(flags=("--to",))] = Field(description="Last day (dt) of the range, inclusive.")
    models: Annotated[list[str], BeforeValidator(comma_list)] = Field(
        min_length=2, description="The models (the `model` column) to compare.")
    baseline: OptionalText = Field(default=None, description="The model the others are compared to; empty: the first.")
    judges: JudgeList = Field(default_factory=lambda: list(JUDGES), min_length=1, description="Judges compared.")
    sample_per_model: Annotated[int | None, Cli(flags=("--sample",))] = Field(
        default=None, ge=1, description="At most this many records per model, a seeded sample; empty: all."
    )
    seed: int = Field(default=0, ge=0, description="Seeds the sample, the bootstrap and the permutations.")


class ComparisonSpec(JudgeSettings, _ComparedRange):
    """What to compare. The DAG's Params form and ``python -m evaluation compare`` map onto it. The
    judge's settings re-judge the sample; an empty ``judge_model`` (the default) compares the landed scores."""

    model_config = ConfigDict(extra="forbid")

    #: Its judge_model option: empty compares the landed scores, so its variable is its own (the runs'
    #: EVALUATION_JUDGE_MODEL would re-judge every comparison); the range and models (the question) have none.
    OPTION_CLI: ClassVar[dict[str, Cli]] = {"judge_model": Cli(
        env="EVALUATION_COMPARE_JUDGE_MODEL", empty="",
        description="Re-judge the sample with this litellm model; none: compare the landed scores."),
        **dict.fromkeys(("start_date", "end_date", "models"), Cli(env=""))}

    bootstrap: int = Field(
        default=2000, ge=100, le=100_000,
        description="Bootstrap resamples, and the least permutations of each p-value: raised to what the number of "
        "tests needs (the p-value's floor a tenth of the first adjusted test's threshold).")
    thresholds: Thresholds = Field(
        default_factory=Thresholds, description="Verdict thresholds when re-judging (landed rows keep theirs)."
    )
    min_pairs: int = Field(default=10, ge=2, description="Shared questions needed for a paired test.")
    p_adjust: Literal["holm", "bh"] = Field(
        default="holm",
        description="How the comparison's p-values are adjusted for their number: holm (Holm's step-down, "
        "family-wise error rate) or bh (Benjamini–Hochberg, false discovery rate).",
    )

    @field_validator("models")
    @classmethod
    def _unique_models(cls, value: list[str]) -> list[str]:
        models = [m.strip() for m in value]
        if any(not m for m in models):
            raise ValueError("a model name is blank")
        repeated = sorted({m for m in models if models.count(m) > 1})
        if repeated:
            raise ValueError(f"models are repeated: {', '.join(repeated)}")
        return models

    @model_validator(mode="before")
    @classmethod
    def _landed_scores(cls, data: object) -> object:
        """No judge model (absent, null or blank) is the empty one: compare the landed scores."""
        if isinstance(data, dict) and (data.get("judge_model") is None or not str(data["judge_model"]).strip()):
            data = {**data, "judge_model": ""}
        return data

    @field_serializer("judge_model")
    def _no_model(self, value: str) -> str | None:
        return value or None  # null, as before comparisons had every judge setting: their ids stay

    @model_validator(mode="after")
    def _check(self) -> ComparisonSpec:
        if self.end_date < self.start_date:
            raise ValueError(f"end_date {self.end_date} is before start_date {self.start_date}")
        if not self.rejudges:
            self.api_base = None  # only a judge call uses it; it must not change the comparison's id
        if self.baseline is None:
            self.baseline = self.models[0]
        elif self.baseline not in self.models:
            raise ValueError(f"baseline {self.baseline!r} is not one of the models {self.models}")
        return self

    @property
    def rejudges(self) -> bool:
        """Whether the sample is re-judged (a judge model is named)."""
        return bool(self.judge_model)

    @property
    def baseline_model(self) -> str:
        """The baseline (set by validation)."""
        assert self.baseline is not None
        return self.baseline

    def days(self) -> list[dt.date]:
        """Every day of the range."""
        return [self.start_date + dt.timedelta(days=i) for i in range((self.end_date - self.start_date).days + 1)]

    def default_id(self) -> str:
        """``cmp-`` and a hash of the spec: the same spec gets the same id."""
        # The default adjustment is left out of the hash: comparisons named before it was a choice keep their id.
        exclude = self.left_out_of_id() | ({"p_adjust"} if self.p_adjust == "holm" else set())
        digest = hashlib.sha256(self.model_dump_json(exclude=exclude).encode()).hexdigest()
        return f"cmp-{digest[:16]}"

    def describe(self) -> str:
        """The range and the models, for messages."""
        return f"{self.start_date}..{self.end_date}, models {', '.join(self.models)}"
