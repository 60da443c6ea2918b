"""``casstore run``'s stat-based caches (a SOURCE's discovery, the options digest, a kept job's
import) and the checks made before a job directory is locked (SOURCE, ``--reward-key``).

Each cache is shown to serve an unchanged input without redoing the work, and to redo it for
every kind of change (contents of the same size, mode, a new or renamed entry, another store,
other options); ``RACY_NS`` is lowered where a test needs a just-written tree recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from casstore.archive.discover import discover_task
from casstore.errors import UsageError
from casstore.examples.harbor_tasks import write_harbor_tasks
from casstore.examples.job import write_example_job
from casstore.run import importcache, sourcecache
from casstore.run.config import RunOptions, check_options, check_reward_key
from casstore.run.identity import (
    options_digest,
    remember_options_digest,
    remembered_options_digest,
)
from casstore.run.lock import job_lock, lock_path
from casstore.run.source import RunTask, plan_source
from casstore.store import Store
from casstore.trials.jobstore import Jobs
from tests.helpers import run_cli


@pytest.fixture
def unracy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record trees however recently written (the tests write them just before)."""
    monkeypatch.setattr(sourcecache, "RACY_NS", -(10**18))
    monkeypatch.setattr(importcache, "RACY_NS", -(10**18))


def _counting() -> tuple[list[int], object]:
    calls: list[int] = []
    real = sourcecache.cached_discovery

    def wrapped(source, jobs_dir, discover, pending=None):
        def counted():
            calls.append(1)
            return discover()

        return real(source, jobs_dir, counted, pending)

    return calls, wrapped


def _plan(monkeypatch, ds: Path, jobs: Path) -> tuple[dict[str, str], int]:
    """The digests ``plan_source`` gives for ``ds`` and whether it discovered (1) or not (0)."""
    calls, wrapped = _counting()
    monkeypatch.setattr("casstore.run.source.cached_discovery", wrapped)
    plan = plan_source(str(ds), None, jobs)
    return plan.tasks().digests(), len(calls)


@pytest.mark.parametrize("change", ["same-size", "mode", "new-file", "rename", "remove"])
def test_a_source_is_discovered_once_and_again_after_any_change(
    monkeypatch, tmp_path: Path, unracy: None, change: str
) -> None:
    ds, jobs = tmp_path / "ds", tmp_path / "jobs"
    plain, _ = write_harbor_tasks(ds, ["plain", "multi-reward"])
    first, discovered = _plan(monkeypatch, ds, jobs)
    assert discovered == 1
    assert first["plain"] == discover_task(plain).content_digest
    assert _plan(monkeypatch, ds, jobs) == (first, 0)  # unchanged: nothing read again
    test_sh = plain / "tests" / "test.sh"
    if change == "same-size":
        text = test_sh.read_text()
        test_sh.write_text(text.replace("1", "2", 1))  # as long, other bytes
        assert len(test_sh.read_text()) == len(text)
    elif change == "mode":
        os.chmod(test_sh, 0o644 if os.stat(test_sh).st_mode & 0o111 else 0o755)
    elif change == "new-file":
        (plain / "tests" / "extra.txt").write_text("x")
    elif change == "rename":
        os.rename(test_sh, plain / "tests" / "test2.sh")
        os.rename(plain / "tests" / "test2.sh", test_sh)  # back: same name, same content
    else:
        (plain / "tests" / "extra.txt").write_text("x")
        _plan(monkeypatch, ds, jobs)
        (plain / "tests" / "extra.txt").unlink()
    again, discovered = _plan(monkeypatch, ds, jobs)
    assert discovered == 1
    assert again["plain"] == discover_task(plain).content_digest
    assert again["multi-reward"] == first["multi-reward"]
    if change in {"same-size", "mode", "new-file"}:
        assert again["plain"] != first["plain"]


def test_a_linked_source_is_fingerprinted_through_its_link(
    monkeypatch, tmp_path: Path, unracy: None
) -> None:
    # lstat of a link to the dataset saw the link only: edits in the dataset went unseen.
    jobs, link = tmp_path / "jobs", tmp_path / "link"
    (plain,) = write_harbor_tasks(tmp_path / "ds", ["plain"])
    (other,) = write_harbor_tasks(tmp_path / "ds2", ["plain"])
    (other / "tests" / "extra.txt").write_text("x")
    link.symlink_to(tmp_path / "ds")
    first, _ = _plan(monkeypatch, link, jobs)
    assert _plan(monkeypatch, link, jobs) == (first, 0)
    (plain / "tests" / "extra.txt").write_text("x")
    again, discovered = _plan(monkeypatch, link, jobs)
    assert discovered == 1 and again["plain"] != first["plain"]
    link.unlink()
    link.symlink_to(tmp_path / "ds2")  # pointed elsewhere
    assert _plan(monkeypatch, link, jobs)[1] == 1


