"""Remotes recorded in a store: ``casstore remote add NAME URL [--endpoint-url URL]``.

A remote is a name (:func:`casstore.names.check_name`), an ``s3://bucket[/prefix]`` URL and
an optional endpoint (any S3-compatible server; else ``AWS_ENDPOINT_URL``, else AWS). The
store keeps each in its index's ``meta`` database under ``remote/<name>`` (a msgpack map
``{"url", "endpoint_url"}``), written in one transaction like every other record.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from casstore.errors import StoreError, UnknownReferenceError, UsageError
from casstore.names import check_name
from casstore.store.core import Store
from casstore.store.index import Txn
from casstore.store.values import decode

__all__ = ["Remote", "add_remote", "get_remote", "list_remotes", "parse_url", "remove_remote"]

_PREFIX = "remote/"


@dataclass(frozen=True, slots=True)
class Remote:
    """A remote: ``name``, ``url`` (``s3://bucket[/prefix]``), ``endpoint_url`` (None: the
    environment's ``AWS_ENDPOINT_URL``, else AWS itself)."""

    name: str
    url: str
    endpoint_url: str | None = None

    @property
    def bucket(self) -> str:
        """The bucket of :attr:`url`."""
        return parse_url(self.url)[0]

    @property
    def prefix(self) -> str:
        """The key prefix of :attr:`url` (``""`` or ``a/b``, no slash at either end)."""
        return parse_url(self.url)[1]

    def to_json(self) -> dict[str, str | None]:
        """``{"name", "url", "endpoint_url"}``."""
        return {"name": self.name, "url": self.url, "endpoint_url": self.endpoint_url}


def parse_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket[/prefix]``; UsageError naming ``url`` otherwise
    (a bucket name is 3 to 63 characters of lowercase letters, digits, ``.`` and ``-``)."""
    parts = urlsplit(url)
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if parts.scheme != "s3" or parts.query or parts.fragment:
        raise UsageError(url, "a remote URL is s3://bucket[/prefix]")
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789.-")
    if not 3 <= len(bucket) <= 63 or not set(bucket) <= allowed:
        raise UsageError(url, "a bucket name is 3 to 63 lowercase letters, digits, '.' or '-'")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise UsageError(url, "the prefix holds an empty, '.' or '..' component")
    return bucket, prefix


def _check_endpoint(endpoint: str | None) -> str | None:
    """``endpoint`` when it is an http(s) URL with a host (or None); UsageError otherwise."""
    if endpoint is None:
        return None
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(endpoint, "an endpoint URL is http(s)://host[:port]")
    return endpoint.rstrip("/")


def _decoded(name: str, raw: object) -> Remote:
    """The remote record ``raw`` of ``name`` (CorruptStoreError naming ``meta/remote/<name>``
    when it is no such map)."""

    def build(value: object) -> Remote:
        if not isinstance(value, dict) or not isinstance(value.get("url"), str):
            raise ValueError("not a remote record")
        endpoint = value.get("endpoint_url")
        if endpoint is not None and not isinstance(endpoint, str):
            raise ValueError("endpoint_url is not text")
        return Remote(name, value["url"], endpoint)

    return decode("meta", _PREFIX + name, build, raw)


def add_remote(store: Store, name: str, url: str, endpoint_url: str | None = None) -> Remote:
    """Record the remote ``name`` in ``store``; StoreError when that name is taken (remove
    it first), UsageError for a bad name, URL or endpoint."""
    remote = Remote(check_name(name), url, _check_endpoint(endpoint_url))
    parse_url(url)

    def body(txn: Txn) -> Remote:
        if txn.has("meta", _PREFIX + name):
            raise StoreError(name, "a remote of that name exists (casstore remote rm it first)")
        txn.put("meta", _PREFIX + name, {"url": url, "endpoint_url": remote.endpoint_url})
        return remote

    return store.index.write(body)


def remove_remote(store: Store, name: str) -> Remote:
    """Forget the remote ``name`` (nothing on the remote is touched); UnknownReferenceError
    when there is none."""

    def body(txn: Txn) -> Remote:
        remote = _read(txn, check_name(name))
        txn.delete("meta", _PREFIX + name)
        return remote

    return store.index.write(body)


def _read(txn: Txn, name: str) -> Remote:
    raw = txn.get("meta", _PREFIX + name)
    if raw is None:
        raise UnknownReferenceError(name, "no remote of that name (casstore remote add NAME URL)")
    return _decoded(name, raw)


def get_remote(store: Store, name: str) -> Remote:
    """The remote ``name`` of ``store``; UnknownReferenceError when there is none."""
    return store.index.read(lambda txn: _read(txn, check_name(name)))


def list_remotes(store: Store) -> list[Remote]:
    """Every remote of ``store``, by name."""

    def body(txn: Txn) -> list[Remote]:
        return [_decoded(key.removeprefix(_PREFIX), raw) for key, raw in txn.items("meta", _PREFIX)]

    return store.index.read(body)
