"""Dependencies the README's test command (`./run tests`) installs. A test
that needs one imports it through require(): when it is missing, or another
version than the pinned one, the test fails with what to install. Nothing is
skipped for a missing dependency."""

from __future__ import annotations

import importlib
import importlib.metadata
from types import ModuleType
from typing import Optional


class MissingTestDependency(ImportError):
    pass


def require(module: str, *, distribution: Optional[str] = None, version: Optional[str] = None) -> ModuleType:
    """import `module`; raises MissingTestDependency when it cannot be
    imported, or when `version` is given and the installed distribution
    (default: the module's top-level name) is another version."""
    distribution = distribution or module.split(".")[0]
    wanted = f"{distribution}=={version}" if version else distribution
    try:
        imported = importlib.import_module(module)
    except ImportError as error:
        raise MissingTestDependency(
            f"{module} cannot be imported ({error}): the README's test command (./run tests) installs "
            f"{wanted}; this test fails without it") from error
    if version is not None:
        pinned(distribution, version)
    return imported


def pinned(distribution: str, version: str) -> None:
    """Fails (MissingTestDependency) unless `distribution` is installed at
    exactly `version`; imports nothing."""
    try:
        installed = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise MissingTestDependency(
            f"{distribution} is not installed: the README's test command (./run tests) installs "
            f"{distribution}=={version}; this test fails without it") from None
    if installed != version:
        raise MissingTestDependency(
            f"{distribution} {installed} is installed; the tests compare against the pinned "
            f"{distribution}=={version} (the README's test command, ./run tests, installs it)")
