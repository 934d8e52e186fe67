"""Stage 3: run the calls a migration plan places on a device through torch, transparently.

The op library it runs (registry, backends, conversions, tolerances) is
:mod:`codedag.backends`.

* :mod:`.admitted`: The prefix cache's chains and the lookup tables' runs, kept to the functions
  the registry admits
* :mod:`.api`: PipelineMigrator: apply a migration plan to the running process
* :mod:`.call_counts`: What one migration wrapper counts: migrated calls by level and device,
  fallbacks and their reasons, calls passed through, nested calls
* :mod:`.dispatch`: One owner of the functions a plan's run-time parts replace, and of the
  DataLoader fetch
* :mod:`.epoch_seeds`: Persistent DataLoader workers seeded at each epoch's start as fresh
  workers would be
* :mod:`.guard`: Run-time guard: a placement stays only if, measured on this process's own calls,
  its backend agrees with the original library and beats it in time
* :mod:`.injector`: PatchInjector: installs one UniversalWrapper per planned function through
  codedag.patching
* :mod:`.loader_settings`: Apply a plan's ``loader`` section to the DataLoaders a program creates
  while the plan is applied
* :mod:`.patched_runtime`: What the run-time parts of a plan share: being applied through a
  :class:`~.dispatch.Dispatch`
* :mod:`.plan_mailbox`: DataLoader workers that started before the plan was made receive it where
  they run
* :mod:`.placements`: The migrator's index of a migration plan: placements by function
* :mod:`.spawned_workers`: DataLoader workers that inherit nothing apply the plan themselves
* :mod:`.stats`: What a migrated run did: ``PipelineMigrator.get_stats`` as one model
* :mod:`.sites`: Where patching a function means replacing it: its canonical name and every other
  public path
* :mod:`.random_states`: The global random generators' states (Python's, NumPy's, torch's),
  taken and put back
* :mod:`.proxy`: Small objects the migration wrapper is made of: call counters and NumPy ufunc
  proxies
* :mod:`.warm_loader`: Epochs the prefix cache serves, loaded with the settings measured for them
* :mod:`.worker_threads`: A DataLoader ``worker_init_fn`` that sets the thread counts of torch,
  OpenCV and BLAS
* :mod:`.workerstats`: Counters of forked child processes, summed into the process that applied the
  patches
* :mod:`.wrapper`: UniversalWrapper: decides per call whether to run the torch backend or the
  original
* :mod:`.batched`: Batched execution at run time: a plan's ``batched`` chains applied to a
  DataLoader
* :mod:`.tables`: Element-wise runs on uint8 arrays computed as one gather from an exact lookup
  table
* :mod:`.cache`: The prefix cache at run time: each sample's deterministic prefix computed once,
  then read back

Old paths of modules that moved to :mod:`codedag.backends` (each re-exports the new module's names
and warns once, with a DeprecationWarning, when imported):

* :mod:`.registry`: moved to :mod:`codedag.backends.registry`
* :mod:`.tolerances`: moved to :mod:`codedag.backends.tolerances`
* :mod:`.probe`: moved to :mod:`codedag.backends.probe`
* :mod:`.ops`: moved to :mod:`codedag.backends.ops` (a package: ``codedag.migrate.ops.cv2`` and
  every module under it import as the new modules themselves)

Nothing is imported here: ``import codedag.migrate`` stays free of torch.
"""
