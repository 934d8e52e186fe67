"""The demo's one-sentence verdict says what ran, never more."""

from __future__ import annotations

from codedag.experiments.demo_steps import verdict

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
