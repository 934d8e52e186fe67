"""A stored plan is used only for the code it was made from: the dataset class's module and name
in its key, and the other modules of the pipeline's code checked by digest."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from prefix_support import storing_pays

from codedag.cli.main import main
from codedag.integrations.pipeline_code import changed_code, code_digests
from codedag.integrations.plan_store import (
    load_plan,
    plan_inputs,
    plan_key,
    plan_path,
    save_plan,
)
from codedag.integrations.run_results import load_run_results

DATASET = """\
class Samples:
    def __getitem__(self, i):
        return i

    def __len__(self):
        return 4
"""


def _module(path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


class _Loader:
    def __init__(self, dataset: object) -> None:
        self.dataset = dataset


def test_the_same_code_under_another_module_name_has_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data.py").write_text(DATASET)
    one = _module(tmp_path / "data.py", "pipeline_one", monkeypatch)
    two = _module(tmp_path / "data.py", "pipeline_two", monkeypatch)
    again = _module(tmp_path / "data.py", "pipeline_one", monkeypatch)
    keys = [plan_key(_Loader(m.Samples()), "cpu") for m in (one, two, again)]
    assert keys[0] != keys[1]  # the plan's call sites name the module: another plan
    assert keys[0] == keys[2]


def test_a_training_and_a_validation_set_of_one_class_have_two_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data.py").write_text(
        DATASET + "\n    def __init__(self, paths, train, size=64):\n"
        "        self.paths, self.train, self.size = paths, train, size\n"
    )
    samples = _module(tmp_path / "data.py", "pipeline_split", monkeypatch).Samples

    def key(dataset: object) -> str:
        return plan_key(_Loader(dataset), "cpu")

    train, val = samples(["a.png", "b.png"], True), samples(["c.png"], False)
    assert key(train) != key(val)  # one flag: another path through the same code
    assert key(train) == key(samples(["d.png"], True))  # the files are data, not settings
    assert key(train) != key(samples(["a.png"], True, size=96))


def test_a_key_made_before_a_librarys_lazy_import_is_the_key_made_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # librosa imports SciPy on its first load: a key that read the versions of the imported
    # libraries changed between the lookup (the loader's first iteration) and the store (after
    # tracing), so every run of an audio script planned again
    (tmp_path / "data.py").write_text(DATASET)
    loader = _Loader(_module(tmp_path / "data.py", "pipeline_lazy", monkeypatch).Samples())
    import scipy

    before = plan_key(loader, "cpu")
    monkeypatch.delitem(sys.modules, "scipy")
    assert plan_key(loader, "cpu") == before
    monkeypatch.setitem(sys.modules, "scipy", scipy)
    versions = plan_inputs(loader, "cpu")["versions"]
    assert versions["scipy"] == scipy.__version__ and versions["numpy"] == np.__version__


def test_digests_keep_the_pipelines_own_modules_and_notice_a_changed_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import soundfile  # noqa: F401  (loaded: its module is looked at)

    helper = tmp_path / "pipeline_helpers.py"
    helper.write_text("def load(path):\n    return path\n")
    _module(helper, "pipeline_helpers", monkeypatch)
    names = {
        "pipeline_helpers.load",
        "pipeline_helpers.load.<locals>.inner",
        "cv2.resize",
        "numpy.ndarray.astype",
        "random.Random.random",
        "codedag.integrations.plan_store.plan_key",
        "torch.utils.data.dataloader._BaseDataLoaderIter.__next__",
        "never_imported.load",
        "soundfile.read",  # a package installed in site-packages: versioned, not the pipeline's
    }
    digests = code_digests(names)
    assert list(digests) == ["pipeline_helpers"]
    assert changed_code(digests) == []
    helper.write_text("def load(path):\n    return path[::-1]\n")
    assert changed_code(digests) == ["pipeline_helpers"]
    # a module this process has not loaded is not imported to be checked
    assert changed_code({"not_loaded_here": "0" * 64}) == []


@pytest.mark.parametrize("code", [["a"], {"mod": "not a digest"}, {"mod": 7}])
def test_a_record_whose_code_is_not_digests_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: object
) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    plan = {"context_device_map": {}, "calls": []}
    key = "ab" * 12
    path = save_plan(key, plan, {"pipeline": "m.Samples"})
    assert path is not None and load_plan(key) is not None
    record = json.loads(path.read_text())
    record["code"] = code
    path.write_text(json.dumps(record))
    assert load_plan(key) is None


SCRIPT = """\
import os, sys
import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_load

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")


