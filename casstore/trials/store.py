"""Imported jobs in a store's LMDB index (what ``Store.import_jobs`` and friends do).

Databases (keys UTF-8, values msgpack): ``jobs`` (job id → :class:`JobRecord`),
``trial_packs`` (``<job id>/<pack number, 8 digits>`` → a **trial pack**: the array of up to
:data:`PACK` trial records (:class:`TrialRecord`, by trial name) in their stored form, each
an array without what the job record implies, see
:func:`~casstore.trials.records.encode_trial_pack`),
``reward_tables`` (job id → :meth:`RewardTable.to_bytes`), ``evidence`` (content-addressed:
``sha256:<hex>`` of the value; a pack of the zstd-compressed raw result.json files of the
trial directories read together (:data:`~casstore.trials.chunk.TRIALS_PER_CHUNK` or so), a trial's
reference ``<key>#<index>``, see :mod:`casstore.trials.evidence`),
``zstd_dicts`` (dictionary id → bytes). One value per few hundred trials, not one per trial:
an import of 100,000 trials writes 400 values instead of 200,000.

Stores of schema 1 and 2 kept one record per trial in ``trials`` (``<job id>/<trial name>``)
and one evidence entry per file: they are read alike (:func:`_stored_trials`,
:func:`evidence_bytes`); the next import into such a job rewrites its records as packs.

Re-importing a job is idempotent: trial directories already stored (by name) are not read
again; new ones are added, attempts are re-assigned over all of the job's trials and the
job's reward table is rebuilt. Importing with another ``reward_key`` rebuilds the table and
the records' reward-key metadata. A report's ``imported`` counts only the trials the store did
not hold before (re-importing the same job or saved-trials file reports 0 new).

A job keeps the name it was first imported with: re-importing it with another ``name`` is
refused (:class:`UsageError` naming the job and its current name), so that the name it was
known by never stops resolving.

Paths are absolute: the job record's ``path`` and the trials' ``result_path`` (the rebuild
hint of a saved-trials file names the job directory from them, and must work from any
folder).

Stored values are read through :func:`stored_job`, :func:`stored_table`, :func:`stored_trial`
and :func:`evidence_bytes`: a value that does not decode or validate (or a reward table one
of whose column CRC-32s fails) is :class:`CorruptStoreError` naming ``db/key``.
"""

from __future__ import annotations

import operator
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec

from casstore.errors import CheckError, UnknownReferenceError, UsageError, is_text, printable
from casstore.progress import Progress
from casstore.store.index import Txn, decode
from casstore.table.codes import ordered_counts
from casstore.table.columns import RewardTable
from casstore.trials.evidence import (
    decompress,
    dictionary_id,
    entry_key,
    frame_count,
    frame_of,
    split_reference,
)
from casstore.trials.files import job_id_at
from casstore.trials.find import find_jobs
from casstore.trials.find import subdir_names as _subdir_names
from casstore.trials.imported import ImportedJob
from casstore.trials.read import paused_gc, read_job
from casstore.trials.records import (
    ImportReport,
    JobRecord,
    TrialRecord,
    decode_stored,
    decode_trial_pack,
    encode_stored,
    encode_trial_pack,
    from_builtins,
    record_reward_key,
)
from casstore.trials.saved import read_trials_jsonl
from casstore.trials.table import assign_attempts, job_counts, table_from_records

if TYPE_CHECKING:
    from casstore.store.core import Store

__all__ = [
    "PACK",
    "TRIAL_DATABASES",
    "checked_dictionary",
    "checked_entry",
    "evidence_bytes",
    "import_jobs",
    "import_records",
    "job_packs",
    "job_record",
    "jobs",
    "older_trials",
    "reward_table",
    "stored_job",
    "stored_pack",
    "stored_table",
    "stored_trial",
    "trial_records",
]

PACK = 500
"""Trial records per ``trial_packs`` value (the last pack of a job holds the rest)."""
TRIAL_DATABASES = ("jobs", "trial_packs", "trials", "reward_tables", "evidence", "zstd_dicts")


