"""Run bundles (``rescore --bundle``, ``verify-bundle``, a bundle as a SOURCE): written whole,
checked file by file, reopened to the same summary, re-scored under a taskset's views."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import casstore
from casstore.bundle import canonical, open_bundle
from casstore.bundle.lines import sample_lines
from casstore.bundle.read import SAMPLES, SUMMARY
from casstore.bundle.samples import read_samples
from casstore.bundle.table import table_of_samples
from casstore.errors import CorruptArchiveError, DigestMismatchError, UsageError
from casstore.jsontext import json_text
from casstore.table.columns import Flag, RewardTable
from scoring import apply_rules, score
from tests.helpers import TB2_HAIKU_COUNTS, run_cli
from tests.test_discovery import write_task

JOB = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")


def _table() -> RewardTable:
    """A table with every reward kind, labels without "" at 0, an unused label, an
    exception, a failure code and two jobs' worth of evals keys."""
    nan, inf = math.nan, math.inf
    return RewardTable(
        reward_key="reward",
        tasks=["t-b", "t-a", "unused"],
        trials=["b0", "b1", "a0", "a1", "a2"],
        keys=["fmt", "never", "style"],
        task=np.array([0, 0, 1, 1, 1], np.int32),
        attempt=np.array([0, 1, 0, 1, 2], np.int32),
        flags=np.array([0, Flag.EXCEPTION, Flag.NO_VERIFIER, Flag.INVALID, 0], np.uint8),
        primary=np.array([1.0, 3.0, nan, nan, 1.0]),
        primary_kind=np.array([1, 4, 0, 0, 3], np.int8),
        values=np.array([[nan, nan, 0.5], [inf, nan, 2.0], [nan] * 3, [nan] * 3, [1.0, nan, inf]]),
        kinds=np.array([[0, 0, 1], [1, 0, 4], [0, 0, 0], [0, 0, 0], [3, 0, 2]], np.int8),
        agent=np.array([1, 1, 0, 0, 1], np.int32),
        model=np.array([0, 0, 0, 0, 0], np.int32),
        dataset=np.array([0, 0, 0, 0, 0], np.int32),
        exception=np.array([0, 1, 0, 0, 0], np.int32),
        failure=np.array([0, 2, 1, 1, 0], np.int32),
        agents=["a@1", "b@2"],
        models=["m"],
        datasets=[""],
        exceptions=["", "AgentTimeoutError"],
        failures=["", "verifier_result_missing", "trial_exception"],
        jobs=["job-1"],
    )


