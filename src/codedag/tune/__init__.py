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
"""

from codedag.tune.options import TuneOptions, parse_fixed
from codedag.tune.tuner import tune_loader

__all__ = ["TuneOptions", "parse_fixed", "tune_loader"]