def import_jobs(
    store: Store,
    paths: Sequence[Path | str],
    reward_key: str = "reward",
    name: str | None = None,
    progress: Progress | None = None,
) -> list[ImportReport]:
    """Import Harbor job directories (or ``*.jsonl`` saved-trials files) into ``store``.

    ``paths``: job directories, directories of job directories, saved-trials files.
    ``name``: the job's name (only with a single job; default the directory name; a job
    already imported under another name is refused).
    ``progress``: ``start(total trial dirs)`` once, ``advance(trial dir)`` per trial.
    Returns one :class:`ImportReport` per job. Raises :class:`UsageError` for a path holding
    no job (or ``--name`` with several jobs), :class:`CheckError` for an unusable job or
    saved-trials file.
    """
    files = [Path(p) for p in paths if Path(p).is_file() and str(p).endswith(".jsonl")]
    dirs = [Path(p) for p in paths if Path(p) not in files]
    for p in paths:
        if Path(p).is_file() and Path(p) not in files:
            raise UsageError(str(p), "not a Harbor job directory or a trials .jsonl file")
    job_dirs = find_jobs(dirs) if dirs else []
    if name is not None and len(job_dirs) + len(files) != 1:
        raise UsageError(name, "--name needs a single job")
    if name is not None and not is_text(name):
        raise UsageError(printable(name), "--name is not valid Unicode text")
    reports: list[ImportReport] = []
    # each job directory listed once (scandir, no stat per entry): for the total and the parse
    listings = {job_dir: _subdir_names(job_dir) for job_dir in job_dirs}
    if progress is not None:
        progress.start(sum(len(names) for names in listings.values()))
    for job_dir in job_dirs:
        reports.append(
            _import_dir(store, job_dir, reward_key, name, progress, listings.pop(job_dir))
        )
    for file in files:
        key, records = read_trials_jsonl(file)
        by_job: dict[str, list[TrialRecord]] = {}
        for record in records:
            by_job.setdefault(record.job_id, []).append(record)
        for job_id, group in by_job.items():  # the whole file checked before any import
            _given_once(group, job_id, str(file))
        for job_id, group in by_job.items():
            reports.append(import_records(store, job_id, group, key, name, where=str(file)))
    return reports


def _import_dir(
    store: Store,
    job_dir: Path,
    reward_key: str,
    name: str | None,
    progress: Progress | None,
    trial_dirs: list[str],
) -> ImportReport:
    index = store.index
    job_id = job_id_at(job_dir)  # as read_job gives it: the stream writes under this id
    existing = index.read(lambda txn: txn.get("jobs", job_id))
    existing_record = stored_job(job_id, existing) if existing else None
    _check_name(str(job_dir), job_id, name, existing_record)
    skip = set()
    dictionary = None
    if existing_record is not None:
        skip = set(existing_record.trial_names)
        if existing_record.dictionary:
            dictionary = index.read(lambda txn: txn.get("zstd_dicts", existing_record.dictionary))
    advance = progress.advance if progress is not None else None
    # a new job's trials are written while the rest is parsed (one write transaction)
    stream = _Stream(index, job_id) if existing_record is None else None
    try:
        parsed = read_job(
            job_dir,
            reward_key,
            name=name or (existing_record.name if existing_record else None),
            skip=skip & set(trial_dirs),  # Harbor names trial directories after their trials
            trial_dirs=trial_dirs,
            dictionary=dictionary,
            progress=advance,
            sink=stream,
        )
    except BaseException:
        if stream is not None:
            stream.abort()
        raise
    if stream is not None:
        with paused_gc():
            report = stream.finish(parsed)
        if report is not None:
            return report

    def body(txn: Txn) -> ImportReport:
        previous = existing_record
        if previous is None:  # imported meanwhile by another process?
            raw = txn.get("jobs", job_id)
            previous = stored_job(job_id, raw) if raw else None
            _check_name(str(job_dir), job_id, name, previous)
        return _store_job(txn, parsed, previous)

    _reserve(store, parsed)
    with paused_gc():
        return index.write(body)


