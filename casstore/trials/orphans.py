"""Orphaned job data: the values of the trial databases no job record reaches.

A job record (``jobs``, key: the job id) reaches its trial packs (``trial_packs``,
``<job id>/<8 digits>``), an older store's single trial records (``trials``, ``<job id>/<trial
name>``) and its reward table (``reward_tables``, the job id); its trials' evidence
references reach evidence values (``evidence``), and the trials' and the record's dictionary
ids zstd dictionaries (``zstd_dicts``). Any other value is **orphaned**: ``orphan_trial_pack``,
``orphan_trial_record``, ``orphan_reward_table``, ``orphan_evidence``, ``orphan_dictionary``
(:data:`KINDS`).

No command leaves any: an import writes a job's record, packs and table in one transaction, only
the evidence its trials reference, and removes the evidence and dictionaries it stops
referencing that no other trial references (:func:`drop_unreferenced`: trials replaced by saved
trials or read again, a job adopted; every unreferenced one after a damaged or lost trial pack
was replaced, :func:`drop_all_unreferenced`). Orphans are damage (a lost job record) or the
leftovers of an older version: fsck reports them (:mod:`casstore.trials.check`), ``casstore gc``
removes them (:func:`remove_orphans`), and importing the job directory again restores a lost job
record (the import merges the trial packs stored under its id, as for any stored job).

Finding them costs nothing when there are none: a database is listed only when its count of
values differs from the count the job records reach.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from casstore.errors import CorruptStoreError
from casstore.store.index import Index, Txn
from casstore.store.values import decode, decode_value
from casstore.trials.evidence import dictionary_id, entry_key
from casstore.trials.packs import job_packs, older_trials
from casstore.trials.references import job_references
from casstore.trials.stored import stored_job

__all__ = [
    "KINDS",
    "Orphan",
    "Referenced",
    "drop_all_unreferenced",
    "drop_unreferenced",
    "find_orphans",
    "remove_orphans",
]

KINDS = {
    "trial_packs": "orphan_trial_pack",
    "trials": "orphan_trial_record",
    "reward_tables": "orphan_reward_table",
    "evidence": "orphan_evidence",
    "zstd_dicts": "orphan_dictionary",
}
"""The fsck problem kind of an orphaned value, by database."""
_REIMPORT = "; importing its job directory again restores the job record"


@dataclass
class Orphan:
    """An orphaned value: its ``db``, its ``key`` (as text; ``stored``: the bytes), its size
    in bytes (key and value)."""

    db: str
    key: str
    stored: bytes
    size: int

    @property
    def kind(self) -> str:
        return KINDS[self.db]

    @property
    def message(self) -> str:
        """The fsck message: what it is and how to repair it."""
        hint = _REIMPORT if self.db in ("trial_packs", "trials", "reward_tables") else ""
        return f"{self.db}/{self.key}: no job record references it (casstore gc removes it{hint})"


@dataclass
class Referenced:
    """What the job records reach: ``jobs`` (ids), how many ``packs``, ``older`` single
    records and ``tables`` they own, the ``evidence`` keys and ``dictionaries`` their trials
    and records name; ``complete`` False when a job record or a pack did not decode (what it
    references is unknown: no evidence or dictionary is called orphaned)."""

    jobs: set[str] = field(default_factory=set)
    packs: int = 0
    older: int = 0
    tables: int = 0
    evidence: set[str] = field(default_factory=set)
    dictionaries: set[str] = field(default_factory=set)
    complete: bool = True

    def add_trial(self, evidence: str | None, dictionary: str | None) -> None:
        """A trial's evidence reference and dictionary id."""
        if evidence:
            self.evidence.add(evidence.partition("#")[0])
        if dictionary:
            self.dictionaries.add(dictionary)


def referenced_in(txn: Txn) -> Referenced:
    """What every job record of the index reaches (each trial's references read without
    decoding its record). Raises :class:`CorruptStoreError` for a value that does not
    decode: then nothing can be called orphaned."""
    found = Referenced()
    for key, raw in txn.items("jobs"):
        record = stored_job(key, raw)
        found.jobs.add(key)
        found.packs += sum(1 for _ in job_packs(txn, key))
        found.older += sum(1 for _ in older_trials(txn, key))
        found.tables += txn.has("reward_tables", key)
        if record.dictionary:
            found.dictionaries.add(record.dictionary)
        for trials in job_references(txn, key, record.pack_checksums):
            for trial in trials:
                found.add_trial(trial.evidence, trial.evidence_dict)
    return found


