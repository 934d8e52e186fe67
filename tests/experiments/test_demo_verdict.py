"""The demo's one-sentence verdict says what ran, never more."""

from __future__ import annotations

from codedag.experiments.demo_verdict import (
    RULES,
    VerdictFacts,
    all_kept_rule,
    batched_rule,
    cached_rule,
    moves_rule,
    nothing_measured_rule,
    switched_back_rule,
    tuned_loader_rule,
    verdict,
)

MEL = "librosa.feature.spectral.melspectrogram"


def _rows(*placed: str, kept: tuple[str, ...] = ("numpy.pad",)) -> list[dict]:
    return [{"function": f, "placed": 1} for f in placed] + [
        {"function": f, "placed": 0} for f in kept
    ]


def test_a_measured_win_is_reported_with_its_speedup() -> None:
    text = verdict(_rows(MEL), 1.5, "cpu", "measured")
    assert f"moves {MEL} to torch on the CPU" in text
    assert "ran 1.50x faster" in text


def test_placements_the_run_time_check_switched_off_claim_no_speedup() -> None:
    text = verdict(_rows(MEL), 1.53, "cpu", "measured", switched_off={MEL: "slower"})
    assert "faster." not in text and "1.53x" not in text
    assert "switched it back" in text
    assert "both runs executed the library code" in text
    assert "differ by 53.0 %" in text


def test_a_partly_switched_off_plan_names_what_still_moves() -> None:
    text = verdict(
        _rows(MEL, "numpy.fft.rfft"), 1.2, "cpu", "measured", switched_off=["numpy.fft.rfft"]
    )
    assert f"moves {MEL} to torch" in text
    assert "switched numpy.fft.rfft back to its library" in text


def test_nothing_placed_says_both_runs_execute_the_same_code() -> None:
    text = verdict(_rows(kept=("cv2.resize", "cv2.flip")), 0.9, "cpu", "measured")
    assert "each of the 2 candidate functions is faster with its own library" in text
    assert "run-to-run noise" in text


def test_chains_that_ran_batched_are_not_called_the_same_code() -> None:
    rows = _rows(kept=("cv2.resize", "cv2.warpAffine"))
    text = verdict(rows, 0.5, "cuda:0", "measured", batched=["chain0"])
    assert "same code" not in text and "noise" not in text
    assert "chain chain0 ran once per batch through torch on cuda:0" in text
    assert "2.00x slower" in text
    assert "1.39x as fast" in verdict(rows, 1.39, "cpu", "measured", batched=["chain0"])


def test_a_cached_run_reports_each_epoch_and_never_the_same_code() -> None:
    cached = "keeps each sample's deterministic prefix in the prefix cache (prefix0: x > y)"
    rows = _rows(kept=("cv2.resize",))
    text = verdict(rows, 1.4, "cpu", "measured", cached=cached, epochs=[0.96, 2.5])
    assert "moves no call to torch and keeps each sample's deterministic prefix" in text
    assert "epoch 1 ran 0.96x as fast" in text and "epoch 2 2.50x" in text
    assert "same code" not in text and "noise" not in text
    one = verdict(_rows(MEL), 1.2, "cpu", "measured", cached=cached, epochs=[1.2])
    assert f"moves {MEL} to torch" in one and "was 1.20x as fast" in one
    noisy = verdict(rows, 1.0, "cpu", "measured", cached=cached, epochs=[0.9, 1.1], spread=0.12)
    assert "epoch 2 1.10x (reading them back); the two runs" in noisy
    assert "spread by ± 0.12 in their step times" in noisy


def test_a_ratio_within_its_spread_reads_as_no_difference() -> None:
    text = verdict(_rows(MEL), 1.076, "cpu", "measured", difference="no difference", spread=0.09)
    assert "1.08x faster" not in text and "ran 1.08x" not in text
    assert "do not differ beyond their spread (1.08x ± 0.09)" in text
    faster = verdict(_rows(MEL), 1.5, "cpu", "measured", difference="faster", spread=0.05)
    assert "ran 1.50x faster" in faster


