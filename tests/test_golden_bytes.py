"""Archives, store bytes and JSON stay byte-identical across refactors.

The digests below were recorded at commit 8e2c795, before the code was re-layered (issue 16):
every fixture task packed with each compression; the tb2-haiku job imported into a fresh store
and the fixture tasks published and pinned in a taskset, each stored value hashed as LMDB holds
it; ``casstore import --json`` and ``rescore --json`` of the job. Only what depends on the
clock or on where the checkout lies is left out (a job record's ``imported_at`` and ``path``,
a revision's ``created``, a name's history times). A change of any byte of an archive, a trial
pack, an evidence pack, a zstd dictionary, a reward table, a record or a report fails here.

Schema 4 (issue 17) changed two of them on purpose: each trial pack now starts with 0xC1 and
the CRC-32 of the schema-3 array that follows it (unchanged), and the job record says so
(``pack_checksums``). The schema-3 digests are kept in ``tests/test_pack_checksums.py``, which
checks that a store rewritten as schema 3 holds exactly those bytes.

Issue 18 (item 3) changed the two JSON outputs on purpose, nothing else: ``import --json``
printed overlapping flag counts (``"invalid": 0, "errored": 21, "no_verifier": 1``) under the
words ``rescore`` uses for exclusive statuses (``errored 1``, ``no_verifier 0``); those three
keys became ``counts``, rescore's breakdown of the job, and every ``counts`` object of
``rescore --json`` (the run's, each group's, each task's) gained ``harbor_errors``, Harbor's
``n_errors`` (21 here). The store bytes and archives are unchanged.

Schema 5 (issue 14, item 3) keeps each trial's ATIF trajectory as evidence: a frame of its
chunk's evidence pack after the result.json frames, and a ``trace`` item at the end of the
trial's stored record. A trial without a trajectory is stored with the bytes schema 4 wrote,
so the tb2-haiku digests above (no trajectory in that job) did not move; the new values,
:data:`TRACE_STORE`, are those of the ``full-trials`` job, one of whose three trials has a
trajectory: its evidence pack holds four frames and that trial's record ends with the
reference of the fourth.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgpack
import pytest

from casstore.archive.pack import pack_tree
from casstore.store import Store
from casstore.trials import Jobs
from cli.main import run
from tests.conftest import FIXTURES, real_task_dirs

pytestmark = pytest.mark.realdata

JOB = FIXTURES / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _archives() -> dict[str, str]:
    """``{"<suite>/<task> <compression>": address}`` of every fixture task."""
    found = {}
    for task in real_task_dirs():
        for compression in ("gzip", "zstd", "none"):
            result = pack_tree(task, None, compression)
            found[f"{task.parent.name}/{task.name} {compression}"] = str(result.address)
    return found


def _values(store: Store, db: str) -> dict[str, str]:
    """``{key: sha256 of the stored bytes}`` of one database."""
    return store.index.read(
        lambda txn: {key.decode(): _sha(bytes(raw)) for key, raw in txn.raw_items(db)}
    )


def _records(store: Store, db: str, *unstable: str) -> dict[str, str]:
    """``{key: sha256}`` of the stored maps of ``db`` without their ``unstable`` fields (the
    clock's, the checkout's), re-encoded in their stored order."""
    found = {}
    for key, raw in store.index.read(lambda txn: list(txn.raw_items(db))):
        record = msgpack.unpackb(raw)
        for name in unstable:
            record.pop(name, None)
        found[key.decode()] = _sha(msgpack.packb(record, use_bin_type=True))
    return found


def _names(store: Store, db: str) -> dict[str, list[str]]:
    """``{name: [revision digest, ...]}`` of a names database (history times left out)."""
    return {
        key.decode(): [entry["digest"] for entry in msgpack.unpackb(raw)["history"]]
        for key, raw in store.index.read(lambda txn: list(txn.raw_items(db)))
    }


def test_json_is_byte_identical(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``casstore import --json`` and ``casstore rescore --json`` of the job print the bytes
    they printed before (the import's ``harbor_schema_drift`` lists fields, no times)."""
    printed = {}
    for argv in (["import", str(JOB)], ["rescore", str(JOB)], ["rescore", JOB.name]):
        capsys.readouterr()
        assert run(["--store", str(tmp_path / "store"), *argv, "--json"]) == 0
        printed[argv[0] + " " + ("dir" if "/" in argv[1] else "name")] = capsys.readouterr().out
    assert printed["rescore dir"] == printed["rescore name"]
    assert {key: _sha(text.encode()) for key, text in printed.items()} == JSON


def test_verifier_files_are_byte_identical(tmp_path: Path) -> None:
    """``casstore verifier init`` copies the runner and helpers into a task: their bytes are
    part of the task's address, so they must not change with a refactor."""
    from casstore.verifier.init import vendor

    (tmp_path / "tests").mkdir()
    written = vendor(tmp_path / "tests" / ".ng")
    assert {str(p.relative_to(tmp_path)): _sha(p.read_bytes()) for p in written} == VERIFIER


