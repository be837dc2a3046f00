"""Stage 0: check the run before anything is paid for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from evaluation.calling import offline
from evaluation.calling.batch import BatchUnsupported, require_batches
from evaluation.calling.client import JudgeClient, credential_variables, endpoint, judge_client
from evaluation.contract.calibration import CalibrationError
from evaluation.contract.config import RunConfig
from evaluation.stages._run import CheckResult, JudgeUnreachable, JudgeUnusable, Stores, fail_run, where
from evaluation.stages.cascade.bands import level_bands
from evaluation.stages.ingest import DayInput, missing_input
from evaluation.stages.thresholds import with_calibrated_thresholds

logger = logging.getLogger(__name__)

#: Seconds between two "waiting for the judge" lines while a probe call has no answer.
PROBE_REPORT_EVERY_S = 5.0


def check_run(
    cfg: RunConfig,
    stores: Stores,
    *,
    api_key: str | None = None,
    key_hint: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    every_s: float = PROBE_REPORT_EVERY_S,
    input_ready: bool = True,
) -> CheckResult:
    """Fail before paying. With ``input_ready`` (the day is expected to be complete already, not
    waited for after this check), a day without input objects fails first, saying what the input
    URI holds instead (:func:`~evaluation.stages.ingest.missing_input`). Then the judge model gets
    one probe call of a few tokens before anything is ingested or judged (see
    :func:`probe_judge`). Every failure leaves the run's ``runs`` row (status ``failed`` and the
    cause): a model that does not exist or an endpoint that refuses the call for good raises
    :class:`RunFailed`; an endpoint that cannot be reached or does not answer within
    ``probe_timeout_s`` raises :class:`JudgeUnreachable`, which a scheduler may retry (a later
    attempt of the run replaces its row). ``key_hint``, ``on_wait`` and ``every_s`` are
    :func:`probe_judge`'s."""

    missing = missing_input(stores.raw, cfg.date, DayInput.of(cfg)) if input_ready and not cfg.allow_empty else None
    if missing:
        raise fail_run(cfg, stores, f"{where(cfg)}: {missing}; nothing was ingested or judged")
    try:  # a calibration named for the thresholds or a cascade's band must exist before anything is paid for
        with_calibrated_thresholds(cfg, stores.out)
        level_bands(cfg, stores.out)
        if cfg.batch:  # a provider without a batch API fails here, not once the day is ingested
            require_batches(cfg.judge_model)
    except (CalibrationError, BatchUnsupported) as exc:
        raise fail_run(cfg, stores, f"{where(cfg)}: {exc}; nothing was ingested or judged") from exc
    client = judge_client(cfg, api_key)
    # every level of a cascade is probed, cheapest first; the judge model, its last level, too
    levels = [judge_client(cfg.level_config(level), api_key) for level in range(len(cfg.cascade))] + [client]
    latency_ms = 0.0
    try:
        for level_client in levels:
            if cfg.dry_run:  # a dry run calls no judge, not even the probe; a model that cannot exist still fails
                refuse_unknown_offline_model(level_client.model, where(cfg))
            else:
                latency_ms = probe_judge(level_client, where(cfg), timeout_s=cfg.probe_timeout_s, key_hint=key_hint,
                                         on_wait=on_wait, every_s=every_s)
    except JudgeUnusable as exc:
        raise fail_run(cfg, stores, f"{exc}; nothing was ingested or judged") from exc
    except JudgeUnreachable as exc:
        message = f"{exc}; nothing was ingested or judged"
        fail_run(cfg, stores, message)
        raise JudgeUnreachable(message) from exc
    return CheckResult(judge_model=cfg.judge_model, probe_latency_ms=latency_ms,
                       call_parameters=client.call_parameters())


def refuse_unknown_offline_model(model: str, where: str) -> None:
    """Raise :class:`JudgeUnusable` for an ``offline/...`` model that does not exist (a typo of
    ``offline/lexical``), listing the ones that do."""

    unknown = offline.unknown_model(model)
    if unknown is not None:
        raise JudgeUnusable(f"{where}: judge model {model!r} cannot be used: {unknown}")


def probe_judge(
    client: JudgeClient,
    where: str,
    *,
    timeout_s: float,
    key_hint: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    every_s: float = PROBE_REPORT_EVERY_S,
) -> float:
    """Send ``client``'s judge model its probe call (one attempt, a busy endpoint's 429 or 5xx
    tried again, all within ``timeout_s``); returns the latency (ms). Raises :class:`JudgeUnusable`
    for an offline judge that does not exist (no call made), credentials missing or refused (naming
    the variables to set, and ``key_hint``) or any other refusal; :class:`JudgeUnreachable` naming
    the URL for a refused connection, a probe unanswered within ``timeout_s`` or an endpoint that
    stayed busy. While it waits, a line saying what for is logged, and passed to ``on_wait``, every
    ``every_s`` seconds."""

    model = client.model
    refuse_unknown_offline_model(model, where)
    url = endpoint(model, client.api_base)

    def waiting(waited: float) -> None:
        line = (f"{where}: waiting for judge model {model} at {url} to answer the probe call "
                f"({waited:.0f} s of {timeout_s:g} s)")
        logger.info("%s", line)
        if on_wait is not None:
            on_wait(line)

    outcome = asyncio.run(client.probe(timeout_s=timeout_s, on_wait=waiting, every_s=every_s))
    if outcome.ok:
        logger.info("%s: judge model %s answered the probe in %.0f ms", where, model, outcome.latency_ms)
        return float(outcome.latency_ms)
    error, error_class = outcome.error, outcome.error_class
    if error_class == "auth":
        places = [" / ".join(credential_variables(model)), key_hint or ""]
        advice = " or ".join(p for p in places if p) or f"the credentials of {model}'s provider"
        raise JudgeUnusable(f"{where}: judge model {model!r} at {url} has no usable credentials (missing or "
                            f"refused): set {advice}; the probe call failed with {error}")
    if error_class == "connection":
        raise JudgeUnreachable(f"{where}: judge model {model!r}: could not connect to {url}: {error}")
    if error_class == "timeout":
        raise JudgeUnreachable(f"{where}: judge model {model!r} at {url} did not answer a probe call within "
                               f"{timeout_s:g} s (probe_timeout_s): {error}")
    if error_class in ("rate_limit", "server_error"):
        raise JudgeUnreachable(f"{where}: judge model {model!r} at {url} did not answer a probe call: {error}")
    raise JudgeUnusable(f"{where}: judge model {model!r} cannot be used: the probe call to {url} failed with {error}")
