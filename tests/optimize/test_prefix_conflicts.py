"""The prefix cache beside per-call placement and batched chains."""

from __future__ import annotations

from typing import Any

from codedag.optimize.cache_conflicts import resolve
from codedag.plan import MigrationPlan


def _decode_plan(batched_steps: list[str]) -> dict[str, Any]:
    """A cached ``imread > resize`` (cut at the resize) and a batched chain of ``steps``."""
    functions = [s for s in batched_steps if s.startswith("cv2.")]
    return {
        "context_device_map": {},
        "calls": [
            {
                "function": name,
                "migrate": False,
                "context_keys": [f"s#{i}/{name}#0" for i in (0, 1)] + [f"other#0/{name}#0"],
            }
            for name in functions
        ],
        "batched": {
            "chains": [
                {
                    "id": "chain0",
                    "steps": batched_steps,
                    "functions": functions,
                    "entries": [f"s#{i}/{batched_steps[0]}#0" for i in (0, 1)],
                    "entry_functions": [batched_steps[0]],
                    "batched": True,
                    "basis": "assumed",
                    "reason": "forced",
                }
            ]
        },
        "cache": {
            "chains": [
                {
                    "id": "prefix0",
                    "source_function": "cv2.imread",
                    "steps": ["cv2.imread", "cv2.resize", "cv2.cvtColor"],
                    "functions": ["cv2.imread", "cv2.resize", "cv2.cvtColor"],
                    "cached": True,
                    "cut": {"step": "cv2.resize", "position": 1, "saved_ns": 1_000_000},
                }
            ]
        },
        "notes": [],
    }


def test_a_batched_chain_that_begins_in_a_cached_prefix_begins_after_its_cut() -> None:
    steps = ["cv2.resize", "cv2.cvtColor", "cv2.warpAffine", "operator.truediv"]
    given = MigrationPlan.from_dict(_decode_plan(steps))
    before = given.model_copy(deep=True)
    plan = resolve(given)
    (chain,) = plan.batched.chains
    assert plan.cache is not None and plan.cache.chains[0].cached
    assert chain.batched and chain.entry_functions == ["cv2.cvtColor", "cv2.warpAffine"]
    assert chain.steps == ["cv2.cvtColor", "cv2.warpAffine", "operator.truediv"]
    assert chain.functions == ["cv2.cvtColor", "cv2.warpAffine"]
    assert chain.entries == [  # its samples only; any of them may start it (a random branch)
        f"s#{i}/cv2.{f}#0" for i in (0, 1) for f in ("cvtColor", "warpAffine")
    ]
    assert "prefix0 feeds batched chain0" in plan.notes[-1]
    assert given == before and given.batched.chains[0].steps == steps  # the input is kept


def test_a_batched_chain_inside_a_cached_prefix_is_not_batched() -> None:
    plan = resolve(MigrationPlan.from_dict(_decode_plan(["cv2.resize", "operator.truediv"])))
    (chain,) = plan.batched.chains
    assert not chain.batched and "cached prefix of prefix0" in chain.reason
    assert plan.cache is not None and plan.cache.chains[0].cached


def test_placed_calls_and_guards_stay_beside_the_cache() -> None:
    plan = _decode_plan(["cv2.warpAffine", "operator.truediv"])  # begins after the prefix
    plan["calls"][0].update(function="cv2.resize", migrate=True)
    plan["cache"]["chains"][0]["guards"] = ["cv2.flip"]
    given = MigrationPlan.from_dict(plan)
    before = given.model_copy(deep=True)
    # nothing to give way: the runtime nests the cache's replacements
    assert resolve(given) == before
