"""Models config and batch settings: validation with errors naming the field, bundled files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codedag.energy.config import load_models_config
from codedag.energy.settings import BUNDLED_SETTINGS, load_settings
from codedag.errors import ConfigError


def base_config() -> dict:
    return {
        "repositories": {
            "toy": {
                "path": ".",
                "train_script": "train.py",
                "models": {"m": {}},
                "supported_hyperparams": {
                    "epochs": {"flag": "--epochs", "type": "int", "default": 2, "range": [1, 4]}
                },
            }
        }
    }


def write(tmp_path: Path, data: dict, name: str = "cfg.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_bundled_config_and_settings_load() -> None:
    config = load_models_config()
    assert set(config.repositories["examples"].models) == {"mnist_cnn", "mnist_rnn", "resnet_cifar"}
    for model in config.repositories["examples"].models:
        script = Path(config.command("examples", model, {})[1])
        assert script.is_file(), script
    for name in BUNDLED_SETTINGS:
        assert load_settings(name, config).experiments


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["repositories"]["toy"]["supported_hyperparams"]["epochs"].update(dfault=3),
            "repositories.toy.supported_hyperparams.epochs.dfault: unknown key",
        ),
        (
            lambda d: d["repositories"]["toy"].update(timout_s=3),
            "repositories.toy.timout_s: unknown key",
        ),
        (
            lambda d: d["repositories"]["toy"]["supported_hyperparams"]["epochs"].update(
                type="integer"
            ),
            "repositories.toy.supported_hyperparams.epochs.type",
        ),
        (
            lambda d: d["repositories"]["toy"]["supported_hyperparams"]["epochs"].update(
                range=[5, 1]
            ),
            "low <= high",
        ),
        (
            lambda d: d["repositories"]["toy"].update(
                performance_metrics={"log_patterns": {"acc": "Acc: [0-9.]+"}}
            ),
            "needs a capture group",
        ),
        (
            lambda d: d["repositories"]["toy"].pop("models"),
            "repositories.toy.models: Field required",
        ),
    ],
)
def test_invalid_config_names_the_field(tmp_path: Path, mutate, expected: str) -> None:
    data = base_config()
    mutate(data)
    with pytest.raises(ConfigError) as info:
        load_models_config(write(tmp_path, data))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_invalid_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"repositories": {,}}')
    with pytest.raises(ConfigError, match=r"is not JSON: .* at line 1"):
        load_models_config(path)


def test_command_is_an_argument_list(tmp_path: Path) -> None:
    config = load_models_config(write(tmp_path, base_config()))
    argv = config.command("toy", "m", {"epochs": 3})
    assert argv[1] == str(tmp_path / "train.py") and argv[-2:] == ["--epochs", "3"]
    with pytest.raises(ConfigError, match=r"unknown model 'x'.*known: \['m'\]"):
        config.command("toy", "x", {})


def settings(**changes) -> dict:
    data = {
        "experiment_name": "t",
        "mode": "mutation",
        "experiments": [{"repo": "examples", "model": "mnist_cnn", "mutate": ["epochs"]}],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (settings(runs_per_confg=2), "runs_per_confg: unknown key"),
        (settings(mode="parallell"), "mode: Input should be 'mutation', 'default' or 'parallel'"),
        (settings(experiments=[]), "experiments: List should have at least 1 item"),
        (
            settings(experiments=[{"repo": "examples", "model": "vgg"}]),
            "experiments.0: unknown model 'vgg'",
        ),
        (
            settings(experiments=[{"repo": "examples", "model": "mnist_cnn", "mutate": ["lr"]}]),
            "experiments.0.mutate",
        ),
        (
            settings(mode="parallel"),
            "mode 'parallel' needs a 'background'",
        ),
    ],
)
def test_invalid_settings_give_one_clear_error(tmp_path: Path, data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, data, "settings.json"), load_models_config())
    assert expected in str(info.value)
    assert "\n" not in str(info.value)
