"""Reading a migration plan file: the one reader, which validates the plan once.

Every command and API that takes a plan file (``codedag migrate``, ``codedag optimize --loader``,
``codedag tune --plan``, :meth:`PipelineMigrator.from_json
<codedag.migrate.api.PipelineMigrator.from_json>`) reads it through :func:`read_plan` and passes
the validated :class:`~codedag.plan.MigrationPlan` on, so nothing downstream validates it again.
The plans ``codedag run`` keeps across runs are opened by their store (no link, this user's,
size-capped: :mod:`codedag.integrations.plan_store`) and validated by the same :func:`check_plan`.
"""

from __future__ import annotations

import os
from typing import Any

from codedag.plan.model import MigrationPlan
from codedag.util.io import read_json


def read_plan(path: str | os.PathLike[str], source: str | None = None) -> MigrationPlan:
    """Read and validate the migration plan file ``path``.

    Args:
        path: the JSON file (plain or gzip).
        source: how to name the plan in messages (default: ``migration plan '<path>'``).

    Raises:
        SchemaError: one line naming the file: it is missing, unreadable, not JSON, too large,
            or not a valid plan (every problem found listed).
    """
    data = read_json(path, what="migration plan")
    return check_plan(data, source or f"migration plan {str(path)!r}")


def check_plan(data: Any, source: str) -> MigrationPlan:
    """Validate the parsed JSON of a plan file (any supported version) into the model.

    Args:
        data: the file's JSON value (a plan object).
        source: how to name the plan in messages.

    Raises:
        SchemaError: one line naming ``source``: not an object, an unsupported version, or
            fields of the wrong type (every problem found listed).
    """
    return MigrationPlan.from_dict(data, source=source)