class _Stream:
    """The write of a new job whose chunks are stored as :func:`read_job` parses them (see
    :class:`ChunkSink`): ``start`` grows the map for the job and opens the write transaction,
    ``add`` writes a chunk's evidence pack and every full trial pack (:func:`_trial_packs`:
    the records must come in trial-name order, as Harbor names trial directories after their
    trials), ``finish`` writes the last pack and the rest as :func:`_store_packed` does and
    commits. Anything unexpected (the job appeared meanwhile, a full map, trial names out of
    order, records the merge rewrote) aborts the transaction: ``finish`` then returns None and
    the caller writes the parsed job the usual way."""

    def __init__(self, index: Any, job_id: str) -> None:
        self.index = index
        self.job_id = job_id
        self.txn: Any = None
        self.failed = False
        self.names: list[str] = []  # records not yet in a pack, and their trial names
        self.records: list[bytes] = []
        self.last: str | None = None  # the trial name of the last record added
        self.packs = 0  # packs written

    def start(self, trials: int) -> None:
        env = self.index.env
        _grow_map(env, _ROW_BYTES * trials)
        while True:
            try:
                self.txn = env.begin(write=True)
                break
            except lmdb.MapResizedError:
                env.set_mapsize(0)
        txn = Txn(self.txn, self.index.dbs)
        if txn.get("jobs", self.job_id) is not None or _has_trials(txn, self.job_id):
            self.failed = True  # imported meanwhile: the usual path merges with it

    def add(self, chunk: Any) -> None:
        if self.failed or self.txn is None or not chunk.records:
            return
        names = chunk.names
        if (self.last is not None and names[0] <= self.last) or not _increasing(names):
            self.failed = True  # the usual path sorts them
            return
        self.last = names[-1]
        self.names += names
        self.records += chunk.records
        try:
            txn = Txn(self.txn, self.index.dbs)
            _put_evidence(txn, [(chunk.ev_key, chunk.ev_pack)])
            self._write_packs(txn, full_only=True)
        except lmdb.Error:
            self.failed = True

    def _write_packs(self, txn: Txn, full_only: bool) -> None:
        """Write the buffered records in packs (only full ones when ``full_only``)."""
        count = len(self.records) - len(self.records) % PACK if full_only else len(self.records)
        if count:
            packs = _trial_packs(self.job_id, self.names[:count], self.records[:count], self.packs)
            _put_encoded(txn, "trial_packs", packs)
            self.packs += len(packs)
            del self.names[:count], self.records[:count]

    def finish(self, parsed: ImportedJob) -> ImportReport | None:
        """Commit and report, or None (transaction aborted) when the job must be written
        the usual way."""
        if self.txn is None:
            return None
        packed = parsed.packed
        if self.failed or packed is None or packed.rewritten or parsed.job_id != self.job_id:
            self.abort()
            return None
        try:
            txn = Txn(self.txn, self.index.dbs)
            self._write_packs(txn, full_only=False)
            _put_dictionary(txn, parsed)
            report = _store_packed(txn, parsed, None, rows=False)
            self.txn.commit()
        except lmdb.Error:
            self.abort()
            return None
        self.txn = None
        return report

    def abort(self) -> None:
        if self.txn is not None:
            self.txn.abort()
            self.txn = None


# map bytes reserved per trial directory of a streamed job (a record, its keys and evidence
# take about 1.5 KB; _grow_map doubles it): a bigger job ends in the usual write (map grown)
_ROW_BYTES = 4096


def _grow_map(env: Any, need: int) -> None:
    """Grow the LMDB map (doubling) to hold ``2 * need`` more bytes than it uses."""
    info, stat = env.info(), env.stat()
    used = (info["last_pgno"] + 1) * stat["psize"]
    want = used + 2 * need
    if want > info["map_size"]:
        size = info["map_size"]
        while size < want:
            size *= 2
        env.set_mapsize(size)


def _check_name(where: str, job_id: str, name: str | None, previous: JobRecord | None) -> None:
    """UsageError when ``name`` would rename an already-imported job (names never change)."""
    if name is not None and previous is not None and previous.name != name:
        raise UsageError(
            where,
            f"job {job_id} is already imported as {previous.name!r}; a job keeps its name "
            f"(re-import without --name)",
        )


def _reserve(store: Store, parsed: ImportedJob) -> None:
    """Grow the LMDB map before one big write transaction, so that it is not retried from the
    start after each doubling (``Index.write`` grows on ``MapFullError``)."""
    per_row = 2048 + 2 * (64 + 9 * len(parsed.table.keys))  # record, index and table bytes
    if parsed.packed is not None:
        evidence = sum(len(value) for _, value in parsed.packed.evidence)
        need = evidence + per_row * len(parsed.packed.names)
    else:
        need = sum(len(b) for b in parsed.evidence.values()) + per_row * len(parsed.trials)
    _grow_map(store.index.env, need)


