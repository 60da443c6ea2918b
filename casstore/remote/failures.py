"""What an obstore error says, on one line: the S3 error code and message the server sent
(never its XML body), and whether the failure is the remote's as a whole (no such bucket,
refused credentials, an endpoint out of reach) rather than the one object's.

obstore's message is ``<what failed>: ... Server returned non-2xx status code: <status>:
<XML body>`` followed by a multi-line debug dump; an unreachable endpoint's ends ``HTTP
error: error sending request``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape

__all__ = ["Failure", "bucket_missing", "describe"]

CREDENTIALS = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidClientTokenId",
    }
)
"""S3 error codes of credentials the server refused: every request fails alike."""

_CODE = re.compile(r"<Code>([^<]*)</Code>")
_MESSAGE = re.compile(r"<Message>([^<]*)</Message>")
_STATUS = re.compile(r"status code: (\d{3}[^:<]*)")
_RETRIES = re.compile(r"after (\d+) retries")
_UNREACHABLE = ("error sending request", "connection refused", "dns error", "timed out")


@dataclass(frozen=True, slots=True)
class Failure:
    """``text``: the cause on one line; ``remote_wide``: any request to the remote would
    fail so (name the remote, not the object)."""

    text: str
    remote_wide: bool


def bucket_missing(error: BaseException) -> bool:
    """True when ``error`` (e.g. obstore's not-found) says the bucket itself does not exist."""
    return _code(str(error)) == "NoSuchBucket"


def describe(error: BaseException, bucket: str, endpoint: str) -> Failure:
    """The cause of the failed request ``error`` to ``bucket`` at ``endpoint`` (a URL, or
    ``AWS``)."""
    text = str(error)
    code = _code(text)
    said = _said(text, code)
    if code == "NoSuchBucket":
        return Failure(f"no bucket {bucket} at {endpoint} ({said})", True)
    if code in CREDENTIALS:
        return Failure(f"the credentials were refused by {endpoint} ({said})", True)
    head = (text.strip().splitlines() or [type(error).__name__])[0]
    if code is None and any(sign in head.lower() for sign in _UNREACHABLE):
        retries = _RETRIES.search(head)
        tried = f", {retries.group(1)} retries" if retries else ""
        return Failure(f"cannot reach {endpoint} ({_detail(head)}{tried})", True)
    if code is None:
        return Failure(head, False)
    status = _STATUS.search(head)
    return Failure(f"{status.group(1).strip() if status else 'refused'} ({said})", False)


def _code(text: str) -> str | None:
    found = _CODE.search(text)
    return unescape(found.group(1)) if found else None


def _said(text: str, code: str | None) -> str:
    """``<Code>: <Message>`` of the server's error body."""
    message = _MESSAGE.search(text)
    return f"{code}: {unescape(message.group(1))}" if message else str(code)


def _detail(head: str) -> str:
    """The last clause of obstore's first line (``error sending request``)."""
    return head.rsplit(" - ", 1)[-1].removeprefix("HTTP error: ").strip()
