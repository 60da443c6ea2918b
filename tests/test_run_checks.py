"""``casstore run`` without a running job: the agent configuration checks (each rule with a
refused and an accepted case), the cache identity (options, agent and task digests, the
stamp), the job lock and the launcher's job codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from casstore.errors import RunError, UsageError
from casstore.examples.harbor_tasks import write_harbor_tasks
from casstore.run.config import MAX_ATTEMPTS, RunOptions, check_options, job_config
from casstore.run.credentials import (
    check_agent_kwargs,
    check_env_vars,
    resolve_secrets,
    secret_variables,
)
from casstore.run.identity import (
    NO_AGENT,
    STAMP_NAME,
    agent_digest,
    options_digest,
    read_stamp,
    write_stamp,
)
from casstore.run.lock import job_lock
from casstore.run.source import RunTask
from casstore.table.codes import FailureCode
from casstore.trials.rules import launch_codes
from tests.helpers import run_cli


def _refused(call, *args) -> UsageError:
    with pytest.raises(UsageError) as refused:
        call(*args)
    return refused.value


# --ak: JSON, credential-looking keys, token shapes


def test_ak_values_must_be_json() -> None:
    error = _refused(check_agent_kwargs, {"temperature": "warm"})
    assert str(error).startswith("--ak temperature: the value is not JSON")
    assert check_agent_kwargs({"temperature": "0.5", "tags": '["a", 1]'}) == {
        "temperature": 0.5,
        "tags": ["a", 1],
    }


@pytest.mark.parametrize(
    "key",
    ["api_key", "apiKey", "token", "auth_token", "client_secret", "Authorization", "password"],
)
def test_a_credential_looking_key_refuses_plaintext(key: str) -> None:
    error = _refused(check_agent_kwargs, {key: '"hunter2hunter2"'})
    assert error.path == f"--ak {key}"
    assert "credential-looking key holding plaintext" in error.rule
    assert "hunter2" not in str(error)  # the value is never shown


def test_a_credential_looking_key_takes_a_template_and_other_keys_take_text() -> None:
    assert check_agent_kwargs({"api_key": '"${OPENAI_API_KEY}"'}) == {
        "api_key": "${OPENAI_API_KEY}"
    }
    assert check_agent_kwargs({"max_tokens": "100", "keyword": '"plain"'}) == {
        "max_tokens": 100,
        "keyword": "plain",
    }


def test_a_credential_key_deep_in_a_value_is_refused() -> None:
    error = _refused(check_agent_kwargs, {"client": '{"headers": {"Authorization": "Bearer x"}}'})
    assert error.path == "--ak client.headers.Authorization"


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        ("nvapi-" + "a1B2" * 8, "nvapi-"),
        ("sk-proj-" + "x9" * 12, "sk-"),
        ("hf_" + "Ab3" * 10, "hf_"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "a PEM block"),
    ],
)
def test_an_issued_token_shape_is_refused_under_any_key(value: str, shape: str) -> None:
    error = _refused(check_agent_kwargs, {"notes": json.dumps(["see", value])})
    assert error.path == "--ak notes[1]"
    assert error.rule.startswith(f"the value has the shape of an issued token ({shape})")
    assert value[:12] not in str(error)


def test_an_issued_token_shape_is_refused_as_a_key_without_showing_it() -> None:
    # Harbor writes kwargs keys into config.json as it writes values: `--ak sk-…=1` (a token
    # pasted where the name goes) passed, and naming the key in the error would show it.
    token = "sk-proj-" + "x9" * 12
    top = _refused(check_agent_kwargs, {token: "1"})
    nested = _refused(check_agent_kwargs, {"headers": json.dumps({token: 1})})
    assert (top.path, nested.path) == ("--ak", "--ak headers")
    assert top.rule.startswith("a key has the shape of an issued token (sk-)")
    assert token[:12] not in str(top) + str(nested)


def test_environment_kwargs_follow_the_same_rules() -> None:
    """Harbor copies --ek into the job's files as it does --ak."""
    refused = _refused(check_options, RunOptions(environment_kwargs=['token="abc"']))
    assert refused.path == "--ek token" and "plaintext" in refused.rule
    assert _refused(check_options, RunOptions(environment_kwargs=["dir=x"])).path == "--ek dir"
    accepted = check_options(RunOptions(environment_kwargs=['sandbox_dir="/tmp/x"']))
    assert accepted.environment_kwargs == {"sandbox_dir": "/tmp/x"}


