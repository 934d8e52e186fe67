"""Reports over measured runs: the demo's HTML page, multi-rank runs, loader tables.

* :mod:`.chain_view`: The traced pipeline as a person reads it: one sample's chain of calls, with
  the batch around it
* :mod:`.chain_html`: HTML of the chain view, and of the full DAG as a view to zoom and search
* :mod:`.demo_report`: The demo's HTML report: summary, equivalence, plan, partitioned DAG, plots,
  environment
* :mod:`.html`: One self-contained HTML report: summary, equivalence, plan, DAG, plots, environment
* :mod:`.loader`: The HTML section of a plan's ``loader`` section: every measured setting, the
  choice, why
* :mod:`.ranks`: A multi-rank run (torchrun, SLURM, MPI) read as one: per-rank figures and the
  aggregate
"""
