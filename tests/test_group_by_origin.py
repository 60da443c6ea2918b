"""``rescore --group-by job`` and ``source``: two jobs of one agent side by side.

The real Terminal-Bench 2.0 job (Harbor recorded mean 37/89 = 0.4157303370786517) and a second
job made from it here: another job id, 13 of its failed trials (no exception) given reward 1,
and Harbor's recorded mean set to what Harbor's Mean then gives, 50/89 = 0.5617977528089888."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import casstore
from casstore.errors import CasstoreError
from scoring import score
from tests.helpers import run_cli, store_cli

REAL = Path("jobs/tb2-haiku/jobs/2026-05-10__01-23-57")
SECOND_ID = "2b0c3f2e-1111-4222-8333-444455556666"


def second_job(real: Path, dest: Path) -> Path:
    """A copy of the ``real`` job at ``dest`` under another job id, 13 failed trials passed."""
    shutil.copytree(real, dest)
    for path in dest.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    old = json.loads((real / "result.json").read_text())["id"]
    flipped = 0
    for trial in sorted(p for p in dest.iterdir() if p.is_dir()):
        for name in ("result.json", "config.json"):
            (trial / name).write_text((trial / name).read_text().replace(old, SECOND_ID))
        result = json.loads((trial / "result.json").read_text())
        rewards = (result.get("verifier_result") or {}).get("rewards") or {}
        if rewards.get("reward") == 0.0 and not result.get("exception_info") and flipped < 13:
            rewards["reward"] = 1.0
            flipped += 1
            (trial / "result.json").write_text(json.dumps(result))
    summary = json.loads((dest / "result.json").read_text())
    summary["id"] = SECOND_ID
    (evals,) = summary["stats"]["evals"].values()
    evals["metrics"] = [{"mean": 50 / 89}]
    (dest / "result.json").write_text(json.dumps(summary))
    assert flipped == 13
    return dest


def recorded_mean(job: Path) -> float:
    (evals,) = json.loads((job / "result.json").read_text())["stats"]["evals"].values()
    return evals["metrics"][0]["mean"]


@pytest.fixture
def jobs(tmp_path: Path, fixtures_dir: Path) -> tuple[Path, Path]:
    real = fixtures_dir / REAL
    return real, second_job(real, tmp_path / "runs" / "second")


def means(report: casstore.ScoreReport) -> dict[tuple[str, ...], float | None]:
    return {
        tuple(group.labels[field] for field in report.group_by): group.outputs["reward"].mean
        for group in report.groups
    }


@pytest.mark.realdata
def test_two_job_directories_by_job(jobs: tuple[Path, Path], tmp_path: Path) -> None:
    real, second = jobs
    assert recorded_mean(real) == 0.4157303370786517 == 37 / 89
    assert recorded_mean(second) == 0.5617977528089888 == float(Fraction(50, 89))
    report = casstore.rescore([real, second], tmp_path / "none", group_by=["job"])
    assert means(report) == {
        ("2026-05-10__01-23-57",): recorded_mean(real),
        ("second",): recorded_mean(second),
    }
    assert [group.counts["attempts"] for group in report.groups] == [89, 89]
    assert report.counts["attempts"] == 178 and report.outputs["reward"].mean == 87 / 178
    by_agent = casstore.rescore([real, second], tmp_path / "none", group_by=["agent", "job"])
    assert list(means(by_agent).values()) == [37 / 89, 50 / 89]
    assert {group.labels["agent"] for group in by_agent.groups} == {"predev-auto@0.1.0"}
    default = casstore.rescore([real, second], tmp_path / "none")
    assert len(default.groups) == 1 and default.groups[0].outputs["reward"].mean == 87 / 178


@pytest.mark.realdata
def test_imported_jobs_by_name_and_sources_as_given(
    jobs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real, second = jobs
    store = tmp_path / "store"
    for job, name in ((real, "haiku-a"), (second, "haiku-b")):
        code, _, err = store_cli(capsys, store, "import", str(job), "--name", name)
        assert code == 0, err
    code, out, err = store_cli(
        capsys, store, "rescore", "haiku-b", "haiku-a", "--group-by", "job", "--json"
    )
    assert code == 0, err
    groups = {g["labels"]["job"]: g["outputs"]["reward"]["mean"] for g in out["groups"]}
    assert groups == {"haiku-a": 37 / 89, "haiku-b": 50 / 89}
    exported = tmp_path / "second.jsonl"
    assert store_cli(capsys, store, "export", "haiku-b", "-o", str(exported))[0] == 0
    code, out, err = store_cli(
        capsys, store, "rescore", "haiku-a", str(exported), "--group-by", "source", "--json"
    )
    assert code == 0, err
    groups = {g["labels"]["source"]: g["outputs"]["reward"]["mean"] for g in out["groups"]}
    assert groups == {"haiku-a": 37 / 89, str(exported): 50 / 89}
    code, text, _ = run_cli(
        capsys, "--store", str(store), "rescore", "haiku-a", "haiku-b", "--group-by", "job"
    )
    assert code == 0
    rows = text[text.index("groups\n") :].splitlines()[1:4]
    assert rows[0].split("\t")[:3] == ["job", "attempts", "mean reward"]
    assert [row.split("\t")[:3] for row in rows[1:]] == [
        ["haiku-a", "89", "0.4157"],
        ["haiku-b", "89", "0.5618"],
    ]


@pytest.mark.realdata
def test_a_trials_file_of_two_jobs_split_by_its_records(
    jobs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real, second = jobs
    store = tmp_path / "store"
    both = tmp_path / "both.jsonl"
    for job in (second, real):
        assert store_cli(capsys, store, "import", str(job))[0] == 0
        part = tmp_path / f"{job.name}.jsonl"
        assert store_cli(capsys, store, "export", job.name, "-o", str(part))[0] == 0
        with both.open("a") as out:
            out.write(part.read_text())
    report = casstore.rescore(both, store, group_by=["job", "source"])
    real_id = json.loads((real / "result.json").read_text())["id"]
    assert means(report) == {(real_id, str(both)): 37 / 89, (SECOND_ID, str(both)): 50 / 89}


@pytest.mark.realdata
def test_two_jobs_of_one_name_told_apart_by_id(jobs: tuple[Path, Path], tmp_path: Path) -> None:
    real = jobs[0]
    twin = tmp_path / "elsewhere" / real.name
    shutil.copytree(real, twin)
    (twin / "result.json").chmod(0o644)
    summary = json.loads((twin / "result.json").read_text())
    summary["id"] = "9d0c3f2e-1111-4222-8333-444455556666"
    (twin / "result.json").write_text(json.dumps(summary))
    report = casstore.rescore([real, twin], tmp_path / "none", group_by=["job"])
    real_id = json.loads((real / "result.json").read_text())["id"]
    assert [group.labels["job"] for group in report.groups] == [
        f"{real.name}#{real_id}",
        f"{real.name}#9d0c3f2e-1111-4222-8333-444455556666",
    ]


@pytest.mark.realdata
def test_score_without_origins(jobs: tuple[Path, Path], tmp_path: Path) -> None:
    real, second = jobs
    loaded = casstore.sources.load_sources([real, second], tmp_path / "none")
    one = casstore.rescore([real], tmp_path / "none").table
    assert score(one, group_by=["job"]).groups[0].labels == {"job": one.jobs[0]}
    with pytest.raises(CasstoreError, match="cannot group by 'source': the source of each"):
        score(one, group_by=["source"])
    with pytest.raises(CasstoreError, match="cannot group by 'job'"):
        score(loaded.table, group_by=["job"])
    codes, labels = loaded.origins["job"]
    assert score(loaded.table, group_by=["job"], origins=loaded.origins).groups[1].labels == {
        "job": "second"
    }
    with pytest.raises(CasstoreError, match="job labels: expected 178 codes into 1 labels"):
        score(loaded.table, group_by=["job"], origins={"job": (codes, labels[:1])})
    assert np.bincount(codes).tolist() == [89, 89]


@pytest.mark.realdata
@pytest.mark.parametrize("group_by", [["job", "source"], ["source"], ["job"]])
def test_a_bundle_grouped_by_origin_reopens_to_its_report(
    capsys, jobs: tuple[Path, Path], tmp_path: Path, group_by: list[str]
) -> None:
    real, second = jobs
    dest, store = tmp_path / "bundle", tmp_path / "none"
    written = casstore.rescore([real, second], store, group_by=group_by, bundle=dest)
    summary = json.loads((dest / "summary.json").read_text())
    labels = {"job": ["2026-05-10__01-23-57", "second"], "source": [str(real), str(second)]}
    assert sorted(json.dumps(g["labels"]) for g in summary["report"]["groups"]) == sorted(
        json.dumps({field: labels[field][i] for field in group_by}) for i in range(2)
    )
    code, out, _ = run_cli(capsys, "--store", str(store), "rescore", str(dest), "--json")
    assert code == 0 and json.loads(out) == summary["report"]
    again = casstore.rescore([dest], store, group_by=group_by)
    assert again.to_json() == written.to_json()


@pytest.mark.realdata
def test_a_bundle_without_origin_labels_groups_as_before(jobs: tuple[Path, Path], tmp_path) -> None:
    """An older bundle (samples without ``job`` and ``source``): its job ids and its path."""
    from tests.test_bundle import _rewrite

    real, second = jobs
    dest, store = tmp_path / "bundle", tmp_path / "none"
    casstore.rescore([real, second], store, group_by=["job", "source"], bundle=dest)
    samples = [json.loads(line) for line in (dest / "samples.jsonl").read_bytes().splitlines()]
    assert {(s["job"], s["source"]) for s in samples} == {
        ("2026-05-10__01-23-57", str(real)),
        ("second", str(second)),
    }
    older = [{k: v for k, v in s.items() if k not in ("job", "source")} for s in samples]
    _rewrite(dest, "samples.jsonl", b"".join(json.dumps(s).encode() + b"\n" for s in older))
    report = casstore.rescore([dest], store, group_by=["job", "source"])
    ids = [samples[0]["job_id"], SECOND_ID]
    assert [g.labels for g in report.groups] == [{"job": i, "source": str(dest)} for i in ids]