def test_text_that_merely_starts_like_a_token_is_accepted() -> None:
    kwargs = {"mode": '"sk-short"', "task": '"ask-for-help-with-the-thing"', "x": '"hf_a"'}
    assert check_agent_kwargs(kwargs) == {
        "mode": "sk-short",
        "task": "ask-for-help-with-the-thing",
        "x": "hf_a",
    }


# --env-secret: references resolved from the environment, templates for Harbor


def test_secret_references_read_workspace_then_bare_variables() -> None:
    assert secret_variables("my-ws/openai-api-key") == ["MY_WS_OPENAI_API_KEY", "OPENAI_API_KEY"]
    assert secret_variables("openai-api-key") == ["OPENAI_API_KEY"]
    assert _refused(secret_variables, "a/b/c").path == "--env-secret a/b/c"


def test_a_workspace_secret_wins_and_falls_back() -> None:
    both = {"MY_WS_OPENAI_API_KEY": "ws-value", "OPENAI_API_KEY": "bare-value"}
    env = resolve_secrets({"OPENAI_API_KEY": "my-ws/openai-api-key"}, {}, both)
    assert env.templates == {"OPENAI_API_KEY": "${OPENAI_API_KEY}"}
    assert env.values == {"OPENAI_API_KEY": "ws-value"}
    assert env.references == {"OPENAI_API_KEY": "my-ws/openai-api-key"}
    fallback = resolve_secrets(
        {"KEY": "my-ws/openai-api-key"}, {}, {"OPENAI_API_KEY": "bare-value"}
    )
    assert fallback.values == {"KEY": "bare-value"}
    assert fallback.templates == {"KEY": "${KEY}"}


def test_an_unresolved_secret_is_refused_naming_the_variables() -> None:
    error = _refused(resolve_secrets, {"OPENAI_API_KEY": "my-ws/openai-api-key"}, {}, {})
    assert str(error) == (
        "--env-secret OPENAI_API_KEY: my-ws/openai-api-key does not resolve: "
        "neither MY_WS_OPENAI_API_KEY nor OPENAI_API_KEY is set"
    )
    bare = _refused(resolve_secrets, {"OPENAI_API_KEY": "openai-api-key"}, {}, {})
    assert bare.rule == "openai-api-key does not resolve: OPENAI_API_KEY is not set"


def test_a_secret_value_reaches_no_config(tmp_path: Path) -> None:
    options = RunOptions(agent="oracle", env_secrets=["OPENAI_API_KEY=openai-api-key"])
    checked = check_options(options, {"OPENAI_API_KEY": "sk-the-real-secret-value-000"})
    task = RunTask("t", tmp_path / "ds" / "t", "blake3:" + "0" * 64)
    config = job_config(checked, [(task, 2)], "ds")
    dumped = config.model_dump_json()
    assert "sk-the-real" not in dumped and "${OPENAI_API_KEY}" in dumped
    assert checked.env.values == {"OPENAI_API_KEY": "sk-the-real-secret-value-000"}


# --env-var: literals only


def test_env_vars_refuse_templates_credential_shapes_and_secret_names() -> None:
    assert _refused(check_env_vars, {"MODE": "${HOME}"}).rule.startswith("a ${...} template")
    shape = _refused(check_env_vars, {"MODE": "hf_" + "Zz9" * 10})
    assert shape.rule.startswith("the value has the shape of an issued token (hf_)")
    for name in ("MAX_TOKENS", "my_secret", "DB_PASSWORD", "AUTH_MODE", "API_KEY"):
        assert "Harbor treats this name as a secret" in _refused(check_env_vars, {name: "1"}).rule
    assert check_env_vars({"LOG_LEVEL": "debug", "MAX_STEPS": "30"}) == {
        "LOG_LEVEL": "debug",
        "MAX_STEPS": "30",
    }


