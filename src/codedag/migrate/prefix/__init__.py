"""The prefix cache at run time: each sample's deterministic prefix computed once, then read back.

A plan's ``cache`` section names, per chain of calls in ``__getitem__``, the call that reads the
source (a file or an encoded buffer), the calls after it and the *cut*: the call whose result
depends only on the source and fixed arguments, and is worth keeping. While the plan is applied,
the chain's calls return prefix values keyed by their provenance; at the cut, a hit hands user
code the stored value and the calls before it never run.

* :mod:`.keys`: provenance keys: the source's identity, each call and its arguments, versions;
* :mod:`.entry`: how a value is stored (header, keyed tag, raw buffer) and read back as a copy;
* :mod:`.trust`: private tier folders and files (owner, mode, no link), the secret key, store
  files cut short;
* :mod:`.store`: one LMDB environment with a budget, generations, eviction, failure handling;
* :mod:`.confine`: where a plan file may put the cache: inside the user's own cache folders only;
* :mod:`.tiers`: the RAM tier (shared memory) and the disk tier of a cache folder, and defaults;
* :mod:`.ram_owner`: the cache folder each RAM tier belongs to; RAM tiers of deleted folders
  removed;
* :mod:`.values`: :class:`~.values.PrefixValue`, what the chain's calls return before the cut;
* :mod:`.writer`: :class:`~.writer.Writer`, the thread of each process that stores its values;
* :mod:`.session`: one process's side: starting chains, answering cuts, counting;
* :mod:`.runtime`: :class:`~.runtime.PrefixCacheRuntime`, applied by
  :class:`codedag.migrate.api.PipelineMigrator` for a plan's ``cache`` section.

Nothing is imported here: ``import codedag.migrate.prefix`` opens no store.
"""