def _store_job(
    txn: Txn, parsed: ImportedJob, previous: JobRecord | None, replace: bool = False
) -> ImportReport:
    """Write a parsed job, merged with the trials stored for it. A parsed trial whose name is
    stored already replaces it when ``replace`` (saved trials), else is left out with a
    ``duplicate_trial_name`` diagnostic (a job directory: only directories not imported
    before are read, so such a trial is another directory's copy; the first one stays)."""
    job_id = parsed.job_id
    record = parsed.record
    key = record.reward_key
    _put_dictionary(txn, parsed)
    if parsed.packed is not None and not _has_trials(txn, job_id):
        return _store_packed(txn, parsed, previous)
    _put_evidence(txn, [(k.encode(), value) for k, value in parsed.evidence.items()])
    stored_as = previous or record  # the job the stored records were written for
    stored = _stored_trials(txn, job_id, stored_as.path, stored_as.reward_key)
    _rebase(stored, stored_as.path, record.path)
    new = list(parsed.trials)
    if replace:
        new_names = {trial.trial_name for trial in new}
        old = [t for t in stored if t.trial_name not in new_names]
    else:
        old, new = stored, _not_stored(new, stored, record)
    everything = old + new
    record_reward_key(everything, key)
    if old:
        assign_attempts(everything)
        table = table_from_records(everything, key, jobs=[job_id])
    else:  # the parsed trials alone: attempts and table as read_job made them
        table = parsed.table
    # every record rewritten, in packs by trial name (attempts may have changed anywhere)
    _delete_trials(txn, job_id)
    everything.sort(key=_TRIAL_NAME)
    names = [t.trial_name for t in everything]
    records = [encode_stored(t, record.path, key) for t in everything]
    _put_encoded(txn, "trial_packs", _trial_packs(job_id, names, records))
    txn.put("reward_tables", job_id, table.to_bytes())
    codes: Counter[str] = Counter(t.failure for t in everything if t.failure)
    for code in ("result_unreadable", "job_result_missing_partial", "trial_count_mismatch"):
        if parsed.failure_codes.get(code):
            codes[code] = parsed.failure_codes[code]
    if previous is not None:
        _keep_previous(record, previous, bool(parsed.trials))
    record.trials = len(everything)
    record.trial_names = sorted(t.trial_name for t in everything)
    record.failure_codes = ordered_counts(codes)
    record.agents = [a for a in table.agents if a]
    record.models = [m for m in table.models if m]
    record.datasets = [d for d in table.datasets if d]
    _put_job(txn, record)
    counts = job_counts(everything)
    known = set(previous.trial_names) if previous is not None else set()
    return ImportReport(
        job=job_id,
        name=record.name,
        trials=counts["trials"],
        imported=sum(t.trial_name not in known for t in parsed.trials),
        invalid=counts["invalid"],
        exceptions=counts["exceptions"],
        no_verifier=counts["no_verifier"],
        failure_codes=record.failure_codes,
        diagnostics=record.diagnostics,
    )


def _rebase(records: list[TrialRecord], old: str | None, new: str | None) -> None:
    """Result paths under a job's old directory ``old`` that no longer exist moved under
    ``new`` where the file is (the job directory was moved, then imported from there; a copy
    leaves the trials read before where they were read)."""
    if not old or not new or old == new:
        return
    prefix = old.rstrip("/") + "/"
    for r in records:
        path = r.result_path
        if path and path.startswith(prefix) and not os.path.exists(path):
            moved = new.rstrip("/") + "/" + path[len(prefix) :]
            if os.path.exists(moved):
                r.result_path = moved


def _not_stored(
    trials: list[TrialRecord], stored: list[TrialRecord], record: JobRecord
) -> list[TrialRecord]:
    """``trials`` whose names are not among ``stored``; those read from another directory
    than the stored trial of their name are reported on ``record``
    (``duplicate_trial_name``, with their trial directories)."""
    known = {t.trial_name: _trial_dir(t) for t in stored}
    dirs = [
        _trial_dir(t) for t in trials if known.get(t.trial_name, _trial_dir(t)) != _trial_dir(t)
    ]
    if dirs:
        code = "duplicate_trial_name"
        found = next((d for d in record.diagnostics if d.get("code") == code), None)
        if found is None:
            found = {"code": code, "count": 0, "trial_dirs": []}
            record.diagnostics.append(found)
        found["trial_dirs"] = list(dict.fromkeys([*found["trial_dirs"], *dirs]))  # (retries)
        found["count"] = len(found["trial_dirs"])
    return [t for t in trials if t.trial_name not in known]


