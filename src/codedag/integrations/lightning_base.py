"""Lightning's ``Callback`` class, whichever package provides it, without importing codedag's monitor.

Both Lightning callbacks (:mod:`.lightning`, the monitor's; :mod:`.lightning_accelerate`) derive
from :data:`Callback`; the accelerating one imports only this module, so a script that adds it
pays for no monitoring code.
"""

from __future__ import annotations

from codedag.errors import ConfigError


def _lightning_callback_class() -> type | None:
    """``lightning.pytorch.Callback`` (or pytorch_lightning's), ``None`` when neither imports."""
    try:
        from lightning.pytorch import Callback

        return Callback
    except ImportError:
        pass
    try:
        from pytorch_lightning import Callback as LegacyCallback

        return LegacyCallback
    except ImportError:
        return None


Callback = _lightning_callback_class()
"""Lightning's ``Callback`` (``None`` when neither lightning nor pytorch_lightning imports)."""


def require_lightning(name: str, instead: str) -> None:
    """Raise :class:`ConfigError` saying that ``name`` needs lightning and what to do ``instead``,
    when neither lightning nor pytorch_lightning is installed."""
    if Callback is None:
        raise ConfigError(
            f"{name} needs lightning: pip install 'codedag[lightning]' (or {instead})"
        )