def test_a_just_written_source_is_not_recorded(monkeypatch, tmp_path: Path) -> None:
    # A file changed within one timestamp tick of the scan could keep its lstat: a tree
    # written moments ago is discovered every time until it has aged.
    ds, jobs = tmp_path / "ds", tmp_path / "jobs"
    write_harbor_tasks(ds, ["plain"])
    assert _plan(monkeypatch, ds, jobs)[1] == 1
    assert _plan(monkeypatch, ds, jobs)[1] == 1
    assert not (jobs / ".casstore-cache" / "sources").exists()


def test_a_warning_or_a_malformed_entry_is_no_cache(monkeypatch, tmp_path: Path, unracy) -> None:
    ds, jobs = tmp_path / "ds", tmp_path / "jobs"
    write_harbor_tasks(ds, ["plain"])
    write_harbor_tasks(ds / "task_template", ["plain"])  # skipped with a warning
    (ds / "task_template" / "plain").rename(ds / "task_template" / "x")
    with pytest.warns(UserWarning, match="task template"):
        assert _plan(monkeypatch, ds, jobs)[1] == 1
    with pytest.warns(UserWarning, match="task template"):  # warned again: not cached
        assert _plan(monkeypatch, ds, jobs)[1] == 1
    other = tmp_path / "other"
    write_harbor_tasks(other, ["plain"])
    digests, _ = _plan(monkeypatch, other, jobs)
    (entry,) = (jobs / ".casstore-cache" / "sources").iterdir()
    entry.write_text('{"version": 1, "fingerprint": "blake3:00", "tasks": [')
    assert _plan(monkeypatch, other, jobs) == (digests, 1)
    assert _plan(monkeypatch, other, jobs) == (digests, 0)  # the entry written anew


def _options(tmp_path: Path, **changes) -> RunOptions:
    fields = {
        "agent": "oracle",
        "job_name": "memo",
        "jobs_dir": tmp_path / "jobs",
        "agent_kwargs": ["temperature=0.5"],
        "env_secrets": ["OPENAI_API_KEY=openai-api-key"],
    }
    return RunOptions(**(fields | changes))


ENV = {"OPENAI_API_KEY": "value-one"}


