"""Many inputs in one process: ``casstore verify FILE...``, ``casstore pack DIR... -o OUTDIR``
and their API (``casstore.verify_each``, ``casstore.pack_into``).

One input prints exactly what it always did; several print one line (or one JSON object, as
JSON Lines) per input, in order, and exit with the worst status; a bad input stops nothing.
The API yields one Outcome per input, in order; its arguments are checked before any work.
"""

from __future__ import annotations

import json
import os

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.archive.read import verify_archive
from casstore.errors import UsageError
from tests.helpers import make_task, run_cli

ZERO = "sha256:" + "0" * 64


def _values(out: str) -> list[dict]:
    """Every JSON value of ``out``, a stream of JSON texts (as jq reads its input)."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while at < len(out):
        value, at = decoder.raw_decode(out, at)
        values.append(value)
        while at < len(out) and out[at].isspace():
            at += 1
    return values


@pytest.fixture
def tasks(tmp_path):
    """Three valid tasks ``a``, ``b``, ``c`` under ``tmp_path/src``."""
    return [make_task(tmp_path / "src", name, {"tests/test.sh": name}) for name in "abc"]


@pytest.fixture
def archives(tasks, tmp_path):
    """The gzip archives of ``tasks``; the second one corrupted."""
    paths = []
    for task in tasks:
        path = tmp_path / f"{task.name}.tar.gz"
        pack_tree(task, path)
        paths.append(path)
    data = bytearray(paths[1].read_bytes())
    data[len(data) // 2] ^= 0xFF
    paths[1].write_bytes(bytes(data))
    return paths


# One input: today's output, byte for byte.


def test_one_archive_prints_the_two_lines_it_always_did(archives, capsys):
    result = verify_archive(archives[0])
    code, out, err = run_cli(capsys, "verify", str(archives[0]))
    assert (code, err) == (0, "")
    assert out == (
        f"ok {result.address}  {archives[0]}\n"
        f"content {result.content_digest}  entries {result.entries}\n"
    )


def test_one_archive_json_is_the_indented_object_it_always_was(archives, capsys):
    result = verify_archive(archives[0])
    code, out, _ = run_cli(capsys, "verify", str(archives[0]), "--json")
    assert code == 0
    assert out == (
        "{\n"
        '  "ok": true,\n'
        f'  "address": "{result.address}",\n'
        f'  "content_digest": "{result.content_digest}",\n'
        f'  "entries": {result.entries},\n'
        '  "error": null\n'
        "}\n"
    )


def test_one_failing_archive_keeps_its_one_line_and_json(archives, capsys):
    address = verify_archive(archives[0]).address
    code, out, err = run_cli(capsys, "verify", str(archives[0]), "--expect", ZERO)
    message = f"{archives[0]}: address is {address}, expected {ZERO}"
    assert (code, out, err) == (1, "", f"casstore: {message}\n")
    code, out, err = run_cli(capsys, "verify", str(archives[0]), "--expect", ZERO, "--json")
    assert (code, err) == (1, f"casstore: {message}\n")
    assert out == (
        "{\n"
        '  "ok": false,\n'
        '  "address": null,\n'
        '  "content_digest": null,\n'
        '  "entries": null,\n'
        '  "error": {\n'
        '    "kind": "digest_mismatch",\n'
        f'    "path": "{archives[0]}",\n'
        f'    "message": "{message}"\n'
        "  }\n"
        "}\n"
    )


def test_one_missing_archive_keeps_its_usage_json(tmp_path, capsys):
    missing = tmp_path / "nope.tgz"
    code, out, err = run_cli(capsys, "verify", str(missing), "--json")
    message = f"{missing}: cannot open archive: No such file or directory"
    assert (code, err) == (2, f"casstore: {message}\n")
    assert json.loads(out) == {
        "ok": False,
        "error": {"kind": "usage", "path": str(missing), "message": message},
    }


def test_one_task_pack_prints_the_two_lines_it_always_did(tasks, tmp_path, capsys):
    out_file = tmp_path / "one.tar.zst"
    code, out, err = run_cli(capsys, "pack", str(tasks[0]), "-o", str(out_file), "-c", "zstd")
    result = verify_archive(out_file)
    assert (code, err) == (0, "")
    assert out == (
        f"{result.address}  {out_file}\n"
        f"content {result.content_digest}  entries {result.entries}  "
        f"payload {result.payload_bytes} B  archive {out_file.stat().st_size} B (zstd)\n"
    )
    code, out, _ = run_cli(capsys, "pack", str(tasks[0]), "-o", str(out_file), "--json")
    result = verify_archive(out_file)
    assert code == 0
    assert out == (
        "{\n"
        f'  "address": "{result.address}",\n'
        f'  "content_digest": "{result.content_digest}",\n'
        f'  "entries": {result.entries},\n'
        f'  "payload_bytes": {result.payload_bytes},\n'
        f'  "archive_bytes": {out_file.stat().st_size},\n'
        '  "compression": "zstd"\n'  # the name's, without -c (issue 18: it wrote gzip)
        "}\n"
    )


# verify FILE...


def test_verify_many_prints_one_line_each_in_order_and_exits_with_the_worst(archives, capsys):
    code, out, err = run_cli(capsys, "verify", *map(str, archives))
    first, last = verify_archive(archives[0]), verify_archive(archives[2])
    assert code == 1
    assert out == (
        f"ok {first.address}  content {first.content_digest}  entries 5  {archives[0]}\n"
        f"ok {last.address}  content {last.content_digest}  entries 5  {archives[2]}\n"
    )
    assert err.count("\n") == 1
    assert err.startswith(f"casstore: {archives[1]}: ")


def test_verify_many_json_is_one_object_per_line_naming_its_archive(archives, capsys):
    code, out, err = run_cli(capsys, "verify", *map(str, archives), "--json")
    lines = out.splitlines()
    reports = [json.loads(line) for line in lines]
    assert code == 1 and len(lines) == 3
    assert [r["archive"] for r in reports] == [str(a) for a in archives]
    assert [r["ok"] for r in reports] == [True, False, True]
    assert reports[0] == {"archive": str(archives[0])} | verify_archive(archives[0]).to_json()
    failed = reports[1]
    assert (failed["address"], failed["content_digest"], failed["entries"]) == (None, None, None)
    assert failed["error"] == {
        "kind": "corrupt",
        "path": "b/instruction.md",
        "message": "b/instruction.md: header checksum mismatch",
    }
    assert err == f"casstore: {archives[1]}: b/instruction.md: header checksum mismatch\n"


def test_one_and_many_archives_give_jq_the_same_objects(archives, capsys):
    _, one, _ = run_cli(capsys, "verify", str(archives[0]), "--json")
    _, many, _ = run_cli(capsys, "verify", str(archives[0]), str(archives[2]), "--json")
    single, pair = _values(one), _values(many)
    assert len(single) == 1 and len(pair) == 2
    assert pair[0] == {"archive": str(archives[0])} | single[0]


def test_a_missing_archive_is_bad_usage_and_the_others_are_still_verified(archives, capsys):
    missing = archives[0].parent / "missing.tgz"
    code, out, err = run_cli(capsys, "verify", str(missing), *map(str, archives))
    assert code == 2
    assert out.count("\n") == 2 and out.startswith("ok ")
    assert err.splitlines() == [
        f"casstore: {missing}: cannot open archive: No such file or directory",
        err.splitlines()[1],
    ]
    assert err.splitlines()[1].startswith(f"casstore: {archives[1]}: ")


def test_a_read_error_is_a_failed_check_naming_the_archive(archives, capsys):
    """``/proc/self/mem`` opens, and its first read fails (EIO): an OSError no check caught."""
    code, out, err = run_cli(capsys, "verify", "/proc/self/mem", str(archives[0]), "--json")
    first, second = (json.loads(line) for line in out.splitlines())
    assert code == 1
    assert first["error"] == {
        "kind": "check",
        "path": "/proc/self/mem",
        "message": "/proc/self/mem: Input/output error",
    }
    assert second["ok"] is True
    assert err == "casstore: /proc/self/mem: Input/output error\n"


def test_a_name_that_is_no_text_prints_escaped(archives, capsys):
    odd = archives[0].parent / os.fsdecode(b"odd-\xff.tar.gz")
    archives[0].rename(odd)
    code, out, err = run_cli(capsys, "verify", str(odd), str(archives[2]), "--json")
    reports = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and err == ""
    assert reports[0]["archive"] == str(odd.parent / "odd-\\udcff.tar.gz")
    code, out, _ = run_cli(capsys, "verify", str(odd), str(archives[1]))
    assert code == 1
    assert out.endswith("odd-\\udcff.tar.gz\n")


def test_an_error_about_an_entry_names_the_archive_first(archives, capsys):
    argv = ["verify", str(archives[0]), str(archives[2]), "--limit", "entries=2"]
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"casstore: {archives[0]}: a/task.toml: limit max_entries exceeded: 3 > 2",
        f"casstore: {archives[2]}: c/task.toml: limit max_entries exceeded: 3 > 2",
    ]


def test_expect_with_several_archives_is_bad_usage_before_any_work(archives, capsys):
    code, out, err = run_cli(capsys, "verify", str(archives[0]), str(archives[2]), "--expect", ZERO)
    assert (code, out) == (2, "")
    assert err == "casstore: --expect: one address checks one FILE, and 2 were given\n"


# pack DIR... -o OUTDIR


def test_pack_many_into_a_new_folder_named_by_compression(tasks, tmp_path, capsys):
    folder = tmp_path / "out"
    code, out, err = run_cli(capsys, "pack", *map(str, tasks), "-o", str(folder), "-c", "zstd")
    assert (code, err) == (0, "")
    assert sorted(p.name for p in folder.iterdir()) == ["a.tar.zst", "b.tar.zst", "c.tar.zst"]
    lines = []
    for task in tasks:
        archive = folder / f"{task.name}.tar.zst"
        result = verify_archive(archive)
        assert result.address == pack_tree(task, None, "zstd").address
        size = archive.stat().st_size
        lines.append(
            f"{result.address}  content {result.content_digest}  entries 5  "
            f"payload {result.payload_bytes} B  archive {size} B  {archive}"
        )
    assert out.splitlines() == lines


@pytest.mark.parametrize(("compression", "suffix"), [("gzip", ".tar.gz"), ("none", ".tar")])
def test_pack_many_json_lines(compression, suffix, tasks, tmp_path, capsys):
    folder = tmp_path / "out"
    argv = ["pack", *map(str, tasks[:2]), "-o", str(folder), "-c", compression, "--json"]
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0
    reports = [json.loads(line) for line in out.splitlines()]
    assert (
        reports
        == [
            {"source": str(task), "archive": str(folder / f"{task.name}{suffix}"), "ok": True}
            | pack_tree(task, None, compression).to_json()  # type: ignore[arg-type]
            for task in tasks[:2]
        ]
    )


def test_a_bad_task_fails_alone_and_leaves_no_file(tasks, tmp_path, capsys):
    (tasks[1] / "instruction.md").unlink()
    folder = tmp_path / "out"
    code, out, err = run_cli(capsys, "pack", *map(str, tasks), "-o", str(folder), "--json")
    reports = [json.loads(line) for line in out.splitlines()]
    assert code == 1
    assert [r["ok"] for r in reports] == [True, False, True]
    assert reports[1] == {
        "source": str(tasks[1]),
        "archive": str(folder / "b.tar.gz"),
        "ok": False,
        "error": reports[1]["error"],
    }
    assert reports[1]["error"]["kind"] == "task_format"
    assert err.splitlines() == [f"casstore: {tasks[1]}: {reports[1]['error']['message']}"]
    assert sorted(p.name for p in folder.iterdir()) == ["a.tar.gz", "c.tar.gz"]


def test_a_missing_task_is_bad_usage_and_the_others_are_still_packed(tasks, tmp_path, capsys):
    folder, missing = tmp_path / "out", tmp_path / "src" / "nope"
    code, out, err = run_cli(capsys, "pack", str(tasks[0]), str(missing), "-o", str(folder))
    assert code == 2
    assert out.count("\n") == 1
    assert err.startswith(f"casstore: {missing}: cannot read task directory")
    assert [p.name for p in folder.iterdir()] == ["a.tar.gz"]


def test_two_tasks_with_one_name_are_bad_usage_before_any_work(tasks, tmp_path, capsys):
    other = make_task(tmp_path / "elsewhere", "a")
    folder = tmp_path / "out"
    code, out, err = run_cli(
        capsys, "pack", str(tasks[0]), str(tasks[1]), str(other), "-o", str(folder)
    )
    assert (code, out) == (2, "")
    assert err == (
        f"casstore: {other}: its archive a.tar.gz would overwrite that of {tasks[0]}; "
        "pack them apart\n"
    )
    assert not folder.exists()


def test_a_path_without_a_name_is_bad_usage_before_any_work(tasks, tmp_path, capsys):
    folder = tmp_path / "out"
    code, out, err = run_cli(capsys, "pack", str(tasks[0]), "/", "-o", str(folder))
    assert (code, out) == (2, "")
    assert err == "casstore: /: has no name to give its archive; pack it with -o FILE\n"
    assert not folder.exists()


def test_the_output_folder_needs_its_parent(tasks, tmp_path, capsys):
    folder = tmp_path / "no" / "out"
    code, out, err = run_cli(capsys, "pack", str(tasks[0]), str(tasks[1]), "-o", str(folder))
    assert (code, out) == (2, "")
    assert err == f"casstore: {folder}: the output folder's parent does not exist\n"
    assert not (tmp_path / "no").exists()


def test_an_output_folder_inside_a_task_is_bad_usage_and_not_made(tasks, tmp_path, capsys):
    folder = tasks[1] / "out"
    code, out, err = run_cli(capsys, "pack", *map(str, tasks), "-o", str(folder))
    assert (code, out) == (2, "")
    assert err == f"casstore: {folder}: the output folder is inside the task {tasks[1]}\n"
    assert not folder.exists()


def test_an_output_folder_that_is_a_file_is_bad_usage(tasks, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.write_text("x")
    code, _, err = run_cli(capsys, "pack", str(tasks[0]), str(tasks[1]), "-o", str(folder))
    assert code == 2
    assert err == f"casstore: {folder}: the output folder exists and is not a directory\n"
    assert folder.read_text() == "x"


def test_one_task_into_an_existing_folder_goes_inside_it(tasks, tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = run_cli(capsys, "pack", str(tasks[0]), "-o", str(folder), "--json")
    result = verify_archive(folder / "a.tar.gz")
    assert (code, err) == (0, "")
    assert (
        json.loads(out)
        == {
            "source": str(tasks[0]),
            "archive": str(folder / "a.tar.gz"),
            "ok": True,
        }
        | pack_tree(tasks[0], None).to_json()
    )
    assert json.loads(out)["address"] == str(result.address)
    assert [p.name for p in folder.iterdir()] == ["a.tar.gz"]


# The Python API: the same batch, one Outcome per input


def test_api_verify_each_yields_an_outcome_per_archive_in_order(archives) -> None:
    outcomes = list(casstore.verify_each([str(a) for a in archives]))
    assert [o.archive for o in outcomes] == archives
    assert [o.ok for o in outcomes] == [True, False, True]
    assert [o.exit_code for o in outcomes] == [0, 1, 0]
    assert outcomes[0].result == verify_archive(archives[0])
    assert outcomes[1].result is None and outcomes[1].error is not None
    assert outcomes[1].error.kind == "corrupt"
    assert outcomes[1].message() == f"{archives[1]}: b/instruction.md: header checksum mismatch"
    (alone,) = casstore.verify_each(archives[0])  # a single path is a one-item list
    assert alone.result == outcomes[0].result


def test_api_pack_into_packs_each_task_into_the_folder(tasks, tmp_path) -> None:
    folder = tmp_path / "out"
    outcomes = casstore.pack_into(tasks, folder, "none")
    assert folder.is_dir()  # made before any packing
    assert list(folder.iterdir()) == []
    done = list(outcomes)
    assert [o.archive for o in done] == [folder / f"{t.name}.tar" for t in tasks]
    assert [o.result for o in done] == [pack_tree(t, None, "none") for t in tasks]


def test_api_batch_arguments_are_checked_before_any_work(tasks, tmp_path) -> None:
    cases = [
        (
            lambda: casstore.verify_each([1]),
            "archives: expected items that are a path (str or Path), not int",
        ),
        (
            lambda: casstore.verify_each(None),
            "archives: expected a path (str or Path) or a sequence of them, not NoneType",
        ),
        (
            lambda: casstore.pack_into(tasks, 3),
            "out_dir: expected a path (str or Path), not int",
        ),
        (
            lambda: casstore.pack_into(tasks, tmp_path / "o", "lzma"),
            "compression: 'lzma' is not gzip, zstd or none",
        ),
        (
            lambda: casstore.pack_into([tasks[0], tasks[0]], tmp_path / "o"),
            f"{tasks[0]}: its archive a.tar.gz would overwrite that of {tasks[0]}; pack them apart",
        ),
    ]
    for call, message in cases:
        with pytest.raises(UsageError) as raised:
            call()
        assert str(raised.value) == message
    assert not (tmp_path / "o").exists()