def test_archives_are_byte_identical() -> None:
    assert _sha(repr(sorted(_archives().items())).encode()) == ARCHIVES


def test_store_bytes_are_byte_identical(tmp_path: Path) -> None:
    from casstore.archive.discover import discover

    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([JOB])
        assert (report.trials, report.imported) == (89, 89)
        for task in real_task_dirs():
            for found in discover(task):
                store.publish(found, f"{task.parent.name}.{task.name}")
        names = [f"{task.parent.name}.{task.name}" for task in real_task_dirs()]
        store.tasksets.create("fixtures", names)
        found = {db: _values(store, db) for db in STORED_DATABASES}
        found["jobs"] = _records(store, "jobs", "imported_at", "path")
        found["revisions"] = _records(store, "revisions", "created")
        found["taskset_revisions"] = _records(store, "taskset_revisions", "created")
        found["tasks"] = _names(store, "tasks")
        found["tasksets"] = _names(store, "tasksets")
    digests = {db: _sha(repr(sorted(values.items())).encode()) for db, values in found.items()}
    assert digests == STORE
    assert len(found["trial_packs"]) == 1
    assert len(found["revisions"]) == len(names) == 22


def test_trace_store_bytes_are_byte_identical(tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        (report,) = Jobs(store).import_jobs([FIXTURES / "jobs" / "full-trials"])
        assert (report.trials, report.imported) == (3, 3)
        found = {db: _values(store, db) for db in ("trial_packs", "evidence", "zstd_dicts")}
        found["jobs"] = _records(store, "jobs", "imported_at", "path")
        traces = [r.trace for r in Jobs(store).trial_records(report.job)]
    digests = {db: _sha(repr(sorted(values.items())).encode()) for db, values in found.items()}
    assert digests == TRACE_STORE
    (pack,) = found["evidence"]
    assert traces == [None, f"{pack}#3", None]


TRACE_STORE = {
    "evidence": "3a5bace6ea68089ddcc7e8755849e6c707a52d939d88df118b4e0c87ec6d1db9",
    "jobs": "63b84cae7cc07e80fad965dadb8b053eaafac62a0c7e62511760563b4019ccbf",
    "trial_packs": "dbfa78e983278c95ec96ff9b084e6286c33a210e19a5a4164ba84860690d5b52",
    "zstd_dicts": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
}

STORED_DATABASES = (
    "trial_packs",
    "trials",
    "reward_tables",
    "evidence",
    "zstd_dicts",
)

VERIFIER = {
    "tests/.ng/run_verifier.py": "ef0efb0e8d78ea71c4bc96d04b6c3403b77378f587180a15b2b26a616aa4a855",
    "tests/.ng/helpers/casstore_verify/__init__.py": (
        "436ae9dfd6f60f713ed4a9fed3cddb3a8524ed4a3b515d11f0bcac5f1b7b413a"
    ),
}
ARCHIVES = "196f22fbcded33a8b8fb62511a65d89835097d137879826fa6786b78a63f3b7d"
JSON = {
    "import dir": "954b79aba32dd470b739d32d8c7cafbe7f3b1381f60197c83d4a02814efc9d35",
    "rescore dir": "4f50789e2f8e53265dc699cc640fbdb55106ac07e118f9576950aaeb6e8d8231",
    "rescore name": "4f50789e2f8e53265dc699cc640fbdb55106ac07e118f9576950aaeb6e8d8231",
}
STORE = {
    "trial_packs": "4ec5c6a69541e8aaf73eb3c1ba8d36e201fbab744629d2f040dc91d27360f3f0",
    "trials": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
    "reward_tables": "f144fe9781420b5aa324d8ca470b999b5b74c0586c99ed5ac62e42c69ab4fe12",
    "evidence": "48634212dc08273cb17d405dd5836066deeb40dd121f15b6d7f5191ac0910092",
    "zstd_dicts": "23ae0a661c9517304b3e1fdd1f8376a31ec7d4fb9711b1b03d8eb7bd09dd3fe5",
    "jobs": "333b4b017027b5cfeda3a745f1faf3ce126d92a5123c799e41ae7632f401b151",
    "revisions": "fee5961c6ed32947663f18ea4398b03300a2aae9dced64f9b860a32fa68f17d5",
    "taskset_revisions": "ed1527785ec287b77a33ab3b3b67c4b9dd4cd682b415adb5b1e354c17da7df53",
    "tasks": "ef5b13488c182556ab9168fc7b9340476dd5f82f805e82f3eef41a25ed76a9e7",
    "tasksets": "6aeec7007ef3b5691f8ac7bdbde17d54ac37a5706606774092846fd9d17f4513",
}
