"""Energy experiments: training runs with mutated hyperparameters, their CPU and GPU energy,
and the results store (``codedag mutate``, ``codedag results``).

* :mod:`.analysis`: Session analysis: energy against each hyperparameter, and energy against
  quality (Pareto front)
* :mod:`.background`: A background training load for parallel mode, always stopped
* :mod:`.config`: The models config: which repositories, training scripts, models and
  hyperparameters exist
* :mod:`.executors`: Where experiments run: the executor interface and the local executor
* :mod:`.gpu_meter`: GPU energy over one window: NVML's energy counter, plus sampled power,
  temperature, utilization
* :mod:`.jobs`: Planning a session: settings (or CLI flags) to the list of experiments to run
* :mod:`.meters`: CPU energy over one experiment's window: a meter per source, started and stopped
  around a run
* :mod:`.mutation`: Hyperparameter mutation: reproducible draws around a model's defaults, without
  duplicates
* :mod:`.process`: Running a training command so that nothing outlives it, in any session or
  process group
* :mod:`.ray_executor`: Mutation experiments on a Ray cluster: one Ray task per experiment
* :mod:`.ray_node`: The Ray task of one experiment: what runs on the node Ray picked
* :mod:`.ray_reaper`: A watchdog that ends an experiment's processes when the Ray worker running it
  dies
* :mod:`.runner`: One experiment where it runs: cooldown, attempts with retries, energy, the raw
  files
* :mod:`.session`: A session: run the planned experiments, measure each one's energy, record
  everything
* :mod:`.settings`: Batch experiment settings (``settings/*.json``), validated like the models
  config
* :mod:`.store`: Results on disk: session folders, experiment.json, summary.csv and one SQLite
  database
* :mod:`.examples`: Example training scripts for ``codedag mutate``: small models on synthetic
  data, offline, CPU
"""
