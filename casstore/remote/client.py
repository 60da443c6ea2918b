"""The object-store client of a remote: obstore's ``S3Store``, and what its failures become.

Credentials and settings come as the AWS tools read them: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (obstore reads the
environment), else the profile ``AWS_PROFILE`` (default ``default``) of the shared credentials
file (``AWS_SHARED_CREDENTIALS_FILE``, default ``~/.aws/credentials``) and its region in
``~/.aws/config`` (``AWS_CONFIG_FILE``). The endpoint is the remote's ``--endpoint-url``, else
``AWS_ENDPOINT_URL``; an ``http://`` endpoint is allowed (a local server), path-style requests
are used with any endpoint given.

Every failure is :class:`~casstore.errors.RemoteError` naming the object,
``s3://bucket/prefix/key`` (the remote's URL when it is the remote's as a whole: no such
bucket, credentials refused, the endpoint out of reach), its cause on one line. Objects are
written create-only (:meth:`Client.put_new_async`: an existing key is never overwritten) and
refs by conditional writes (:meth:`Client.put_ref`: ``If-Match`` the ETag read,
``If-None-Match: *`` for a new ref).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import S3Store

from casstore.errors import RemoteError
from casstore.remote.config import Remote
from casstore.remote.failures import bucket_missing, describe

__all__ = ["Client", "open_client"]

RETRY: Any = {"max_retries": 3, "retry_timeout": timedelta(seconds=30)}
"""A request failing for a reason worth retrying (a timeout, a 5xx) is retried 3 times within
30 s (obstore's defaults, 10 times within 3 min, kept a wrong endpoint waiting minutes)."""


def _profile_settings() -> dict[str, str]:
    """Credentials and region of the AWS profile, when the environment names none."""
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        return {}
    profile = os.environ.get("AWS_PROFILE", "default")
    found: dict[str, str] = {}
    home = Path.home() / ".aws"
    files = (
        (os.environ.get("AWS_SHARED_CREDENTIALS_FILE", str(home / "credentials")), profile),
        (os.environ.get("AWS_CONFIG_FILE", str(home / "config")), _config_section(profile)),
    )
    keys = {
        "aws_access_key_id": "access_key_id",
        "aws_secret_access_key": "secret_access_key",
        "aws_session_token": "token",
        "region": "region",
    }
    for path, section in files:
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error as error:
            raise RemoteError(path, f"the AWS settings file does not parse: {error}") from error
        if parser.has_section(section):
            for name, option in keys.items():
                value = parser.get(section, name, fallback=None)
                if value and option not in found:
                    found[option] = value
    return found


def _config_section(profile: str) -> str:
    return "default" if profile == "default" else f"profile {profile}"


def open_client(remote: Remote) -> Client:
    """The client of ``remote`` (see the module docstring)."""
    settings: dict[str, Any] = dict(_profile_settings())
    endpoint = remote.endpoint_url or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        settings["endpoint"] = endpoint
        settings["virtual_hosted_style_request"] = False
    if not (settings.get("region") or os.environ.get("AWS_REGION")):
        settings["region"] = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    options: Any = {"allow_http": True} if endpoint and endpoint.startswith("http://") else None
    try:
        store = S3Store(
            remote.bucket,
            prefix=remote.prefix or None,
            client_options=options,
            retry_config=RETRY,
            **settings,
        )
    except Exception as error:  # obstore's configuration errors
        line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise RemoteError(remote.url, f"cannot open the remote: {line}") from error
    return Client(remote, store, endpoint or "AWS")


class Client:
    """Requests to one remote; every method names the key it failed on."""

    def __init__(self, remote: Remote, store: S3Store, endpoint: str = "AWS") -> None:
        self.remote = remote
        self.store = store
        self.endpoint = endpoint

    def where(self, key: str) -> str:
        """``s3://bucket/prefix/key``: how errors name an object."""
        return f"{self.remote.url.rstrip('/')}/{key}"

    def failed(self, key: str, error: BaseException) -> RemoteError:
        """The RemoteError of a request on ``key`` that raised ``error``: naming the object,
        or the remote's URL when no request could succeed (no such bucket, credentials
        refused, the endpoint out of reach); the cause on one line
        (:func:`~casstore.remote.failures.describe`)."""
        failure = describe(error, self.remote.bucket, self.endpoint)
        return RemoteError(
            self.remote.url if failure.remote_wide else self.where(key), failure.text
        )

    def absent(self, key: str, error: FileNotFoundError) -> None:
        """Return for a request on ``key`` that found no object; raise :meth:`failed` when it
        is the bucket that does not exist."""
        if bucket_missing(error):
            raise self.failed(key, error) from error

    def get(self, key: str) -> bytes | None:
        """The bytes of ``key``, None when the remote holds no such object."""
        try:
            return bytes(obstore.get(self.store, key).bytes())
        except FileNotFoundError as error:
            self.absent(key, error)
            return None
        except Exception as error:
            raise self.failed(key, error) from error

    async def get_async(self, key: str) -> bytes | None:
        """:meth:`get`, awaited."""
        try:
            result = await obstore.get_async(self.store, key)
            return bytes(await result.bytes_async())
        except FileNotFoundError as error:
            self.absent(key, error)
            return None
        except Exception as error:
            raise self.failed(key, error) from error

    async def open_async(self, key: str, offset: int = 0) -> Any:
        """The GET of ``key`` begun (obstore's ``GetResult``: its body not read yet), from
        byte ``offset`` on (a ranged GET when not 0; ``meta["size"]`` is still the whole
        object's), None when the remote holds no such object; read it with :meth:`chunks`."""
        options: Any = {"range": {"offset": offset}} if offset else None
        try:
            return await obstore.get_async(self.store, key, options=options)
        except FileNotFoundError as error:
            self.absent(key, error)
            return None
        except Exception as error:
            raise self.failed(key, error) from error

    async def body_async(self, key: str, result: Any) -> bytes:
        """The whole body of the GET ``result`` of ``key`` (:meth:`open_async`), awaited."""
        try:
            return bytes(await result.bytes_async())
        except Exception as error:
            raise self.failed(key, error) from error

    async def size_async(self, key: str) -> int | None:
        """The size in bytes of ``key`` (a HEAD request), None when there is no such object."""
        try:
            meta = await obstore.head_async(self.store, key)
        except FileNotFoundError as error:
            self.absent(key, error)
            return None
        except Exception as error:
            raise self.failed(key, error) from error
        return int(meta["size"])

    def chunks(self, key: str, result: Any, size: int) -> Iterator[bytes]:
        """The body of the GET ``result`` of ``key`` (:meth:`open_async`) as it arrives, in
        chunks of at least ``size`` bytes (the last one may be shorter); on this thread."""
        try:
            for chunk in result.stream(min_chunk_size=size):
                yield bytes(chunk)
        except Exception as error:
            raise self.failed(key, error) from error

    def get_ref(self, key: str) -> tuple[bytes, str] | None:
        """The bytes and ETag of the ref ``key``; None when there is none."""
        try:
            result = obstore.get(self.store, key)
            data = bytes(result.bytes())
        except FileNotFoundError as error:
            self.absent(key, error)
            return None
        except Exception as error:
            raise self.failed(key, error) from error
        etag = result.meta.get("e_tag")
        if not etag:
            raise RemoteError(self.where(key), "the server gave the ref no ETag")
        return data, etag

    def put_ref(self, key: str, data: bytes, etag: str | None) -> bool:
        """Write the ref ``key`` only when it still has ``etag`` (None: only when it does not
        exist): True when written, False when another writer came first (read it again)."""
        mode: Any = "create" if etag is None else {"e_tag": etag}
        try:
            obstore.put(self.store, key, data, mode=mode)
        except (AlreadyExistsError, PreconditionError):
            return False
        except Exception as error:
            raise self.failed(key, error) from error
        return True

    async def put_new_async(self, key: str, data: bytes | Path) -> bool:
        """Write ``key`` create-only (bytes, or a file's): True when written, False when the
        remote holds it already (never overwritten)."""
        try:
            body: Any = data if isinstance(data, bytes) else data.open("rb")
            try:
                await obstore.put_async(self.store, key, body, mode="create")
            finally:
                if not isinstance(data, bytes):
                    body.close()
        except AlreadyExistsError:
            return False
        except Exception as error:
            raise self.failed(key, error) from error
        return True

    async def delete_async(self, key: str) -> None:
        """Remove ``key`` (only an object this client just wrote: content-addressed objects
        are otherwise never removed by a transfer)."""
        try:
            await obstore.delete_async(self.store, key)
        except Exception as error:
            raise self.failed(key, error) from error

    def list(self, prefix: str) -> dict[str, int]:
        """Every key under ``prefix`` (``a/`` style) with its size."""
        found: dict[str, int] = {}
        try:
            for batch in obstore.list(self.store, prefix=prefix or None):
                for meta in batch:
                    found[meta["path"]] = meta["size"]
        except Exception as error:
            raise self.failed(prefix, error) from error
        return found
