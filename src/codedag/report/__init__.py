"""Reports over measured runs: the demo's HTML page, multi-rank runs, loader tables.

* :mod:`.cache`: The HTML section of a plan's ``cache`` section: each chain's cut and figures, and
  what the run counted (hits, misses by reason, bytes in RAM and on disk, evictions, verification)
* :mod:`.chain_view`: The traced pipeline as a person reads it: one sample's chain of calls, with
  the batch around it
* :mod:`.chain_html`: HTML of the chain view, and of the full DAG as a view to zoom and search
* :mod:`.dag_drawing`: The drawing of a traced DAG that Graphviz lays out in seconds: node by node,
  or coarsened
* :mod:`.demo_report`: The demo's HTML report: summary, epochs, equivalence, plan, prefix cache,
  chain view, partitioned DAG, plots, environment
* :mod:`.html`: One self-contained HTML report: summary, epochs, equivalence, plan, prefix cache,
  chain view, DAG, plots, environment
* :mod:`.loader`: The HTML section of a plan's ``loader`` section: every measured setting, the
  choice, why
* :mod:`.tables`: The HTML section of a plan's ``tables`` section: where element-wise runs start,
  and what the run counted
* :mod:`.svg_bars`: A bar chart as inline SVG markup: one bar per label, its value written above
  it
* :mod:`.ranks`: A multi-rank run (torchrun, SLURM, MPI) read as one: per-rank figures and the
  aggregate
"""