def _trial_dir(record: TrialRecord) -> str:
    """The name of the trial directory a record was read from (else its trial name)."""
    return Path(record.result_path).parent.name if record.result_path else record.trial_name


def _put_job(txn: Txn, record: JobRecord) -> None:
    """The job record at its id, encoded straight from the struct (a third of the time of
    its builtins through ``Txn.put`` for 100,000 trial names; read back alike)."""
    txn._txn.put(record.job_id.encode(), _ENCODER.encode(record), db=txn._dbs["jobs"])


def _put_dictionary(txn: Txn, parsed: ImportedJob) -> None:
    """The job's zstd dictionary, unless stored already."""
    record = parsed.record
    if (
        parsed.dictionary is not None
        and record.dictionary is not None
        and txn.get("zstd_dicts", record.dictionary) is None
    ):
        txn.put("zstd_dicts", record.dictionary, parsed.dictionary)


def _has_trials(txn: Txn, job_id: str) -> bool:
    """Whether the store holds trial records of ``job_id`` (packs, or older single records)."""
    older = next(older_trials(txn, job_id), None)
    return older is not None or next(job_packs(txn, job_id), None) is not None


def older_trials(txn: Txn, job_id: str) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of the job's single trial records in ``trials`` (schemas 1 and 2:
    keys ``<job id>/<trial name>``)."""
    return txn.raw_items("trials", f"{job_id}/")


_TRIAL_NAME = operator.attrgetter("trial_name")


def job_packs(txn: Txn, job_id: str) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` of the job's ``trial_packs`` in pack order: the keys
    ``<job id>/<pack number, 8 digits>`` (another job whose id starts ``<job id>/`` has
    longer keys)."""
    prefix = f"{job_id}/"
    size = len(prefix.encode()) + _PACK_DIGITS
    for key, raw in txn.raw_items("trial_packs", prefix):
        if len(key) == size and key[-_PACK_DIGITS:].isdigit():
            yield key, raw


_PACK_DIGITS = 8


def _delete_trials(txn: Txn, job_id: str) -> None:
    """Remove every trial record of ``job_id`` (packs, and older single records)."""
    for db, found in (
        ("trial_packs", job_packs(txn, job_id)),
        ("trials", older_trials(txn, job_id)),
    ):
        for key in [key for key, _ in found]:
            txn._txn.delete(key, db=txn._dbs[db])


def _pack_key(job_id: str, number: int) -> bytes:
    """The ``trial_packs`` key of the job's pack ``number`` (0 first): of a bounded size,
    whatever the trial names (an LMDB key holds at most 511 bytes)."""
    return f"{job_id}/{number:0{_PACK_DIGITS}d}".encode()


def _trial_packs(
    job_id: str, names: list[str], records: list[bytes], first: int = 0
) -> list[tuple[bytes, bytes]]:
    """``(key, pack)`` items holding ``records`` (stored form; their trial ``names`` alike)
    by trial name, :data:`PACK` per pack, numbered from ``first``: a job's packs depend on
    its records alone, not on how they were read or written."""
    if not _increasing(names):
        order = sorted(range(len(names)), key=names.__getitem__)
        records = [records[i] for i in order]
    return [
        (_pack_key(job_id, first + k), encode_trial_pack(records[start : start + PACK]))
        for k, start in enumerate(range(0, len(records), PACK))
    ]


def _put_evidence(txn: Txn, items: list[tuple[bytes, bytes]]) -> None:
    """Store evidence values at their content digests. A value stored at the same digest is
    kept unless its bytes differ (damaged: the digest fixes the bytes), then replaced."""
    db = txn._dbs["evidence"]
    for key, value in items:
        kept = not txn._txn.put(key, value, db=db, overwrite=False)
        if kept and txn._txn.get(key, db=db) != value:
            txn._txn.put(key, value, db=db)


def _increasing(names: list[str]) -> bool:
    """Whether ``names`` are strictly increasing."""
    return all(map(str.__lt__, names, islice(names, 1, None)))


