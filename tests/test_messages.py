"""Messages that say what is wrong (issue 18, items 9 to 14): each refusal is one line on
stderr naming the argument the user gave and what is wrong with it, with the exit status of
its kind; a refusal creates nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from casstore.archive.pack import pack_tree
from tests.helpers import make_task, run_cli, store_cli

TB1_NOTE = "an older Terminal-Bench format; casstore reads Harbor job directories"


def _tb1_results(path: Path) -> Path:
    """A run-level ``results.json`` of Terminal-Bench 1 (``tb run``): its ``BenchmarkResults``
    fields (``id``, ``results`` with one ``TrialResults`` each, ``pass_at_k``, ``n_resolved``,
    ``n_unresolved``, ``resolved_ids``, ``unresolved_ids``, ``accuracy``)."""
    trial = {
        "id": "5d1d1c0e-0000-4000-8000-000000000001",
        "trial_name": "hello-world.1-of-1.2025-06-01__10-00-00",
        "task_id": "hello-world",
        "instruction": "Create hello.txt.",
        "is_resolved": True,
        "failure_mode": "unset",
        "parser_results": {"test_hello_file_exists": "passed"},
        "recording_path": "hello-world/hello-world.1-of-1/sessions/agent.cast",
        "total_input_tokens": 1200,
        "total_output_tokens": 80,
    }
    results = {
        "id": "5d1d1c0e-0000-4000-8000-000000000000",
        "results": [trial],
        "pass_at_k": {"1": 1.0},
        "n_resolved": 1,
        "n_unresolved": 0,
        "resolved_ids": ["hello-world"],
        "unresolved_ids": [],
        "accuracy": 1.0,
    }
    path.write_text(json.dumps(results, indent=4))
    return path


# item 9: rescore FILE


@pytest.mark.parametrize("with_store", [False, True])
def test_rescore_of_a_plain_file_says_it_is_no_job_directory_nor_trials_file(
    capsys, tmp_path: Path, with_store: bool
) -> None:
    store = tmp_path / "store"
    if with_store:
        store_cli(capsys, store, "publish", str(make_task(tmp_path)))
    data = tmp_path / "scores.json"
    data.write_text('{"reward": 1.0}\n')
    code, out, err = store_cli(capsys, store, "rescore", str(data))
    assert (code, out) == (2, "")
    assert err == (
        f"casstore: {data}: a file, neither a Harbor job directory nor a trials .jsonl file\n"
    )


@pytest.mark.parametrize("with_store", [False, True])
def test_rescore_of_a_fifo_or_device_says_it_is_no_regular_file(
    capsys, tmp_path: Path, with_store: bool
) -> None:
    """It was looked up as a job name: `no casstore store here`, or `no imported job`."""
    store = tmp_path / "store"
    if with_store:
        store_cli(capsys, store, "publish", str(make_task(tmp_path)))
    fifo = tmp_path / "trials"
    os.mkfifo(fifo)
    for source, kind in [(str(fifo), "a FIFO"), ("/dev/null", "a character device")]:
        code, out, err = store_cli(capsys, store, "rescore", source)
        assert (code, out, err) == (2, "", f"casstore: {source}: not a regular file ({kind})\n")


def test_rescore_and_import_name_a_terminal_bench_1_results_file(capsys, tmp_path: Path) -> None:
    results = _tb1_results(tmp_path / "results.json")
    expected = f"casstore: {results}: a Terminal-Bench 1 results.json, {TB1_NOTE}\n"
    for command in ("rescore", "import"):
        code, out, err = store_cli(capsys, tmp_path / "store", command, str(results))
        assert (code, out, err) == (2, "", expected)
    assert not (tmp_path / "store").exists()


def test_a_terminal_bench_1_run_directory_is_named_as_such(capsys, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "2025-06-01__10-00-00"
    (run / "hello-world").mkdir(parents=True)
    _tb1_results(run / "results.json")
    (run / "run_metadata.json").write_text('{"run_id": "2025-06-01__10-00-00"}')
    (run / "tb.lock").write_text("{}")
    expected = f"casstore: {run}: a Terminal-Bench 1 run directory, {TB1_NOTE}\n"
    for command in ("rescore", "import"):
        code, out, err = store_cli(capsys, tmp_path / "store", command, str(run))
        assert (code, out, err) == (2, "", expected)


def test_an_imported_job_named_like_a_file_is_still_found(
    capsys, tmp_path: Path, monkeypatch
) -> None:
    from casstore.examples.job import write_example_job

    job = write_example_job(tmp_path / "jobs", ["alpha"], attempts=2)
    store = tmp_path / "store"
    code, _, err = store_cli(capsys, store, "import", str(job), "--name", "notes.json")
    assert (code, err) == (0, "")
    monkeypatch.chdir(tmp_path)
    Path("notes.json").write_text("{}\n")
    code, report, err = store_cli(capsys, store, "rescore", "notes.json", "--json")
    assert (code, err) == (0, "") and report["counts"]["attempts"] == 2


# item 14: one wording for unknown references


def test_every_command_words_an_unknown_reference_alike(capsys, tmp_path: Path) -> None:
    from casstore.examples.job import write_example_job

    store = tmp_path / "store"
    store_cli(capsys, store, "publish", str(make_task(tmp_path)))
    job = write_example_job(tmp_path / "jobs", ["task"], attempts=1)
    either = "casstore: default/nosuch: no taskset or task of that name\n"
    refusals = {
        ("show", "nosuch"): either,
        ("checkout", "nosuch", str(tmp_path / "out")): either,
        ("rescore", str(job), "--taskset", "nosuch"): either,
        ("taskset", "create", "set", "nosuch"): "casstore: default/nosuch: no task of that name\n",
        ("rescore", "nosuch"): "casstore: nosuch: no imported job of that id or name\n",
        ("export", "nosuch", "-o", str(tmp_path / "t.jsonl")): (
            "casstore: nosuch: no imported job of that id or name\n"
        ),
    }
    for argv, expected in refusals.items():
        code, out, err = store_cli(capsys, store, *argv)
        assert (code, out, err) == (2, "", expected), argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs", "store", "task"]


# item 10: a path argument whose parent (or itself) is a file


def test_checkout_under_a_file_names_the_file_and_makes_nothing(capsys, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store_cli(capsys, store, "publish", str(make_task(tmp_path)))
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    for dest in (afile / "sub", afile / "sub" / "deeper"):
        code, out, err = store_cli(capsys, store, "checkout", "task", str(dest))
        assert (code, out, err) == (2, "", f"casstore: {dest}: {afile} is not a directory\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "store", "task"]


def test_checkout_and_extract_under_a_file_name_it_as_given(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative DEST under a file: the file named as the user wrote it (README: `checkout REF
    afile/sub`: `afile/sub: afile is not a directory`), not as an absolute path."""
    store = tmp_path / "store"
    store_cli(capsys, store, "publish", str(make_task(tmp_path)))
    archive = tmp_path / "t.tar.gz"
    assert run_cli(capsys, "pack", str(tmp_path / "task"), "-o", str(archive))[0] == 0
    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("x\n")
    for argv in (["checkout", "task"], ["extract", str(archive)]):
        for dest in ("afile/sub", "afile/sub/deeper"):
            code, out, err = store_cli(capsys, store, *argv, dest)
            assert (code, out, err) == (2, "", f"casstore: {dest}: afile is not a directory\n")


