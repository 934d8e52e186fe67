"""Small helpers of every layer: safe reading and atomic writing, paths, signals, logs, seeding.

* :mod:`.context_keys`: The segments of a traced context key: a canonical name and a counter
  each
* :mod:`.drawing`: How large a traced DAG Graphviz draws in seconds: the limit ``codedag trace``,
  its drawings and the reports share, readable without importing the tracer
* :mod:`.exports`: Lazy package exports: a package names what it re-exports and from where, and
  each name is imported on first use
* :mod:`.forks`: Fork hooks run in a declared order: what a forked child resets comes before what
  reads it
* :mod:`.gc_pause`: Pause Python's cyclic garbage collector around work that makes many
  long-lived objects
* :mod:`.import_draws`: Modules whose import draws from a global random generator, noted while
  codedag imports
* :mod:`.io`: Files in and out: atomic writes, and the one checked JSON reader for every file
  codedag reads
* :mod:`.logs`: Logging set-up for the CLI and scripts
* :mod:`.moved`: Old import paths of moved modules: a DeprecationWarning that points at the
  importing line
* :mod:`.paths`: Output paths checked before any work: a run never fails at its end because of
  where it writes
* :mod:`.seeding`: Reproducibility: one call seeds every random number generator a training run
  touches
* :mod:`.signals`: Ctrl-C, SIGTERM and SIGHUP handled alike, so every interruption runs the same
  cleanup
* :mod:`.text`: Text from files made safe to show: the one escaper for terminals, logs, HTML and
  DOT
* :mod:`.targets`: Resolve a target named on the command line (``path/to/script.py:function`` or
  ``package.module:function``): the one loader of ``trace``, ``tune`` and ``profile``
"""