def find_orphans(txn: Txn, referenced: Referenced) -> list[Orphan]:
    """The orphaned values of the index, given what its job records reach."""
    found: list[Orphan] = []
    jobs = referenced.jobs
    checks: list[tuple[str, int, Callable[[str], bool]]] = [
        ("trial_packs", referenced.packs, lambda key: _pack_job(key) in jobs),
        ("trials", referenced.older, lambda key: _has_job(key, jobs)),
        ("reward_tables", referenced.tables, jobs.__contains__),
    ]
    if referenced.complete:
        named = (("evidence", referenced.evidence), ("zstd_dicts", referenced.dictionaries))
        for db, keys in named:
            present = sum(txn.has(db, key) for key in keys)
            checks.append((db, present, keys.__contains__))
    for db, reached, is_reached in checks:
        if txn.count(db) != reached:  # else every value is reached: nothing listed
            for key, raw in txn.raw_items(db):
                name = key.decode(errors="backslashreplace")
                if not is_reached(name):
                    _check_address(db, name, raw, referenced)
                    found.append(Orphan(db, name, key, len(key) + len(raw)))
    return found


def _check_address(db: str, name: str, raw: bytes | memoryview, referenced: Referenced) -> None:
    """CorruptStoreError when an unreached evidence value or dictionary is one the trials
    reference under another key: they are content-addressed, so a value whose own address
    is referenced (and absent, or it would be reached) sits under a damaged key, and gc would
    remove what the trials still need (a fresh tester's finding). A value hashing to nothing
    referenced is an orphan."""
    try:
        if db == "zstd_dicts":
            address = dictionary_id(decode(db, name, decode_value, raw))
            wanted = referenced.dictionaries
        else:
            address, wanted = entry_key(raw), referenced.evidence
    except CorruptStoreError:
        return  # a value that does not decode is no trial's: an orphan
    if address != name and address in wanted:
        rule = f"a damaged key: its bytes are {address}, which trials reference; run casstore fsck"
        raise CorruptStoreError(f"{db}/{name}", rule)


def _pack_job(key: str) -> str | None:
    """The job id of a ``trial_packs`` key ``<job id>/<8 digits>``, None for another key."""
    job, slash, number = key.rpartition("/")
    return job if slash and len(number) == 8 and number.isdigit() else None


def _has_job(key: str, jobs: set[str]) -> bool:
    """Whether an older ``trials`` key ``<job id>/<trial name>`` names one of ``jobs``."""
    at = key.find("/")
    while at != -1:
        if key[:at] in jobs:
            return True
        at = key.find("/", at + 1)
    return False


def remove_orphans(index: Index, dry_run: bool = False) -> list[Orphan]:
    """Remove the orphaned values of the index (``dry_run``: only list them), in one write
    transaction taken only when there are some. Raises :class:`CorruptStoreError` when a job
    record or a trial pack does not decode (what is referenced is then unknown: nothing is
    removed; fsck names the damage)."""

    def found(txn: Txn) -> list[Orphan]:
        return find_orphans(txn, referenced_in(txn))

    def remove(txn: Txn) -> list[Orphan]:
        orphans = found(txn)  # (again: in the write transaction)
        for orphan in orphans:
            txn.delete(orphan.db, orphan.stored)
        return orphans

    orphans = index.read(found)
    if dry_run or not orphans:
        return orphans
    return index.write(remove)


def drop_unreferenced(txn: Txn, evidence: Iterable[str], dictionaries: Iterable[str]) -> None:
    """Remove the ``evidence`` keys and ``dictionaries`` no job record of the index
    references any more (an import that stopped referencing them, after its writes); none
    when a job record or pack does not decode (fsck names the damage, gc the orphans once
    it is repaired)."""
    evidence, dictionaries = set(evidence), set(dictionaries)
    if not evidence and not dictionaries:
        return
    try:
        referenced = referenced_in(txn)
    except CorruptStoreError:  # another job damaged: what it references is unknown, keep all
        return
    for key in evidence - referenced.evidence:
        txn.delete("evidence", key)
    for key in dictionaries - referenced.dictionaries:
        txn.delete("zstd_dicts", key)


def drop_all_unreferenced(txn: Txn) -> None:
    """:func:`drop_unreferenced` over every evidence value and zstd dictionary of the index:
    after damaged or lost trial records were replaced, whose references are unknown."""
    keys = [
        [key.decode(errors="backslashreplace") for key, _ in txn.raw_items(db)]
        for db in ("evidence", "zstd_dicts")
    ]
    drop_unreferenced(txn, *keys)
