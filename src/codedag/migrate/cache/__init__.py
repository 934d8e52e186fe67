"""The prefix cache at run time: each sample's deterministic prefix computed once, then read back.

A plan's ``cache`` section names, per chain of calls in ``__getitem__``, the call that reads the
source (a file or an encoded buffer), the calls after it and the *cut*: the call whose result
depends only on the source and fixed arguments, and is worth keeping. While the plan is applied,
the chain's calls return prefix values keyed by their provenance; at the cut, a hit hands user
code the stored value and the calls before it never run.

* :mod:`.keys`: provenance keys: the source's identity, each call and its arguments, versions;
* :mod:`.prefix_values`: :class:`~.prefix_values.PrefixValue`, what the chain's calls return
  before the cut;
* :mod:`.headers`: what a deferred value's stored header answers (metadata, recorded methods,
  the type ``isinstance`` sees);
* :mod:`.session`: one process's side: starting chains, answering cuts, counting;
* :mod:`.reasons`: why a sample's chain was computed without the cache, each reason said;
* :mod:`.runtime`: :class:`~.runtime.PrefixCacheRuntime`, applied by
  :class:`codedag.migrate.api.PipelineMigrator` for a plan's ``cache`` section.

The values are stored, tagged and read back by :mod:`codedag.store`.

Nothing is imported here: ``import codedag.migrate.cache`` opens no store.
"""