def test_verifier_init_of_a_file_says_it_is_not_a_directory(capsys, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    code, out, err = run_cli(capsys, "verifier", "init", str(afile))
    rule = "not a directory but a regular file (a Harbor task directory is expected)"
    expected = f"casstore: {afile}: {rule}\n"
    assert (code, out, err) == (2, "", expected)
    missing = tmp_path / "missing"
    code, out, err = run_cli(capsys, "verifier", "init", str(missing))
    assert (code, out, err) == (2, "", f"casstore: {missing}: task directory does not exist\n")


def test_demo_dir_that_is_or_lies_under_a_file_is_refused_first(capsys, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    refusals = {
        afile: f"casstore: {afile}: not a directory (--dir names the demo's working folder)\n",
        afile / "demo": f"casstore: {afile / 'demo'}: {afile} is not a directory\n",
    }
    for directory, expected in refusals.items():
        code, out, err = run_cli(capsys, "demo", "--dir", str(directory))
        assert (code, out, err) == (2, "", expected)
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


# item 11: an archive error names the archive file first


@pytest.fixture
def fliphdr(tmp_path: Path) -> Path:
    """An uncompressed archive whose second header (``task/instruction.md``) has one bit of
    its checksum flipped."""
    archive = tmp_path / "fliphdr.tar"
    pack_tree(make_task(tmp_path), archive, "none")
    data = bytearray(archive.read_bytes())
    data[512 + 148] ^= 0x01
    archive.write_bytes(bytes(data))
    return archive


def test_verify_of_one_archive_names_it_before_the_entry(capsys, fliphdr: Path) -> None:
    line = f"casstore: {fliphdr}: task/instruction.md: header checksum mismatch\n"
    code, out, err = run_cli(capsys, "verify", str(fliphdr))
    assert (code, out, err) == (1, "", line)
    code, out, err = run_cli(capsys, "verify", str(fliphdr), "--json")
    assert (code, err) == (1, line)
    assert json.loads(out)["error"] == {  # the error's own object, as verify FILE... has it
        "kind": "corrupt",
        "path": "task/instruction.md",
        "message": "task/instruction.md: header checksum mismatch",
    }


def test_extract_names_the_archive_before_the_entry(capsys, tmp_path: Path, fliphdr) -> None:
    dest = tmp_path / "out"
    code, out, err = run_cli(capsys, "extract", str(fliphdr), str(dest))
    line = f"casstore: {fliphdr}: task/instruction.md: header checksum mismatch\n"
    assert (code, out, err) == (1, "", line)
    assert not dest.exists()
    code, out, err = run_cli(capsys, "extract", str(fliphdr), str(tmp_path))
    rule = "the destination must not exist or be an empty directory; it is a directory that"
    rule += " is not empty"
    assert (code, out, err) == (2, "", f"casstore: {tmp_path}: {rule}\n")


# item 12: publish of a task whose default name is not ASCII

NAME_RULE = "not a valid name (1 to 255 ASCII letters, digits, '_', '-', '.'; not '.' or '..')"


def test_publish_of_a_non_ascii_task_name_suggests_name_and_makes_no_store(
    capsys, tmp_path: Path
) -> None:
    task = make_task(tmp_path / "suite", "tâche-日本語")
    store = tmp_path / "store"
    code, out, err = store_cli(capsys, store, "publish", str(task))
    expected = f"casstore: tâche-日本語: {NAME_RULE}; publish it with --name NAME\n"
    assert (code, out, err) == (2, "", expected)
    make_task(tmp_path / "suite", "plain")
    code, out, err = store_cli(capsys, store, "publish", str(tmp_path / "suite"))
    expected = f"casstore: tâche-日本語: {NAME_RULE}; publish it alone with --name NAME\n"
    assert (code, out, err) == (2, "", expected)
    assert not store.exists()
    code, out, err = store_cli(capsys, store, "publish", str(task), "--name", "tache", "--json")
    assert (code, err) == (0, "") and [r["name"] for r in out] == ["tache"]


@pytest.mark.parametrize("option", ["--name", "--taskset", "--workspace", "--fileset"])
def test_publish_checks_every_name_before_making_the_store(
    capsys, tmp_path: Path, option: str
) -> None:
    store = tmp_path / "store"
    argv = ["publish", str(make_task(tmp_path)), option, "été"]
    code, out, err = store_cli(capsys, store, *argv)
    assert (code, out, err) == (2, "", f"casstore: été: {NAME_RULE}\n")
    assert not store.exists()


# item 13: publish of a folder of datasets; --recursive


@pytest.fixture
def datasets(tmp_path: Path) -> Path:
    """``benchmarks/`` holding the datasets ``ds-a`` (tasks ``a1``, ``a2``) and ``ds-b`` (``b1``),
    a README file and a dot-directory (both skipped, as in a dataset)."""
    folder = tmp_path / "benchmarks"
    for dataset, names in {"ds-a": ["a1", "a2"], "ds-b": ["b1"]}.items():
        for name in names:
            make_task(folder / dataset, name)
    (folder / "README.md").write_text("two datasets\n")
    (folder / ".git").mkdir()
    return folder


def test_publish_of_a_folder_of_datasets_says_so_and_makes_nothing(
    capsys, tmp_path: Path, datasets: Path
) -> None:
    store = tmp_path / "store"
    code, out, err = store_cli(capsys, store, "publish", str(datasets))
    expected = (
        f"casstore: {datasets}: a folder of datasets (ds-a, ds-b), not a dataset of tasks: "
        "publish each, or all with --recursive\n"
    )
    assert (code, out, err) == (2, "", expected)
    make_task(datasets, "t1")
    code, out, err = store_cli(capsys, store, "publish", str(datasets))
    expected = (
        f"casstore: {datasets / 'ds-a'}: a dataset, not a task ({datasets} mixes tasks and "
        "datasets)\n"
    )
    assert (code, out, err) == (2, "", expected)
    assert not store.exists()


def test_publish_recursive_makes_a_taskset_per_dataset(capsys, tmp_path, datasets) -> None:
    store = tmp_path / "store"
    code, out, err = store_cli(capsys, store, "publish", str(datasets), "--recursive", "--json")
    assert (code, err) == (0, "")
    assert [(d["dataset"], d["taskset"]["id"]) for d in out] == [
        (str(datasets / "ds-a"), "default/ds-a"),
        (str(datasets / "ds-b"), "default/ds-b"),
    ]
    assert [[t["name"] for t in d["tasks"]] for d in out] == [["a1", "a2"], ["b1"]]
    for dataset in out:
        pins = {p["task"]: p["revision"] for p in dataset["taskset"]["tasks"]}
        assert pins == {f"default/{t['name']}": t["revision"] for t in dataset["tasks"]}
    code, text, err = store_cli(capsys, store, "publish", str(datasets), "--recursive")
    lines = text.splitlines()
    assert (code, err, len(lines)) == (0, "", 5)
    assert [line.split()[0] for line in lines] == [
        "reused",
        "reused",
        "taskset",
        "reused",
        "taskset",
    ]
    assert lines[2].startswith("taskset default/ds-a#sha256:") and lines[2].endswith(
        "  2 tasks (reused)"
    )
    code, listed, _ = store_cli(capsys, store, "ls", "tasksets", "--json")
    assert [(row["ref"], row["tasks"]) for row in listed] == [
        ("default/ds-a", 2),
        ("default/ds-b", 1),
    ]


def test_publish_recursive_refusals_come_before_any_work(capsys, tmp_path, datasets) -> None:
    store = tmp_path / "store"
    refusals = {
        (str(datasets / "ds-a"), "--recursive"): (
            f"casstore: {datasets / 'ds-a' / 'a1'}: a task, not a dataset "
            f"(publish {datasets / 'ds-a'} without --recursive)\n"
        ),
        (str(datasets), "--recursive", "--taskset", "all"): (
            "casstore: --taskset: --recursive names a taskset after each dataset\n"
        ),
        (str(datasets), "--recursive", "--name", "x"): (
            "casstore: --name: --recursive publishes datasets, --name a single task\n"
        ),
    }
    for argv, expected in refusals.items():
        code, out, err = store_cli(capsys, store, "publish", *argv)
        assert (code, out, err) == (2, "", expected), argv
    make_task(datasets / "ds-b", "a1")
    code, out, err = store_cli(capsys, store, "publish", str(datasets), "--recursive")
    expected = (
        f"casstore: {datasets / 'ds-b' / 'a1'}: the task name default/a1 is also that of "
        f"{datasets / 'ds-a' / 'a1'}; publish the datasets apart (--workspace)\n"
    )
    assert (code, out, err) == (2, "", expected)
    assert not store.exists()


@pytest.mark.realdata
def test_publish_recursive_of_the_real_suites(capsys, tmp_path, fixtures_dir) -> None:
    store = tmp_path / "store"
    tasks = fixtures_dir / "tasks"
    code, out, err = store_cli(capsys, store, "publish", str(tasks), "--recursive", "--json")
    assert (code, err) == (0, "")
    suites = sorted(p for p in tasks.iterdir() if p.is_dir())
    assert [d["taskset"]["id"] for d in out] == [f"default/{p.name}" for p in suites]
    assert [len(d["tasks"]) for d in out] == [
        len([c for c in p.iterdir() if (c / "task.toml").is_file()]) for p in suites
    ]


def test_pack_and_export_outputs_under_a_file_name_the_file(capsys, tmp_path: Path) -> None:
    from casstore.examples.job import write_example_job

    afile = tmp_path / "afile"
    afile.write_text("x\n")
    out = afile / "x.tar.gz"
    code, text, err = run_cli(capsys, "pack", str(make_task(tmp_path)), "-o", str(out))
    assert (code, text, err) == (2, "", f"casstore: {out}: {afile} is not a directory\n")
    job = write_example_job(tmp_path / "jobs", ["task"], attempts=1)
    out = afile / "trials.jsonl"
    code, text, err = run_cli(capsys, "export", str(job), "-o", str(out))
    assert (code, text, err) == (2, "", f"casstore: {out}: {afile} is not a directory\n")
