"""Batched execution at run time: a plan's ``batched`` chains applied to a DataLoader.

The engine (deferred values, collate, the batched executor, delivery) is
:mod:`codedag.backends.batched`; here:

* :mod:`.settings`: the chains a plan names and the runtime's settings;
* :mod:`.fetch`: the DataLoader fetch patched to defer each sample's chain;
* :mod:`.check`: the run-time check: the first batches both ways, batched kept only where
  faster;
* :mod:`.runtime`: :class:`~.runtime.BatchedRuntime`, applied by
  :class:`codedag.migrate.api.PipelineMigrator` for a plan's ``batched`` section;
* :mod:`.inactive`: the part a plan without batched chains gets instead (imports none of the
  above).

Nothing is imported here: ``import codedag.migrate.batched`` stays free of torch.
"""