def _facts(**changes: object) -> VerdictFacts:
    fields: dict = dict(placed=(), kept=("numpy.pad",), measured=True, speedup=1.2,
                        where="the CPU", basis="measured")  # fmt: skip
    fields.update(changes)
    return VerdictFacts(**fields)


def test_the_rules_apply_in_order_and_the_first_that_applies_decides() -> None:
    order = (cached_rule, batched_rule, switched_back_rule, tuned_loader_rule,
             nothing_measured_rule, all_kept_rule, moves_rule)  # fmt: skip
    assert order == RULES
    # a cached run with a tuned loader and a batched chain: the cache's rule speaks first
    facts = _facts(cached="keeps x", loader="2 workers", batched=("chain0",))
    assert batched_rule(facts) is not None and tuned_loader_rule(facts) is not None
    text = verdict([{"function": "numpy.pad", "placed": 0}], 1.2, "cpu", "measured",
                   loader="2 workers", batched=["chain0"], cached="keeps x")  # fmt: skip
    assert text == cached_rule(facts)


def test_cached_rule_applies_only_when_the_cache_kept_values() -> None:
    assert cached_rule(_facts()) is None
    text = cached_rule(_facts(cached="keeps x", loader="2 workers", batched=("chain0",)))
    assert text is not None
    assert text.startswith("Measured on the CPU, the plan moves no call to torch, runs the sample")
    assert "uses the tuned DataLoader (2 workers) and keeps x: the optimized run was 1.20x" in text


def test_batched_rule_needs_a_batched_chain_and_no_placed_call() -> None:
    assert batched_rule(_facts()) is None
    assert batched_rule(_facts(batched=("chain0",), placed=(MEL,))) is None
    text = batched_rule(_facts(batched=("chain0",), loader="2 workers", speedup=None))
    assert text is not None and text.endswith("with the tuned DataLoader (2 workers).")


def test_switched_back_rule_needs_every_placed_call_switched_back() -> None:
    assert switched_back_rule(_facts()) is None
    assert switched_back_rule(_facts(placed=(MEL, "x.y"), switched_off=frozenset({MEL}))) is None
    text = switched_back_rule(_facts(placed=(MEL,), switched_off=frozenset({MEL}), speedup=None))
    assert text is not None and text.endswith("both runs executed the library code.")


def test_tuned_loader_rule_speaks_when_only_the_loader_changed() -> None:
    assert tuned_loader_rule(_facts()) is None
    assert tuned_loader_rule(_facts(placed=(MEL,), loader="2 workers")) is None
    text = tuned_loader_rule(_facts(loader="2 workers", speedup=0.8))
    assert text == (
        "Measured on the CPU, the plan keeps every call with its library (both runs execute the "
        "same code) and runs them in the tuned DataLoader (2 workers): the optimized run was "
        "1.25x slower."
    )
    assert verdict(_rows(kept=("cv2.resize",)), 0.8, "cpu", "measured", loader="2 workers") == text


def test_nothing_measured_rule_needs_no_measured_call() -> None:
    assert nothing_measured_rule(_facts()) is None
    text = verdict([], 1.0, "cpu", "none")
    assert text == nothing_measured_rule(_facts(kept=(), measured=False))
    assert text.startswith("No traced call could be measured")


def test_all_kept_rule_counts_the_candidates_and_calls_any_difference_noise() -> None:
    assert all_kept_rule(_facts(placed=(MEL,))) is None
    text = all_kept_rule(_facts(kept=("a.b", "c.d", "e.f"), speedup=None))
    assert text is not None and "each of the 3 candidate functions" in text
    assert text.endswith("both runs execute the same code.")


def test_moves_rule_names_the_assumed_basis_the_loader_and_a_slower_run() -> None:
    assert moves_rule(_facts()) is None
    text = moves_rule(_facts(placed=(MEL,), basis="assumed", loader="2 workers", speedup=0.5))
    assert text is not None
    assert "(ASSUMED speedup, not measured), with the tuned DataLoader (2 workers)" in text
    assert "yet the optimized run was 2.00x slower than the baseline here" in text
