"""A remote no request can succeed on (no such bucket, credentials refused, an endpoint out of
reach), against real servers on loopback: push, pull and ``ls --remote`` fail with one line
naming the remote's URL and the cause (the server's S3 error code and message, never its XML
body), exit status 1, no traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import casstore
from casstore.remote import api as remote
from tests.helpers import make_task, store_cli
from tests.remote_server import S3, s3, s3_server, server_process

__all__ = ["s3", "s3_server"]


def _store(root: Path, url: str, endpoint: str | None = None) -> Path:
    with casstore.open_store(root) as store:
        casstore.publish(store, make_task(root.parent / "src", "t1", {"n.txt": "1"}))
        remote.add_remote(store, "origin", url, endpoint)
    return root


def _every_command_says(capsys: pytest.CaptureFixture[str], root: Path, line: str) -> None:
    for argv in (("push", "t1"), ("pull", "t1"), ("ls", "tasks", "--remote", "origin")):
        code, _, err = store_cli(capsys, root, *argv)
        assert (code, err) == (1, f"casstore: {line}\n"), argv
        assert "<" not in err and "Traceback" not in err


def test_a_missing_bucket_is_named(tmp_path: Path, s3: S3, capsys) -> None:
    url = f"s3://{s3.bucket}-missing/r"
    root = _store(tmp_path / "a", url)
    cause = "NoSuchBucket: The specified bucket does not exist"
    _every_command_says(
        capsys, root, f"{url}: no bucket {s3.bucket}-missing at {s3.endpoint} ({cause})"
    )


def test_an_unreachable_endpoint_is_named(tmp_path: Path, s3: S3, capsys) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    root = _store(tmp_path / "a", s3.url("r"), endpoint)
    line = f"{s3.url('r')}: cannot reach {endpoint} (error sending request, 3 retries)"
    _every_command_says(capsys, root, line)


def test_refused_credentials_are_named(
    tmp_path: Path, s3: S3, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "INITIAL_NO_AUTH_ACTION_COUNT", "0")  # moto checks keys
    with server_process() as endpoint:
        root = _store(tmp_path / "a", "s3://any/r", endpoint)
        cause = (
            "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records."
        )
        _every_command_says(
            capsys, root, f"s3://any/r: the credentials were refused by {endpoint} ({cause})"
        )