def test_the_command_refuses_before_anything_runs(capsys, tmp_path: Path) -> None:
    code, out, err = run_cli(
        capsys,
        "--store",
        str(tmp_path / "store"),
        "run",
        str(tmp_path / "nothing-here"),
        "--ak",
        'api_key="plaintext-secret"',
    )
    assert (code, out) == (2, "")
    assert err.startswith("casstore: --ak api_key: a credential-looking key holding plaintext")
    assert not (tmp_path / "store").exists() and not (tmp_path / "jobs").exists()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_source_path_that_is_no_directory_is_named(capsys, tmp_path: Path, kind: str) -> None:
    # "./nothing-here" was read as the reference "./nothing-here" and refused as the
    # workspace name ".", which names neither the path nor the rule a user broke.
    source = tmp_path / "nothing-here"
    if kind == "file":
        source.write_text("not a task")
    jobs = ("--jobs-dir", str(tmp_path / "jobs"))
    code, out, err = run_cli(capsys, "--store", str(tmp_path / "store"), "run", str(source), *jobs)
    assert (code, out) == (2, "")
    assert err == (
        f"casstore: {source}: neither a task or dataset directory nor a stored reference\n"
    )


@pytest.mark.parametrize("kind", ["source", "other", "file"])
def test_a_job_name_on_a_directory_no_run_made_is_refused(
    capsys, tmp_path: Path, kind: str
) -> None:
    # A stamp-less directory was deleted as a stale job: `--jobs-dir . --job-name plain`
    # deleted the task `plain` being run, and any other folder of that name went alike.
    (task,) = write_harbor_tasks(tmp_path, ["plain"])
    victim = task if kind == "source" else tmp_path / "victim"
    if kind == "other":
        (victim / "keep").mkdir(parents=True)
        (victim / "keep" / "file.txt").write_text("precious")
    elif kind == "file":
        victim.write_text("precious")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, out, err = run_cli(
        capsys,
        *("--store", str(tmp_path / "store"), "run", str(task)),
        *("--jobs-dir", str(tmp_path), "--job-name", victim.name),
        *("--environment-import-path", "casstore.sandbox:HostEnvironment"),
    )
    assert (code, out) == (2, "")
    rule = "is no directory" if kind == "file" else "is no job directory"
    assert err.startswith(f"casstore: {victim}: {rule}")
    after = sorted(str(p) for p in tmp_path.rglob("*") if "store" not in p.parts[-3:])
    assert [p for p in before if p not in after] == []


def test_one_agent_and_counts_at_least_one() -> None:
    both = RunOptions(agent="oracle", agent_import_path="m:C")
    assert _refused(check_options, both).path == "--agent"
    assert _refused(check_options, RunOptions(agent_dir=Path("x"))).path == "--agent-dir"
    assert str(_refused(check_options, RunOptions(attempts=0))) == (
        "--attempts: must be at least 1, not 0"
    )


def test_attempts_bounded_above() -> None:
    # Harbor builds every trial's config up front: 10**20 attempts grew its process past
    # 11 GB in ten minutes without starting a trial, so a usage error comes first.
    assert str(_refused(check_options, RunOptions(attempts=10**20))) == (
        f"--attempts: must be at most {MAX_ATTEMPTS:,}, not {10**20}"
    )
    assert check_options(RunOptions(attempts=MAX_ATTEMPTS)).options.attempts == MAX_ATTEMPTS


# cache identity


def _digest(**changes: object) -> str:
    base = {"agent": "oracle", "env_secrets": ["K=openai-api-key"], "env_vars": ["MODE=a"]}
    options = RunOptions(**{**base, **changes})  # type: ignore[arg-type]
    checked = check_options(options, {"OPENAI_API_KEY": str(changes.pop("_value", "v1"))})
    return options_digest(checked.base, checked.env.references)


def test_options_digest_rules() -> None:
    first = _digest(job_name="a")
    assert first.startswith("sha256:") and len(first) == 71
    # not result-affecting: names, folders, counts, scheduling, scoring
    assert _digest(job_name="b", jobs_dir=Path("elsewhere")) == first
    assert _digest(attempts=5, concurrency=9, max_retries=3, reward_key="score") == first
    # result-affecting: the agent, its kwargs, its literals, a secret's reference
    assert _digest(agent_kwargs=["temperature=0.5"]) != first
    assert _digest(agent_kwargs=["temperature=0.5"]) != _digest(agent_kwargs=["temperature=0.6"])
    assert _digest(env_vars=["MODE=b"]) != first
    assert _digest(env_secrets=["K=my-ws/openai-api-key"]) != first
    assert _digest(model="m") != first
    assert _digest(environment_kwargs=['sandbox_dir="/x"']) != first


