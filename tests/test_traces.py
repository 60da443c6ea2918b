"""Traces: each trial's ATIF trajectory kept as evidence at import, translated into agent-trace
steps with every step accounted for, shown by ``show JOB/TRIAL --trace``, referenced by the
samples of a bundle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import casstore
from casstore.errors import CorruptArchiveError
from casstore.trials.chunk import TRACE_REFUSED
from casstore.trials.trace import translate
from tests.helpers import run_cli

FULL = Path("jobs/full-trials")
COBOL = "cobol-modernization__j3gBmiz"


def _imported(store: Path, job: Path) -> dict[str, casstore.TrialRecord]:
    with casstore.open_store(store) as opened:
        casstore.import_jobs(opened, [job], name="full")
        return {r.trial_name: r for r in casstore.Jobs(opened).trial_records("full")}


@pytest.mark.realdata
def test_real_trajectories_import_with_every_step(fixtures_dir: Path, tmp_path: Path) -> None:
    job = fixtures_dir / FULL
    records = _imported(tmp_path / "store", job)
    assert [name for name, r in records.items() if r.trace] == [COBOL]  # .head4k is no trajectory
    raw_bytes = (job / COBOL / "artifacts" / "trajectory.json").read_bytes()
    with casstore.open_store(tmp_path / "store") as opened:
        kept = casstore.Jobs(opened).evidence(records[COBOL].trace)
    assert kept == raw_bytes
    raw = json.loads(raw_bytes)
    trace = translate(kept, COBOL)
    assert len(raw["steps"]) == len(trace.steps) == 62
    # Harbor's ToolCall takes arguments as an object; this agent wrote JSON strings
    strings = [
        s
        for s in raw["steps"]
        if any(isinstance(c["arguments"], str) for c in s.get("tool_calls", []))
    ]
    assert len(strings) == 31 and trace.known_steps == 62 - 31
    tokens = 0
    for source, step in zip(raw["steps"], trace.steps, strict=True):
        assert step.step_id == source["step_id"] and step.timestamp == source["timestamp"]
        assert step.role == "assistant" and step.content == source["message"]
        if source in strings:
            assert step.metadata["raw_atif_step"] == source
            assert (
                step.metadata["atif_error"]
                == "tool_calls.0.arguments: Input should be a valid dictionary"
            )
        else:
            assert "raw_atif_step" not in step.metadata
            if "metrics" in source:
                assert step.tokens == {
                    "prompt": source["metrics"].get("prompt_tokens"),
                    "completion": source["metrics"].get("completion_tokens"),
                    "cached": source["metrics"].get("cached_tokens"),
                }
                tokens += 1
    assert tokens == 2
    assert trace.format == "ATIF-v1.4" and trace.metadata["final_metrics"] == raw["final_metrics"]
    assert trace.metadata["agent"]["model_name"] == "claude-haiku-4-5-20251001"


@pytest.mark.realdata
def test_show_trace(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    _imported(store, fixtures_dir / FULL)
    code, out, err = run_cli(capsys, "--store", str(store), "show", f"full/{COBOL}", "--trace")
    assert code == 0, err
    lines = out.splitlines()
    assert (
        lines[0]
        == f"trace full/{COBOL}: ATIF-v1.4, 62 steps (31 read by Harbor's model, 31 kept raw)"
    )
    assert lines[1] == "#1 2026-05-10T02:04:32.307Z assistant: Using tool: exa_search_urls"
    assert sum(line.startswith("#") for line in lines) == 62
    code, out, _ = run_cli(
        capsys, "--store", str(store), "show", f"full/{COBOL}", "--trace", "--json"
    )
    shown = json.loads(out)
    assert code == 0 and len(shown["steps"]) == 62 and shown["known_steps"] == 31
    assert shown["trace_ref"].startswith("sha256:") and shown["trace_ref"].endswith("#3")
    code, _, err = run_cli(
        capsys, "--store", str(store), "show", "full/bn-fit-modify__mpWwMgj", "--trace"
    )
    assert code == 2 and "the trial has no trajectory" in err
    code, _, err = run_cli(capsys, "--store", str(store), "show", "full/nosuch", "--trace")
    assert code == 2 and err == "casstore: full/nosuch: no trial 'nosuch' in the job 'full'\n"
    code, _, err = run_cli(capsys, "--store", str(store), "show", "nojob/x", "--trace")
    assert code == 2 and "nojob: no imported job of that id or name" in err
    code, _, err = run_cli(capsys, "--store", str(store), "show", "plain", "--trace")
    assert code == 2 and "--trace takes JOB/TRIAL" in err


@pytest.mark.realdata
def test_samples_carry_the_trace_reference(fixtures_dir: Path, tmp_path: Path) -> None:
    records = _imported(tmp_path / "store", fixtures_dir / FULL)
    out = tmp_path / "bundle"
    casstore.rescore(["full"], store=tmp_path / "store", bundle=out)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_bytes().splitlines()]
    assert {s["trial"]: s.get("trace") for s in samples} == {n: r.trace for n, r in records.items()}
    direct = tmp_path / "direct"  # read from the job directory: the same references
    casstore.rescore([fixtures_dir / FULL], store=tmp_path / "none", bundle=direct)
    again = [json.loads(line) for line in (direct / "samples.jsonl").read_bytes().splitlines()]
    assert [s.get("trace") for s in again] == [s.get("trace") for s in samples]


_STEPS = [
    {
        "step_id": 1,
        "timestamp": "2026-01-01T00:00:00Z",
        "source": "user",
        "message": "Fix the bug.",
    },
    {
        "step_id": 2,
        "source": "agent",
        "message": [{"type": "text", "text": "Looking."}],
        "reasoning_content": "think",
        "tool_calls": [{"tool_call_id": "c1", "function_name": "bash", "arguments": {"cmd": "ls"}}],
        "observation": {"results": [{"source_call_id": "c1", "content": "a.py"}]},
        "metrics": {"prompt_tokens": 10, "completion_tokens": 3, "cost_usd": 0.5},
        "extra": {"k": 1},
    },
    {"step_id": 3, "source": "robot", "message": "beep"},
    {"step_id": 4, "source": "agent", "message": "x", "surprise": True},
    "not a step",
]


def test_translation_of_every_shape() -> None:
    data = json.dumps({"schema_version": "ATIF-v1.6", "agent": {"name": "a"}, "steps": _STEPS})
    trace = translate(data.encode(), "t")
    assert trace.known_steps == 2 and len(trace.steps) == 5
    user, agent, robot, surprise, text = trace.steps
    assert (user.role, user.content, user.timestamp) == (
        "user",
        "Fix the bug.",
        "2026-01-01T00:00:00Z",
    )
    assert agent.role == "assistant" and agent.content == [{"type": "text", "text": "Looking."}]
    assert agent.reasoning == "think"
    assert agent.tool_calls == [{"id": "c1", "name": "bash", "arguments": {"cmd": "ls"}}]
    assert agent.tool_results == [{"call_id": "c1", "content": "a.py"}]
    assert agent.tokens == {"prompt": 10, "completion": 3, "cached": None} and agent.cost_usd == 0.5
    assert agent.metadata == {"extra": {"k": 1}}
    assert robot.role == "unknown" and robot.metadata["raw_atif_step"] == _STEPS[2]
    assert surprise.role == "assistant" and surprise.metadata["raw_atif_step"] == _STEPS[3]
    assert surprise.metadata["atif_error"].startswith("surprise: Extra inputs")
    assert text.step_id is None and text.metadata["raw_atif_step"] == "not a step"
    assert trace.metadata == {"agent": {"name": "a"}}
    with pytest.raises(CorruptArchiveError, match="t: not an ATIF trajectory \\(not JSON"):
        translate(b"{", "t")
    with pytest.raises(CorruptArchiveError, match="no list of steps"):
        translate(b'{"steps": 3}', "t")


def test_import_finds_agent_trajectory_and_skips_what_is_no_file(tmp_path: Path) -> None:
    from casstore.examples.job import write_example_job

    job = write_example_job(tmp_path / "jobs", ["alpha"], attempts=3)
    body = json.dumps({"schema_version": "ATIF-v1.4", "steps": _STEPS[:2]}).encode()
    (job / "alpha__0" / "agent").mkdir()
    (job / "alpha__0" / "agent" / "trajectory.json").write_bytes(body)
    (job / "alpha__1" / "agent").mkdir()
    os.symlink(
        job / "alpha__0" / "agent" / "trajectory.json",
        job / "alpha__1" / "agent" / "trajectory.json",
    )
    (job / "alpha__2" / "agent").mkdir()
    os.mkfifo(job / "alpha__2" / "agent" / "trajectory.json")  # never waited on
    with casstore.open_store(tmp_path / "store") as opened:
        (report,) = casstore.import_jobs(opened, [job])
        records = {r.trial_name: r for r in casstore.Jobs(opened).trial_records(report.job)}
        assert records["alpha__1"].trace is None and records["alpha__2"].trace is None
        assert records["alpha__1"].metadata[TRACE_REFUSED] == (
            "agent/trajectory.json: a symbolic link (not followed)"
        )
        assert records["alpha__2"].metadata[TRACE_REFUSED] == (
            "agent/trajectory.json: not a regular file (a FIFO)"
        )
        assert TRACE_REFUSED not in records["alpha__0"].metadata
        assert casstore.Jobs(opened).evidence(records["alpha__0"].trace) == body
        assert casstore.fsck(opened).ok


@pytest.mark.realdata
def test_fsck_checks_the_trace_reference(fixtures_dir: Path, tmp_path: Path) -> None:
    from casstore.trials.stored_form import decode_trial_pack, encode_stored, encode_trial_pack

    store = tmp_path / "store"
    records = _imported(store, fixtures_dir / FULL)
    with casstore.open_store(store) as opened:
        assert casstore.fsck(opened).ok
        (key,) = opened.index.read(
            lambda txn: [k.decode() for k, _ in txn.raw_items("trial_packs")]
        )
        job = casstore.Jobs(opened).get("full")
        pack = opened.index.read(lambda txn: bytes(txn.raw_get("trial_packs", key)))
        trials = decode_trial_pack(pack, job.job_id, job.path, job.reward_key, True)
        trials[1].trace = records[COBOL].evidence.replace("#1", "#9")
        data = encode_trial_pack([encode_stored(t, job.path, job.reward_key) for t in trials])
        opened.index.write(lambda txn: txn.raw_put("trial_packs", key, data))
        report = casstore.fsck(opened)
    (problem,) = report.problems
    assert problem["kind"] == "corrupt_trial", problem
    assert "is no frame of the trial's evidence pack" in str(problem)


def test_show_trace_says_why_a_trajectory_was_refused(capsys, tmp_path: Path) -> None:
    from casstore.examples.job import write_example_job

    job = write_example_job(tmp_path / "jobs", ["alpha"], attempts=2)
    (job / "alpha__0" / "agent").mkdir()
    os.mkfifo(job / "alpha__0" / "agent" / "trajectory.json")
    store = str(tmp_path / "store")
    code, _, err = run_cli(capsys, "--store", store, "import", str(job), "--name", "x")
    assert code == 0, err
    code, _, err = run_cli(capsys, "--store", store, "show", "x/alpha__0", "--trace")
    assert code == 2 and err == (
        "casstore: x/alpha__0: the trajectory was refused at import:"
        " agent/trajectory.json: not a regular file (a FIFO)\n"
    )
    code, _, err = run_cli(capsys, "--store", store, "show", "x/alpha__1", "--trace")
    assert code == 2 and "the trial has no trajectory" in err
