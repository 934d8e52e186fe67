"""The prefix cache's two tiers and where they live: RAM (shared memory) first, then disk.

* **RAM tier**: an LMDB environment in the shared memory folder (``/dev/shm``), which every
  DataLoader worker maps: reads copy straight from shared pages into the array returned. Its
  budget defaults to a quarter of the memory the container may use (the cgroup limit, else the
  machine's memory), and at most half of what the shared memory folder has free. Its pages count
  as shared memory of the container and live until ``codedag cache clear`` or a reboot, or until
  a run starts after its cache folder was deleted (:mod:`.ram_owner`).
* **Disk tier**: an LMDB environment in the cache folder (``$CODEDAG_PREFIX_CACHE_DIR``, else
  ``prefix/`` in the user cache directory), for what does not fit in RAM and across reboots. Its
  budget defaults to half the free space of its filesystem, at most 32 GiB.

A value goes to the RAM tier when it fits there, else to the disk tier; a read asks the RAM tier
first. Each tier of one cache folder is its own environment; two folders never share a RAM tier.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

from codedag.errors import ConfigError
from codedag.plan.cache import MAX_BUDGET_BYTES
from codedag.store import ram_owner, trust
from codedag.store.entry import CorruptEntry, Encoded, decode, encode
from codedag.store.lmdb_tier import TIER_FILES, LmdbTier, PutItem, TierError, TierInfo
from codedag.store.meta import Meta
from codedag.util.io import exclusive_lock
from codedag.util.paths import user_cache_dir

log = logging.getLogger(__name__)

ENV_FOLDER = "CODEDAG_PREFIX_CACHE_DIR"
RAM_LOCK_FILE = "ram.lock"
"""In the cache folder: held while a process opens the folder's RAM tier."""
RAM_SHARE = 0.25
DISK_SHARE = 0.5
DISK_MAX_BYTES = 32 << 30


def default_folder() -> Path:
    """``$CODEDAG_PREFIX_CACHE_DIR``, else ``prefix`` in the user cache directory
    (:func:`~codedag.util.paths.user_cache_dir`: ``$CODEDAG_CACHE_DIR`` when set)."""
    override = os.environ.get(ENV_FOLDER, "").strip()
    if override:
        return Path(override)
    return user_cache_dir() / "prefix"


def default_ram_budget_bytes() -> int:
    """A quarter of the memory the container may use, at most half the free shared memory."""
    from codedag.devices.memory import free_bytes, memory_limit_bytes, shared_memory_folder

    folder = shared_memory_folder()
    if folder is None:
        return 0
    return int(min(memory_limit_bytes() * RAM_SHARE, free_bytes(folder) * 0.5))


def default_disk_budget_bytes(folder: Path) -> int:
    """Half the free space where ``folder`` lives, at most 32 GiB."""
    from codedag.devices.memory import free_bytes

    return int(min(DISK_MAX_BYTES, free_bytes(folder) * DISK_SHARE))


@dataclass(frozen=True)
class StoreSettings:
    """Where the cache lives and how much it may hold.

    Attributes:
        folder: the disk tier's folder (default :func:`default_folder`).
        ram_budget_bytes: the RAM tier's budget (default :func:`default_ram_budget_bytes`;
            0: no RAM tier).
        disk_budget_bytes: the disk tier's budget (default :func:`default_disk_budget_bytes`;
            0: no disk tier).

    Raises:
        ConfigError: a budget that is not a number of bytes from 0 to
            :data:`~codedag.plan.cache.MAX_BUDGET_BYTES`.
    """

    folder: Path | None = None
    ram_budget_bytes: int | None = None
    disk_budget_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("ram_budget_bytes", "disk_budget_bytes"):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 <= value <= MAX_BUDGET_BYTES:
                raise ConfigError(
                    f"StoreSettings {name} must be a number of bytes >= 0 and <= "
                    f"{MAX_BUDGET_BYTES} (1 PiB), got {value!r}"
                )

    def resolved_folder(self) -> Path:
        """The disk tier's folder."""
        return Path(self.folder) if self.folder is not None else default_folder()


def ram_folder(folder: Path) -> Path | None:
    """The RAM tier of the cache in ``folder``: its own environment in shared memory."""
    from codedag.devices.memory import shared_memory_folder

    shm = shared_memory_folder()
    if shm is None:
        return None
    tag = xxhash.xxh3_64_hexdigest(os.fsencode(os.path.abspath(folder)))[:12]
    return shm / f"{ram_owner.PREFIX}{_uid()}-{tag}"


