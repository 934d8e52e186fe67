"""One owner per function: the prefix cache against per-call placement and batched chains."""

from __future__ import annotations

from typing import Any

from codedag.optimize.prefix_conflicts import resolve


def _plan(saved_ns: int, placed_saving_ns: int, batched: bool = False) -> dict[str, Any]:
    cut = {"step": "librosa.power_to_db", "saved_ns": saved_ns, "write_ns": 1_000,
           "bytes_per_sample": 80_000}  # fmt: skip
    return {
        "context_device_map": {"k/librosa.melspectrogram#0": "cpu"},
        "calls": [
            {
                "function": "librosa.melspectrogram",
                "context_keys": ["k/librosa.melspectrogram#0"],
                "instance_count": 4,
                "migrate": True,
                "device": "cpu",
                "original_ns": 50_000_000,
                "backend_ns": 50_000_000 - placed_saving_ns,
                "reason": "measured faster",
            }
        ],
        "batched": {
            "chains": [
                {
                    "id": "chain0",
                    "functions": ["librosa.power_to_db"],
                    "batched": batched,
                    "original_ns": 8_000_000,
                    "batched_ns": 4_000_000,
                    "batch_size": 4,
                    "basis": "measured",
                    "reason": "measured",
                }
            ]
        },
        "cache": {
            "samples": 4,
            "dataset_len": 16,
            "bytes_total": 16 * 80_000,
            "saved_ns_per_sample": saved_ns,
            "write_ns_per_sample": 1_000,
            "chains": [
                {
                    "id": "prefix0",
                    "source_function": "librosa.melspectrogram",
                    "functions": ["librosa.melspectrogram", "librosa.power_to_db"],
                    "sources": 4,
                    "samples": 4,
                    "cached": True,
                    "share": 1.0,
                    "cut": cut,
                }
            ],
        },
        "notes": [],
    }


def test_the_cache_wins_over_a_placement_that_saves_less_and_the_call_stays() -> None:
    plan = _plan(saved_ns=50_000_000, placed_saving_ns=20_000_000, batched=True)
    resolve(plan)
    (call,) = plan["calls"]
    assert not call["migrate"] and "prefix cache" in call["reason"]
    assert plan["context_device_map"] == {}
    assert plan["batched"]["chains"][0]["batched"]  # nested with the cache where they share
    assert plan["cache"]["chains"][0]["cached"]
    assert "kept the cache" in plan["notes"][-1]


def test_a_placement_that_saves_more_keeps_its_calls_and_the_chain_is_not_cached() -> None:
    plan = _plan(saved_ns=1_000_000, placed_saving_ns=45_000_000)
    resolve(plan)
    assert plan["calls"][0]["migrate"] and plan["context_device_map"]
    chain = plan["cache"]["chains"][0]
    assert not chain["cached"] and "save more" in chain["reason"]
    assert plan["cache"]["bytes_total"] == 0 and plan["cache"]["saved_ns_per_sample"] == 0
    assert "kept the placement" in plan["notes"][-1]


def test_chains_without_a_shared_function_are_left_alone() -> None:
    plan = _plan(saved_ns=50_000_000, placed_saving_ns=20_000_000)
    plan["calls"][0]["function"] = "cv2.resize"
    resolve(plan)
    assert plan["calls"][0]["migrate"] and plan["notes"] == []


def _decode_plan(batched_steps: list[str]) -> dict[str, Any]:
    """A cached ``imread > resize`` (cut at the resize) and a batched chain of ``steps``."""
    functions = [s for s in batched_steps if s.startswith("cv2.")]
    return {
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
    plan = _decode_plan(["cv2.resize", "cv2.cvtColor", "cv2.warpAffine", "operator.truediv"])
    resolve(plan)
    (chain,) = plan["batched"]["chains"]
    assert plan["cache"]["chains"][0]["cached"]
    assert chain["batched"] and chain["entry_functions"] == ["cv2.cvtColor"]
    assert chain["steps"] == ["cv2.cvtColor", "cv2.warpAffine", "operator.truediv"]
    assert chain["functions"] == ["cv2.cvtColor", "cv2.warpAffine"]
    assert chain["entries"] == ["s#0/cv2.cvtColor#0", "s#1/cv2.cvtColor#0"]  # its samples only
    assert "prefix0 feeds batched chain0" in plan["notes"][-1]


def test_a_batched_chain_inside_a_cached_prefix_is_not_batched() -> None:
    plan = _decode_plan(["cv2.resize", "operator.truediv"])
    resolve(plan)
    (chain,) = plan["batched"]["chains"]
    assert not chain["batched"] and "cached prefix of prefix0" in chain["reason"]
    assert plan["cache"]["chains"][0]["cached"]


def test_a_guard_yields_to_a_placement_that_patches_its_function() -> None:
    plan = _plan(saved_ns=50_000_000, placed_saving_ns=20_000_000)
    plan["calls"][0]["function"] = "librosa.feature.mfcc"  # placed, outside the cached chain
    plan["cache"]["chains"][0]["guards"] = ["librosa.feature.mfcc", "librosa.util.normalize"]
    resolve(plan)
    assert plan["calls"][0]["migrate"]
    assert plan["cache"]["chains"][0]["guards"] == ["librosa.util.normalize"]
