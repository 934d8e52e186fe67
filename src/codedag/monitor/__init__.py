"""Monitoring of training runs: batch time, data wait, CPU/GPU use, memory, losses, accuracies.

Import from the submodules (``codedag.monitor.experiment`` etc.) or from ``codedag``; this package
imports nothing at load time.
"""
