"""Calibration: time each migratable call's original and backend on the target device.

Placement decides from these figures (``codedag.optimize``), never from an assumed speedup.

* :mod:`.saved_times`: The calibration cache: measured times per (device, library versions, function,
  signature)
* :mod:`.chain_loader`: Deciding a batched chain in the loader itself: batched against per
  sample, in alternating blocks, through the run-time check
* :mod:`.chain_replay`: Replaying a traced sample chain, per sample with the libraries or as one
  batched run
* :mod:`.chains`: Calibrating batched chains: one batch through batched execution vs the per-sample
  chain
* :mod:`.dispatch`: The wrapper's own cost per call, measured in this process
* :mod:`.environment`: What a measurement depends on besides the call and the device: the library
  versions
* :mod:`.inputs`: Inputs for timing a traced call: rebuilt from the tracer's argument descriptions
* :mod:`.measurement`: What calibration measured: one :class:`Measurement` per (function, argument
  signature), and the :class:`Calibration` of a DAG that maps each traced call to one of them
* :mod:`.store_costs`: What the prefix cache's store costs here: writing a value once and reading it
  back, by size
* :mod:`.run`: Calibrate the migratable calls of a traced DAG on a target device
* :mod:`.table`: A human view of a calibration: one row per measured call signature
* :mod:`.timing`: Calibration's use of :mod:`codedag.measure`: two ways of making the same call,
  side by side
"""

from codedag.calibrate.measurement import Calibration, CallEstimate, DispatchCost, Measurement
from codedag.calibrate.run import Calibrator, calibrate_dag
from codedag.calibrate.saved_times import CalibrationCache, default_cache_path
from codedag.calibrate.timing import Budget, Stopwatch, Timing

__all__ = [
    "Budget",
    "Calibration",
    "CalibrationCache",
    "Calibrator",
    "CallEstimate",
    "DispatchCost",
    "Measurement",
    "Stopwatch",
    "Timing",
    "calibrate_dag",
    "default_cache_path",
]
