"""Monitoring of training runs: batch time, data wait, CPU/GPU use, memory, losses, accuracies.

* :mod:`.callbacks`: Monitoring for existing loops in two lines: a loop wrapper and Lightning-style
  hooks (the real Lightning callback: :mod:`codedag.integrations.lightning`)
* :mod:`.compare`: Compare the modes of one results file: timing, data-wait share, throughput,
  speedup, metrics
* :mod:`.environment`: The environment a run measured on: host, Python, torch, CUDA, GPUs, CPU and
  memory limits
* :mod:`.experiment`: ExperimentMonitor: one object that times batches, samples resources, logs
  metrics and saves
* :mod:`.exit_save`: A running mode saved when the process ends during it (exit hooks, SIGTERM),
  and the monitor closed at exit if nobody did
* :mod:`.forksafe`: An ExperimentMonitor in a forked process (a DataLoader worker) writes nothing
  there
* :mod:`.metrics`: Loss and accuracy logging with constant memory and honest handling of NaN/inf
* :mod:`.mode`: One mode's measurements (timer, metrics, resources, raw streams) and its part of
  the results
* :mod:`.mode_start`: What a monitor builds when a mode starts: its unique name, step timer,
  metrics logger, resource sampler and probe
* :mod:`.model`: The results file as one model (RunResults, ModeResults, ModeSummary, ...), shared
  by the monitor that writes it and every reader
* :mod:`.plots`: PNG figures comparing the modes of a results file (baseline vs optimization
  overlaid)
* :mod:`.probes`: What one resource sample reads: CPU and memory of the process tree, the
  container, the GPUs
* :mod:`.records`: What the monitor hands its sinks: steps, resource samples, logged values, the
  run and its modes starting and ending
* :mod:`.rebuild`: Recompute a run's results from the raw CSV streams next to its JSON
* :mod:`.replay`: Replays of a saved run: resource samples and GPU readings played back from a
  results file
* :mod:`.resources`: ResourceMonitor: a background thread sampling CPU, memory and GPUs at a fixed
  interval
* :mod:`.results`: The results JSON: each mode's batch times, data wait, resources and metrics; the
  environment; loading, validating, upgrading and merging into the model
* :mod:`.sinks`: Where the records go: the raw CSV streams, TensorBoard, MLflow (a package of its
  own)
* :mod:`.spill`: Stream every raw sample of a long run to a CSV file, so memory stays bounded and
  nothing is lost
* :mod:`.stats`: Constant-memory statistics for long runs: running moments, quantiles and plot
  downsampling
* :mod:`.step_figures`: The figures of a mode's recorded steps, streamed in constant memory, and
  their summaries (all steps, and the steady steps after the warm-up)
* :mod:`.system`: SystemProbe: one resource sample of this machine, right inside containers
* :mod:`.timer`: Batch timing that is right with asynchronous GPUs, split into data wait and
  compute

Import from the submodules (``codedag.monitor.experiment`` etc.) or from ``codedag``; this package
imports nothing at load time.
"""
