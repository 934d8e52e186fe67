"""Where the monitor's records go besides ``results.json``: one sink per tool.

* :mod:`.base`: The sink interface, and the hub that fans records out and drops a sink that fails
  with one warning
* :mod:`.csv`: The raw CSV streams next to ``results.json`` (every step, sample and logged value)
* :mod:`.tensorboard`: TensorBoard event files, one run per mode
* :mod:`.event_file`: Event files written on the caller's thread, their records checksummed in C
* :mod:`.mlflow`: An MLflow parent run with a nested run per mode, sent from a thread of its own
* :mod:`.names`: Each figure's TensorBoard tag and MLflow key, in one table
* :mod:`.window`: Dashboard points: the steps since the previous point, averaged
* :mod:`.specs`: Sinks chosen by name (``tensorboard``, ``mlflow:URI``), for the API, the CLI and
  configs

A new output is one module here with a :class:`~.base.Sink` subclass and its name in
:data:`.specs.SINKS`. Import from the submodules; this package imports nothing at load time.
"""
