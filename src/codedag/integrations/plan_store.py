"""Plans kept across runs: the next run of the same pipeline applies its plan from the first batch.

A plan is stored under ``<user cache>/plans/<key>.json`` (``$CODEDAG_CACHE_DIR`` overrides the
platform's cache folder). The key hashes what the plan depends on: the dataset class's name
(module and qualified name: the plan's call sites name them), its source and its module file's
content (the pipeline's code; for torch's wrappers, ``Subset`` from ``random_split`` and the
like, those of the data sets they wrap: :func:`~.pipeline_code.pipeline_classes`), the data
sets' settings (their attributes holding numbers, flags and short texts: a training and a
validation set of one class, ``train=True`` and ``False``, take different paths through the same
code: :func:`~.pipeline_code.pipeline_settings`), the versions
of codedag, Python and the installed libraries codedag knows (read from their distributions, so
a library the script imports lazily keys the plan the same before and after), and the device it
was planned for. Changing any of them makes another key. The record also keeps a digest of each
other module of the pipeline's own code the traced samples ran (helpers in other files,
:func:`~.pipeline_code.code_digests`; a module without a file, a notebook's ``__main__``, by the
bytecode of what it defines: :func:`~.pipeline_code.code_fingerprint`); a run where one of them
has changed plans again (:func:`~.pipeline_code.changed_code`), so a stale plan is never
applied; ``codedag run --replan`` plans again and replaces the stored one.

A stored file is a record (:data:`RECORD_FORMAT`): the plan under ``plan`` beside what it was made
for (the dataset class, the script, the device, the versions the key hashed, the digests of the
pipeline's other modules) and when; files written before the record hold the bare plan and still
load. A stored file is untrusted: it is read without following a link, only when this user owns
it, size-capped, and its plan validated as every plan file is
(:func:`codedag.plan.files.check_plan`, :func:`read_stored`); what fails is refused with the
reason (:class:`Unreadable`). :func:`load_plan` hands ``codedag run`` the
validated :class:`~codedag.plan.MigrationPlan` with what it was made for.
``codedag plans list|show|clear`` lists, prints and removes them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import re
import stat
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.integrations.pipeline_code import (
    code_digests,
    pipeline_classes,
    pipeline_settings,
    pipeline_source,
)
from codedag.util.paths import user_cache_dir
from codedag.version import distribution_version

if TYPE_CHECKING:
    from codedag.integrations.run_results import Decision
    from codedag.plan import MigrationPlan

log = logging.getLogger(__name__)

PLANS_FOLDER = "plans"
RECORD_FORMAT = 1
"""``stored_plan`` of a record; a file without the key is a bare plan (written before records)."""
KEY_NAME = re.compile(r"[0-9a-f]{24}\.json")
"""The name of a plan file: its key (24 hex digits) and ``.json``."""
MAX_PLAN_BYTES = 64 * 2**20
IDLE = "idle"
"""The record's key of what a plan that applies nothing moved and kept (``moved`` and ``kept``:
lists of decisions) and why it applies nothing (``reason``): a run reads it instead of the plan,
without importing the plan's models (they cost a script that plans nothing a fifth of a
second), and one whose samples gave nothing to plan traces nothing again."""
NO_PLAN: dict[str, Any] = {"context_device_map": {}}
"""The plan stored for samples with nothing to plan: the smallest valid plan (it applies
nothing), beside its :data:`IDLE` record."""
_MAX_IDLE_ROWS = 4096
_MAX_REASON_CHARS = 2000
_DIGEST = re.compile(r"[0-9a-f]{64}")
_reported: set[Path] = set()
"""Plan files whose refusal :func:`load_plan` warned about in this process."""


def plans_folder() -> Path:
    """``plans`` in :func:`~codedag.util.paths.user_cache_dir`."""
    return user_cache_dir() / PLANS_FOLDER


def library_versions() -> dict[str, str]:
    """codedag's, Python's and the installed versions of the distributions of every library
    codedag knows (its facts name them), whether the script has imported it yet or not: a key
    made before a library's lazy import (librosa's scipy) is the key made after it."""
    from codedag.backends.libraries import all_distributions
    from codedag.version import __version__

    versions = {"codedag": __version__, "python": platform.python_version()}
    for distribution in all_distributions():
        found = distribution_version(distribution)
        if found:
            versions[distribution] = found
    return versions


def plan_key(loader: Any, device: str) -> str:
    """The key of ``loader``'s pipeline on ``device`` (hex, 24 characters): its data sets'
    code and settings (a training and a validation set of one class take different paths
    through it), the libraries' versions, the device."""
    dataset = getattr(loader, "dataset", None)
    code = [pipeline_source(kind) for kind in pipeline_classes(dataset)]
    settings = pipeline_settings(dataset)
    text = json.dumps(
        [*code, settings, sorted(library_versions().items()), device], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def plan_path(key: str) -> Path:
    """Where the plan of ``key`` is stored."""
    return plans_folder() / f"{key}.json"


def plan_inputs(loader: Any, device: str, code: Iterable[str] = ()) -> dict[str, Any]:
    """What the key of ``loader``'s plan on ``device`` stands for, as the record keeps it: the
    dataset class, the script that ran, the device, the versions and the digests of the modules
    of ``code`` (the functions the traced samples ran: :func:`~.pipeline_code.code_digests`)."""
    classes = pipeline_classes(getattr(loader, "dataset", None))
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
    return {
        "pipeline": ", ".join(f"{kind.__module__}.{kind.__qualname__}" for kind in classes),
        "script": str(Path(script).resolve()) if script and os.path.isfile(script) else "",
        "device": device,
        "versions": library_versions(),
        "code": code_digests(code),
    }


class Unreadable(Exception):
    """A stored plan file that is not used: a link, another user's, no JSON, not a plan (the
    message says which)."""


@dataclass
class StoredPlan:
    """One file of the plans folder and what it holds.

    Attributes:
        key: the plan's key (the file name without ``.json``).
        path: the file.
        size_bytes: its size.
        created: when it was stored (ISO 8601, UTC; a file without a record: its mtime).
        inputs: what the key stands for (``pipeline``, ``script``, ``device``, ``versions``,
            ``code``; empty for a file written before records).
        plan: the validated plan, or None when unreadable (or read as ``idle`` alone).
        data: the plan's JSON as stored, or None when unreadable.
        problem: why it is unreadable, else ``""``.
        idle: what the record keeps of a plan that applies nothing (:data:`IDLE`; None: it
            applies something, or the record keeps nothing readable).
    """

    key: str
    path: Path
    size_bytes: int = 0
    created: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)
    plan: MigrationPlan | None = None
    data: dict[str, Any] | None = None
    problem: str = ""
    idle: IdlePlan | None = None


