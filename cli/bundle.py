"""``casstore verify-bundle``, and what ``casstore rescore`` takes from a bundle it rescores.

``casstore verify-bundle DIR [--json]`` checks every file of a run bundle against its
``manifest.json`` (:func:`casstore.bundle.verify_files`): ``ok <n> files  DIR``, exit 0; a
file changed, missing, added or not a regular file, or a damaged manifest: one line naming
that file, exit 1; DIR holding no bundle: exit 2.

``casstore rescore DIR`` of one bundle scores it as its ``summary.json`` says (its reward
key, threshold, k, groups, metrics, views): each option not given on the command line is the
bundle's (:func:`bundle_options`), so that the report is the bundle's own, bit for bit.
``--taskset REF`` scores it under that taskset's views instead of the bundle's.

The bundle code is imported in the command bodies, for start-up time (README, "Start-up").
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer._click.core import ParameterSource

from casstore.errors import UsageError
from cli.options import JsonOption
from cli.output import emit_json, out_console

__all__ = ["bundle_options", "register", "show_trace"]

_FROM_BUNDLE = {
    "reward_key": "reward_key",
    "k": "ks",
    "threshold": "threshold",
    "metric": "metrics",
    "metric_timeout": "metric_timeout",
    "group_by": "group_by",
    "views": "views",
}
"""rescore's parameters a bundle's scoring definition fills, and the definition's names."""


def bundle_options(ctx: typer.Context, sources: list[str]) -> dict[str, Any]:
    """The options of the one bundle in ``sources`` that the command line left at their
    defaults (``{}`` unless ``sources`` is one bundle directory): keyword arguments of
    :func:`casstore.rescore`. Views stay the taskset's when ``--taskset`` is given."""
    if len(sources) != 1 or not Path(sources[0]).is_dir():
        return {}
    from casstore.bundle.read import SUMMARY, is_bundle, read_scoring  # here: start-up time
    from casstore.inputs import read_regular

    root = Path(sources[0])
    if not is_bundle(root):
        return {}
    import msgspec

    from casstore.errors import CasstoreError

    try:  # read before the manifest is checked: a damaged file is left to the source's
        # own reading, which checks every file first and names the one that fails
        summary = msgspec.json.decode(read_regular(root / SUMMARY))
        if not isinstance(summary, dict):
            return {}
        scoring = read_scoring(summary, str(root / SUMMARY)).options(root)
    except (msgspec.DecodeError, CasstoreError):
        return {}
    if ctx.params.get("taskset") is not None:
        scoring["views"] = []
    return {
        name: scoring[option]
        for parameter, option in _FROM_BUNDLE.items()
        if ctx.get_parameter_source(parameter) in (ParameterSource.DEFAULT, None)
        for name in (option,)
    }


def verify_bundle(
    directory: Annotated[Path, typer.Argument(help="A run bundle directory.")],
    json: JsonOption = False,
) -> None:
    """Check every file of a run bundle against its manifest.json (SHA-256 and size; no
    file missing or added). Exit 1 naming the first file that fails."""
    from casstore.bundle.files import MANIFEST, verify_files  # here: for start-up time

    if not directory.is_dir():
        raise UsageError(str(directory), "not a directory (a run bundle is one)")
    if not (directory / MANIFEST).exists():
        raise UsageError(str(directory), f"no {MANIFEST}: not a run bundle")
    manifest = verify_files(directory)
    if json:
        emit_json({"ok": True, "bundle": str(directory), "files": len(manifest.files)})
        return
    out_console.print(f"ok {len(manifest.files)} files  {directory}")


def show_trace(store: Path, ref: str, json: bool) -> None:
    """``casstore show JOB/TRIAL --trace``: the agent trace of a trial of an imported job
    (:mod:`casstore.trials.trace`), one line per step (``--json``: the whole trace)."""
    from casstore.store import Store  # here: for start-up time
    from casstore.trials import Jobs
    from casstore.trials.trace import translate

    job, slash, trial = ref.rpartition("/")
    if not slash or not job or not trial:
        raise UsageError(ref, "--trace takes JOB/TRIAL (an imported job's id or name, a trial)")
    with Store(store, create=False) as opened:
        jobs = Jobs(opened)
        found = [r for r in jobs.trial_records(job) if r.trial_name == trial]
        if not found:
            raise UsageError(ref, f"no trial {trial!r} in the job {job!r}")
        if found[0].trace is None:
            raise UsageError(ref, _no_trace(found[0].metadata))
        trace = translate(jobs.evidence(found[0].trace), ref)
    if json:
        import msgspec

        emit_json({"trial": ref, "trace_ref": found[0].trace, **msgspec.to_builtins(trace)})
        return
    raw = len(trace.steps) - trace.known_steps
    out_console.print(
        f"trace {ref}: {trace.format}, {len(trace.steps)} steps "
        f"({trace.known_steps} read by Harbor's model, {raw} kept raw)"
    )
    for step in trace.steps:
        for line in _step_lines(step):
            out_console.print(line)


def _no_trace(metadata: dict[str, str]) -> str:
    """Why a trial shows no trace: its trajectory refused at import (and why), or none."""
    from casstore.trials.chunk import TRACE_REFUSED

    if TRACE_REFUSED in metadata:
        return f"the trajectory was refused at import: {metadata[TRACE_REFUSED]}"
    return "the trial has no trajectory (agent/trajectory.json)"


def _short(value: object, width: int = 160) -> str:
    """``value`` on one line of at most ``width`` characters."""
    from casstore.errors import printable

    text = value if isinstance(value, str) else repr(value)
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def _step_lines(step: Any) -> list[str]:
    """The text lines of one trace step."""
    head = f"#{step.step_id if step.step_id is not None else '?'} {step.timestamp or '-'} "
    lines = [head + f"{step.role}: {_short(step.content) if step.content else ''}".rstrip()]
    lines += [f"    tool call {c['name']}: {_short(c['arguments'])}" for c in step.tool_calls]
    lines += [f"    tool result {r['call_id']}: {_short(r['content'])}" for r in step.tool_results]
    if step.tokens:
        tokens = ", ".join(f"{k} {v}" for k, v in step.tokens.items() if v is not None)
        lines.append(f"    tokens {tokens}" + (f", cost {step.cost_usd}" if step.cost_usd else ""))
    if "raw_atif_step" in step.metadata:
        lines.append(f"    kept raw (metadata.raw_atif_step): {step.metadata['atif_error']}")
    return lines


def register(app: typer.Typer) -> None:
    """Add ``verify-bundle`` to ``app``."""
    app.command("verify-bundle")(verify_bundle)
