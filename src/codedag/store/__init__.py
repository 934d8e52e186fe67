"""Foundation: the prefix cache's storage, used by calibration, optimization, tuning and migration.

Values are kept in LMDB environments that every process maps: a RAM tier in shared memory, then
a disk tier in the cache folder. Each value carries a keyed tag, so only what the cache wrote
itself is ever read back.

* :mod:`.entry`: how a value is stored (header, keyed tag, raw buffer) and read back as a copy;
* :mod:`.meta`: what a value is without its data (:class:`~.meta.Meta`), and the header's
  opening that says it;
* :mod:`.memory_order`: the order an array's axes lie in memory, kept through the store;
* :mod:`.image_info`: a PIL image's ``info`` (EXIF, ICC profile, dpi) kept beside its pixels;
* :mod:`.trust`: private tier folders and files (owner, mode, no link), the secret key, store
  files cut short;
* :mod:`.network_fs`: whether a folder lies on a network filesystem, where LMDB is not safe;
* :mod:`.lmdb_tier`: one LMDB environment with a budget, generations, eviction, failure handling;
* :mod:`.environments`: the environments open in a process, shared by folder, never closed
  under an operation of another thread, closed before a ``fork``;
* :mod:`.tiers`: :class:`~.tiers.PrefixStore`, the RAM tier (shared memory) and the disk tier of
  a cache folder, and their defaults;
* :mod:`.ram_owner`: the cache folder each RAM tier belongs to; RAM tiers of deleted folders
  removed;
* :mod:`.confine`: where a plan file may put the cache: inside the user's own cache folders only;
* :mod:`.writer`: :class:`~.writer.Writer`, the thread of each process that stores its values.

Nothing is imported here: ``import codedag.store`` opens no store.
"""
