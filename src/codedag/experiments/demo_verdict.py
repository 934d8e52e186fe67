"""The one-sentence verdict of ``codedag demo``: what the plan did and what it changed, without
overclaiming.

The verdict is an ordered list of rules (:data:`RULES`). Each rule reads the run's facts
(:class:`VerdictFacts`) and returns its sentence, or ``None`` when it does not apply; the first
rule that applies decides. The last two rules together cover every run, so a verdict is always
found.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VerdictFacts:
    """What the verdict is made of.

    ``placed`` lists the functions the plan moved to torch (the run-time check may have
    switched some back: ``switched_off``), ``kept`` the other measured functions; ``where`` the
    device in words; ``loader`` the tuned DataLoader settings when the plan changes them;
    ``batched`` the sample chains that ran once per batch; ``cached`` what the prefix cache did
    (a clause, ``""``: nothing cached); ``epochs`` the optimized run's speedup per epoch;
    ``difference`` (``no difference`` when ``speedup`` lies within its ``spread``) keeps noise
    from reading as a speedup.
    """

    placed: tuple[str, ...]
    kept: tuple[str, ...]
    measured: bool  # any call was measured (the plan's placement rows are not empty)
    speedup: float | None
    where: str
    basis: str
    loader: str | None = None
    switched_off: frozenset[str] = frozenset()
    batched: tuple[str, ...] = ()
    cached: str = ""
    epochs: tuple[float, ...] = ()
    difference: str | None = None
    spread: float | None = None

    @property
    def off(self) -> list[str]:
        """The placed functions the run-time check switched back to their library."""
        return [f for f in self.placed if f in self.switched_off]

    @property
    def moved(self) -> list[str]:
        """The placed functions that ran through torch."""
        return [f for f in self.placed if f not in self.switched_off]


Rule = Callable[[VerdictFacts], str | None]


def outcome(facts: VerdictFacts, faster: str, slower: str) -> str:
    """The end of a verdict: ``faster`` or ``slower`` filled with the ratio, no difference
    when the ratio lies within its spread, or a full stop when no ratio is known."""
    speedup = facts.speedup
    if speedup is None:
        return "."
    if facts.difference == "no difference":
        return (
            f": the two runs' step times do not differ beyond their spread ({speedup:.2f}x "
            f"± {facts.spread or 0.0:.2f})."
        )
    if speedup >= 1.0:
        return faster.format(speedup)
    return slower.format(1 / speedup)


def _noise(facts: VerdictFacts) -> str:
    """The end of a verdict where both runs executed the same code: any difference is noise."""
    if facts.speedup is None:
        return "."
    return f" (their step times differ by {abs(1 - facts.speedup) * 100:.1f} %: run-to-run noise)."


def cached_rule(facts: VerdictFacts) -> str | None:
    """The prefix cache kept values: what moved, what was cached, each epoch (with the spread
    of the runs' step times, so that one run's noise does not read as a change)."""
    if not facts.cached:
        return None
    if facts.moved:
        text = (
            f"The plan moves {', '.join(facts.moved)} to torch on {facts.where}, "
            "where measured faster"
        )
    else:
        text = f"Measured on {facts.where}, the plan moves no call to torch"
    if facts.batched:
        text += f", runs the sample chain {', '.join(facts.batched)} once per batch"
    if facts.loader is not None:
        text += f", uses the tuned DataLoader ({facts.loader})"
    text += f" and {facts.cached}"
    epochs = facts.epochs
    if len(epochs) >= 2:
        text += (
            f": epoch 1 ran {epochs[0]:.2f}x as fast as the baseline (computing and storing "
            f"the cached values), epoch 2 {epochs[1]:.2f}x (reading them back)"
        )
        if facts.spread:
            text += (
                f"; the two runs, one after the other, spread by ± {facts.spread:.2f} in their "
                "step times, so an epoch within that of 1.00x is no measured difference"
            )
        return text + "."
    if facts.speedup is not None:
        return text + f": the optimized run was {facts.speedup:.2f}x as fast as the baseline."
    return text + "."


def batched_rule(facts: VerdictFacts) -> str | None:
    """No call moves on its own and sample chains ran once per batch."""
    if not facts.batched or facts.placed:
        return None
    text = (
        f"Measured on {facts.where}, no call moves on its own; the sample chain "
        f"{', '.join(facts.batched)} ran once per batch through torch on {facts.where}"
    )
    if facts.loader is not None:
        text += f", with the tuned DataLoader ({facts.loader})"
    return text + outcome(
        facts,
        ": the optimized run was {:.2f}x as fast.",
        ": the optimized run was {:.2f}x slower than the baseline.",
    )


def switched_back_rule(facts: VerdictFacts) -> str | None:
    """The run-time check switched every placed function back: both runs ran the library."""
    if not facts.placed or facts.moved:
        return None
    return (
        f"The plan moved {', '.join(facts.placed)} to torch on {facts.where}, where calibration "
        "measured it faster, but on the training run's own calls the run-time check measured the "
        "library faster and switched it back, so both runs executed the library code"
        + _noise(facts)
    )


def tuned_loader_rule(facts: VerdictFacts) -> str | None:
    """Every call stays with its library; the tuned DataLoader is what changed."""
    if facts.moved or facts.loader is None:
        return None
    text = (
        f"Measured on {facts.where}, the plan keeps every call with its library (both runs "
        f"execute the same code) and runs them in the tuned DataLoader ({facts.loader})"
    )
    return text + outcome(
        facts,
        ": the optimized run was {:.2f}x as fast.",
        ": the optimized run was {:.2f}x slower.",
    )


def nothing_measured_rule(facts: VerdictFacts) -> str | None:
    """No traced call could be measured."""
    if facts.moved or facts.measured:
        return None
    return (
        "No traced call could be measured, so the plan keeps every call on the CPU; both "
        "runs execute the same code."
    )


def all_kept_rule(facts: VerdictFacts) -> str | None:
    """Every measured function is faster with its library: both runs execute the same code."""
    if facts.moved:
        return None
    return (
        f"Measured on {facts.where}, each of the {len(facts.kept)} candidate functions is faster "
        "with its own library than through torch, so the plan keeps every call where it is: "
        "both runs execute the same code" + _noise(facts)
    )


def moves_rule(facts: VerdictFacts) -> str | None:
    """The plan moved functions to torch: which, what else it did, and the speedup."""
    if not facts.moved:
        return None
    text = (
        f"The plan moves {', '.join(facts.moved)} to torch on {facts.where}, where calibration "
        "measured it faster"
    )
    if facts.kept:
        text += f", and keeps {len(facts.kept)} other measured function(s) with their library"
    if facts.off:
        text += f" (the run-time check switched {', '.join(facts.off)} back to its library)"
    if facts.basis == "assumed":
        text += " (ASSUMED speedup, not measured)"
    if facts.loader is not None:
        text += f", with the tuned DataLoader ({facts.loader})"
    return text + outcome(
        facts,
        ": the pipeline ran {:.2f}x faster.",
        "; yet the optimized run was {:.2f}x slower than the baseline here "
        "(see the run-time check in the migration stats).",
    )


# In order: the first rule that applies decides. all_kept_rule and moves_rule cover every run.
RULES: tuple[Rule, ...] = (
    cached_rule,
    batched_rule,
    switched_back_rule,
    tuned_loader_rule,
    nothing_measured_rule,
    all_kept_rule,
    moves_rule,
)


def _field(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


def verdict(
    rows: Sequence[Any],
    speedup: float | None,
    device: str,
    basis: str,
    loader: str | None = None,
    switched_off: Collection[str] = (),
    batched: Collection[str] = (),
    cached: str = "",
    epochs: Sequence[float] = (),
    difference: str | None = None,
    spread: float | None = None,
) -> str:
    """One sentence saying what the plan did and what it changed, without overclaiming.

    Args:
        rows: The plan's placement rows (``function`` and ``placed``), as dicts or models.
        speedup: Baseline over optimized step time; ``None`` when the optimized run did not run.
        device: The device the plan was measured for.
        basis: The plan's placement basis (``measured``, ``assumed``, ``none``).
        loader: The tuned DataLoader settings when the plan changes them.
        switched_off: The placed functions the run-time check turned back to their library.
        batched: The sample chains that ran once per batch.
        cached: What the prefix cache did, as a clause (``""``: nothing cached).
        epochs: The optimized run's speedup per epoch (the cache stores in the first, reads
            back from the second).
        difference: ``no difference`` when ``speedup`` lies within its ``spread``.
        spread: The half-width of the speedup's interval.
    """
    facts = VerdictFacts(
        placed=tuple(_field(r, "function") for r in rows if _field(r, "placed")),
        kept=tuple(_field(r, "function") for r in rows if not _field(r, "placed")),
        measured=bool(rows),
        speedup=speedup,
        where="the CPU" if device == "cpu" else device,
        basis=basis,
        loader=loader,
        switched_off=frozenset(switched_off),
        batched=tuple(batched),
        cached=cached,
        epochs=tuple(epochs),
        difference=difference,
        spread=spread,
    )
    for rule in RULES:
        text = rule(facts)
        if text is not None:
            return text
    raise AssertionError("no verdict rule applied")  # all_kept_rule and moves_rule cover all
