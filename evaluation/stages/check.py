"""Stage 0: check the run before anything is paid for."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from evaluation.contract import RunConfig
from evaluation.stages._run import CheckResult, JudgeUnreachable, JudgeUnusable, Stores, fail_run, where

logger = logging.getLogger(__name__)


def judge_client(cfg: RunConfig, api_key: str | None) -> Any:
    """The run's judge client (imports litellm: only where calls are made)."""
    from evaluation.client import JudgeClient

    return JudgeClient(
        cfg.judge_model,
        api_base=cfg.api_base,
        api_key=api_key,
        concurrency=cfg.concurrency,
        timeout_s=cfg.timeout_s,
        max_attempts=cfg.max_attempts,
        retry_budget_s=cfg.retry_budget_s,
        temperature=cfg.temperature,
        rpm=cfg.judge_rpm,
        tpm=cfg.judge_tpm,
    )


def check_run(cfg: RunConfig, stores: Stores, *, api_key: str | None = None) -> CheckResult:
    """Fail before paying: send the judge model one probe call of a few tokens before anything is
    ingested or judged. A model litellm cannot resolve, or an endpoint that refuses the call for
    good (unknown model, bad key, quota), fails the run with the provider's message and a
    ``runs`` row; an endpoint that does not answer (timeouts, 429, 5xx after the client's retries)
    raises :class:`JudgeUnreachable`, which the scheduler retries."""
    from evaluation.batch import BatchUnsupported, require_batches
    from evaluation.calibration.daily import with_calibrated_thresholds
    from evaluation.calibration.spec import CalibrationError

    try:  # a calibration named for the thresholds must exist before anything is paid for
        with_calibrated_thresholds(cfg, stores.out)
        if cfg.batch:  # a provider without a batch API fails here, not once the day is ingested
            require_batches(cfg.judge_model)
    except (CalibrationError, BatchUnsupported) as exc:
        raise fail_run(cfg, stores, f"{where(cfg)}: {exc}; nothing was ingested or judged") from exc
    client = judge_client(cfg, api_key)
    try:
        latency_ms = probe_judge(client, where(cfg))
    except JudgeUnusable as exc:
        raise fail_run(cfg, stores, f"{exc}; nothing was ingested or judged") from exc
    return CheckResult(judge_model=cfg.judge_model, probe_latency_ms=latency_ms,
                       call_parameters=client.call_parameters())


def probe_judge(client: Any, where: str) -> float:
    """Send ``client``'s judge model its probe call; returns the latency (ms). Raises
    :class:`JudgeUnusable` when it is refused for good, :class:`JudgeUnreachable` when the endpoint
    does not answer after the client's retries."""
    from evaluation.outcome import RETRYABLE

    outcome = asyncio.run(client.probe())
    if outcome.ok:
        logger.info("%s: judge model %s answered the probe in %.0f ms", where, client.model, outcome.latency_ms)
        return float(outcome.latency_ms)
    if outcome.error_class in RETRYABLE:
        raise JudgeUnreachable(f"{where}: judge model {client.model!r} did not answer a probe call: {outcome.error}")
    raise JudgeUnusable(f"{where}: judge model {client.model!r} cannot be used: the probe call failed with "
                        f"{outcome.error}")

