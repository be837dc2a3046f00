"""What the review step is asked (:class:`ReviewSpec`): the options of the review queue, its
Label Studio round trip and its export; light enough for a DAG file to import."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from evaluation.contract.adapters import (
    INPUT_FORMATS,
    INPUT_LAYOUTS,
    check_input_format,
    check_input_layout,
    parse_mapping,
)
from evaluation.contract.config import Cli, FormText, comma_list


class ReviewError(RuntimeError):
    """The review step cannot do what it was asked: the message names the day, the object or the
    Label Studio project, and the cause."""


#: The targeted strata, in the order a record that belongs to several is counted in (the first).
TARGETED_STRATA = ("flagged", "disagreement", "escalated", "borderline")
#: The questions people answer about a record (the ``question`` column of ``human_labels``).
QUESTIONS = ("supported", "answers", "verdict")


class ReviewSpec(BaseModel):
    """The review step's options: the ``review_queue`` DAG's form and ``python -m evaluation review``
    map onto it."""

    model_config = ConfigDict(extra="forbid")

    input_uri: Annotated[str, Cli(env="EVALUATION_INPUT_URI", flags=("--input", "--input-uri"))] = Field(
        default="", title="Input URI", description="Root of the raw logs (the queued records' texts are read there).")
    output_uri: Annotated[str, Cli(env="EVALUATION_OUTPUT_URI", flags=("--output", "--output-uri"))] = Field(
        default="", title="Output URI", description="Root of the landed tables (the queue and human_labels land there).")
    input_format: Annotated[str, BeforeValidator(check_input_format)] = Field(
        default="own", title="Input format", json_schema_extra={"enum": list(INPUT_FORMATS)},
        description="Shape of the raw records, as the day's run read them.")
    input_layout: Annotated[str, BeforeValidator(check_input_layout), FormText] = Field(
        default="", validate_default=True, title="Input layout", json_schema_extra={"enum": ["", *INPUT_LAYOUTS]},
        description="Where a day's objects lie under the input root, as the day's run read them. Empty: the input "
        "format's own (date for litellm, ymd for otel, hive for the others).")
    input_mapping: Annotated[dict[str, str], BeforeValidator(parse_mapping), FormText] = Field(
        default="", validate_default=True, title="Input mapping",
        description="Fields read from other places of a record, as the day's run read them. Empty: none.")
    review_size: Annotated[int, Cli(env="EVALUATION_REVIEW_SIZE")] = Field(
        default=50, ge=1, le=100_000, title="Review size",
        description="Records queued for people per day: the uniform slice plus the targeted strata.")
    review_uniform_share: Annotated[float, Cli(env="EVALUATION_REVIEW_UNIFORM_SHARE")] = Field(
        default=0.5, ge=0.0, le=1.0, title="Uniform share",
        description="Share of the review size drawn uniformly at random from the day (what the corrected "
        "estimates use); the rest goes to the targeted strata, and what they cannot fill to the uniform slice.")
    flagged_models: Annotated[list[str], BeforeValidator(comma_list), FormText] = Field(
        default="", validate_default=True, title="Flagged models",
        description="Models whose records form the flagged stratum (comma-separated). Empty: the models the "
        "day's report says regressed (its summary.json's alerting), none before the report is built.")
    review_seed: int = Field(default=0, ge=0, description="Seeds the draw together with the day and the run id.")
    label_studio_project: Annotated[int | None, Cli(env="EVALUATION_LABEL_STUDIO_PROJECT")] = Field(
        default=None, ge=1, title="Label Studio project",
        description="Id of the Label Studio project the queue is sent to and labels pulled from; empty: "
        "the project titled label_studio_title, created when missing.")
    label_studio_title: str = Field(default="LLM answers review", description="Title of the Label Studio project.")
    min_labels: Annotated[int, Cli(env="EVALUATION_MIN_LABELS")] = Field(
        default=30, ge=2, title="Minimum labels",
        description="Labelled records of the uniform slice a model needs before the report shows its "
        "human-corrected estimates.")
    labels_days: Annotated[int, Cli(env="EVALUATION_LABELS_DAYS")] = Field(
        default=28, ge=1, le=3660, title="Labels window (days)",
        description="Days of labelling (ending at the run's day) a calibration from people's labels is fitted on.")
    people_window_days: int = Field(
        default=28, ge=1, le=366, title="People window (days)",
        description="Days of records (ending at the report's day) the corrected estimates and the label "
        "agreement are computed over.")
