"""Digest prefixes (issue 18, item 6): a unique prefix of 8+ hex digits wherever a stored
digest is looked up, an ambiguous one listing its candidates, a shorter one refused saying
the rule; short digests in human output, whole ones with ``--long`` and ``--json``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from casstore.digest import Digest, DigestPrefix, short
from casstore.errors import AmbiguousPrefixError, UnknownReferenceError, UsageError
from casstore.store import Store
from tests.conftest import FIXTURES
from tests.helpers import store_cli
from tests.test_discovery import write_task

HEX = "0d95ce9b87ae1fba789f30d6be6f5561d8198860493c3e6c9df1ea2fb36d1646"
RULE = "a digest prefix is at least 8 lowercase hex digits, after an optional sha256: or blake3:"
TB2_JOB = FIXTURES / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"
TB2_ID = "1ea8f217-0d00-4ce0-859b-0fc92e7325d7"


def test_prefix_forms() -> None:
    assert DigestPrefix.parse("0d95ce9b", "sha256") == DigestPrefix("sha256", "0d95ce9b")
    assert DigestPrefix.parse("sha256:0d95ce9b87") == DigestPrefix("sha256", "0d95ce9b87")
    assert DigestPrefix.parse("0d95ce9b").keys() == ["blake3:0d95ce9b", "sha256:0d95ce9b"]
    assert DigestPrefix.parse(f"sha256:{HEX}").complete
    for text, rule in [
        ("0d95ce9", f"too short ({RULE})"),
        ("sha256:0d95ce9", f"too short ({RULE})"),
        ("0D95CE9B", f"not a digest or digest prefix ({RULE})"),
        ("sha256:", f"not a digest or digest prefix ({RULE})"),
        ("md5:0d95ce9b", f"not a digest or digest prefix ({RULE})"),
        ("0" * 65, f"not a digest or digest prefix ({RULE})"),
        ("blake3:0d95ce9b", "not a sha256: digest"),
    ]:
        with pytest.raises(UsageError) as caught:
            DigestPrefix.parse(text, "sha256")
        assert str(caught.value) == f"{text}: {rule}"


def test_short_form() -> None:
    assert short(f"sha256:{HEX}") == "sha256:0d95ce9b87ae"
    assert short(Digest("blake3", HEX)) == "blake3:0d95ce9b87ae"
    line = f"new    default/a#sha256:{HEX}  sha256:{HEX}"
    assert short(line) == "new    default/a#sha256:0d95ce9b87ae  sha256:0d95ce9b87ae"
    ref = f"default/harbor-tasks#simple-task/{HEX}/task_archive"
    assert short(ref) == "default/harbor-tasks#simple-task/0d95ce9b87ae…/task_archive"
    # not a whole digest: unchanged (a UUID job id, a prefix, 65 hex digits)
    for text in [TB2_ID, "sha256:0d95ce9b", f"sha256:{HEX}0", "plain text"]:
        assert short(text) == text


def _two_revisions(tmp_path: Path, capsys) -> tuple[Path, list[str]]:
    """A store where task ``a`` has two revisions (an edit between), and taskset ``set``
    pins the first: ``(store, [first revision digest, second])``."""
    source, store = tmp_path / "src", tmp_path / "store"
    task = write_task(source, "a")
    code, first, _ = store_cli(capsys, store, "publish", str(task), "--json")
    assert code == 0
    assert store_cli(capsys, store, "taskset", "create", "set", "a")[0] == 0
    (task / "instruction.md").write_text("Do the other thing.\n")
    code, second, _ = store_cli(capsys, store, "publish", str(task), "--json")
    assert code == 0
    return store, [first[0]["revision"], second[0]["revision"]]


def test_unique_prefix_in_every_lookup(tmp_path: Path, capsys) -> None:
    store, (old, new) = _two_revisions(tmp_path, capsys)
    for given in (old[:15], old[7:15], old[:30]):  # sha256: and 8 hex, bare 8 hex, longer
        code, shown, _ = store_cli(capsys, store, "show", f"a#{given}", "--json")
        assert code == 0 and shown["revision"]["digest"] == old
    code, shown, _ = store_cli(capsys, store, "show", old[:15], "--json")  # show DIGEST
    assert code == 0 and shown == {
        "kind": "task",
        "names": ["default/a"],
        "revision": shown["revision"],
    }
    assert shown["revision"]["digest"] == old
    code, made, _ = store_cli(
        capsys, store, "taskset", "replace", "pin", f"a#{old[7:15]}", "--json"
    )
    assert code == 0 and made["tasks"] == [{"task": "default/a", "revision": old}]
    set_digest = store_cli(capsys, store, "ls", "tasksets", "--json")[1][1]["revision"]
    code, shown, _ = store_cli(capsys, store, "show", set_digest[:15], "--json")
    assert (
        code == 0
        and shown["kind"] == "taskset"
        and shown["names"] == ["default/pin", "default/set"]
    )
    code, _, _ = store_cli(
        capsys, store, "checkout", f"a#{old[:15]}", str(tmp_path / "out"), "--json"
    )
    assert code == 0 and (tmp_path / "out" / "a" / "instruction.md").read_text() == (
        "Do the thing.\n"
    )
    with Store(store, create=False) as opened:
        assert opened.revision(new[:15]).digest == new
        assert opened.revision(new[7:20]).digest == new
        assert opened.tasks.get(f"a#{new[7:15]}")[1].digest == new


def test_short_and_unknown_prefixes_refused(tmp_path: Path, capsys) -> None:
    store, (old, _) = _two_revisions(tmp_path, capsys)
    for argv, message in [
        (["show", f"a#{old[7:14]}"], f"casstore: {old[7:14]}: too short ({RULE})\n"),
        (["show", old[:14]], f"casstore: {old[:14]}: too short ({RULE})\n"),
        (["rescore", "sha256:1ea8f21"], f"casstore: sha256:1ea8f21: too short ({RULE})\n"),
        (
            ["show", "a#sha256:00000000"],
            "casstore: default/a#sha256:00000000: no task revision of that digest\n",
        ),
        (
            ["show", "sha256:00000000"],
            "casstore: sha256:00000000: no taskset or task revision of that digest\n",
        ),
    ]:
        code, out, err = store_cli(capsys, store, *argv)
        assert (code, out, err) == (2, "", message), argv


def _plant(store: Path, db: str, keys: list[str], value: object) -> None:
    """Write ``value`` at each of ``keys`` of ``db`` (crafted index entries: the lookups
    read keys only until they found one)."""
    with Store(store, create=False) as opened:
        opened.index.write(lambda txn: [txn.put(db, key, value) for key in keys])


def test_ambiguous_prefix_lists_candidates(tmp_path: Path, capsys) -> None:
    store, _ = _two_revisions(tmp_path, capsys)
    planted = [f"sha256:00000000{n:02x}{'0' * 54}" for n in range(12)]
    _plant(store, "revisions", planted, {"planted": True})
    code, out, err = store_cli(capsys, store, "show", "sha256:00000000")
    listed = ", ".join(f"sha256:00000000{n:02x}00" for n in range(10))
    assert (code, out) == (2, "")
    assert err == (
        f"casstore: sha256:00000000: ambiguous: 12 revisions start with it ({listed} and 2 "
        "more); give more digits\n"
    )
    with Store(store, create=False) as opened, pytest.raises(AmbiguousPrefixError) as caught:
        opened.revision("00000000")
    assert caught.value.count == 12 and len(caught.value.candidates) == 10
    assert caught.value.exit_code == 2 and caught.value.kind == "ambiguous_prefix"
    # a name whose history holds two of them: ambiguous within that name's revisions
    history = [{"digest": key, "created": "2026-12-01T00:00:00+00:00"} for key in planted[:2]]
    _plant(store, "tasks", ["default/p"], {"workspace": "default", "name": "p", "history": history})
    code, _, err = store_cli(capsys, store, "show", "p#00000000")
    assert code == 2 and err == (
        "casstore: sha256:00000000: ambiguous: 2 revisions start with it "
        "(sha256:000000000000, sha256:000000000100); give more digits\n"
    )
    # unique within the name, though the store holds 12 such digests
    assert store_cli(capsys, store, "show", "p#0000000001", "--json")[0] == 1  # planted junk
    with Store(store, create=False) as opened, pytest.raises(UnknownReferenceError):
        opened.tasks.get("p#00000000ff")


@pytest.mark.realdata
def test_job_id_prefix(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    assert store_cli(capsys, store, "import", str(TB2_JOB), "--name", "tb2")[0] == 0
    out = tmp_path / "t.jsonl"
    for given in ("1ea8f217", "1ea8f217-0d00"):
        code, done, _ = store_cli(capsys, store, "export", given, "-o", str(out), "--json")
        assert code == 0 and done["job"] == TB2_ID and done["trials"] == 89
        code, report, _ = store_cli(capsys, store, "rescore", given, "--json")
        assert code == 0 and report["resolve_rate"] == 0.4157303370786517
    code, _, err = store_cli(capsys, store, "rescore", "1ea8f21")
    assert (code, err) == (2, "casstore: 1ea8f21: no imported job of that id or name\n")
    _plant(store, "jobs", [f"1ea8f217-{n}" for n in "ab"], {"name": "planted"})
    code, _, err = store_cli(capsys, store, "rescore", "1ea8f217")
    assert code == 2 and err.startswith("casstore: 1ea8f217: ambiguous: 3 imported jobs start")
    assert store_cli(capsys, store, "rescore", "1ea8f217-0d", "--json")[0] == 0


def test_expect_needs_the_whole_address(tmp_path: Path, capsys) -> None:
    task = write_task(tmp_path, "a")
    archive = tmp_path / "a.tar.gz"
    code, packed, _ = store_cli(
        capsys, tmp_path / "unused", "pack", str(task), "-o", str(archive), "--json"
    )
    assert code == 0
    address = packed["address"]
    for command in (["verify", str(archive)], ["extract", str(archive), str(tmp_path / "x")]):
        code, out, err = store_cli(capsys, tmp_path / "unused", *command, "--expect", address[:15])
        assert (code, out) == (2, "")
        assert err == (
            f"casstore: '{address[:15]}' is a digest prefix; the full digest is needed here: "
            "sha256:<64 lowercase hex digits> or blake3:<64 lowercase hex digits>\n"
        )
    assert (
        store_cli(capsys, tmp_path / "unused", "verify", str(archive), "--expect", address)[0] == 0
    )


@pytest.mark.realdata
def test_store_text_lines_fit_100_columns(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    code, out, _ = store_cli(capsys, store, "publish", str(FIXTURES / "tasks"), "--recursive")
    lines = out.splitlines()
    tasks = store_cli(capsys, store, "ls", "tasks", "--json")[1]
    names = [row["ref"] for row in tasks]
    sets = [row["ref"] for row in store_cli(capsys, store, "ls", "tasksets", "--json")[1]]
    assert code == 0 and len(names) == 22 and len(sets) == 3
    made = store_cli(capsys, store, "taskset", "create", "all", *names)
    lines += made[1].splitlines()
    for argv in (["ls", "tasks"], ["ls", "tasksets"], ["ls", "tasks", "--all"]):
        lines += store_cli(capsys, store, *argv)[1].splitlines()
    for ref in names + sets + ["all", tasks[0]["revision"]]:
        lines += store_cli(capsys, store, "show", ref)[1].splitlines()
    assert len(lines) > 400
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    assert not any(re.search("[0-9a-f]{13}", line) for line in lines)  # 12 hex digits at most
    whole = store_cli(capsys, store, "ls", "tasks", "--long")[1].splitlines()
    assert [line.split("#")[1].split()[0] for line in whole] == [row["revision"] for row in tasks]
    shown = store_cli(capsys, store, "show", names[0], "--long")[1]
    assert f"address: {tasks[0]['address']}\n" in shown


def test_a_real_collision_of_eight_digits(tmp_path: Path, capsys) -> None:
    """Two real taskset revisions (one pin each, in workspaces found by a birthday search)
    whose digests share their first 8 hex digits: ``show`` of those 8 is ambiguous, one
    more digit tells them apart."""
    from casstore.store.records import TasksetRevision

    store = tmp_path / "store"
    task = write_task(tmp_path / "src", "a")
    revision = store_cli(capsys, store, "publish", str(task), "--json")[1][0]["revision"]
    pins = [{"task": "default/a", "revision": revision}]
    seen: dict[str, str] = {}
    for number in range(2_000_000):
        workspace = f"w{number}"
        digest = TasksetRevision(workspace=workspace, tasks=pins).sealed().digest
        if digest[:15] in seen:
            break
        seen[digest[:15]] = workspace
    else:
        raise AssertionError("no collision")  # 2**32 digits: ~77,000 tries expected
    made = []
    for name in (seen[digest[:15]], workspace):
        code, result, _ = store_cli(
            capsys, store, "taskset", "create", "t", "default/a", "-w", name, "--json"
        )
        assert code == 0
        made.append(result["revision"])
    assert made[0] != made[1] and made[0][:15] == made[1][:15] == digest[:15]
    code, _, err = store_cli(capsys, store, "show", digest[:15])
    listed = ", ".join(short(key) for key in sorted(made))
    assert code == 2 and err == (
        f"casstore: {digest[:15]}: ambiguous: 2 revisions start with it ({listed}); "
        "give more digits\n"
    )
    common = next(n for n in range(15, 71) if made[0][n] != made[1][n])
    for full in made:
        code, shown, _ = store_cli(capsys, store, "show", full[: common + 1], "--json")
        assert code == 0 and shown["revision"]["digest"] == full
