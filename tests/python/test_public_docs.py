"""The public callables of the thin modules keep their docstrings (help()
shows them) now that they are bound from C++, and the classes read as the
modules' own."""

from __future__ import annotations

import inspect

import pytest

import seqflow.balance
import seqflow.pack
import seqflow.remote
import seqflow.samplers

MODULES = [seqflow.balance, seqflow.pack, seqflow.samplers, seqflow.remote]
PUBLIC = [(module, name) for module in MODULES for name in module.__all__
          if callable(getattr(module, name)) and not name.isupper()]


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_callable_has_a_docstring(module, name):
    doc = inspect.getdoc(getattr(module, name)) or ""
    # nanobind's own text is only the signature line: a real docstring adds prose after it.
    prose = [line for line in doc.splitlines() if line.strip() and not line.startswith(f"{name}(")]
    assert prose, f"{module.__name__}.{name} lost its docstring"


@pytest.mark.parametrize("method", ["sample", "clear", "has_cached_result", "clear_cache"])
def test_builtin_sampler_methods_keep_their_docstrings(method):
    assert inspect.getdoc(getattr(seqflow.samplers.SeqlenBalancedSampler, method))


def test_bound_classes_read_as_the_modules_own():
    assert seqflow.pack.Ragged.__module__ == "seqflow.pack"
    assert seqflow.balance.OnlineWorkload.__module__ == "seqflow.balance"
    assert seqflow.samplers.SequentialSampler.__module__ == "seqflow.samplers"
    assert seqflow.remote.ServiceHandle.__module__ == "seqflow.remote"
