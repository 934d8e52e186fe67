"""Batched execution: each sample's chain runs once per batch on the device, in the main process.

Inside ``__getitem__`` (in DataLoader workers, or in the main process with ``num_workers=0``) the
calls of a chain the plan places for batched execution return deferred values
(:mod:`.deferred`) that record the call and its per-sample arguments instead of computing;
``default_collate`` gathers the deferred samples of a batch into one record (:mod:`.collate`);
in the main process the executor runs each step once per group of samples through the same
batch-first backends a per-call migration uses (:mod:`.executor`), and the training loop receives
what ``default_collate`` would have produced (:mod:`.delivery`). Anything the record cannot answer
forces the value: the recorded calls replay through the original CPU functions, which is the
per-sample reference itself (:mod:`.forcing`).

* :mod:`.ops`, :mod:`.views`, :mod:`.backends`: what can be recorded and how it runs batched;
* :mod:`.fetch`, :mod:`.wrappers`: what is patched while applied;
* :mod:`.transfer`: host<->device copies (counted) and the side stream;
* :mod:`.runtime`: :class:`~.runtime.BatchedRuntime`, applied by
  :class:`codedag.migrate.api.PipelineMigrator` for a plan's ``batched`` section.

Nothing is imported here: ``import codedag.migrate.batched`` stays free of torch.
"""