def _same(one: RewardTable, two: RewardTable) -> None:
    """Every column of the two tables equal (NaN equal to NaN)."""
    for name in ("reward_key", "tasks", "keys", "agents", "models", "datasets", "exceptions"):
        assert getattr(one, name) == getattr(two, name), name
    for name in ("failures", "jobs", "evals_keys"):
        assert getattr(one, name) == getattr(two, name), name
    assert list(one.trials) == list(two.trials)
    for name in ("task", "attempt", "flags", "primary_kind", "kinds", "agent", "model", "evals"):
        got, want = getattr(one, name), getattr(two, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    for name in ("dataset", "exception", "failure"):
        assert np.array_equal(getattr(one, name), getattr(two, name)), name
    assert np.array_equal(one.primary, two.primary, equal_nan=True)
    assert np.array_equal(one.values, two.values, equal_nan=True)


def test_samples_give_back_the_canonical_table() -> None:
    table = canonical(_table())
    assert table.keys == ["fmt", "style"]  # "never": no row holds it
    assert table.tasks == ["t-b", "t-a"] and table.agents == ["", "b@2", "a@1"]
    data = b"".join(sample_lines(table, apply_rules(table), None))
    samples = read_samples(data, "samples.jsonl")
    assert [s.status for s in samples] == ["scored", "partial", "no_verifier", "invalid", "scored"]
    assert samples[1].rewards == {"reward": 3, "fmt": {"kind": 1, "value": "inf"}, "style": 2}
    assert samples[4].rewards == {"reward": True, "fmt": True, "style": "Infinity"}
    assert samples[4].rewards["fmt"] is True
    assert [(d.code, d.output) for d in samples[4].diagnostics] == [
        ("primary_boolean", "reward"),
        ("secondary_boolean", "fmt"),
        ("secondary_nonfinite", "style"),
    ]
    assert samples[3].primary is None and samples[2].primary == 0.0
    back = table_of_samples(samples, "reward", "samples.jsonl")
    _same(back, table)
    assert [s.job_id for s in samples] == ["job-1"] * 5
    assert score(canonical(_table())).to_json() == score(back).to_json()


@pytest.mark.parametrize("key", ["reward", "style"])
def test_an_integer_reward_no_float_holds_is_refused_naming_the_line(key: str) -> None:
    # (a hostile bundle: float() of it raised a bare OverflowError, a traceback)
    line = b'{"trial":"x","task":"t","attempt":0,"status":"scored","primary":1.0,'
    ok = line + b'"rewards":{"reward":1.0}}\n'
    huge = line.replace(b'"x"', b'"y"') + b'"rewards":{"%s":1%s}}\n' % (key.encode(), b"0" * 400)
    samples = read_samples(ok + huge, "s.jsonl")
    refused = r"s.jsonl:2: not a reward value .* an integer of 1329 bits"
    with pytest.raises(CorruptArchiveError, match=refused):
        table_of_samples(samples, "reward", "s.jsonl")


def test_a_sample_value_no_bundle_writes_is_refused() -> None:
    line = b'{"trial":"x","task":"t","attempt":0,"status":"scored","primary":1.0,'
    samples = read_samples(line + b'"rewards":{"reward":[1]}}\n', "s.jsonl")
    with pytest.raises(CorruptArchiveError, match=r"s.jsonl:1: not a reward value"):
        table_of_samples(samples, "reward", "s.jsonl")
    with pytest.raises(CorruptArchiveError, match="not a bundle sample"):
        read_samples(b'{"trial": 1}\n', "s.jsonl")


@pytest.fixture(scope="module")
def tb2_bundle(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "tb2"
    casstore.rescore([fixtures_dir / JOB], store=out.parent / "none", bundle=out)
    return out


@pytest.mark.realdata
def test_bundle_of_a_real_job_holds_the_rescore(tb2_bundle: Path, fixtures_dir: Path) -> None:
    plain = casstore.rescore([fixtures_dir / JOB], store=tb2_bundle.parent / "none")
    summary = json.loads((tb2_bundle / SUMMARY).read_bytes())
    assert summary["report"] == json.loads(json_text(plain.to_json()))
    assert summary["report"]["counts"] == TB2_HAIKU_COUNTS
    origin = summary["provenance"]
    assert origin["jobs"] == ["1ea8f217-0d00-4ce0-859b-0fc92e7325d7"]
    assert origin["harbor_version"] == "0.20.0" and origin["samples"] == 89
    assert summary["scoring"]["metrics"] == ["mean"] and summary["scoring"]["ks"] is None
    lines = (tb2_bundle / SAMPLES).read_bytes().splitlines()
    assert len(lines) == 89
    first = json.loads(lines[0])
    assert first["trial"] == "adaptive-rejection-sampler__VxBEuK2"
    assert first["evidence"].startswith("sha256:")  # the reference an import would store
    assert first["evidence"].endswith("#0")
    assert first["result_path"].endswith("adaptive-rejection-sampler__VxBEuK2/result.json")
    timeouts = [json.loads(line) for line in lines if b"AgentTimeoutError" in line]
    assert len(timeouts) == 17 and all(t["exception_message"] for t in timeouts)


@pytest.mark.realdata
def test_a_bundle_reopens_to_its_own_summary(capsys, tb2_bundle: Path, tmp_path: Path) -> None:
    summary = json.loads((tb2_bundle / SUMMARY).read_bytes())
    code, out, _ = run_cli(capsys, "rescore", str(tb2_bundle), "--json")
    assert code == 0 and json.loads(out) == summary["report"]
    again = tmp_path / "again"
    code, _, err = run_cli(capsys, "rescore", str(tb2_bundle), "--bundle", str(again))
    assert code == 0, err
    assert (again / SAMPLES).read_bytes() == (tb2_bundle / SAMPLES).read_bytes()
    second = json.loads((again / SUMMARY).read_bytes())
    for part in ("report", "scoring"):
        assert json_text(second[part]) == json_text(summary[part])
    assert second["provenance"]["sources"] == [str(tb2_bundle)]


@pytest.mark.realdata
def test_options_not_given_are_the_bundle_s(capsys, fixtures_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "b"
    code, _, err = run_cli(
        capsys, "rescore", str(fixtures_dir / JOB), "--k", "1,2", "--threshold", "0.5",
        "--group-by", "agent", "--bundle", str(out),
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads((out / SUMMARY).read_bytes())
    assert summary["scoring"]["ks"] == [1, 2] and summary["scoring"]["threshold"] == 0.5
    code, text, _ = run_cli(capsys, "rescore", str(out), "--json")
    assert json.loads(text) == summary["report"]
    code, text, _ = run_cli(capsys, "rescore", str(out), "--threshold", "1", "--json")
    report = json.loads(text)
    assert report["threshold"] == 1.0 and report["ks"] == [1, 2] and report["group_by"] == ["agent"]


def test_a_bundle_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch) -> None:
    from casstore.bundle import write as writing
    from casstore.examples.job import write_example_job

    job = write_example_job(tmp_path / "jobs", ["alpha", "beta"], attempts=3)

    def broken(payload: object) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(writing, "json_text", broken)
    with pytest.raises(OSError):
        casstore.rescore([job], store=tmp_path / "none", bundle=tmp_path / "out" / "b")
    assert not (tmp_path / "out").exists()  # the parent it made, removed again
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(UsageError, match="must not exist or be an empty directory"):
        casstore.rescore([job], store=tmp_path / "none", bundle=tmp_path / "full")


def _bundle(tmp_path: Path) -> Path:
    from casstore.examples.job import write_example_job

    job = write_example_job(tmp_path / "jobs", ["alpha", "beta"], attempts=3)
    out = tmp_path / "bundle"
    casstore.rescore([job], store=tmp_path / "none", bundle=out, metrics=["mean", "max"])
    return out


def test_a_tampered_bundle_fails_verify_naming_the_file(capsys, tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    code, text, _ = run_cli(capsys, "verify-bundle", str(out))
    assert code == 0 and text == f"ok 2 files  {out}\n"
    data = (out / SAMPLES).read_bytes()
    (out / SAMPLES).write_bytes(data.replace(b'"primary":1.0', b'"primary":0.0', 1))
    code, _, err = run_cli(capsys, "verify-bundle", str(out))
    assert code == 1 and err.startswith(f"casstore: {out}/{SAMPLES}: {len(data)} bytes with sha")
    code, _, err = run_cli(capsys, "rescore", str(out))  # never scored from a tampered file
    assert code == 1 and f"{out}/{SAMPLES}" in err
    (out / SAMPLES).write_bytes(data)
    (out / "extra.txt").write_text("x")
    with pytest.raises(CorruptArchiveError, match=r"extra\.txt: not listed in manifest\.json"):
        casstore.rescore([out], store=tmp_path / "none")
    os.unlink(out / "extra.txt")
    os.unlink(out / SUMMARY)
    code, _, err = run_cli(capsys, "verify-bundle", str(out))
    assert code == 1 and err == f"casstore: {out}/{SUMMARY}: listed in manifest.json but missing\n"
    code, _, err = run_cli(capsys, "verify-bundle", str(tmp_path))
    assert code == 2 and "no manifest.json: not a run bundle" in err


def test_rescore_of_a_bundle_under_a_taskset(capsys, tmp_path: Path) -> None:
    from casstore.archive.discover import discover
    from casstore.store import Store

    out = _bundle(tmp_path)
    signal = '{metric = "harbor_reward", output = "reward"}'
    views = f'views = [{{name = "best", reducer = "max", signals = [{signal}]}}]'
    store = tmp_path / "store"
    with Store(store) as opened:
        names = [
            opened.publish(discover(write_task(tmp_path / "tasks", name, metadata=views))[0]).name
            for name in ("alpha", "beta")
        ]
        opened.tasksets.replace("suite", names)
    code, text, err = run_cli(
        capsys, "--store", str(store), "rescore", str(out), "--taskset", "suite", "--json",
        "--bundle", str(tmp_path / "again"),
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(text)
    assert list(report["views"]) == ["best"]
    assert (
        report["harbor_metrics"]
        == json.loads((out / SUMMARY).read_bytes())["report"]["harbor_metrics"]
    )
    again = json.loads((tmp_path / "again" / SUMMARY).read_bytes())
    pins = again["provenance"]["taskset"]
    assert pins["ref"] == "suite" and [p["task"] for p in pins["tasks"]] == [
        "default/alpha",
        "default/beta",
    ]
    assert all(p["revision"].startswith("sha256:") for p in pins["tasks"])
    assert again["scoring"]["views"][0]["name"] == "best"
    assert open_bundle(tmp_path / "again").scoring.views[0].reducer == "max"
    with pytest.raises(DigestMismatchError):
        (out / SUMMARY).write_bytes(b"{}")
        open_bundle(out)


def _rewrite(out: Path, name: str, data: bytes) -> None:
    """Replace a bundle file and re-hash it in the manifest, as someone forging it would."""
    import hashlib

    (out / name).write_bytes(data)
    manifest = json.loads((out / "manifest.json").read_bytes())
    for entry in manifest["files"]:
        if entry["path"] == name:
            entry["sha256"] = "sha256:" + hashlib.sha256(data).hexdigest()
            entry["bytes"] = len(data)
    (out / "manifest.json").write_text(json.dumps(manifest))


def test_a_forged_bundle_is_refused_naming_what_is_wrong(tmp_path: Path) -> None:
    out = _bundle(tmp_path)
    lines = (out / SAMPLES).read_bytes().splitlines(keepends=True)
    _rewrite(out, SAMPLES, b"".join([*lines, lines[0]]))  # one attempt twice
    with pytest.raises(casstore.errors.ScoringError, match="trial given twice"):
        casstore.rescore([out], store=tmp_path / "none")
    _rewrite(out, SAMPLES, lines[0].replace(b'"rewards":{', b'"rewards":{"x":null,'))
    with pytest.raises(CorruptArchiveError, match=rf"{SAMPLES}:1: not a reward value"):
        casstore.rescore([out], store=tmp_path / "none")
    _rewrite(out, SAMPLES, b"".join(lines))
    _rewrite(out, SUMMARY, b'{"schema": "other"}')
    with pytest.raises(CorruptArchiveError, match="not a bundle summary"):
        casstore.rescore([out], store=tmp_path / "none")
    manifest = json.loads((out / "manifest.json").read_bytes())
    manifest["files"].append({"path": "../outside", "sha256": "sha256:" + "0" * 64, "bytes": 1})
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptArchiveError, match=r"lists an unsafe path '\.\./outside'"):
        casstore.verify_bundle(out)
    os.symlink(out / SAMPLES, tmp_path / "link")
    manifest["files"].pop()
    (out / "manifest.json").write_text(json.dumps(manifest))
    os.unlink(out / SUMMARY)
    os.symlink(tmp_path / "link", out / SUMMARY)
    with pytest.raises(CorruptArchiveError, match="a symbolic link, not a file of the bundle"):
        casstore.verify_bundle(out)


def test_rescore_of_a_bundle_missing_its_summary_says_what_verify_says(capsys, tmp_path) -> None:
    """The CLI read summary.json for the bundle's options before checking the manifest: a
    bundle without it was bad usage (``cannot open``, exit 2), not the failed check."""
    out = _bundle(tmp_path)
    os.unlink(out / SUMMARY)
    code, _, err = run_cli(capsys, "rescore", str(out))
    assert code == 1 and err == f"casstore: {out}/{SUMMARY}: listed in manifest.json but missing\n"
    (out / SUMMARY).write_text('{"schema": "casstore.bundle/1", "scoring": 1}')
    code, _, err = run_cli(capsys, "rescore", str(out))  # the digest, not the content
    assert code == 1 and err.startswith(f"casstore: {out}/{SUMMARY}: 45 bytes with sha256:")


@pytest.mark.parametrize("attempt", [2**40, 2**31, -1])
def test_a_forged_attempt_index_is_refused_not_a_traceback(tmp_path: Path, attempt: int) -> None:
    """An attempt index outside int32 raised OverflowError from NumPy (a traceback), and a
    negative one was scored: both are no attempt index a bundle writes."""
    out = _bundle(tmp_path)
    lines = (out / SAMPLES).read_bytes().splitlines(keepends=True)
    forged = json.loads(lines[0])
    forged["attempt"] = attempt
    _rewrite(out, SAMPLES, b"".join([json.dumps(forged).encode() + b"\n", *lines[1:]]))
    with pytest.raises(CorruptArchiveError, match=r"not a bundle sample: .*\$\[0\]\.attempt"):
        casstore.rescore([out], store=tmp_path / "none")


@pytest.mark.parametrize("metric", ["../evil.py", "/tmp/evil.py", "metrics/0/../../evil.py"])
def test_a_metric_outside_the_bundle_is_refused(capsys, tmp_path: Path, metric: str) -> None:
    """A forged summary naming a metric script outside the bundle (its manifest re-hashed)
    had rescore run that script, which no manifest checks: only ``metrics/<i>/<name>``, the
    copies the bundle holds, or a built-in metric may be named."""
    out = _bundle(tmp_path)
    evil = tmp_path / "evil.py"
    evil.write_text("raise SystemExit('ran')\n")
    summary = json.loads((out / SUMMARY).read_bytes())
    summary["scoring"]["metrics"] = ["mean", metric.replace("/tmp/", f"{tmp_path}/")]
    _rewrite(out, SUMMARY, json.dumps(summary).encode())
    code, _, err = run_cli(capsys, "rescore", str(out))
    assert code == 1 and err.startswith(f"casstore: {out}/{SUMMARY}: scoring definition"), err
    assert "metric" in err


def test_a_large_tampered_samples_file_is_refused_for_its_digest(tmp_path, monkeypatch) -> None:
    """Samples hashed by a thread while they are decoded (bundle.files._IN_THREAD): a byte
    changed so that the line no longer decodes still fails on the digest, naming the file."""
    from casstore.bundle import files

    out = _bundle(tmp_path)
    monkeypatch.setattr(files, "_IN_THREAD", 0)
    assert open_bundle(out).table.trials == open_bundle(out, details=False).table.trials
    data = (out / SAMPLES).read_bytes()
    (out / SAMPLES).write_bytes(data.replace(b'"primary":', b'"primary":"', 1))
    with pytest.raises(DigestMismatchError, match=rf"{SAMPLES}: {len(data) + 1} bytes"):
        open_bundle(out)
    (out / SAMPLES).write_bytes(data.replace(b'"primary":1.0', b'"primary":0.0', 1))
    with pytest.raises(DigestMismatchError, match=rf"{SAMPLES}: {len(data)} bytes with sha"):
        open_bundle(out)


def test_a_sample_block_failing_mid_file_leaves_no_bundle(tmp_path: Path) -> None:
    """The samples' blocks are hashed and written by a thread: an error making one, or
    writing one, is raised by write_files and nothing is left."""
    from casstore.bundle.files import write_files

    def blocks():
        yield b"x" * 100_000
        raise ValueError("block 2 failed")

    with pytest.raises(ValueError, match="block 2 failed"):
        write_files(tmp_path / "b", {SAMPLES: blocks()})
    assert not (tmp_path / "b").exists()
    entries = write_files(tmp_path / "c", {SAMPLES: iter([b"ab", b"c"]), "x.txt": b"d"})
    digest = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert [(e.path, e.sha256, e.bytes) for e in entries][:1] == [(SAMPLES, digest, 3)]
    assert (tmp_path / "c" / SAMPLES).read_bytes() == b"abc"


def test_a_write_failing_in_the_writer_thread_is_raised() -> None:
    import hashlib
    import io

    from casstore.bundle.files import _write_blocks

    class Full(io.BytesIO):
        def write(self, block) -> int:
            if self.tell() >= 4:
                raise OSError(28, "No space left on device")
            return super().write(block)

    handle = Full()
    with pytest.raises(OSError, match="No space left"):
        _write_blocks(iter([b"abcd", b"efgh", b"ijkl"] * 10), hashlib.sha256(), handle)
    assert handle.getvalue() == b"abcd"
    hasher = hashlib.sha256()
    assert _write_blocks(iter([b"ab", b"c"]), hasher, io.BytesIO()) == 3
    assert hasher.hexdigest() == hashlib.sha256(b"abc").hexdigest()
