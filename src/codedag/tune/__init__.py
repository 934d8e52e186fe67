"""Loader tuning: measure a DataLoader's parallelism settings and choose them (``codedag tune``).

The commonest reason an accelerator waits for data is a DataLoader set up by guesswork: no
workers or too many, every worker running as many OpenCV and BLAS threads as there are cores, a
prefetch that cannot cover a slow batch. :func:`tune_loader` times a grid of settings on this
machine (``num_workers`` up to the CPUs the container may use, threads per worker, prefetch,
pinned memory where a GPU exists), stops a setting early when it is clearly slower, confirms the
winner against the program's own settings side by side, and returns the migration plan's
``loader`` section (:class:`codedag.plan.LoaderSection`) with every figure behind the choice.

Example:
    >>> from codedag.tune import tune_loader  # doctest: +SKIP
    >>> section = tune_loader(make_loader(), step_s=0.05)  # doctest: +SKIP
    >>> section.chosen.num_workers, section.reason  # doctest: +SKIP

See docs/loader-tuning.md.

* :mod:`.capture`: Find the DataLoader of a pipeline given as ``codedag trace`` takes it
* :mod:`.choice`: Choose among the timed settings, confirm against the program's own, and say why
* :mod:`.consumer`: The consumer's time per step: what "fast enough" means for a loader
* :mod:`.draws`: What a DataLoader's samples draw random numbers from, probed by loading a few
  samples
* :mod:`.limits`: What the container allows a DataLoader: CPUs (the worker ceiling) and memory
* :mod:`.measure`: Time one DataLoader setting: batches per second, the consumer's wait, start-up,
  worker memory
* :mod:`.options`: What a loader tuning searches, how long it measures, and what it holds fixed
* :mod:`.search`: The search: which DataLoader settings to time, in which order, and when to stop
  one early
* :mod:`.stats`: The tuner's statistics: DataLoader settings judged by the rule of
  :mod:`codedag.measure`
* :mod:`.tuner`: ``tune_loader``: measure a DataLoader's settings and return the plan's ``loader``
  section
* :mod:`.variants`: A DataLoader's settings, and copies of it with other settings (same dataset,
  sampler, collate)
* :mod:`.warm`: ``tune_warm``: the loader settings for epochs the prefix cache serves, measured with
  it warm
"""

from codedag.tune.options import TuneOptions, parse_fixed
from codedag.tune.tuner import tune_loader
from codedag.tune.warm import tune_warm

__all__ = ["TuneOptions", "parse_fixed", "tune_loader", "tune_warm"]
