"""The judge's settings, declared once (:class:`JudgeSettings`): which model is called where
(:class:`JudgeEndpoint`), how its replies are asked for, how many calls are in flight, how long a call
may take and how often it is tried, and the deployment's rate limits.

A run, a re-judging comparison and a calibration are built on :class:`JudgeSettings`, so their options
keep the flat names (``judge_model``, ``concurrency``, ``judge_rpm``, ...) the CLI, the DAG forms and the
``EVALUATION_<OPTION>`` variables use. Light on purpose (pydantic only): a DAG file imports it at parse time.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, BeforeValidator, Field

#: The built-in lexical baseline judge: no network, no key.
OFFLINE_JUDGE_MODEL = "offline/lexical"

#: Whether judge calls send each judge's reply model as a JSON schema: ``auto`` where litellm says
#: the provider enforces one, ``on`` always (an OpenAI-compatible server that does), ``off`` never.
StructuredOutput = Literal["auto", "on", "off"]


#: Text that may be left blank in a form: blank is None.
OptionalText = Annotated[str | None, BeforeValidator(lambda value: None if isinstance(value, str) and not value.strip()
                                                     else value)]


def request_parameters(*, temperature: float, api_base: str | None, json_mode: bool,
                       response_schema: bool) -> dict[str, Any]:
    """The parameters that shape a reply, as a ledger request hash takes them. The API base is one
    of them: the same model name behind another endpoint is another judge deployment. A call that
    sends a JSON schema says so (``response_format``); one that does not leaves the key out, so its
    hash is what it was before schemas were sent. ``json_mode`` and ``response_schema`` are what the
    provider supports (the calling layer asks litellm)."""
    parameters: dict[str, Any] = {"temperature": temperature, "json_mode": json_mode, "api_base": api_base}
    if response_schema:
        parameters["response_format"] = "json_schema"
    return parameters


#: The settings that do not change a reply (left out of a comparison's and a calibration's id).
_NOT_IN_ID = frozenset({"timeout_s", "max_attempts", "retry_budget_s", "probe_timeout_s", "judge_rpm", "judge_tpm"})


class JudgeEndpoint(BaseModel):
    """Which judge model is called, and where."""

    judge_model: str = Field(
        default=OFFLINE_JUDGE_MODEL, title="Judge model",
        description="Any litellm model string (openai/gpt-4o-mini, anthropic/..., bedrock/..., ollama/...); "
        "offline/lexical is the built-in lexical baseline (no network, no key).")
    api_base: OptionalText = Field(
        default=None, title="API base",
        description="Base URL of an OpenAI-compatible server (vLLM, Ollama, a proxy); when neither it nor its "
        "variable is set, the llm_judge connection's host, else the provider's own.")


class JudgeSettings(JudgeEndpoint):
    """Every setting of the judge: the fields a run, a re-judging comparison and a calibration take
    (see the module's docstring)."""

    structured_output: StructuredOutput = Field(
        default="auto", description="Send each judge's reply model as a JSON schema (the reply then parses by "
        "construction; extraction stays the fallback): auto where litellm says the provider and model enforce one, "
        "on for an OpenAI-compatible server that does, off for JSON mode only. Batch lines too; changes the "
        "ledger's request hashes.")
    concurrency: int = Field(default=8, ge=1, le=1024, description="Judge calls in flight per chunk.")
    timeout_s: float = Field(default=60.0, gt=0, title="Call timeout (s)", description="Timeout of one HTTP attempt.")
    max_attempts: int = Field(default=4, ge=1, le=20, description="Attempts per judge call, the first included.")
    retry_budget_s: float = Field(default=120.0, gt=0, title="Retry budget (s)",
                                  description="Cap on the time spent on one call.")
    probe_timeout_s: float = Field(
        default=30.0, gt=0, title="Probe timeout (s)",
        description="How long the probe call sent before the run starts may take, retries of a busy endpoint "
        "included; missing or refused credentials and a refused connection end it at once.")
    judge_rpm: float | None = Field(
        default=None, ge=0.0, title="Judge requests/min",
        description="The provider's requests per minute for the whole deployment, shared by every judge task "
        "(through Redis, else divided by the llm_judge pool's slots); when neither it nor its variable is set, the "
        "llm_judge connection's extra rpm, else none.")
    judge_tpm: float | None = Field(
        default=None, ge=0.0, title="Judge tokens/min",
        description="The provider's tokens per minute (prompt and completion) for the whole deployment, shared "
        "like judge_rpm, estimated before each call and corrected with the usage returned; when neither it nor its "
        "variable is set, the llm_judge connection's extra tpm, else none.")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0,
                               description="Sampling temperature of every judge call (fixed: not an option).")

    def client_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`evaluation.calling.client.JudgeClient` these settings give
        (the caller adds the key and where the rate budget is shared)."""
        return {"model": self.judge_model, "api_base": self.api_base, "concurrency": self.concurrency,
                "timeout_s": self.timeout_s, "max_attempts": self.max_attempts,
                "retry_budget_s": self.retry_budget_s, "temperature": self.temperature, "rpm": self.judge_rpm,
                "tpm": self.judge_tpm, "structured_output": self.structured_output}

    def call_parameters(self, *, json_mode: bool, response_schema: bool) -> dict[str, Any]:
        """The parameters of a ledger request hash of a call made with these settings, given what the
        provider supports (see :func:`request_parameters`)."""
        return request_parameters(temperature=self.temperature, api_base=self.api_base, json_mode=json_mode,
                                  response_schema=response_schema)

    def left_out_of_id(self) -> set[str]:
        """The settings a comparison's or a calibration's id leaves out: those that do not change a
        reply, and the reply-shaping ones (temperature, structured output) at their defaults, so that
        the ids of those named before these were options stay what they were."""
        defaults = JudgeSettings()
        return set(_NOT_IN_ID) | {name for name in ("temperature", "structured_output")
                                  if getattr(self, name) == getattr(defaults, name)}

    def judge_settings(self) -> JudgeSettings:
        """The judge's settings alone (of a run, a comparison or a calibration built on them)."""
        return JudgeSettings.model_validate(self.model_dump(include=set(JUDGE_SETTINGS)))

    def for_level(self, level: JudgeEndpoint | None, **update: Any) -> Self:
        """These settings as a cascade level is judged with them: the level's judge model, and its API
        base (else this one); ``update`` changes other fields. Validated like any other settings (the
        whole model again, not a copy); ``level`` None keeps the judge model."""
        data = self.model_dump()
        if level is not None:
            data.update(judge_model=level.judge_model, api_base=level.api_base or self.api_base)
        return self.model_validate({**data, **update})


#: The names of the judge's settings: declared on :class:`JudgeSettings` (and :class:`JudgeEndpoint`) only.
JUDGE_SETTINGS: tuple[str, ...] = tuple(JudgeSettings.model_fields)
