"""The exception hierarchy. Every error says what was received and what was expected."""

from __future__ import annotations


class CodeDAGError(Exception):
    """Base class of all codedag errors."""


class ConfigError(CodeDAGError):
    """Bad user input: arguments, configuration files, settings."""


class SchemaError(ConfigError):
    """A data file (DAG, plan, results) that is malformed or has an unsupported schema version."""


class TraceError(CodeDAGError):
    """Tracing a target failed (missing target, not callable, hook conflict)."""


class GraphError(CodeDAGError):
    """An execution DAG violates an invariant (cycle, dangling edge, negative time)."""


class MigrationError(CodeDAGError):
    """A migration plan cannot be applied (unknown or refused function, bad device)."""


class DeviceError(CodeDAGError):
    """Requested hardware is missing or unusable (no CUDA, NVML not loadable)."""


class ExperimentError(CodeDAGError):
    """An experiment, training run or energy measurement failed."""


class WriteError(CodeDAGError):
    """A file could not be written (a full disk, a quota, a read-only mount); the file it would
    have replaced is intact and no partial file is left."""


class UsageError(ConfigError):
    """The CLI was called in a way that cannot work; the message says how to call it."""


class UnsupportedOperation(MigrationError):
    """A backend cannot reproduce this call (argument value, dtype, shape); the original runs."""
