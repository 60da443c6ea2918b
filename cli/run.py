"""``casstore run``: run a taskset through Harbor, import the job, print rescore's report.

``casstore [--store DIR] run SOURCE [--agent NAME | --agent-import-path MOD:CLASS
[--agent-dir DIR]] [--model NAME] [--ak KEY=JSON]... [--env-secret NAME=REF]...
[--env-var NAME=VALUE]... [--attempts N] [--concurrency N] [--max-retries N] [--job-name NAME]
[--jobs-dir DIR] [--environment TYPE | --environment-import-path MOD:CLASS] [--ek KEY=JSON]...
[--reward-key KEY] [--force-rerun] [--json]``

The work is :func:`casstore.run.api.run_job` (README, "casstore run"); the report is
:func:`cli.rescore.print_report`'s, and ``--json`` is rescore's JSON plus a ``run`` object.
Exit status: 0 ok; 1 Harbor failed, the job is busy, a check failed; 2 bad usage (an option
refused by the agent configuration checks); 130 interrupted (the job's completed trials
imported, ``cancelled.json`` written).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli.options import GlobalOptions, JsonOption
from cli.output import emit_json, err_console, fail

if TYPE_CHECKING:
    from casstore.run.api import RunResult

__all__ = ["register"]


def run(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="A task or dataset directory, or a taskset.")],
    agent: Annotated[str | None, typer.Option("--agent", help="A Harbor agent name.")] = None,
    agent_import_path: Annotated[
        str | None, typer.Option("--agent-import-path", help="Your agent, MOD:CLASS.")
    ] = None,
    agent_dir: Annotated[
        Path | None, typer.Option("--agent-dir", help="A loose source tree of that agent.")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="The model name.")] = None,
    ak: Annotated[
        list[str] | None, typer.Option("--ak", help="Agent kwarg KEY=JSON (no secrets).")
    ] = None,
    env_secret: Annotated[
        list[str] | None, typer.Option("--env-secret", help="NAME=REF, read from the env.")
    ] = None,
    env_var: Annotated[
        list[str] | None, typer.Option("--env-var", help="NAME=VALUE, a literal.")
    ] = None,
    attempts: Annotated[
        int, typer.Option("--attempts", help="Attempts per task (1 to 10,000).")
    ] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Concurrent trials.")] = 4,
    max_retries: Annotated[int, typer.Option("--max-retries", help="Harbor's retries.")] = 0,
    job_name: Annotated[str | None, typer.Option("--job-name", help="Pin the job.")] = None,
    jobs_dir: Annotated[Path, typer.Option("--jobs-dir", help="Where jobs go.")] = Path("jobs"),
    environment: Annotated[
        str | None, typer.Option("--environment", help="Harbor environment type.")
    ] = None,
    environment_import_path: Annotated[
        str | None, typer.Option("--environment-import-path", help="MOD:CLASS.")
    ] = None,
    ek: Annotated[
        list[str] | None, typer.Option("--ek", help="Environment kwarg KEY=JSON.")
    ] = None,
    reward_key: Annotated[str, typer.Option("--reward-key", help="Primary key.")] = "reward",
    force_rerun: Annotated[
        bool, typer.Option("--force-rerun", help="Delete the job and rerun all.")
    ] = False,
    json: JsonOption = False,
) -> None:
    """Run SOURCE through Harbor (every attempt once), import it, print the rescore report.

    A second identical run starts no Harbor process; only missing attempts run.
    """
    from casstore.run import api  # here: for start-up time (not all of casstore.api)
    from casstore.store import Store
    from cli.rescore import print_report

    global_options: GlobalOptions = ctx.obj
    options = api.RunOptions(
        agent=agent,
        agent_import_path=agent_import_path,
        agent_dir=agent_dir,
        model=model,
        agent_kwargs=ak or (),
        env_secrets=env_secret or (),
        env_vars=env_var or (),
        attempts=attempts,
        concurrency=concurrency,
        max_retries=max_retries,
        job_name=job_name,
        jobs_dir=jobs_dir,
        environment=environment,
        environment_import_path=environment_import_path,
        environment_kwargs=ek or (),
        reward_key=reward_key,
        force_rerun=force_rerun,
    )
    api.check_run_options(options)  # every agent configuration check, before the store
    with Store(global_options.store) as store:
        try:
            result = api.run_job(source, options, store)
        except KeyboardInterrupt:  # the launch was cancelled, the job imported
            job = options.jobs_dir / (options.job_name or "")
            raise fail(
                f"{job}: interrupted; its completed trials are imported, the job is marked "
                "cancelled (cancelled.json): run again to run the rest",
                130,
            ) from None
    report = api.score_run(result, reward_key)
    if json:
        emit_json({**report.to_json(), "run": result.to_json()})
        return
    err_console.print(_summary(result))
    print_report(report)


def _summary(result: RunResult) -> str:
    """One line on stderr: the job, the cache state, the attempts run and reused."""
    data = result.to_json()
    return (
        f"run {data['job_name']}  cache {data['cache']}   attempts run {data['attempts_run']}"
        f"   reused {data['attempts_reused']}   from {data['trials_from']}"
    )


def register(app: typer.Typer) -> None:
    """Add ``run`` to the ``casstore`` application."""
    app.command("run")(run)
