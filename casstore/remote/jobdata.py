"""A job on a remote: its snapshot (what the job record reaches) and the checks of its values.

A **job snapshot** names every value an imported job's record reaches in the index: the
record itself (its index value, bytes), the reward table and trial packs by the SHA-256 of
their index values, the evidence packs and zstd dictionaries by their index keys (already
content addresses). Its own key is the SHA-256 of its msgpack bytes, so a re-import that
changed anything gives a new snapshot, and the job's ref lists them as a name lists revisions.

Values read back pass the checks the index applies to its own: the digest of their bytes,
then the decoders of :mod:`casstore.trials.stored` (a job record validates, a reward table's
column CRC-32s, a trial pack's CRC-32); a dictionary must hash to its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from casstore.digest import Digest
from casstore.errors import CorruptRemoteError, CorruptStoreError, UsageError
from casstore.remote.client import Client
from casstore.remote.objects import checked, remote_decode, value_key
from casstore.store.index import Txn
from casstore.store.records import canonical
from casstore.store.values import decode_value, encode_value
from casstore.trials.evidence import dictionary_id
from casstore.trials.packs import job_packs, older_trials
from casstore.trials.records import JobRecord
from casstore.trials.references import job_references
from casstore.trials.stored import stored_job, stored_pack, stored_table

__all__ = ["JobSnapshot", "check_value", "local_snapshot"]


@dataclass(frozen=True, slots=True)
class JobSnapshot:
    """A job's snapshot: ``job_id``, ``record`` (index value bytes), ``reward_table``
    (digest), ``packs`` (``[(index key, digest)]``), ``evidence`` and ``dictionaries``
    (index keys); :meth:`encode` gives its bytes, :attr:`digest` their SHA-256."""

    job_id: str
    record: bytes
    reward_table: str
    packs: tuple[tuple[str, str], ...]
    evidence: tuple[str, ...]
    dictionaries: tuple[str, ...]

    def encode(self) -> bytes:
        """The snapshot's msgpack bytes (maps with sorted keys)."""
        fields = {
            "job_id": self.job_id,
            "record": self.record,
            "reward_table": self.reward_table,
            "packs": [list(pack) for pack in self.packs],
            "evidence": list(self.evidence),
            "dictionaries": list(self.dictionaries),
        }
        return encode_value(canonical(fields))

    @property
    def digest(self) -> str:
        """``sha256:`` of :meth:`encode`."""
        return str(Digest.of(self.encode()))

    def job(self) -> JobRecord:
        """The job record (the snapshot was checked when read: it decodes)."""
        return stored_job(self.job_id, decode_value(self.record))

    @classmethod
    def decode(cls, client: Client, digest: str, data: bytes) -> JobSnapshot:
        """The snapshot read as ``data`` at ``jobs/<digest>``: it must hash to ``digest`` and
        decode, and its record must validate (CorruptRemoteError naming the object)."""
        key = value_key("jobs", digest)
        raw = remote_decode(client, key, decode_value, checked(client, key, data, digest))
        snapshot = remote_decode(client, key, _from_map, raw)
        remote_decode(client, key, snapshot.job)
        return snapshot


def _from_map(raw: Any) -> JobSnapshot:
    """A snapshot from its decoded map (``ValueError`` on any other shape)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("record"), bytes):
        raise ValueError("not a job snapshot")
    packs = tuple((str(key), str(digest)) for key, digest in raw["packs"])
    return JobSnapshot(
        job_id=str(raw["job_id"]),
        record=raw["record"],
        reward_table=str(raw["reward_table"]),
        packs=packs,
        evidence=tuple(map(str, raw["evidence"])),
        dictionaries=tuple(map(str, raw["dictionaries"])),
    )


def local_snapshot(txn: Txn, job: JobRecord) -> tuple[JobSnapshot, dict[str, bytes]]:
    """The snapshot of the imported ``job`` and the values it names (remote key → index value
    bytes). UsageError for a job of an older schema (single trial records: import it again
    first, which rewrites it as packs); CorruptStoreError when a value is missing or damaged
    (read as the index reads it)."""
    job_id = job.job_id
    if next(older_trials(txn, job_id), None) is not None:
        raise UsageError(job_id, "the job is stored in an older schema: import it again first")
    values: dict[str, bytes] = {}

    def named(db: str, raw: bytes | memoryview | None, key: str | None = None) -> str:
        if raw is None:
            raise CorruptStoreError(f"{db}/{key or job_id}", "missing (named by the job record)")
        data = bytes(raw)
        digest = key or str(Digest.of(data))
        values[value_key(db, digest)] = data
        return digest

    record = bytes(txn.raw_get("jobs", job_id) or b"")
    table = named("reward_tables", txn.raw_get("reward_tables", job_id))
    packs = []
    for key, raw in job_packs(txn, job_id):
        stored_pack(key, raw, job_id, job.path, job.reward_key, job.pack_checksums)
        packs.append((key.decode(), named("trial_packs", raw)))
    evidence, dictionaries = set(), set()
    for trials in job_references(txn, job_id, job.pack_checksums):
        for trial in trials:
            if trial.evidence:
                evidence.add(trial.evidence.partition("#")[0])
            if trial.evidence_dict:
                dictionaries.add(trial.evidence_dict)
    for name in sorted(evidence):
        named("evidence", txn.raw_get("evidence", name), name)
    for name in sorted(dictionaries):
        named("zstd_dicts", txn.raw_get("zstd_dicts", name), name)
    snapshot = JobSnapshot(
        job_id, record, table, tuple(packs), tuple(sorted(evidence)), tuple(sorted(dictionaries))
    )
    return snapshot, values


def check_value(client: Client, db: str, digest: str, data: bytes, job: JobRecord) -> bytes:
    """``data`` read at ``<db>/<digest>`` for the snapshot of ``job``, checked as the index
    checks that value (CorruptRemoteError naming the object otherwise)."""
    key = value_key(db, digest)
    if db == "zstd_dicts":
        found = remote_decode(client, key, lambda: dictionary_id(decode_value(data)))
        if found != digest:
            raise CorruptRemoteError(client.where(key), f"the dictionary hashes to {found}")
        return data
    checked(client, key, data, digest)
    if db == "reward_tables":
        remote_decode(client, key, lambda: stored_table(job.job_id, decode_value(data)))
    elif db == "trial_packs":
        args = (job.job_id, job.path, job.reward_key, job.pack_checksums)
        remote_decode(client, key, stored_pack, key.encode(), data, *args)
    return data