def _extra_files(tier: LmdbTier) -> frozenset[str]:
    """What a tier's folder holds besides LMDB's files: a RAM tier's owner and key files."""
    if tier.kind == "ram":
        return frozenset({ram_owner.OWNER_FILE, ram_owner.KEY_FILE})
    return frozenset()


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


class PrefixStore:
    """The tiers of one cache folder (see the module docstring).

    Args:
        tiers: the tiers, read in order (RAM first).
        folder: the cache folder the tiers belong to (it owns the RAM tier and keeps the
            secret key values are tagged with; None: a key of this store object only).
    """

    def __init__(self, tiers: list[LmdbTier], folder: Path | None = None) -> None:
        self.tiers = tiers
        self.folder = folder
        self.corrupt = 0
        self._secret: bytes | None = None

    @property
    def secret(self) -> bytes:
        """The key values are tagged with (:func:`.trust.secret`). Where the cache folder's key
        file cannot be trusted, every tier is switched off and a key no store holds is used."""
        if self._secret is None:
            if self.folder is None:
                self._secret = os.urandom(trust.SECRET_BYTES)
                return self._secret
            try:
                self._secret = trust.secret(Path(self.folder))
            except OSError as error:
                for tier in self.tiers:
                    tier.disable(
                        str(error)
                        if isinstance(error, trust.Refused)
                        else f"its key file cannot be used ({error})"
                    )
                self._secret = os.urandom(trust.SECRET_BYTES)
        return self._secret

    @classmethod
    def open(cls, settings: StoreSettings | None = None) -> PrefixStore:
        """The store the settings describe (tiers open on first use)."""
        settings = settings or StoreSettings()
        folder = settings.resolved_folder()
        tiers = []
        ram = ram_folder(folder)
        ram_budget = (
            default_ram_budget_bytes()
            if settings.ram_budget_bytes is None
            else settings.ram_budget_bytes
        )
        if ram is not None and ram_budget > 0:
            tiers.append(LmdbTier("ram", ram, ram_budget))
        disk_budget = (
            default_disk_budget_bytes(folder)
            if settings.disk_budget_bytes is None
            else settings.disk_budget_bytes
        )
        if disk_budget > 0:
            tiers.append(LmdbTier("disk", folder / "store", disk_budget))
        return cls(tiers, folder)

    @property
    def enabled(self) -> bool:
        """Whether any tier is usable in this process."""
        for tier in self.tiers:  # noqa: SIM110 - asked per call of a chain: cheaper than any()
            if tier.enabled:
                return True
        return False

    @property
    def problems(self) -> list[str]:
        """Why tiers are off."""
        return [f"{t.kind} tier: {t.problem}" for t in self.tiers if t.problem]

    def _usable(self) -> list[LmdbTier]:
        return [t for t in self.tiers if t.enabled]

    def begin_run(self, run: str = "") -> None:
        """Start a new generation in every tier (opening them: a tier that cannot be used is
        switched off here, without a warning: :attr:`problems` says why). RAM tiers of deleted
        cache folders are removed first, and this store's RAM tier, once open, is claimed for
        its folder.

        Processes opening one cache folder's RAM tier at once (the ranks of a machine) take
        turns, holding ``ram.lock`` in the folder: one that found the tier before another
        recorded its key would take it for a tier of an earlier key and remove it under the
        other.

        Args:
            run: what the processes of one run share (:meth:`.LmdbTier.begin_run`): they join
                one generation. ``""``: a run of its own.
        """
        ram = next((t for t in self.tiers if t.kind == "ram" and t.enabled), None)
        turn = (
            exclusive_lock(self.folder / RAM_LOCK_FILE, required=False)
            if ram is not None and self.folder is not None
            else contextlib.nullcontext(False)
        )
        with turn:
            self._open_tiers(ram, run)

    def _open_tiers(self, ram: LmdbTier | None, run: str) -> None:
        for tier in self.tiers:
            tier.quiet = True
        try:
            self.secret  # noqa: B018 - read (or made) now: a key file refused turns every tier off
            ram = ram if ram is not None and ram.enabled else None
            digest = ram_owner.key_digest(self.secret)
            if ram is not None and self.folder is not None:
                ram_owner.sweep(ram.path.parent, _uid(), keep=ram.path)
                if not ram_owner.bind_key(ram.path, digest, TIER_FILES | _extra_files(ram)):
                    ram.disable(
                        "it holds values tagged with an earlier key of this cache folder (the "
                        "folder was made again) and a running process still uses them"
                    )
            for tier in self._usable():
                with contextlib.suppress(TierError):
                    tier.begin_run(run)
        finally:
            for tier in self.tiers:
                tier.quiet = False
        if ram is not None and ram.enabled and self.folder is not None:
            ram_owner.record_key(ram.path, digest)
            ram_owner.claim(ram.path, self.folder)

    def get(self, key: bytes) -> tuple[Any, LmdbTier, bool] | None:
        """``(value, tier, stale)`` for ``key``, or None."""
        read = functools.partial(decode, secret=self.secret, key=key)
        for tier in self._usable():
            try:
                found = tier.get(key, read)
            except TierError:
                continue
            except CorruptEntry as error:
                self.corrupt += 1
                (log.warning if self.corrupt == 1 else log.debug)(
                    "prefix cache: a %s tier entry is corrupt (%s); removed (and any other is "
                    "counted as corrupt)",
                    tier.kind,
                    error,
                )
                with contextlib.suppress(TierError):
                    tier.delete(key)
                continue
            if found is not None:
                value, stale = found
                return value, tier, stale
        return None

    def meta(self, key: bytes) -> tuple[Meta, bool] | None:
        """``(header, stale)`` of an intermediate value, or None."""
        for tier in self._usable():
            try:
                found = tier.meta(key)
            except TierError:
                continue
            if found is not None:
                return Meta.from_bytes(found[0]), found[1]
        return None

    def put(self, key: bytes, value: Any, metas: Iterable[tuple[bytes, bytes]]) -> str:
        """Store a value (or its :class:`~.entry.Encoded` form): ``stored``, ``exists``,
        ``full``, ``changed`` (written to since it was encoded), ``unstorable`` (a type the
        cache cannot keep exactly) or ``off`` (no usable tier)."""
        encoded = value if isinstance(value, Encoded) else encode(value, self.secret, key)
        if encoded is None:
            return "unstorable"
        return self.put_many([(key, encoded, tuple(metas))])[0]

    def put_many(
        self, items: Sequence[PutItem], flags: Sequence[bytes | None] | None = None
    ) -> list[str]:
        """Store encoded values, as many as fit in the first tier in one transaction, the rest
        in the next tier; each value's outcome as :meth:`put` gives it. ``flags``: a flag for
        each value (or None), set in the tier that stores it (:meth:`.LmdbTier.put_many`)."""
        outcomes = ["off"] * len(items)
        left = list(range(len(items)))
        for tier in self._usable():
            try:
                if flags is None:
                    got = tier.put_many([items[i] for i in left])
                else:
                    got = tier.put_many([items[i] for i in left], [flags[i] for i in left])
            except TierError:
                continue
            for index, outcome in zip(left, got):
                outcomes[index] = outcome
            left = [index for index, outcome in zip(left, got) if outcome == "full"]
            if not left:
                break
        return outcomes

    def flag(self, name: bytes) -> bool:
        """Whether a usable tier holds the flag ``name``."""
        for tier in self._usable():
            with contextlib.suppress(TierError):
                if tier.flag(name):
                    return True
        return False

    def set_flag(self, name: bytes) -> bool:
        """Set the flag ``name`` in every usable tier; ``False`` where one held it already (a
        process of this run, or an earlier run, set it first)."""
        first = True
        for tier in self._usable():
            with contextlib.suppress(TierError):
                first = tier.set_flag(name) and first
        return first

    def touch(self, tier: LmdbTier, keys: list[bytes], metas: list[bytes]) -> None:
        """Move hit entries to the current generation."""
        with contextlib.suppress(TierError):
            tier.touch(keys, metas)
        for other in self._usable():
            if other is not tier and metas:
                with contextlib.suppress(TierError):
                    other.touch([], metas)

    def delete(self, key: bytes) -> None:
        """Remove a value from every tier."""
        for tier in self._usable():
            with contextlib.suppress(TierError):
                tier.delete(key)

    @property
    def evicted(self) -> int:
        """Values evicted by this process."""
        return sum(t.evicted for t in self.tiers)

    def info(self) -> list[TierInfo]:
        """What each tier holds."""
        return [t.info() for t in self.tiers]

    def close(self) -> None:
        """Close every tier in this process."""
        self._release_ram()
        for tier in self.tiers:
            tier.close()

    def clear(self) -> int:
        """Delete every tier's files; returns the bytes freed. Only what a tier holds is
        deleted, and only once every tier's folder was found to be one.

        Raises:
            NotATier: a tier's folder holds something no tier writes (nothing is deleted).
        """
        self._release_ram()
        for tier in self.tiers:
            tier.own_files(_extra_files(tier))
        return sum(t.clear(_extra_files(t)) for t in self.tiers)

    def _release_ram(self) -> None:
        for tier in self.tiers:
            if tier.kind == "ram":
                ram_owner.release(tier.path)
