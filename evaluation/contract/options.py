"""Options generated from a spec's fields: the DAG forms and the CLI flags of ``run``, ``plan``,
``compare``, ``calibrate`` and ``gc`` come from :class:`RunConfig`, :class:`ComparisonSpec`,
:class:`CalibrationSpec` and :class:`Retention` (each field's title, description, default, range,
flag spellings and environment variable), and :func:`build_config` turns their values into a
:class:`RunConfig`.

Every option of these four has a variable, ``EVALUATION_`` and its name in upper case
(:func:`env_name`), so a deployment sets any of them for its scheduled runs, comparisons,
calibrations and clean-ups; an option of the same name is the same setting wherever it is. A
field's :class:`~evaluation.contract.config.Cli` (or its spec's ``OPTION_CLI``) may name another
variable or none.

This module is light on purpose (pydantic only): the DAG files import it at parse time. Nothing
here reads the environment then: an option with an environment variable is empty in the form and
on the command line, and :func:`fill_from_env` fills it when the run is configured (in the task,
or the CLI), so a worker's environment applies, not the parsing process's.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evaluation.contract.adapters import check_input_layout, check_options, parse_mapping
from evaluation.contract.calibration import CalibrationSpec
from evaluation.contract.comparison import ComparisonSpec
from evaluation.contract.config import RUN_INTERNALS, Cli, Retention, RunConfig


@dataclass(frozen=True)
class Option:
    """One option of a spec: a Param name, and the value of a field (``path``: the field, and the
    key inside it for a nested model's field)."""

    name: str
    path: tuple[str, ...]
    title: str
    description: str
    schema: dict[str, Any]  #: JSON Schema of the value, as a form and a flag take it
    default: Any  #: the form's default (None when required)
    required: bool
    env: str | None  #: the variable an empty value is taken from when the run is configured
    fallback: Any  #: the field's default: the value when the option and its variable are empty
    flags: tuple[str, ...]

    @property
    def kind(self) -> str:
        """The JSON type of the value (``null`` aside)."""
        kind = self.schema.get("type", "string")
        return str(next(k for k in kind if k != "null") if isinstance(kind, list) else kind)

    @property
    def default_text(self) -> str:
        """What the option is when not given, as a person reads it (``300`` not ``300.0``)."""
        value = self.fallback if self.env is not None else self.default
        shown = ("on" if value else "off") if self.kind == "boolean" else "none" if value in (None, "", []) \
            else _shown(value)
        if self.env is None:
            return shown
        return f"${self.env}" + ("" if shown == "none" else f", else {shown}")

    @property
    def help(self) -> str:
        """The description, with the variable an empty value is taken from."""
        return self.description if self.env is None else f"{self.description} Empty: {self.default_text}."


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else ",".join(map(str, value)) if isinstance(value, list) \
        else str(value)


def _cli(info: FieldInfo) -> Cli:
    """The field's :class:`~evaluation.contract.config.Cli` metadata (empty when it has none)."""
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


#: The prefix of the run options' variables: ``EVALUATION_CONCURRENCY`` for ``concurrency``.
ENV_PREFIX = "EVALUATION_"


def env_name(option: str, prefix: str = ENV_PREFIX) -> str:
    """The variable an option named ``option`` falls back to: ``EVALUATION_<OPTION>``."""
    return prefix + option.upper()


def _option(name: str, path: tuple[str, ...], info: FieldInfo, spec: dict[str, Any], *, required: bool,
            env_prefix: str | None, override: Cli) -> Option:
    schema = {k: v for k, v in spec.items() if k not in ("title", "description", "default")}
    variants = schema.pop("anyOf", None)
    if variants:  # X | None as the type [X, "null"]
        (typed,) = [v for v in variants if v.get("type") != "null"]
        schema.update(typed, type=[typed["type"], "null"])
    cli = _cli(info)
    named = override.env if override.env is not None else cli.env
    env = (named if named is not None else None if env_prefix is None else env_name(name, env_prefix)) or None
    default = None if required else info.get_default(call_default_factory=True)
    if override.empty is not None:
        default = override.empty
    fallback = default
    if env is not None:  # left empty for the variable: "" for text, else null
        kind = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        required, default = False, "" if "string" in kind else None
        schema["type"] = "string" if "string" in kind else [*kind, "null"] if "null" not in kind else kind
        if "enum" in schema and default == "":  # a choice left empty
            schema["enum"] = ["", *schema["enum"]]
    description = override.description or spec.get("description", "")
    return Option(name=name, path=path, title=info.title or name.replace("_", " ").capitalize(),
                  description=description, schema=schema, default=default, required=required,
                  env=env, fallback=fallback, flags=cli.flags or ("--" + name.replace("_", "-"),))


def options(model: type[BaseModel], *, skip: Iterable[str] = (), env_prefix: str | None = None) -> tuple[Option, ...]:
    """The options of a spec, in field order: one per field, and one per field of a nested model
    whose :class:`~evaluation.contract.config.Cli` names an option (``thresholds`` as ``pass_threshold`` and
    ``borderline_threshold``); other nested models are left out. With ``env_prefix`` every option
    falls back to the variable :func:`env_name` makes of its name; without, only those whose
    :class:`~evaluation.contract.config.Cli` names one. A spec's ``OPTION_CLI`` (option name to
    :class:`~evaluation.contract.config.Cli`) says where its option differs from the field it inherits."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    overrides: Mapping[str, Cli] = getattr(model, "OPTION_CLI", {})
    found: list[Option] = []
    for name, info in model.model_fields.items():
        spec = schema["properties"][name]
        if name in skip:
            continue
        if "$ref" not in spec:
            found.append(_option(name, (name,), info, spec, required=name in required, env_prefix=env_prefix,
                                 override=overrides.get(name, Cli())))
            continue
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            properties = schema["$defs"][spec["$ref"].rsplit("/", 1)[1]]["properties"]
            for inner, inner_info in nested.model_fields.items():
                flat, key = _cli(inner_info).name, inner_info.alias or inner
                if flat is not None:
                    found.append(_option(flat, (name, key), inner_info, properties[key], required=False,
                                         env_prefix=env_prefix, override=Cli()))
    return tuple(found)


def fill_from_env(found: Iterable[Option], values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with each empty option that has a variable taken from the environment (else its
    fallback); 0 and False are values."""
    filled = dict(values)
    for option in found:
        if option.env is not None and filled.get(option.name) in (None, ""):
            filled[option.name] = os.environ.get(option.env) or option.fallback
    return filled


def model_input(found: Iterable[Option], values: Mapping[str, Any]) -> dict[str, Any]:
    """The spec's input from option values (None left out, so the field's default applies), with
    the options of a nested model's fields nested again: ``{"thresholds": {"pass": 0.9}}``."""
    data: dict[str, Any] = {}
    for option in found:
        value = values.get(option.name)
        if value is None:
            continue
        if len(option.path) == 1:
            data[option.name] = value
        else:
            data.setdefault(option.path[0], {})[option.path[1]] = value
    return data


#: The run options: RunConfig's fields but those the run sets itself, each with its variable.
RUN_OPTIONS = options(RunConfig, skip=RUN_INTERNALS, env_prefix=ENV_PREFIX)
#: The options of a comparison: ComparisonSpec's fields but the re-judging thresholds and the fixed
#: temperature, each with its variable.
COMPARE_OPTIONS = options(ComparisonSpec, skip=("thresholds", "temperature"), env_prefix=ENV_PREFIX)
#: The options of a calibration: CalibrationSpec's fields but the fixed temperature, each with its variable.
CALIBRATE_OPTIONS = options(CalibrationSpec, skip=("temperature",), env_prefix=ENV_PREFIX)
#: The options of ``gc`` and the maintenance DAG: the retention's days, each with its variable.
RETENTION_OPTIONS = options(Retention, env_prefix=ENV_PREFIX)


def read_options(found: Sequence[Option], values: Mapping[str, Any]) -> dict[str, Any]:
    """A spec's input from option values: those left empty taken from their variables (else their
    fallbacks), nested as the spec takes them (:func:`fill_from_env`, :func:`model_input`)."""
    return model_input(found, fill_from_env(found, values))


def build_config(values: dict[str, Any], *, date: dt.date, run_id: str, trigger: str) -> RunConfig:
    """A validated RunConfig from run option values (unknown names are refused); empty values with
    a variable are taken from the environment here, when the run is configured."""
    unknown = set(values) - {o.name for o in RUN_OPTIONS}
    if unknown:
        raise ValueError(f"unknown options: {', '.join(sorted(unknown))}")
    merged = fill_from_env(RUN_OPTIONS, {k: v for k, v in values.items() if v is not None})
    # Checked here too, so that a bad format or mapping reads as its own one line.
    check_options(merged.get("input_format", "own"), parse_mapping(merged.get("input_mapping")))
    check_input_layout(merged.get("input_layout"))
    if not merged["input_uri"] or not merged["output_uri"]:
        raise ValueError("input_uri and output_uri are required (set them, or EVALUATION_INPUT_URI/_OUTPUT_URI)")
    return RunConfig.model_validate({**model_input(RUN_OPTIONS, merged), "date": date, "run_id": run_id,
                                     "trigger": trigger})