def test_a_rotated_secret_value_keeps_the_digest() -> None:
    options = RunOptions(agent="oracle", env_secrets=["K=openai-api-key"])
    one = check_options(options, {"OPENAI_API_KEY": "first-value"})
    two = check_options(options, {"OPENAI_API_KEY": "rotated-value"})
    assert options_digest(one.base, one.env.references) == options_digest(
        two.base, two.env.references
    )


def test_agent_digest_covers_the_tree_but_bytecode(tmp_path: Path) -> None:
    assert agent_digest(None) == NO_AGENT == "<none>"
    agent = tmp_path / "agent"
    (agent / "pkg").mkdir(parents=True)
    (agent / "pkg" / "mod.py").write_text("X = 1\n")
    first = agent_digest(agent)
    assert first.startswith("blake3:")
    (agent / "pkg" / "__pycache__").mkdir()
    (agent / "pkg" / "__pycache__" / "mod.cpython-312.pyc").write_bytes(b"\0")
    assert agent_digest(agent) == first
    (agent / "pkg" / "mod.py").write_text("X = 2\n")
    assert agent_digest(agent) != first
    assert _refused(agent_digest, tmp_path / "missing").rule == "not a directory"


def test_stamp_rules(tmp_path: Path) -> None:
    job = tmp_path / "job"
    tasks = {"a": "blake3:" + "a" * 64, "b": "blake3:" + "b" * 64, "c": "blake3:" + "c" * 64}
    write_stamp(job, "sha256:" + "1" * 64, NO_AGENT, tasks)
    state = read_stamp(job)
    assert state.usable and state.stamp is not None
    assert state.stamp.matches("sha256:" + "1" * 64, NO_AGENT, {"a": tasks["a"]})  # A of A, B, C
    assert not state.stamp.matches("sha256:" + "1" * 64, NO_AGENT, {"d": "blake3:" + "d" * 64})
    assert not state.stamp.matches("sha256:" + "1" * 64, NO_AGENT, {"a": "blake3:" + "e" * 64})
    assert not state.stamp.matches("sha256:" + "2" * 64, NO_AGENT, {"a": tasks["a"]})
    assert not state.stamp.matches("sha256:" + "1" * 64, "blake3:" + "f" * 64, {"a": tasks["a"]})
    raw = json.loads((job / STAMP_NAME).read_bytes())
    (job / STAMP_NAME).write_text(json.dumps({**raw, "version": 2}))
    assert not read_stamp(job).usable
    (job / STAMP_NAME).write_text("{not json")
    assert read_stamp(job) == read_stamp(tmp_path / "no-job")
    assert not read_stamp(job).usable


# the lock, the launcher's codes


def test_a_second_run_on_a_job_name_fails_at_once(tmp_path: Path) -> None:
    with job_lock(tmp_path, "job"):
        with pytest.raises(RunError) as busy, job_lock(tmp_path, "job"):
            pass
        with job_lock(tmp_path, "other"):  # another name is free
            pass
    assert "another casstore run (pid " in str(busy.value)
    assert busy.value.path == str(tmp_path / "job")
    with job_lock(tmp_path, "job"):  # released
        pass


def test_launch_codes() -> None:
    failed = {"outcome": "failed", "exit_status": 1}
    assert launch_codes(failed, False, False, False) == [
        FailureCode.LAUNCHER_FAILED,
        FailureCode.JOB_RESULT_MISSING,
    ]
    assert launch_codes(failed, False, True, True) == [FailureCode.LAUNCHER_FAILED]
    cancelled = {"outcome": "cancelled"}
    assert launch_codes(cancelled, True, True, True) == [FailureCode.CANCELLED]
    assert launch_codes({"outcome": "completed"}, False, True, True) == []
    assert launch_codes(None, False, False, False) == []  # not a job casstore run launched


@pytest.mark.parametrize("inner", ["", "sub"])
def test_a_jobs_dir_that_is_a_file_is_a_usage_error(tmp_path: Path, inner: str) -> None:
    # It was "casstore: …/afile: File exists", exit 1: the OSError of mkdir.
    (tmp_path / "afile").write_text("")
    with pytest.raises(UsageError) as refused, job_lock(tmp_path / "afile" / inner, "job"):
        pass
    assert str(refused.value) == f"{tmp_path / 'afile'}: is not a directory (in --jobs-dir's way)"