def test_the_options_digest_is_remembered_by_its_inputs(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    checked = check_options(_options(tmp_path), ENV)
    digest = options_digest(checked.base, checked.env.references)
    assert remembered_options_digest(jobs, checked.inputs) is None
    remember_options_digest(jobs, checked.inputs, digest)
    assert remembered_options_digest(jobs, checked.inputs) == digest

    def known(inputs: str) -> str | None:
        return remembered_options_digest(jobs, inputs)

    again = check_options(_options(tmp_path), {"OPENAI_API_KEY": "rotated"}, known)
    assert again.remembered == digest  # a rotated secret value: the same inputs
    assert "base" not in again.__dict__  # Harbor's models were not built
    assert options_digest(again.base, again.env.references) == digest
    for change in (
        {"agent_kwargs": ["temperature=0.7"]},
        {"env_secrets": ["OPENAI_API_KEY=other-key"]},
        {"env_vars": ["MODE=fast"]},
        {"model": "m"},
        {"max_retries": 2},
        {"environment_kwargs": ["cpus=2"]},
    ):
        other = check_options(_options(tmp_path, **change), ENV | {"OTHER_KEY": "v"}, known)
        assert other.inputs != checked.inputs and other.remembered is None, change
        assert "base" in other.__dict__  # checked by Harbor's models


def test_options_harbor_refuses_stay_refused(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    good = check_options(_options(tmp_path), ENV)
    remember_options_digest(jobs, good.inputs, "sha256:" + "0" * 64)
    with pytest.raises(UsageError, match="Harbor refuses it"):
        check_options(
            _options(tmp_path, environment="no-such-environment"),
            ENV,
            lambda inputs: remembered_options_digest(jobs, inputs),
        )


def test_a_remembered_digest_of_other_code_is_not_used(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    checked = check_options(_options(tmp_path), ENV)
    remember_options_digest(jobs, checked.inputs, "sha256:" + "1" * 64)
    (entry,) = (jobs / ".casstore-cache" / "options").iterdir()
    data = json.loads(entry.read_text())
    data["code"][0][5] += 1  # one module's mtime: Harbor or casstore upgraded
    entry.write_text(json.dumps(data))
    assert remembered_options_digest(jobs, checked.inputs) is None


def test_a_remembered_digest_under_another_key_is_not_used(tmp_path: Path) -> None:
    # An entry named only by its inputs' hash: copied over another key (a synced or restored
    # cache folder), it gave other options' digest, and the trial cache their attempts.
    jobs = tmp_path / "jobs"
    one = check_options(_options(tmp_path), ENV)
    two = check_options(_options(tmp_path, model="m"), ENV)
    remember_options_digest(jobs, one.inputs, "sha256:" + "1" * 64)
    remember_options_digest(jobs, two.inputs, "sha256:" + "2" * 64)
    folder = jobs / ".casstore-cache" / "options"
    place = {i: folder / f"{i.partition(':')[2]}.json" for i in (one.inputs, two.inputs)}
    place[two.inputs].write_bytes(place[one.inputs].read_bytes())
    assert remembered_options_digest(jobs, two.inputs) is None
    assert remembered_options_digest(jobs, one.inputs) == "sha256:" + "1" * 64


def test_a_kept_job_is_imported_again_only_when_it_changed(tmp_path: Path, unracy) -> None:
    job_dir = write_example_job(tmp_path / "jobs", ["a", "b"], attempts=2, name="kept")
    (job_dir / "a__0" / "trial.log").write_text("a log")
    digests = ("sha256:o", "<none>", {"a": "blake3:a", "b": "blake3:b"})
    imports: list[str] = []

    def remembered(store: Store, digests=digests):
        def import_job():
            imports.append(str(store.root))
            (report,) = Jobs(store).import_jobs([job_dir])
            return report

        return importcache.remembered_import(store, job_dir, digests, import_job)

    with Store(tmp_path / "store") as store:
        first = remembered(store)
        assert (first.trials, first.imported) == (4, 4)
        first = msgspec.structs.replace(first, imported=0)  # what a rerun's import says
        assert remembered(store) == first and len(imports) == 1  # unchanged: not imported
        other_digests = (digests[0], digests[1], {"a": "blake3:a"})
        assert remembered(store, other_digests) == first and len(imports) == 2
        assert remembered(store) == first and len(imports) == 3
        result = job_dir / "a__0" / "result.json"
        result.write_bytes(result.read_bytes())  # rewritten, same bytes: a new ctime
        assert remembered(store) == first and len(imports) == 4
        assert remembered(store) == first and len(imports) == 4
        (job_dir / "a__0" / "trial.log").write_text("not read")  # in place: not read by an import
        assert remembered(store) == first and len(imports) == 4
        (job_dir / "a__1" / "agent").mkdir(exist_ok=True)
        (job_dir / "a__1" / "agent" / "trajectory.json").write_text("{}")  # read: a change
        assert remembered(store).job == first.job and len(imports) == 5
        (job_dir / "b__0").rename(job_dir / "b__0x")
        (job_dir / "b__0x").rename(job_dir / "b__0")  # renamed back: another ctime
        assert remembered(store).job == first.job and len(imports) == 6
    with Store(tmp_path / "another-store") as store:
        assert remembered(store).job == first.job and len(imports) == 7
        assert Jobs(store).get(first.job).trials == 4


# Checked before a job directory is locked or made


def test_a_bad_source_fails_before_the_job_is_locked(capsys, tmp_path: Path) -> None:
    # The lock (and the jobs folder) came first: a mistyped SOURCE made them, and while
    # another run held the job it was reported as busy instead of naming the SOURCE.
    jobs = tmp_path / "jobs"
    argv = ("--store", str(tmp_path / "store"), "run", str(tmp_path / "typo"), "--agent", "oracle")
    code, _, err = run_cli(capsys, *argv, "--jobs-dir", str(jobs), "--job-name", "j")
    assert code == 2 and "neither a task or dataset directory" in err
    assert not jobs.exists()
    with job_lock(jobs, "j"):
        code, _, err = run_cli(capsys, *argv, "--jobs-dir", str(jobs), "--job-name", "j")
    assert code == 2 and "neither a task or dataset directory" in err
    assert sorted(p.name for p in jobs.iterdir()) == [lock_path(jobs, "j").name]


def _declaring(ds: Path) -> None:
    for task in write_harbor_tasks(ds, ["plain", "multi-reward"]):
        toml = task / "task.toml"
        toml.write_text(
            toml.read_text().replace("[metadata]\n", '[metadata]\nreward_keys = ["style"]\n')
        )


def test_a_reward_key_no_declaring_task_has_is_refused_before_harbor(
    capsys, tmp_path: Path, unracy
) -> None:
    _declaring(tmp_path / "ds")
    jobs = tmp_path / "jobs"
    code, out, err = run_cli(
        capsys,
        *("--store", str(tmp_path / "store"), "run", str(tmp_path / "ds"), "--agent", "oracle"),
        *("--jobs-dir", str(jobs), "--job-name", "j", "--reward-key", "styel"),
        *("--environment-import-path", "casstore.sandbox:HostEnvironment"),
    )
    assert (code, out) == (2, "")
    assert err == (
        "casstore: --reward-key: no task declares the reward key 'styel'; the tasks declare "
        "'reward', 'style': pass one of them\n"
    )
    assert not (jobs / "j").exists() and not lock_path(jobs, "j").exists()
    assert not jobs.exists()  # (nor the discovery cache: it was recorded in the jobs folder)


def test_reward_key_rule() -> None:
    path = Path("t")
    declaring = RunTask("a", path, "blake3:a", ("reward", "style"))
    other = RunTask("b", path, "blake3:b", ("score",))
    plain = RunTask("c", path, "blake3:c")  # declares nothing: may write any key
    for key in ("reward", "style", "score"):
        check_reward_key(key, [declaring, other])
    with pytest.raises(UsageError, match="no task declares the reward key 'speed'"):
        check_reward_key("speed", [declaring, other])
    check_reward_key("speed", [declaring, plain])
    check_reward_key("anything", [])


def test_an_entry_that_cannot_be_replaced_leaves_no_temporary_file(tmp_path: Path) -> None:
    from casstore.run.statcache import write_entry

    place = tmp_path / "sources" / "key.json"
    place.mkdir(parents=True)  # (os.replace of a file over a directory fails)
    write_entry(place, {"version": 1})
    assert sorted(p.name for p in place.parent.iterdir()) == ["key.json"]
    assert place.is_dir()


def test_temporary_files_of_killed_writers_are_removed_live_ones_kept(tmp_path: Path) -> None:
    # A writer killed (SIGKILL) between its write and its rename leaves its temporary file; the
    # next write of that entry removes it, never one of a live writer or of another entry.
    import subprocess

    from casstore.run.statcache import read_entry, write_entry

    dead = subprocess.Popen(["true"])
    dead.wait()
    place = tmp_path / "sources" / "key.json"
    place.parent.mkdir()
    orphan = place.with_name(f".key.json.tmp-{dead.pid}")
    live = place.with_name(f".key.json.tmp-{os.getppid()}")
    other = place.with_name(f".other.json.tmp-{dead.pid}")
    for left in (orphan, live, other):
        left.write_bytes(b"{")
    write_entry(place, {"version": 1})
    assert sorted(p.name for p in place.parent.iterdir()) == sorted(
        ["key.json", live.name, other.name]
    )
    assert read_entry(place, dict) == {"version": 1}


@pytest.mark.parametrize("inside", ["ds", "ds/jobs", "ds/plain/jobs"])
def test_a_jobs_dir_inside_the_source_is_refused_first(capsys, tmp_path: Path, inside: str) -> None:
    # Its jobs were discovered with the tasks: a dataset's second run failed on ``jobs`` as a
    # malformed task, a task's content digest changed with every run (always stale).
    write_harbor_tasks(tmp_path / "ds", ["plain"])
    source = tmp_path / ("ds/plain" if "plain" in inside else "ds")
    jobs = tmp_path / inside
    argv = ("--store", str(tmp_path / "store"), "run", str(source), "--agent", "oracle")
    code, out, err = run_cli(capsys, *argv, "--jobs-dir", str(jobs), "--job-name", "j")
    assert (code, out) == (2, "")
    assert err == (
        f"casstore: --jobs-dir: {jobs.resolve()} is inside SOURCE {source.resolve()}: its jobs "
        "would be discovered as tasks; choose a folder outside it\n"
    )
    assert not (tmp_path / "ds" / "jobs").exists() and not (source / "jobs").exists()


def test_an_empty_source_is_refused_not_read_as_the_current_directory(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``casstore run "$SUITE"`` with SUITE unset discovered and ran the current directory.
    write_harbor_tasks(tmp_path / "here", ["plain"])
    monkeypatch.chdir(tmp_path / "here")
    jobs = tmp_path / "jobs"
    argv = ("--store", str(tmp_path / "store"), "run", "", "--agent", "oracle")
    code, out, err = run_cli(capsys, *argv, "--jobs-dir", str(jobs), "--job-name", "j")
    assert (code, out) == (2, "")
    assert err == ("casstore: SOURCE: empty: give a task or dataset directory or a reference\n")
    assert not jobs.exists()
