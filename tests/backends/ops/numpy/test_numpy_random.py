"""numpy.random backends by distribution, shape and dtype.

The random backends cannot reproduce NumPy's stream (see the module docstring), so they are
checked by moments, ranges, shapes and dtypes and by reproducibility under numpy.random.seed,
never by equality with NumPy's draws."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from migrate_support import device_fixture, to_dev  # noqa: F401

from codedag.backends.ops.numpy import BACKENDS
from codedag.errors import UnsupportedOperation


def _moments(t: torch.Tensor) -> tuple[float, float]:
    x = t.double().cpu()
    return float(x.mean()), float(x.std())


def test_uniform_draws(device):
    np.random.seed(0)
    r = BACKENDS["numpy.random.rand"](200, 100, device=device)
    assert r.shape == (200, 100) and r.dtype == torch.float64 and r.device.type == device.type
    assert float(r.min()) >= 0.0 and float(r.max()) < 1.0
    mean, std = _moments(r)
    assert abs(mean - 0.5) < 0.01 and abs(std - (1 / 12) ** 0.5) < 0.01
    u = BACKENDS["numpy.random.uniform"](-3.0, 5.0, size=(20000,), device=device)
    assert float(u.min()) >= -3.0 and float(u.max()) < 5.0
    assert abs(_moments(u)[0] - 1.0) < 0.1
    s = BACKENDS["numpy.random.random"]((7, 3), device=device)
    assert s.shape == (7, 3) and s.dtype == torch.float64


def test_normal_draws(device):
    z = BACKENDS["numpy.random.randn"](20000, device=device)
    assert z.shape == (20000,) and z.dtype == torch.float64
    mean, std = _moments(z)
    assert abs(mean) < 0.05 and abs(std - 1) < 0.05
    n = BACKENDS["numpy.random.normal"](10.0, 2.0, size=(100, 200), device=device)
    mean, std = _moments(n)
    assert abs(mean - 10) < 0.05 and abs(std - 2) < 0.05
    loc = to_dev(np.array([0.0, 100.0]), device)
    per_column = BACKENDS["numpy.random.normal"](loc, 1.0, size=(5000, 2))
    assert abs(float(per_column[:, 1].mean()) - 100) < 0.1


@pytest.mark.parametrize("dtype", [int, np.uint8, np.int16])
def test_randint_range_and_dtype(device, dtype):
    r = BACKENDS["numpy.random.randint"](3, 9, size=(5000,), dtype=dtype, device=device)
    assert r.dtype == torch.from_numpy(np.zeros(1, dtype=dtype)).dtype
    values = set(r.cpu().tolist())
    assert values == set(range(3, 9))
    assert set(BACKENDS["numpy.random.randint"](4, size=500, device=device).tolist()) == set(
        range(4)
    )
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.random.randint"](0, 300, size=3, dtype=np.uint8)


def test_shuffle_permutation_choice(device):
    a = np.arange(40, dtype=np.int32).reshape(20, 2)
    t = to_dev(a, device)
    assert BACKENDS["numpy.random.shuffle"](t) is None
    assert sorted(t[:, 0].tolist()) == list(range(0, 40, 2))
    assert (t[:, 1] - t[:, 0]).eq(1).all()  # rows move together
    p = BACKENDS["numpy.random.permutation"](to_dev(a, device))
    assert p.shape == a.shape and sorted(p[:, 0].tolist()) == list(range(0, 40, 2))
    pop = to_dev(np.array([1.5, 2.5, 3.5], np.float32), device)
    c = BACKENDS["numpy.random.choice"](pop, size=(4000,))
    assert c.dtype == torch.float32 and set(c.tolist()) == {1.5, 2.5, 3.5}
    w = BACKENDS["numpy.random.choice"](pop, size=4000, p=[0.0, 0.2, 0.8])
    assert 1.5 not in w.tolist() and abs(float((w == 3.5).double().mean()) - 0.8) < 0.05
    nr = BACKENDS["numpy.random.choice"](pop, size=3, replace=False)
    assert sorted(nr.tolist()) == [1.5, 2.5, 3.5]


def test_draws_follow_numpy_seed_and_advance_its_state(device):
    np.random.seed(123)
    first = BACKENDS["numpy.random.rand"](5, device=device)
    second = BACKENDS["numpy.random.rand"](5, device=device)
    np.random.seed(123)
    assert torch.equal(BACKENDS["numpy.random.rand"](5, device=device), first)
    assert not torch.equal(first, second)


def test_scalar_draws_stay_on_numpy():
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.random.rand"]()
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.random.uniform"](0, 1)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.random.permutation"](10)
