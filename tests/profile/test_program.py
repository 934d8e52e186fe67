"""What ``codedag profile`` runs: a step, with or without the batches it consumes."""

from __future__ import annotations

from codedag.profile.program import StepProgram


def test_a_step_alone_fetches_its_own_data_and_facts_are_per_program() -> None:
    first, second = StepProgram(step=print), StepProgram(step=len, batches=[1], name="train")
    assert (first.batches, first.name) == (None, "step")
    first.info["parameters"] = 10
    assert second.info == {}  # each program records its own facts
    assert second.step([1, 2]) == 2 and second.name == "train"
