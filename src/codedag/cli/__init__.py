"""The ``codedag`` command: one thin module per subcommand over the library.

* :mod:`._optimize_summary`: ``codedag optimize``'s summary: the passes' figures, what migrates,
  the notes and one table or line per section of the plan
* :mod:`._profile_render`: Rich console output of ``codedag profile``: stats, top ops, diagnosis,
  scenario comparison
* :mod:`._run_report`: ``report.html`` of ``codedag run``: the run's epochs as a table and two
  charts, the prefix cache, and what the plan moved and kept
* :mod:`._report_ranks`: ``codedag report`` of a multi-rank run: one table with every rank and the
  aggregate per mode
* :mod:`.args`: Argument types for numeric flags: finite, in range, and a message that says why;
  byte sizes
* :mod:`.cache`: ``codedag cache info|clear``: what the prefix cache holds, and emptying it
* :mod:`.calibrate`: ``codedag calibrate``: measure a traced DAG's migratable calls on a device and
  print the table
* :mod:`.chain`: ``codedag trace --show``: the traced pipeline as one sample's chain, in the
  terminal and HTML
* :mod:`.demo`: ``codedag demo``: baseline vs optimized training on synthetic Kaggle-like data
* :mod:`.doctor`: ``codedag doctor``: what this machine can do for codedag, and what is missing
* :mod:`.env`: ``codedag env check|build|setup|run``: the experiment environment, Docker or --local
* :mod:`.experiment`: ``codedag experiment new NAME``: scaffold a Kaggle competition experiment
* :mod:`.main`: The ``codedag`` command: a thin dispatcher over one module per subcommand
* :mod:`.migrate`: ``codedag migrate PLAN -- python train.py ...``: run a script with a migration
  plan applied
* :mod:`.mutate`: ``codedag mutate``: train with mutated hyperparameters and measure energy and
  quality
* :mod:`.output`: What commands print for ``--json``: one JSON document on stdout, ended by a
  newline; the Rich console of their tables
* :mod:`.optimize`: ``codedag optimize``: coarsen, partition and refine a traced DAG into a
  migration plan
* :mod:`.plan`: ``codedag plan explain``: show where a migration plan places each call and why,
  and what its prefix cache keeps
* :mod:`.plans`: ``codedag plans list|show|clear``: the plans ``codedag run`` and
  ``codedag.accelerate`` keep across runs
* :mod:`.profile`: ``codedag profile``: torch.profiler bottleneck scenarios and what bounds a
  training step
* :mod:`.report`: ``codedag report results.json --out DIR``: comparison table and plots of a
  monitored run
* :mod:`.results`: ``codedag results``: list and filter the energy sessions of a results folder,
  export CSV
* :mod:`.run`: ``codedag run -- python train.py ...``: run a script unmodified and accelerate its
  DataLoader from the second epoch
* :mod:`.trace`: ``codedag trace``: trace a function or one DataLoader batch into an execution DAG
* :mod:`.tune`: ``codedag tune``: measure a DataLoader's parallelism settings and write them into a
  plan
"""