def _store_packed(
    txn: Txn, parsed: ImportedJob, previous: JobRecord | None, rows: bool = True
) -> ImportReport:
    """:func:`_store_job` for a job read by ``read_job`` whose trials are the job's only ones:
    the packed records, evidence and table written as they are (nothing decoded). ``rows``
    False: the records and evidence are written already (:class:`_Stream`)."""
    packed = parsed.packed
    assert packed is not None
    job_id, record = parsed.job_id, parsed.record
    if rows:
        _put_evidence(txn, packed.evidence)
        _put_encoded(txn, "trial_packs", _trial_packs(job_id, packed.names, packed.records))
    txn.put("reward_tables", job_id, packed.table.to_bytes())
    codes: Counter[str] = Counter(packed.failures)
    for code in ("result_unreadable", "job_result_missing_partial", "trial_count_mismatch"):
        if parsed.failure_codes.get(code):
            codes[code] = parsed.failure_codes[code]
    if previous is not None:
        _keep_previous(record, previous, bool(packed.names))
    record.trials = len(packed.names)
    if len(record.trial_names) != len(packed.names):  # read_job sorted them already
        record.trial_names = sorted(packed.names)
    record.failure_codes = ordered_counts(codes)
    table = packed.table
    record.agents = [a for a in table.agents if a]
    record.models = [m for m in table.models if m]
    record.datasets = [d for d in table.datasets if d]
    _put_job(txn, record)
    counts = packed.counts
    return ImportReport(
        job=job_id,
        name=record.name,
        trials=counts["trials"],
        imported=len(packed.names),
        invalid=counts["invalid"],
        exceptions=counts["exceptions"],
        no_verifier=counts["no_verifier"],
        failure_codes=record.failure_codes,
        diagnostics=record.diagnostics,
    )


def _keep_previous(record: JobRecord, previous: JobRecord, new_trials: bool) -> None:
    record.imported_at = previous.imported_at or record.imported_at
    # drift seen on trials read earlier stays reported (a re-import reads only new ones)
    codes_now = {d.get("code") for d in record.diagnostics}
    record.diagnostics = record.diagnostics + [
        d
        for d in previous.diagnostics
        if d.get("code") == "harbor_schema_drift" and "harbor_schema_drift" not in codes_now
    ]
    if previous.dictionary and not new_trials:
        record.dictionary = previous.dictionary


def _put_encoded(
    txn: Txn, db: str, items: list[tuple[bytes, bytes]], overwrite: bool = True
) -> None:
    """Already-encoded ``(key, value)`` items in one ``Cursor.putmulti`` in key order (the
    first of equal keys wins when not ``overwrite``). Keys all beyond the database's last
    one (a new job's records, written chunk after chunk) are appended: pages filled (inserts
    in order would leave them half full) and no search per key."""
    if not items:
        return
    items = sorted(items, key=_KEY)
    cursor = txn._txn.cursor(db=txn._dbs[db])
    try:
        if not cursor.last() or cursor.key() < items[0][0]:
            _, added = cursor.putmulti(items, overwrite=overwrite, append=True)
            if added == len(items):
                return
            # equal keys among the items: not appended; the plain puts settle them
        cursor.putmulti(items, overwrite=overwrite)
    finally:
        cursor.close()


_ENCODER = msgspec.msgpack.Encoder()
_KEY = operator.itemgetter(0)  # of a (key, value) item


def import_records(
    store: Store,
    job_id: str,
    records: list[TrialRecord],
    reward_key: str,
    name: str | None = None,
    where: str | None = None,
) -> ImportReport:
    """Store saved trials (from ``trials.jsonl``) as job ``job_id``: records and the reward
    table only (their evidence stays where it was). ``name``: the job's name (default: its
    current one, else the job id; another name for an imported job is refused naming
    ``where``); the job's path is its trials' job directory (from their ``result_path``)
    when they agree on one. A stored trial of the same name is replaced. Raises
    :class:`CheckError` naming ``where`` when a trial name is given twice."""
    _given_once(records, job_id, where or job_id)
    existing = store.index.read(lambda txn: txn.get("jobs", job_id))
    previous = stored_job(job_id, existing) if existing else None
    _check_name(where or job_id, job_id, name, previous)
    assign_attempts(records)
    record = JobRecord(
        job_id=job_id, name=name or job_id, path=_job_dir_of(records), reward_key=reward_key
    )
    table = table_from_records(records, reward_key, jobs=[job_id])
    parsed = ImportedJob(job_id=job_id, record=record, trials=records, table=table)
    if previous is not None:
        record.name, record.path = previous.name, previous.path or record.path
        record.dictionary = previous.dictionary
    return store.index.write(lambda txn: _store_job(txn, parsed, previous, replace=True))


