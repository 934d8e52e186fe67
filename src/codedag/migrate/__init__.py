"""Stage 3: run the calls a migration plan places on a device through torch, transparently.

The op library it runs (registry, backends, conversions, tolerances) is
:mod:`codedag.backends`.

* :mod:`.context`: matching runtime calls against the plan's context keys;
* :mod:`.wrapper`: :class:`~.wrapper.UniversalWrapper`, the per-call decision and fallback;
* :mod:`.guard`: the run-time check of a placement's first calls against the original;
* :mod:`.workerstats`: counters of forked workers, read without locks;
* :mod:`.injector`: :class:`~.injector.PatchInjector` on :mod:`codedag.patching`;
* :mod:`.api`: :class:`~.api.PipelineMigrator`, the seed's API.

Nothing is imported here: ``import codedag.migrate`` stays free of torch.
"""
