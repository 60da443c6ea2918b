"""The options of ``casstore run`` and the Harbor ``JobConfig`` they make (Harbor's own
models: ``JobConfig``, ``AgentConfig``, ``EnvironmentConfig``, ``RetryConfig``,
``TaskConfig``; nothing re-typed).

:func:`check_options` runs every agent configuration check
(:mod:`casstore.run.credentials`) and Harbor's own validation of the models before anything
runs; :func:`job_config` builds the config of one launch, with the attempts of each task it
must hold.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from casstore.errors import UsageError
from casstore.run.credentials import (
    AgentEnv,
    check_agent_kwargs,
    check_env_vars,
    parse_assignments,
    resolve_secrets,
)

if TYPE_CHECKING:
    from harbor.models.job.config import JobConfig

    from casstore.run.source import RunTask

__all__ = [
    "MAX_ATTEMPTS",
    "CheckedOptions",
    "RunOptions",
    "check_options",
    "check_reward_key",
    "job_config",
]

MAX_ATTEMPTS = 10_000
"""The most ``--attempts`` a run takes: Harbor builds every trial's config before the first
trial starts, so a huge count only fills memory."""


@dataclass(frozen=True)
class RunOptions:
    """What ``casstore run`` is asked (its options, as given: ``KEY=VALUE`` texts)."""

    agent: str | None = None
    agent_import_path: str | None = None
    agent_dir: Path | None = None
    model: str | None = None
    agent_kwargs: Sequence[str] = ()
    env_secrets: Sequence[str] = ()
    env_vars: Sequence[str] = ()
    attempts: int = 1
    concurrency: int = 4
    max_retries: int = 0
    job_name: str | None = None
    jobs_dir: Path = Path("jobs")
    environment: str | None = None
    environment_import_path: str | None = None
    environment_kwargs: Sequence[str] = ()
    reward_key: str = "reward"
    force_rerun: bool = False


@dataclass(frozen=True)
class CheckedOptions:
    """The options after every check: the decoded kwargs, the agent's environment
    (:class:`~casstore.run.credentials.AgentEnv`), ``inputs`` (the SHA-256 of everything
    the base ``JobConfig`` is made of: :func:`casstore.run.identity.remembered_options_digest`
    keys on it), ``remembered`` (the options digest known for these inputs, or None) and
    :attr:`base`, that ``JobConfig`` without tasks (built when first read)."""

    options: RunOptions
    job_name: str
    kwargs: dict[str, Any]
    environment_kwargs: dict[str, Any]
    env: AgentEnv
    inputs: str
    remembered: str | None = None

    @cached_property
    def base(self) -> JobConfig:
        """Harbor's JobConfig of these options, without tasks (UsageError when Harbor's
        models refuse them)."""
        return _base_config(
            self.options, self.job_name, self.kwargs, self.environment_kwargs, self.env
        )


def check_options(
    options: RunOptions,
    environ: Mapping[str, str] | None = None,
    remembered: Callable[[str], str | None] | None = None,
) -> CheckedOptions:
    """Check ``options`` (UsageError naming the option): one agent (``--agent`` or
    ``--agent-import-path``; ``--agent-dir`` only with the latter), one environment, counts
    >= 1 (retries >= 0), at most ``MAX_ATTEMPTS`` attempts, a job name, the credential rules,
    then Harbor's own models, unless ``remembered`` (inputs → the options digest recorded
    when the same inputs passed them, with the same Harbor) knows the inputs."""
    if options.agent and options.agent_import_path:
        raise UsageError("--agent", "give --agent or --agent-import-path, not both")
    if options.agent_dir is not None and not options.agent_import_path:
        raise UsageError("--agent-dir", "needs --agent-import-path (the agent it holds)")
    if options.environment and options.environment_import_path:
        raise UsageError("--environment", "give --environment or --environment-import-path")
    for name, value, least in (
        ("--attempts", options.attempts, 1),
        ("--concurrency", options.concurrency, 1),
        ("--max-retries", options.max_retries, 0),
    ):
        if value < least:
            raise UsageError(name, f"must be at least {least}, not {value}")
    if options.attempts > MAX_ATTEMPTS:
        raise UsageError("--attempts", f"must be at most {MAX_ATTEMPTS:,}, not {options.attempts}")
    job_name = options.job_name or _default_job_name()
    if "/" in job_name or job_name in {"", ".", ".."} or job_name.startswith("."):
        raise UsageError("--job-name", f"{job_name!r} is not a directory name")
    kwargs = check_agent_kwargs(parse_assignments(options.agent_kwargs, "--ak"))
    literals = check_env_vars(parse_assignments(options.env_vars, "--env-var"))
    env = resolve_secrets(parse_assignments(options.env_secrets, "--env-secret"), literals, environ)
    ek = parse_assignments(options.environment_kwargs, "--ek")
    environment_kwargs = check_agent_kwargs(ek, "--ek")
    inputs = _inputs(options, job_name, kwargs, environment_kwargs, env)
    known = remembered(inputs) if remembered is not None else None
    checked = CheckedOptions(options, job_name, kwargs, environment_kwargs, env, inputs, known)
    if known is None:
        checked.base  # noqa: B018  (Harbor's models check the options now)
    return checked


def _inputs(
    options: RunOptions,
    job_name: str,
    kwargs: dict[str, Any],
    environment_kwargs: dict[str, Any],
    env: AgentEnv,
) -> str:
    """``sha256:`` of the canonical JSON of what :func:`_base_config` is given (the
    secrets by reference)."""
    fields = [
        options.agent,
        options.agent_import_path,
        options.model,
        kwargs,
        env.templates,
        env.references,
        options.environment,
        options.environment_import_path,
        environment_kwargs,
        options.attempts,
        options.concurrency,
        options.max_retries,
        job_name,
        str(options.jobs_dir),
    ]
    canonical = msgspec.json.encode(fields, order="sorted")
    return f"sha256:{hashlib.sha256(canonical).hexdigest()}"


def check_reward_key(reward_key: str, tasks: Sequence[RunTask]) -> None:
    """UsageError naming ``--reward-key`` when every task of ``tasks`` declares its reward
    keys (``[metadata] reward_key`` / ``reward_keys``, steps' ``min_reward``: more than the
    bare default ``reward``) and none declares ``reward_key``: a typo is refused before Harbor
    starts. A task declaring nothing may write any key (its ``reward.json``), so with such a
    task the key is checked only on the results (scoring's rule: no attempt holds it)."""
    declared = [task.metrics for task in tasks]
    if any(keys == ("reward",) for keys in declared):
        return
    names = sorted({key for keys in declared for key in keys})
    if tasks and reward_key not in names:
        raise UsageError(
            "--reward-key",
            f"no task declares the reward key {reward_key!r}; the tasks declare "
            f"{', '.join(map(repr, names))}: pass one of them",
        )


def _default_job_name() -> str:
    """Harbor's own default job name (a timestamp): ``JobConfig().job_name``."""
    from harbor.models.job.config import JobConfig

    return JobConfig().job_name


def _base_config(
    options: RunOptions,
    job_name: str,
    kwargs: dict[str, Any],
    environment_kwargs: dict[str, Any],
    env: AgentEnv,
) -> JobConfig:
    """Harbor's JobConfig for these options, without tasks; UsageError with Harbor's message
    when its models refuse them."""
    from harbor.models.job.config import JobConfig, RetryConfig
    from harbor.models.trial.config import AgentConfig, EnvironmentConfig
    from pydantic import ValidationError

    try:
        agent = AgentConfig(
            name=options.agent,
            import_path=options.agent_import_path,
            model_name=options.model,
            kwargs=kwargs,
            env=env.templates,
        )
        environment = EnvironmentConfig(
            type=options.environment,
            import_path=options.environment_import_path,
            kwargs=environment_kwargs,
        )
        return JobConfig(
            job_name=job_name,
            jobs_dir=options.jobs_dir,
            n_attempts=options.attempts,
            n_concurrent_trials=options.concurrency,
            quiet=True,
            retry=RetryConfig(max_retries=options.max_retries),
            environment=environment,
            agents=[agent],
        )
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "options"
        raise UsageError(where, f"Harbor refuses it: {first['msg']}") from None


def job_config(
    checked: CheckedOptions, planned: Sequence[tuple[RunTask, int]], dataset: str | None
) -> JobConfig:
    """The JobConfig of one launch: ``planned`` holds each task with the number of trials
    the job must hold of it (those it has and those to run). A dataset's tasks are Harbor's
    ``DatasetConfig`` of their folder (so trials carry the dataset's name as Harbor's
    ``source``), one task directory a ``TaskConfig``. Equal counts are Harbor's
    ``n_attempts`` over the tasks listed once; otherwise each task is listed as many times as
    its count, ``n_attempts`` 1 (Harbor plans ``n_attempts`` trials per listed task)."""
    from harbor.models.job.config import DatasetConfig
    from harbor.models.trial.config import TaskConfig

    counts = {count for _, count in planned}
    uniform = len(counts) == 1
    attempts = counts.pop() if uniform else 1
    groups = (
        [[task for task, _ in planned]]
        if uniform
        else [[task] for task, count in planned for _ in range(count)]
    )
    update: dict[str, Any] = {"n_attempts": attempts}
    if dataset is None:
        update["tasks"] = [TaskConfig(path=task.path) for group in groups for task in group]
    else:
        update["datasets"] = [
            DatasetConfig(path=group[0].path.parent, task_names=[_exact(t) for t in group])
            for group in groups
        ]
    return checked.base.model_copy(update=update, deep=True)


def _exact(task: RunTask) -> str:
    """A pattern of Harbor's ``task_names`` (fnmatch) matching only this task's directory."""
    return re.sub(r"([*?\[])", r"[\1]", task.path.name)