def _given_once(records: list[TrialRecord], job_id: str, where: str) -> None:
    """CheckError naming ``where`` when two of the job's ``records`` have one trial name."""
    seen: set[str] = set()
    for r in records:
        if r.trial_name in seen:
            raise CheckError(
                where,
                f"trial {r.trial_name!r} of job {job_id} is given twice; pass each trial once",
            )
        seen.add(r.trial_name)


def _job_dir_of(records: list[TrialRecord]) -> str | None:
    """The absolute job directory the trials were read from, when they all name the same."""
    dirs = {
        str(Path(r.result_path).parent.parent)
        for r in records
        if r.result_path and Path(r.result_path).is_absolute()
    }
    return dirs.pop() if len(dirs) == 1 else None


def stored_job(job_id: str, raw: Any) -> JobRecord:
    """The job record stored (unpacked) as ``raw`` at ``job_id``. Raises
    :class:`CorruptStoreError` when it does not validate."""
    return decode("jobs", job_id, from_builtins, raw, JobRecord)


def stored_table(job_id: str, data: bytes) -> RewardTable:
    """The reward table stored as ``data`` at ``job_id``, every column's CRC-32 checked now
    (the name columns too, which :meth:`RewardTable.from_bytes` leaves to their first use:
    a damaged one is found before any scoring or output). Raises :class:`CorruptStoreError`
    when it does not load or a CRC-32 fails."""
    return decode("reward_tables", job_id, _verified_table, data)


def _verified_table(data: bytes) -> RewardTable:
    """:meth:`RewardTable.from_bytes` and :meth:`RewardTable.verify` (raise ``ValueError``)."""
    table = RewardTable.from_bytes(data)
    table.verify()
    return table


def stored_trial(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str
) -> TrialRecord:
    """The trial record stored as ``raw`` at ``key`` of ``trials`` (older stores: one record
    per trial) of job ``job_id`` (see :func:`decode_stored`). Raises
    :class:`CorruptStoreError` when it does not decode."""
    return decode("trials", key, decode_stored, raw, job_id, path, reward_key)


def stored_pack(
    key: bytes, raw: bytes, job_id: str, path: str | None, reward_key: str
) -> list[TrialRecord]:
    """The trial records of the pack stored as ``raw`` at ``key`` of ``trial_packs`` (see
    :func:`decode_trial_pack`). Raises :class:`CorruptStoreError` when it does not decode."""
    return decode("trial_packs", key, decode_trial_pack, raw, job_id, path, reward_key)


def jobs(store: Store) -> list[JobRecord]:
    """Every imported job, by job id. Raises :class:`CorruptStoreError` for a damaged one."""
    return store.index.read(lambda txn: [stored_job(key, raw) for key, raw in txn.items("jobs")])


def job_record(store: Store, job: str) -> JobRecord:
    """The job with id or name ``job``. UnknownReferenceError if none (or a name is shared
    by several jobs: use the id); CorruptStoreError when a job record it reads is damaged."""

    if not is_text(job):
        raise UnknownReferenceError(printable(job), "no imported job with that id or name")

    def body(txn: Txn) -> JobRecord:
        raw = txn.get("jobs", job)
        if raw is not None:
            return stored_job(job, raw)
        named = [(key, raw) for key, raw in txn.items("jobs") if _name_of(key, raw) == job]
        if len(named) == 1:
            return stored_job(*named[0])
        if named:
            raise UnknownReferenceError(job, f"{len(named)} jobs have that name; use the id")
        raise UnknownReferenceError(job, "no imported job with that id or name")

    return store.index.read(body)


def _name_of(job_id: str, raw: Any) -> Any:
    """The ``name`` of a job record stored (unpacked) as ``raw``; CorruptStoreError when
    ``raw`` is not a map."""
    return decode("jobs", job_id, dict.get, raw, "name")


def reward_table(store: Store, job: str) -> RewardTable:
    """The stored :class:`RewardTable` of a job (by id or name); CorruptStoreError when it is
    damaged (see :func:`stored_table`) or missing (every import writes the job record and its
    table in one transaction: a job record without a table is damage, not a usage error)."""
    from casstore.errors import CorruptStoreError

    job_id = job_record(store, job).job_id
    data = store.index.read(lambda txn: txn.get("reward_tables", job_id))
    if data is None:
        raise CorruptStoreError(
            f"reward_tables/{job_id}", "missing (the job record names this job; fsck reports it)"
        )
    return stored_table(job_id, data)


