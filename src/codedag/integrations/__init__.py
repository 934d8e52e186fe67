"""codedag inside other training frameworks.

* :mod:`.lightning`: One callback monitors a Lightning ``Trainer.fit``: the ExperimentMonitor's
  records, its sinks, and codedag's figures in the trainer's own loggers

Import from the submodules; this package imports nothing at load time.
"""
