"""Batched execution's engine: deferred values that record a sample's calls, and their execution
once per batch through the same batch-first backends a per-call migration uses.

Inside ``__getitem__`` the calls of a chain placed for batched execution return deferred values
(:mod:`.deferred`: :mod:`.lazy_array` and :mod:`.lazy_tensor`, recorded by :mod:`.recorder` into
the sample's :mod:`.record`) that record the call and its per-sample arguments instead of
computing;
``default_collate`` gathers the deferred samples of a batch into one record (:mod:`.collate`); the
executor runs each step once per group of samples (:mod:`.executor`), and the training loop
receives what ``default_collate`` would have produced (:mod:`.delivery`). Anything the record
cannot answer forces the value: the recorded calls replay through the original CPU functions,
which is the per-sample reference itself (:mod:`.forcing`).

* :mod:`.ops`, :mod:`.views`, :mod:`.backends`: what can be recorded and how it runs batched;
* :mod:`.fusion`: programs rewritten before they run (value-wise runs on uint8 as one table);
* :mod:`.ragged`: leading resizes and constant borders of images of different sizes as one
  padded gather;
* :mod:`.segments`: runs of rounds that every group runs together, as one function of their
  prepared inputs; :mod:`.capture`: such segments captured as a CUDA graph once their signature
  repeats, and replayed; :mod:`.staging`: a segment's host->device copies of constants
  answered from the device while it is captured;
* :mod:`.wrappers`: the library functions that return deferred values while a chain is applied;
* :mod:`.transfer`: host<->device copies (counted) and the side stream;
* :mod:`.watch`: delivered tensors that notice where the training loop moves them.

The runtime that installs it into a DataLoader for a plan is :mod:`codedag.migrate.batched`;
calibration replays chains with it (:mod:`codedag.calibrate.chain_replay`).

Nothing is imported here: ``import codedag.backends.batched`` stays free of torch.
"""
