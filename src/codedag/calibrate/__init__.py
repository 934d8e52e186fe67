"""Calibration: time each migratable call's original and backend on the target device.

Placement decides from these figures (``codedag.optimize``), never from an assumed speedup.
"""

from codedag.calibrate.cache import CalibrationCache, default_cache_path
from codedag.calibrate.measurement import Calibration, CallEstimate, DispatchCost, Measurement
from codedag.calibrate.run import Calibrator, calibrate_dag
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
