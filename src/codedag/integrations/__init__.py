"""codedag inside other training frameworks.

* :mod:`.accelerate`: ``codedag.accelerate(loader)`` and ``codedag run``'s watch of a script's
  DataLoaders: planned in the first epoch, the plan applied from then on
* :mod:`.autoplan`: Trace and plan a running script's DataLoader within a budget, its random
  state put back
* :mod:`.prefetch`: The planner imported in a background thread while a script's first batches
  train
* :mod:`.plan_store`: Plans kept across runs, keyed by the pipeline's code, versions and device
* :mod:`.pipeline_code`: The code a plan is made for: the classes that make a loader's samples,
  digests of the modules its samples ran, their bytecode where no file holds them
* :mod:`.run_summary`: The summary an accelerated run prints at its end: epochs against the first,
  the cache, the plan
* :mod:`.run_results`: The ``results.json`` of an accelerated run: one model for writer and reader
* :mod:`.watch`: One DataLoader watched through its epochs: timed, planned, accelerated
* :mod:`.lightning`: One callback monitors a Lightning ``Trainer.fit``: the ExperimentMonitor's
  records, its sinks, and codedag's figures in the trainer's own loggers
* :mod:`.lightning_base`: Lightning's ``Callback`` class, whichever package provides it, without
  importing codedag's monitor
* :mod:`.lightning_accelerate`: One callback accelerates a Lightning ``Trainer.fit``'s training
  DataLoader: planned in its first epoch, the plan applied from then on

Import from the submodules; this package imports nothing at load time.
"""
