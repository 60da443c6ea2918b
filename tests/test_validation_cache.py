"""The validation cache of task.toml (casstore.archive.config_cache): Harbor stays the judge,
its verdict is reused only when it is exactly the one for these bytes and this Harbor."""

from __future__ import annotations

import importlib.metadata
import json
import multiprocessing
import os
from pathlib import Path

import pytest

from casstore.archive import config_cache, layout
from casstore.archive.config_cache import TaskFacts
from casstore.archive.layout import facts_of, parse_task_config, task_facts
from casstore.archive.pack import pack_tree
from casstore.errors import TaskFormatError
from tests.conftest import real_task_dirs
from tests.helpers import TASK_TOML, make_task, run_fresh

REFUSED = b'[verifier]\ntimeout_sec = "soon"\n'  # Harbor wants a number
MULTI_STEP = b'[task]\nname = "org/multi"\n\n[[steps]]\nname = "one"\n\n[[steps]]\nname = "two"\n'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder for this test (and this process's memory of verdicts cleared)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(folder))
    monkeypatch.setattr(layout, "_ACCEPTED", {})
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted((folder / "task-config").glob("*")) if (folder / "task-config").is_dir() else []


def test_an_accepted_task_toml_is_filed_and_read_back(cache: Path) -> None:
    facts = task_facts("t/task.toml", MULTI_STEP)
    assert facts == TaskFacts("org/multi", ("one", "two"))
    (entry,) = entries(cache)
    assert entry == config_cache.entry_path(MULTI_STEP)
    assert config_cache.lookup(MULTI_STEP) == facts
    document = json.loads(entry.read_bytes())
    assert document["entry"]["task_toml"].startswith("sha256:")
    assert document["entry"]["versions"] == config_cache.judge_versions()


def test_a_task_toml_harbor_refuses_is_refused_with_the_cache_warm(
    cache: Path, tmp_path: Path
) -> None:
    good = make_task(tmp_path, "good")
    pack_tree(good, tmp_path / "good.tgz")  # the cache holds an acceptance now
    assert len(entries(cache)) == 1
    bad = make_task(tmp_path, "bad")
    (bad / "task.toml").write_bytes(REFUSED)
    for _ in range(2):  # a refusal is never filed: refused again, by Harbor again
        with pytest.raises(TaskFormatError, match=r"task\.toml is not valid for Harbor"):
            pack_tree(bad, tmp_path / "bad.tgz")
        assert config_cache.lookup(REFUSED) is None
        assert len(entries(cache)) == 1
    for _ in range(2):  # and in new processes, which have only the cache to remember
        code, out, err, _ = run_fresh(
            tmp_path, "pack", str(bad), "-o", str(tmp_path / "b"), cache=cache
        )
        assert (code, out) == (1, "")
        assert "bad/task.toml: task.toml is not valid for Harbor" in err
    assert not (tmp_path / "b").exists()


def test_a_cached_entry_spares_the_harbor_import(cache: Path, tmp_path: Path) -> None:
    task = make_task(tmp_path)
    archive = tmp_path / "t.tgz"
    code, _, _, cold = run_fresh(tmp_path, "pack", str(task), "-o", str(archive), cache=cache)
    assert code == 0 and "harbor.models.task.config" in cold
    for argv in (["pack", str(task), "-o", str(archive)], ["verify", str(archive)]):
        code, _, err, warm = run_fresh(tmp_path, *argv, cache=cache)
        assert (code, err) == (0, ""), err
        assert not {m for m in warm if m == "harbor" or m.startswith(("harbor.", "pydantic"))}
    code, _, _, disabled = run_fresh(tmp_path, "verify", str(archive), cache="")  # cache disabled
    assert code == 0 and "harbor.models.task.config" in disabled


def _damaged(entry: Path, how: str, other: Path) -> None:
    data = entry.read_bytes()
    document = json.loads(data)
    if how == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        entry.write_bytes(os.urandom(200))
    elif how == "steps changed":  # a valid document whose checksum no longer matches
        document["entry"]["steps"] = []
        entry.write_text(json.dumps(document))
    elif how == "foreign":  # another task.toml's intact entry, filed under this key
        entry.write_bytes(other.read_bytes())
    elif how == "empty":
        entry.write_bytes(b"")
    elif how == "symlink":
        entry.unlink()
        entry.symlink_to(other)
    elif how == "fifo":
        entry.unlink()
        os.mkfifo(entry)
    elif how == "directory":
        entry.unlink()
        entry.mkdir()


@pytest.mark.parametrize(
    "how",
    ["truncated", "garbage", "steps changed", "foreign", "empty", "symlink", "fifo", "directory"],
)
def test_a_damaged_entry_is_ignored_and_rewritten(cache: Path, how: str) -> None:
    other_text = TASK_TOML.encode()
    task_facts("o/task.toml", other_text)
    task_facts("m/task.toml", MULTI_STEP)
    entry, other = config_cache.entry_path(MULTI_STEP), config_cache.entry_path(other_text)
    assert entry is not None and other is not None
    _damaged(entry, how, other)
    assert config_cache.lookup(MULTI_STEP) is None  # never trusted
    layout._ACCEPTED.clear()
    assert task_facts("m/task.toml", MULTI_STEP) == TaskFacts("org/multi", ("one", "two"))
    if how != "directory":  # a directory in the way stays; the cache is then just a miss
        assert config_cache.lookup(MULTI_STEP) == TaskFacts("org/multi", ("one", "two"))
    assert not [p for p in entries(cache) if p.name.endswith(".tmp")]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_an_entry_of_another_user_is_not_trusted(cache: Path) -> None:
    task_facts("m/task.toml", MULTI_STEP)
    entry = config_cache.entry_path(MULTI_STEP)
    assert entry is not None
    os.chown(entry, 12345, 12345)
    assert config_cache.lookup(MULTI_STEP) is None


def test_a_different_harbor_version_misses(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = config_cache.judge_versions()
    assert installed == (
        f"harbor {importlib.metadata.version('harbor')}; "
        f"pydantic {importlib.metadata.version('pydantic')}"
    )
    task_facts("m/task.toml", MULTI_STEP)
    assert config_cache.lookup(MULTI_STEP) is not None
    monkeypatch.setattr(config_cache, "_VERSIONS", "harbor 0.0.1; pydantic 2.0.0")
    assert config_cache.lookup(MULTI_STEP) is None
    other_path = config_cache.entry_path(MULTI_STEP)
    monkeypatch.setattr(config_cache, "_VERSIONS", installed)
    assert other_path != config_cache.entry_path(MULTI_STEP)
    # an entry of the other version copied under this version's name is foreign too
    monkeypatch.setattr(config_cache, "_VERSIONS", "harbor 0.0.1; pydantic 2.0.0")
    config_cache.remember(MULTI_STEP, TaskFacts("org/multi", ("one", "two")))
    monkeypatch.setattr(config_cache, "_VERSIONS", installed)
    current = config_cache.entry_path(MULTI_STEP)
    assert other_path is not None and current is not None
    current.write_bytes(other_path.read_bytes())
    assert config_cache.lookup(MULTI_STEP) is None


def test_no_harbor_dist_info_means_no_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_cache, "_VERSIONS", None)  # an editable or unusual install
    assert task_facts("m/task.toml", MULTI_STEP) == TaskFacts("org/multi", ("one", "two"))
    assert entries(cache) == []


def _writer(folder: str, rounds: int) -> None:
    os.environ["CASSTORE_CACHE_DIR"] = folder
    for _ in range(rounds):
        config_cache.remember(MULTI_STEP, TaskFacts("org/multi", ("one", "two")))


def _reader(folder: str, rounds: int, seen: multiprocessing.Queue) -> None:
    os.environ["CASSTORE_CACHE_DIR"] = folder
    answers = {repr(config_cache.lookup(MULTI_STEP)) for _ in range(rounds)}
    seen.put(sorted(answers))


def test_concurrent_writers_leave_a_valid_cache(cache: Path) -> None:
    """Writers rewriting one entry while readers read it: a reader never sees less than the
    whole entry (an entry is replaced by a rename, never written in place)."""
    config_cache.remember(MULTI_STEP, TaskFacts("org/multi", ("one", "two")))
    context = multiprocessing.get_context("fork")
    seen: multiprocessing.Queue = context.Queue()
    workers = [context.Process(target=_writer, args=(str(cache), 400)) for _ in range(4)]
    workers += [context.Process(target=_reader, args=(str(cache), 2000, seen)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    right = repr(TaskFacts("org/multi", ("one", "two")))
    for _ in range(2):
        assert seen.get(timeout=10) == [right]
    assert config_cache.lookup(MULTI_STEP) == TaskFacts("org/multi", ("one", "two"))
    assert [p.name for p in entries(cache)] == [config_cache.entry_path(MULTI_STEP).name]


def test_the_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CASSTORE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert config_cache.cache_dir() == tmp_path / "xdg" / "casstore"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # ignored, as XDG says
    assert config_cache.cache_dir() == tmp_path / "home" / ".cache" / "casstore"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert config_cache.cache_dir() == tmp_path / "home" / ".cache" / "casstore"
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(tmp_path / "mine"))
    assert config_cache.cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("CASSTORE_CACHE_DIR", "")
    assert config_cache.cache_dir() is None and config_cache.entry_path(MULTI_STEP) is None


def test_an_unusable_cache_folder_is_only_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("CASSTORE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setattr(layout, "_ACCEPTED", {})
    assert task_facts("m/task.toml", MULTI_STEP) == TaskFacts("org/multi", ("one", "two"))
    task = make_task(tmp_path)
    out = str(tmp_path / "t.tgz")
    code, _, err, _ = run_fresh(tmp_path, "pack", str(task), "-o", out, cache=blocker / "cache")
    assert (code, err) == (0, "")


@pytest.mark.realdata
@pytest.mark.parametrize("task", real_task_dirs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_cached_facts_are_harbors_for_every_real_task(cache: Path, task: Path) -> None:
    text = (task / "task.toml").read_bytes()
    expected = facts_of(parse_task_config("task.toml", text))
    assert task_facts("task.toml", text) == expected  # from Harbor, then filed
    layout._ACCEPTED.clear()
    assert config_cache.lookup(text) == expected  # read back from the file
    assert task_facts("task.toml", text) == expected
