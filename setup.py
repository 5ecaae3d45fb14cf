"""Packaging glue: the four top-level layer folders install as subpackages of `llgrad`
(runtime/ -> llgrad.runtime, ...); metadata lives in pyproject.toml."""
from setuptools import find_packages, setup

LAYERS = {"llgrad": "llgrad", "llgrad.runtime": "runtime", "llgrad.tracer": "tracer",
          "llgrad.transform": "transform", "llgrad.codegen": "codegen"}

packages = []
for name, folder in LAYERS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=LAYERS)
