"""Issue 18, items 1-3: no silent wrong answers.

1. a reward key no attempt holds is refused (exit 2) naming the keys the attempts hold, for
   every source (job directory, trials .jsonl, imported job) and in the Python API;
2. ``pack -o FILE`` takes the compression from the file name; a ``-c`` contradicting it is
   refused;
3. ``import`` and ``rescore`` print one breakdown of the attempts, Harbor's ``n_errors``
   (``harbor_errors``) in it.

All on the real tb2-haiku job and fixture tasks.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import casstore
from casstore.archive.pack import pack_tree
from casstore.errors import UsageError
from tests.conftest import FIXTURES
from tests.helpers import TB2_HAIKU_COUNTS
from tests.helpers import run_cli as _cli

pytestmark = pytest.mark.realdata

JOB = FIXTURES / "jobs" / "tb2-haiku" / "jobs" / "2026-05-10__01-23-57"
FULL = FIXTURES / "jobs" / "full-trials"
TASK = FIXTURES / "tasks" / "harbor-cookbook" / "simple-task"


NO_SCORE = (
    "casstore: --reward-key: no attempt holds the reward key 'score'; the attempts hold "
    "'reward': pass one of them as --reward-key (trials imported or exported with a key: "
    "import or export them again with another)\n"
)


# --- item 1: a reward key no attempt holds ---------------------------------------------------


def test_rescore_job_dir_refuses_a_key_no_attempt_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = _cli(
        capsys, "--store", str(tmp_path / "s"), "rescore", str(JOB), "--reward-key", "score"
    )
    assert (code, out, err) == (2, "", NO_SCORE)


def test_rescore_imported_job_and_trials_file_refuse_it_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = str(tmp_path / "s")
    assert (
        _cli(
            capsys, "--store", store, "import", str(JOB), "--name", "tb2", "--reward-key", "score"
        )[0]
        == 0
    )
    assert _cli(capsys, "--store", store, "rescore", "tb2") == (2, "", NO_SCORE)
    saved = tmp_path / "score.jsonl"
    assert _cli(capsys, "export", str(JOB), "-o", str(saved), "--reward-key", "score")[0] == 0
    assert _cli(capsys, "--store", store, "rescore", str(saved)) == (2, "", NO_SCORE)


def test_api_rescore_refuses_it() -> None:
    with pytest.raises(UsageError) as raised:
        casstore.rescore([JOB], reward_key="score")
    assert f"casstore: {raised.value}\n" == NO_SCORE
    assert raised.value.exit_code == 2


def test_a_key_missing_on_some_attempts_scores_zero_with_a_diagnostic(tmp_path: Path) -> None:
    """One trial of three writes ``score`` instead of ``reward``: both keys are scored, the
    attempts without the primary as 0.0 with ``primary_missing``, exit 0."""
    job = tmp_path / "job"
    shutil.copytree(FULL, job)
    result = job / "bn-fit-modify__mpWwMgj" / "result.json"
    data = json.loads(result.read_text())
    data["verifier_result"]["rewards"] = {"score": 1.0}
    result.write_text(json.dumps(data))
    by_reward = casstore.rescore([job]).to_json()
    assert by_reward["diagnostic_counts"] == {"primary_missing": 1}
    assert by_reward["outputs"]["reward"]["measured"] == 3
    by_score = casstore.rescore([job], reward_key="score").to_json()
    assert by_score["diagnostic_counts"] == {"primary_missing": 2}
    assert by_score["outputs"]["score"]["mean"] == pytest.approx(1 / 3)


def test_a_run_holding_no_reward_at_all_is_scored_not_refused(tmp_path: Path) -> None:
    """The tb2 trial without a verifier result alone: no reward key occurs, nothing to name:
    scored as before (0.0, ``verifier_result_missing``)."""
    missing = [
        p.parent
        for p in sorted(JOB.glob("*/result.json"))
        if json.loads(p.read_text()).get("verifier_result") is None
    ]
    assert len(missing) == 1
    job = tmp_path / "job"
    job.mkdir()
    shutil.copytree(missing[0], job / missing[0].name)
    report = casstore.rescore([job], reward_key="score").to_json()
    assert report["counts"]["attempts"] == 1
    assert report["diagnostic_counts"] == {"verifier_result_missing": 1}
    assert report["outputs"]["score"]["mean"] == 0.0


def test_a_run_without_attempts_is_not_refused(tmp_path: Path) -> None:
    """No attempt at all: nothing is refused by the rule (the report is empty)."""
    from casstore.trials import table_from_records
    from scoring import score

    report = score(table_from_records([], "score"), reward_key="score", harbor=False)
    assert report.counts["attempts"] == 0


# --- item 2: the compression of an output file ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "compression"),
    [
        ("t.tar.gz", "gzip"),
        ("t.tgz", "gzip"),
        ("t.tar.zst", "zstd"),
        ("t.tar", "none"),
        ("t.tzst", "zstd"),
        ("t.TAR.ZST", "zstd"),
        ("t.zst", "zstd"),
        ("t.gz", "gzip"),
        (".tar", "gzip"),  # a dotfile named .tar: no ending
        ("t.bin", "gzip"),
    ],
)
def test_pack_takes_the_compression_from_the_file_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, compression: str
) -> None:
    out = tmp_path / name
    code, printed, err = _cli(capsys, "pack", str(TASK), "-o", str(out), "--json")
    assert (code, err) == (0, "")
    assert json.loads(printed)["compression"] == compression
    expected = pack_tree(TASK, None, compression)  # type: ignore[arg-type]
    assert json.loads(printed)["address"] == str(expected.address)
    magic = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd", "none": b"simple-task/"}
    assert out.read_bytes().startswith(magic[compression])


def test_pack_refuses_a_compression_the_file_name_contradicts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "t.tar.zst"
    code, printed, err = _cli(capsys, "pack", str(TASK), "-o", str(out), "-c", "gzip")
    assert (code, printed) == (2, "")
    rule = "the name ends in .tar.zst (zstd) but -c asks for gzip: name the file .tar.gz or drop -c"
    assert err == f"casstore: {out}: {rule}\n"
    assert not out.exists()
    # the same -c as the name: accepted
    assert _cli(capsys, "pack", str(TASK), "-o", str(out), "-c", "zstd")[0] == 0


@pytest.mark.parametrize("name", ["t.tar.xz", "t.txz", "t.tar.bz2", "t.zip", "t.TAR.LZ4", "t.7z"])
@pytest.mark.parametrize("asked", [[], ["-c", "gzip"]])
def test_pack_refuses_a_name_that_says_a_compression_casstore_does_not_write(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, asked: list[str]
) -> None:
    """`-o t.tar.xz` used to write gzip bytes under an xz name, exit 0 (issue 18 item 2)."""
    out = tmp_path / name
    code, printed, err = _cli(capsys, "pack", str(TASK), "-o", str(out), *asked)
    assert (code, printed) == (2, "")
    assert err.startswith(f"casstore: {out}: the name ends in ")
    assert "casstore writes gzip (.tar.gz), zstd (.tar.zst) or none (.tar)" in err
    assert not out.exists()


def test_pack_into_a_folder_keeps_the_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / "out.tar.zst"  # a folder: its name says nothing
    folder.mkdir()
    code, _, err = _cli(capsys, "pack", str(TASK), "-o", str(folder))
    assert (code, err) == (0, "")
    assert [p.name for p in folder.iterdir()] == ["simple-task.tar.gz"]


def test_api_pack_takes_the_compression_from_the_file_name(tmp_path: Path) -> None:
    assert casstore.pack(TASK, tmp_path / "t.tar.zst").compression == "zstd"
    assert casstore.pack(TASK, tmp_path / "t.tar").compression == "none"
    assert casstore.pack(TASK, None).compression == "gzip"
    with pytest.raises(UsageError, match=r"ends in \.tgz \(gzip\) but -c asks for none"):
        casstore.pack(TASK, tmp_path / "t.tgz", "none")


# --- item 3: one breakdown for import and rescore ---------------------------------------------

BREAKDOWN = TB2_HAIKU_COUNTS
BREAKDOWN_TEXT = (
    "attempts 89   scored 68   partial 20   errored 1   no_verifier 0   invalid 0   "
    "harbor_errors 21"
)


def test_import_and_rescore_print_one_breakdown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = str(tmp_path / "s")
    code, out, _ = _cli(capsys, "--store", store, "import", str(JOB), "--json")
    assert code == 0
    imported = json.loads(out)
    assert imported["counts"] == BREAKDOWN
    assert not {"errored", "no_verifier", "invalid"} & set(imported)
    recorded = json.loads((JOB / "result.json").read_text())["stats"]
    harbor = recorded["evals"]["predev-auto__terminal-bench"]["n_errors"]
    assert imported["counts"]["harbor_errors"] == harbor == recorded["n_errored_trials"] == 21
    for source in (str(JOB), imported["job"]):
        code, out, _ = _cli(capsys, "--store", store, "rescore", source, "--json")
        assert code == 0
        assert json.loads(out)["counts"] == BREAKDOWN
    _, text, _ = _cli(capsys, "--store", store, "import", str(JOB))
    assert BREAKDOWN_TEXT in text
    _, text, _ = _cli(capsys, "--store", store, "rescore", str(JOB))
    assert BREAKDOWN_TEXT in text.splitlines()[0]


def test_api_import_report_holds_the_breakdown(tmp_path: Path) -> None:
    with casstore.open_store(tmp_path / "s") as store:
        (report,) = casstore.import_jobs(store, [JOB])
    assert report.counts == BREAKDOWN
    assert report.to_json()["counts"] == BREAKDOWN


@pytest.mark.parametrize("command", ["import", "rescore"])
def test_help_says_what_each_status_means(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = _cli(capsys, command, "--help")
    assert code == 0
    text = " ".join(out.replace("│", " ").split())
    for meaning in (
        "scored: no exception, a verifier result",
        "partial: an exception, but a usable primary reward",
        "errored: an exception and no usable primary reward",
        "no_verifier: no exception, no verifier result",
        "invalid: a reward mapping Harbor's model refuses",
        "harbor_errors: attempts with an exception recorded (Harbor's n_errors)",
    ):
        assert meaning in text, meaning
