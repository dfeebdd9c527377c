"""The experiments: every bench/experiments/NAME.py that defines EXPERIMENT.
Files starting with "_" are helpers, not experiments."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from squall.bench.experiment import Experiment
from squall.bench.paths import EXPERIMENTS_DIR


class RegistryError(Exception):
    pass


def _load(path: Path) -> Experiment:
    mod_name = f"squall_bench_experiments.{path.stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise RegistryError(f"{path}: cannot load")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    exp = getattr(mod, "EXPERIMENT", None)
    if not isinstance(exp, Experiment):
        raise RegistryError(f"{path}: defines no EXPERIMENT = Experiment(...)")
    if exp.name != path.stem:
        raise RegistryError(f"{path}: EXPERIMENT.name is {exp.name!r}, expected {path.stem!r}")
    return exp


def experiment_paths(directory: Path = EXPERIMENTS_DIR) -> list[Path]:
    return sorted(p for p in directory.glob("*.py") if not p.name.startswith("_"))


def all_experiments(directory: Path = EXPERIMENTS_DIR) -> dict[str, Experiment]:
    return {p.stem: _load(p) for p in experiment_paths(directory)}


def get(name: str, directory: Path = EXPERIMENTS_DIR) -> Experiment:
    path = directory / f"{name}.py"
    if name.startswith("_") or not path.is_file():
        known = ", ".join(p.stem for p in experiment_paths(directory))
        raise RegistryError(f"no experiment {name!r} in {directory} (known: {known})")
    return _load(path)
