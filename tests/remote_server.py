"""A real S3 API server on loopback for the remote tests (moto's ``ThreadedMotoServer``, port
0): started and stopped by the ``s3`` fixture, which gives a fresh bucket per test and sets
the AWS environment the client reads (credentials, region, endpoint). Nothing is mocked in
the client: every request goes over HTTP to the server."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["S3", "make_bucket", "s3", "s3_server", "server_process", "start_server"]

_BUCKETS = itertools.count()


@dataclass(frozen=True)
class S3:
    """The server's ``endpoint`` and this test's ``bucket``; :meth:`url` of a prefix."""

    endpoint: str
    bucket: str

    def url(self, prefix: str = "") -> str:
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def env(self) -> dict[str, str]:
        """The environment a subprocess needs to reach the server."""
        return {**os.environ, **_credentials(self.endpoint)}


def _credentials(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }


def start_server() -> tuple[object, str]:
    """A started server and its endpoint URL."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def make_bucket(endpoint: str, name: str) -> None:
    """Create the bucket ``name`` through the server's S3 API (boto3, test side only)."""
    import boto3

    creds = _credentials(endpoint)
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    ).create_bucket(Bucket=name)


_SERVE = """
import sys
from tests.remote_server import start_server
server, endpoint = start_server()
print(endpoint, flush=True)
sys.stdin.read()  # until the parent closes it
server.stop()
"""


@contextmanager
def server_process() -> Iterator[str]:
    """A server in a process of its own (its work not sharing this interpreter's GIL, as a
    real object store would not): its endpoint, until the block ends."""
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """The server's endpoint, for the session."""
    server, endpoint = start_server()
    yield endpoint
    server.stop()  # type: ignore[attr-defined]


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> S3:
    """A fresh bucket on the server, and the AWS environment set to reach it."""
    for key, value in _credentials(s3_server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    bucket = f"bucket-{os.getpid()}-{next(_BUCKETS)}"
    make_bucket(s3_server, bucket)
    return S3(s3_server, bucket)