@dataclass
class IdlePlan:
    """What a record keeps of a plan that applies nothing (:data:`IDLE`).

    Attributes:
        moved: the plan's decisions that moved a call (none applied).
        kept: its decisions that kept one, with their reasons.
        reason: why it applies nothing (``""``: the plan's sections change nothing).
    """

    moved: list[Decision] = field(default_factory=list)
    kept: list[Decision] = field(default_factory=list)
    reason: str = ""


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


def _read_bytes(name: str, folder: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the file ``name`` in the folder descriptor ``folder``: not through a link,
    a regular file this user owns, at most :data:`MAX_PLAN_BYTES`."""
    from codedag.store.trust import Refused, read_own_file

    try:
        return read_own_file(name, MAX_PLAN_BYTES, folder)
    except Refused as error:
        raise Unreadable(str(error)) from None
    except OSError as error:
        raise Unreadable(error.strerror or type(error).__name__) from None


def _record(data: Any) -> tuple[Any, dict[str, Any], str]:
    """The plan (unchecked), the inputs and the creation time of a parsed file (a record or a
    bare plan)."""
    from codedag.util.text import printable

    plan: Any
    if not isinstance(data, dict):
        raise Unreadable(f"not a stored plan: a JSON {type(data).__name__}, not an object")
    if "stored_plan" not in data:  # written before records: the bare plan
        plan, inputs, created = data, {}, ""
    else:
        form = data["stored_plan"]
        if type(form) is not int or form != RECORD_FORMAT:
            shown = printable(repr(form), 40)
            raise Unreadable(f"stored_plan format {shown} is not {RECORD_FORMAT} (another codedag)")
        plan, created = data.get("plan"), data.get("created", "")
        inputs = {
            k: data[k] for k in ("pipeline", "script", "device", "versions", "code") if k in data
        }
        if not isinstance(created, str) or not all(
            isinstance(inputs.get(k, ""), str) for k in ("pipeline", "script", "device")
        ):
            raise Unreadable("not a stored plan: created, pipeline, script, device not strings")
        try:
            datetime.fromisoformat(created or "1970-01-01")
        except ValueError:
            shown = printable(created, 40)
            raise Unreadable(f"not a stored plan: created {shown!r} is no time") from None
        versions = inputs.get("versions", {})
        if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
            raise Unreadable("not a stored plan: versions is no object of strings")
        code = inputs.get("code", {})
        if not isinstance(code, dict) or not all(
            isinstance(v, str) and _DIGEST.fullmatch(v) for v in code.values()
        ):
            raise Unreadable("not a stored plan: code is no object of SHA-256 digests")
    return plan, inputs, created


def _checked(plan: Any) -> MigrationPlan:
    from codedag.errors import SchemaError
    from codedag.plan.files import check_plan

    try:
        return check_plan(plan, "plan")
    except SchemaError as error:
        raise Unreadable(str(error)) from None


def _idle(data: Any) -> IdlePlan | None:
    """What a record keeps of a plan that applies nothing; None where it keeps nothing, or its
    decisions are not lists of decisions of strings or its reason no string of at most
    :data:`_MAX_REASON_CHARS` (then the plan is read)."""
    from codedag.integrations.run_results import Decision

    idle = data.get(IDLE) if isinstance(data, dict) else None
    if not isinstance(idle, dict):
        return None
    found: list[list[Decision]] = []
    for side in ("moved", "kept"):
        rows = idle.get(side)
        if not isinstance(rows, list) or len(rows) > _MAX_IDLE_ROWS:
            return None
        fields = ("what", "section", "where", "reason")
        if not all(
            isinstance(row, dict)
            and set(row) == set(fields)
            and all(isinstance(row[f], str) for f in fields)
            for row in rows
        ):
            return None
        found.append([Decision(**row) for row in rows])
    reason = idle.get("reason", "")
    if not isinstance(reason, str) or len(reason) > _MAX_REASON_CHARS:
        return None
    return IdlePlan(found[0], found[1], reason)


def read_stored(name: str, folder: int, where: Path, idle: bool = False) -> StoredPlan:
    """The plan file ``name`` of the folder descriptor ``folder`` (``where``), read and checked;
    an unreadable one has ``problem`` set. ``idle``: a plan that applies nothing is read as what
    its record keeps alone (:data:`IDLE`), its plan left unread."""
    from codedag.errors import SchemaError
    from codedag.util.io import parse_json_bytes

    entry = StoredPlan(key=name.removesuffix(".json"), path=where / name)
    try:
        raw, info = _read_bytes(name, folder)
        entry.size_bytes, entry.created = info.st_size, _iso(info.st_mtime)
        try:
            data = parse_json_bytes(raw, "the file")
        except SchemaError as error:
            raise Unreadable(str(error).removeprefix("the file ")) from None
        plan, entry.inputs, created = _record(data)
        entry.created = created or entry.created
        entry.idle = _idle(data)
        if entry.idle is None or not idle:
            entry.plan, entry.data = _checked(plan), plan
    except Unreadable as error:
        entry.plan, entry.data, entry.problem = None, None, str(error)
    return entry


def open_folder(folder: Path | None = None) -> int | None:
    """A descriptor of the plans folder (default :func:`plans_folder`), None when there is none.

    Raises:
        Unreadable: it is a link, not a folder, or another user's.
    """
    from codedag.store.trust import Refused, open_own_folder

    try:
        return open_own_folder(folder or plans_folder(), "the plans folder")
    except FileNotFoundError:
        return None
    except Refused as error:
        raise Unreadable(str(error)) from None


def stored_plans(folder: Path | None = None) -> list[StoredPlan]:
    """Every plan file of the plans folder (default :func:`plans_folder`), by name; files of
    other names are no plans and are left out.

    Raises:
        Unreadable: the folder is a link, not a folder, or another user's.
    """
    where = folder or plans_folder()
    descriptor = open_folder(where)
    if descriptor is None:
        return []
    try:
        names = sorted(n for n in os.listdir(descriptor) if KEY_NAME.fullmatch(n))
        return [read_stored(name, descriptor, where) for name in names]
    finally:
        os.close(descriptor)


def remove_plan(entry: StoredPlan, folder: int) -> str:
    """Remove ``entry``'s file from the folder descriptor ``folder`` when it is still a plan file
    of the store (a regular file of one name, this user's; a link or anything else stays).

    Returns:
        Why it stays, or ``""`` when it was removed.
    """
    from codedag.store.trust import Refused, check_owner

    name = entry.path.name
    if not KEY_NAME.fullmatch(name):
        return "not a plan file's name"
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return "a symbolic link (left as it is)"
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return "not a regular file of one name"
        check_owner(info, "the file")
        os.unlink(name, dir_fd=folder)
    except Refused as error:
        return str(error)
    except OSError as error:
        return error.strerror or type(error).__name__
    return ""


def drop_plan(key: str) -> str:
    """Remove the stored plan of ``key`` as ``codedag plans clear`` removes one (a link, another
    user's file or folder stays).

    Returns:
        Why it stays, or ``""`` when it was removed.
    """
    path = plan_path(key)
    try:
        descriptor = open_folder(path.parent)
    except Unreadable as error:
        return str(error)
    if descriptor is None:
        return "no plans folder"
    try:
        return remove_plan(StoredPlan(key=key, path=path), descriptor)
    finally:
        os.close(descriptor)


def load_plan(key: str, idle: bool = False) -> StoredPlan | None:
    """The stored plan of ``key``, validated (its ``plan`` set, or ``idle`` where asked for and
    the plan applies nothing), with what it was made for; None when none is stored or it is
    unreadable (one warning says why: a run plans again)."""
    path = plan_path(key)
    try:
        descriptor = open_folder(path.parent)
    except Unreadable as error:
        log.warning("stored plans in %s are not read: %s; planning again", path.parent, error)
        _reported.add(path)
        return None
    if descriptor is None:
        return None
    try:
        if not os.path.lexists(path):
            return None
        entry = read_stored(path.name, descriptor, path.parent, idle)
    finally:
        os.close(descriptor)
    if entry.plan is None and entry.idle is None:
        log.warning("stored plan %s is unreadable (%s); planning again", path, entry.problem)
        _reported.add(path)
        return None
    return entry


def save_plan(
    key: str,
    plan: Mapping[str, Any],
    inputs: dict[str, Any] | None = None,
    idle: IdlePlan | None = None,
) -> Path | None:
    """Store ``plan`` under ``key`` with ``inputs`` (:func:`plan_inputs`) and the time (and,
    for a plan that applies nothing, ``idle``: what it moved and kept, and why); return its
    path (None when it cannot be written: logged)."""
    from dataclasses import asdict

    from codedag.util.io import atomic_write_json

    path = plan_path(key)
    record: dict[str, Any] = {"stored_plan": RECORD_FORMAT, "key": key}
    record["created"] = _iso(time.time())
    record.update(inputs or {})
    if idle is not None:
        record[IDLE] = asdict(idle)
    record["plan"] = dict(plan)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_json(path, record)
    except Exception as error:  # a full or read-only disk must not stop the script
        # a file load_plan reported already (a link, another user's) gets no second warning
        report = log.debug if path in _reported else log.warning
        report("could not store the plan in %s: %s", path, error)
        return None
