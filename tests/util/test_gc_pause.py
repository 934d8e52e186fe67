"""gc_paused: the collector is off inside, back on after the last pause, never turned on by it."""

from __future__ import annotations

import gc
import threading

from codedag.util.gc_pause import gc_paused


def test_gc_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_nested_pauses_end_with_the_outermost() -> None:
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_pause_in_another_thread_outlasting_this_one_keeps_it_off() -> None:
    started, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        assert started.wait(10)
    assert not gc.isenabled()  # the other thread's pause is still on
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_a_raising_block_still_ends_its_pause() -> None:
    try:
        with gc_paused():
            raise ValueError("inside")
    except ValueError:
        pass
    assert gc.isenabled()
