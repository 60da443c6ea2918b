"""Digests (typed values, streaming hashers) and Limits (defaults, overrides)."""

from __future__ import annotations

import hashlib

import blake3
import pytest

from casstore.archive.limits import Limits, parse_size
from casstore.digest import Digest, new_hasher
from casstore.errors import LimitError, UsageError

HEX = "ab" * 32


def test_digest_parse_and_format_round_trip():
    for text in (f"sha256:{HEX}", f"blake3:{HEX}"):
        digest = Digest.parse(text)
        assert str(digest) == text
        assert digest.hex == HEX


@pytest.mark.parametrize(
    "text",
    [
        f"sha256:{HEX.upper()}",
        f"sha256:{HEX[:-1]}",
        f"sha256:{HEX}0",
        f"md5:{HEX}",
        HEX,
        f" sha256:{HEX}",
        f"sha256:{HEX}\n",
        "",
    ],
)
def test_digest_rejects_every_other_form(text):
    with pytest.raises(UsageError):
        Digest.parse(text)
    assert not Digest.is_digest(text)


def test_digest_checks_agree_with_parse():
    """``is_digest`` and ``is_hex`` accept exactly what :meth:`Digest.parse` accepts."""
    for algorithm in ("sha256", "blake3"):
        text = f"{algorithm}:{HEX}"
        assert Digest.is_digest(text, algorithm) and Digest.parse(text, algorithm).hex == HEX
        assert not Digest.is_digest(text, "sha256" if algorithm == "blake3" else "blake3")
    assert Digest.is_hex(HEX) and Digest.of(b"").hex == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_digest_error_quotes_the_text_and_the_forms():
    with pytest.raises(UsageError) as caught:
        Digest.parse("")
    assert str(caught.value) == (
        "'' is not a digest: expected sha256:<64 lowercase hex digits> "
        "or blake3:<64 lowercase hex digits>"
    )


def test_digest_algorithm_must_match_when_asked():
    with pytest.raises(UsageError, match="is not a sha256: digest"):
        Digest.parse(f"blake3:{HEX}", "sha256")


def test_digest_constructor_validates():
    with pytest.raises(UsageError):
        Digest("sha256", "xyz")  # type: ignore[arg-type]


def test_streaming_hashers_equal_one_shot():
    data = bytes(range(256)) * 1000
    for algorithm, reference in (
        ("sha256", hashlib.sha256(data).hexdigest()),
        ("blake3", blake3.blake3(data).hexdigest()),
    ):
        hasher = new_hasher(algorithm)
        for start in range(0, len(data), 7919):
            hasher.update(memoryview(data)[start : start + 7919])
        assert hasher.digest() == Digest(algorithm, reference)


def test_limit_defaults_are_the_spec_values():
    limits = Limits()
    assert limits.max_entries == 100_000
    assert limits.max_file_bytes == 4 * 2**30
    assert limits.max_payload_bytes == 16 * 2**30
    assert limits.max_metadata_bytes == 64 * 2**10
    assert limits.max_path_bytes == 4096
    assert limits.max_expanded_bytes > limits.max_payload_bytes


def test_limit_overrides_accept_names_with_or_without_prefix_and_units():
    limits = Limits().with_overrides(["entries=10", "max_file_bytes=2MiB", "payload-bytes=3k"])
    assert (limits.max_entries, limits.max_file_bytes, limits.max_payload_bytes) == (
        10,
        2 * 2**20,
        3000,
    )
    assert Limits().max_entries == 100_000  # the default is untouched


@pytest.mark.parametrize("assignment", ["bogus=1", "max_entries", "max_entries=-1", "entries=0"])
def test_bad_limit_overrides_are_usage_errors(assignment):
    with pytest.raises(UsageError):
        Limits().with_overrides([assignment])


@pytest.mark.parametrize(
    ("text", "value"),
    [("7", 7), ("64KiB", 65536), ("4GiB", 4 * 2**30), ("2M", 2_000_000), ("5kb", 5000)],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "1.5G", "12 parsecs", "-3", "KiB"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError):
        parse_size(text)


def test_limit_error_names_limit_value_bound_and_path():
    with pytest.raises(LimitError) as caught:
        Limits(max_entries=3).check("max_entries", 4, "task/x")
    error = caught.value
    assert (error.limit, error.value, error.bound, error.path) == ("max_entries", 4, 3, "task/x")
    assert str(error) == "task/x: limit max_entries exceeded: 4 > 3"
    Limits(max_entries=3).check("max_entries", 3, "task/x")  # at the bound is fine
