"""Reports over measured runs: the demo's HTML page, multi-rank runs, loader tables.

* :mod:`.demo_report`: The demo's HTML report: summary, equivalence, plan, partitioned DAG, plots,
  environment
* :mod:`.html`: One self-contained HTML report: summary, equivalence, plan, DAG, plots, environment
* :mod:`.loader`: The HTML section of a plan's ``loader`` section: every measured setting, the
  choice, why
* :mod:`.ranks`: A multi-rank run (torchrun, SLURM, MPI) read as one: per-rank figures and the
  aggregate
"""
