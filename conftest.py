"""Shared by the test and benchmark sessions: the validation cache of casstore
(:mod:`casstore.archive.config_cache`) is a fresh folder of the session, never the user's
``~/.cache/casstore``; subprocesses inherit it. A test that needs another cache sets
``CASSTORE_CACHE_DIR`` itself."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    previous = os.environ.get("CASSTORE_CACHE_DIR")
    os.environ["CASSTORE_CACHE_DIR"] = str(tmp_path_factory.mktemp("casstore-cache"))
    yield
    if previous is None:
        del os.environ["CASSTORE_CACHE_DIR"]
    else:
        os.environ["CASSTORE_CACHE_DIR"] = previous