def trial_records(store: Store, job: str) -> list[TrialRecord]:
    """The job's trial records (by id or name), by trial name. A relative ``result_path``
    (stored by older imports, as typed then) is made absolute under the job's path."""
    record = job_record(store, job)
    return store.index.read(
        lambda txn: _stored_trials(txn, record.job_id, record.path, record.reward_key)
    )


def _stored_trials(txn: Txn, job_id: str, path: str | None, reward_key: str) -> list[TrialRecord]:
    """The stored trial records of ``job_id`` (by trial name), decoded for the job record's
    ``path`` and ``reward_key`` (see :func:`stored_pack`, :func:`stored_trial`)."""
    records = [
        stored_trial(key, raw, job_id, path, reward_key) for key, raw in older_trials(txn, job_id)
    ]
    for key, raw in job_packs(txn, job_id):
        records += stored_pack(key, raw, job_id, path, reward_key)
    records.sort(key=_TRIAL_NAME)  # packs hold trials in directory order
    return records


def evidence_bytes(store: Store, ref: str) -> bytes:
    """The raw result.json bytes kept as evidence under ``ref`` (a trial's
    ``TrialRecord.evidence``: ``<pack key>#<index>``, or an older store's entry key),
    decompressed; only that frame of a pack is read (the value is not copied), its zstd
    content checksum verified. UnknownReferenceError when there is none (or ``ref`` is
    malformed); CorruptStoreError when it does not decode."""
    try:
        key, index = split_reference(ref)
    except ValueError as error:
        raise UnknownReferenceError(ref, str(error).removeprefix(f"{ref}: ")) from error

    def body(txn: Txn) -> bytes:
        value = txn.raw_get("evidence", key)
        if value is None:
            raise UnknownReferenceError(ref, "no evidence with that digest")
        is_pack = _is_pack(value)
        if index is not None and not is_pack:
            raise UnknownReferenceError(ref, "an evidence entry, not a pack: name it without #")
        if index is not None and index >= decode("evidence", key, frame_count, value):
            raise UnknownReferenceError(ref, "the evidence pack has no frame with that index")
        if index is None and is_pack:
            raise UnknownReferenceError(ref, "an evidence pack: name a frame, <digest>#<index>")
        if index is None:
            return decode("evidence", key, checked_entry, txn, key, value)
        return decode("evidence", key, _decompress, txn, value, index)

    return store.index.read(body, buffers=True)


def _is_pack(value: bytes | memoryview) -> bool:
    """Whether the stored evidence ``value`` is a pack (not an older per-file entry)."""
    try:
        frame_count(value)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return False
    return True


def _decompress(txn: Txn, value: bytes | memoryview, index: int | None) -> bytes:
    """The raw bytes of an ``evidence`` entry or pack frame (see :func:`frame_of`), with its
    zstd dictionary when it names one. A pack's frames carry zstd checksums; an older
    store's entry (no checksum) is checked against its key instead (``ValueError``)."""
    frame, name, size = frame_of(value, index)
    data = decompress(frame, checked_dictionary(txn, name) if name else None)
    if len(data) != size:
        raise ValueError(f"{len(data)} bytes decompressed, {size} recorded")
    return data


def checked_dictionary(txn: Txn, name: str) -> bytes:
    """The zstd dictionary stored as ``name`` (its ``sha256:`` id). Raises ``ValueError``
    when it is missing or its bytes do not hash to its id (CorruptStoreError when the value
    does not decode)."""
    data = txn.get("zstd_dicts", name)
    if data is None:
        raise ValueError(f"zstd_dicts/{name}: missing")
    if not isinstance(data, bytes) or dictionary_id(data) != name:
        raise ValueError(f"zstd_dicts/{name}: the dictionary's bytes do not hash to its id")
    return data


def checked_entry(txn: Txn, key: str, value: bytes | memoryview) -> bytes:
    """The raw bytes of the older per-file evidence entry ``value`` stored at ``key``, which
    must be the SHA-256 of the entry (schema 2) or of those bytes (schema 1). Raises
    ``ValueError`` (or a decoding error) otherwise."""
    data = _decompress(txn, value, None)
    if entry_key(value) != key and entry_key(data) != key:
        raise ValueError("the entry hashes to neither its key nor its file's")
    return data