class Files(Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.from_numpy(pipeline_load.load(self.files[i]).astype(np.float32))


if not os.path.isdir(ROOT):
    os.makedirs(ROOT)
    rng = np.random.default_rng(0)
    for i in range(8):
        cv2.imwrite(os.path.join(ROOT, f"{i}.png"), rng.integers(0, 255, (96, 80, 3), dtype=np.uint8))
files = sorted(os.path.join(ROOT, name) for name in os.listdir(ROOT))
for epoch in range(2):
    total = sum(float(x.sum()) for x in DataLoader(Files(files), batch_size=4))
    print(f"epoch {epoch} sum {total!r}", flush=True)
"""

HELPER = """\
import cv2


def load(path):
    img = cv2.imread(path)
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return cv2.resize(img, ({size}, {size}))
"""


def test_a_changed_helper_module_plans_again_and_stores_the_new_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "cache"))
    storing_pays(monkeypatch)  # a chain given up would leave the next run nothing to apply
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    helper = tmp_path / "pipeline_load.py"
    statuses, reasons, sums = [], [], []
    for run, size in enumerate((16, 16, 24, 24)):
        helper.write_text(HELPER.format(size=size))
        monkeypatch.delitem(sys.modules, "pipeline_load", raising=False)  # the script imports it
        monkeypatch.setattr(sys, "path", list(sys.path))
        out = tmp_path / f"run{run}"
        assert main(["run", "--out", str(out), "--", "python", str(script)]) == 0
        results = load_run_results(out)
        statuses.append(results.plan_status)
        reasons.append(results.plan_reason)
        sums.append([line for line in capsys.readouterr().out.splitlines() if "sum" in line])
    assert statuses == ["applied", "applied (stored plan)", "applied", "applied (stored plan)"]
    assert reasons[2] == "planned again: pipeline_load changed since the stored plan"
    assert reasons[0] == reasons[1] == reasons[3] == ""
    assert sums[0] == sums[1] and sums[2] == sums[3] and sums[0] != sums[2]
    stored = load_plan(results.plan_key)
    assert stored is not None and plan_path(results.plan_key).is_file()
    code = stored.inputs["code"]
    assert sorted(code) == ["__main__", "pipeline_load"]  # the script defines the data set
    assert changed_code({"pipeline_load": code["pipeline_load"]}) == []


def test_torchs_wrappers_are_keyed_by_the_data_sets_they_wrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from torch.utils.data import ConcatDataset, Subset, TensorDataset, random_split

    from codedag.integrations.pipeline_code import pipeline_classes, pipeline_name

    (tmp_path / "a.py").write_text(DATASET.replace("Samples", "Images"))
    (tmp_path / "b.py").write_text(DATASET.replace("Samples", "Clips"))
    a = _module(tmp_path / "a.py", "pipeline_a", monkeypatch).Images()
    b = _module(tmp_path / "b.py", "pipeline_b", monkeypatch).Clips()
    split_a, _ = random_split(range(10), [8, 2])  # a Subset of a range: keyed by range
    subset_a, subset_b = Subset(a, [0, 1]), Subset(b, [0, 1])
    keys = {plan_key(_Loader(d), "cpu") for d in (subset_a, subset_b, a)}
    assert len(keys) == 2 and plan_key(_Loader(subset_a), "cpu") == plan_key(_Loader(a), "cpu")
    both = ConcatDataset([Subset(a, [0]), b])
    assert pipeline_classes(both) == [type(a), type(b)]
    assert pipeline_name(both) == "Images, Clips in ConcatDataset"
    assert pipeline_name(a) == "Images" and pipeline_classes(split_a) == [range]
    tensors = TensorDataset(torch.zeros(2))
    assert pipeline_classes(tensors) == [TensorDataset]  # torch's code is the pipeline's


def _cell(module: ModuleType, code: str) -> None:
    """Run ``code`` in ``module`` as a notebook cell runs in ``__main__``: no file to read."""
    exec(compile(code, f"<cell-{id(code)}>", "exec"), vars(module))


def test_code_of_a_notebook_is_read_from_its_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = ModuleType("notebook_session")  # a kernel's __main__ has no __file__
    monkeypatch.setitem(sys.modules, "notebook_session", notebook)
    cell = "class Samples:\n    def __getitem__(self, i):\n        return load(i) + {0}\n"
    helper = "def load(i):\n    return i in {{'a', 'b', 'c'}} or {0}\n"
    _cell(notebook, cell.format(1))
    _cell(notebook, helper.format(2))
    first = plan_key(_Loader(notebook.Samples()), "cpu")
    digests = code_digests({"notebook_session.load", "notebook_session.Samples.__getitem__"})
    assert list(digests) == ["notebook_session"]
    _cell(notebook, cell.format(1))  # the same cells run again (a restarted kernel)
    _cell(notebook, helper.format(2))
    assert plan_key(_Loader(notebook.Samples()), "cpu") == first
    assert changed_code(digests) == []
    _cell(notebook, helper.format(3))  # the helper edited
    assert changed_code(digests) == ["notebook_session"]
    _cell(notebook, cell.format(4))  # the data set's cell edited
    assert plan_key(_Loader(notebook.Samples()), "cpu") != first
