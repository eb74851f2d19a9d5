"""An import name that resolves to another package: ``import alias.x`` gives
the module ``target.x``, the same object under both names (so classes,
isinstance checks and module state are shared)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery


class _ExistingModuleLoader(importlib.abc.Loader):
    def __init__(self, module):
        self._module = module

    def create_module(self, spec):
        return self._module

    def exec_module(self, module):  # the target module ran its code when it was imported
        pass

    def get_resource_reader(self, name):
        """The target's files: importlib.resources.files(alias) reads the
        target package's directory (TransferQueue's recipes load its
        config.yaml that way)."""
        return self._module.__loader__.get_resource_reader(self._module.__name__)


class ModuleAlias(importlib.abc.MetaPathFinder):
    def __init__(self, alias: str, target: str):
        self.alias = alias
        self.target = target

    def _target_of(self, fullname: str):
        if fullname == self.alias:
            return self.target
        if fullname.startswith(self.alias + "."):
            return self.target + fullname[len(self.alias):]
        return None

    def find_spec(self, fullname, path=None, target=None):
        name = self._target_of(fullname)
        if name is None:
            return None
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:  # the module exists but needs something missing: say so
                raise
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _ExistingModuleLoader(module),
                                              is_package=hasattr(module, "__path__"))
        if spec.submodule_search_locations is not None:
            spec.submodule_search_locations = list(module.__path__)
        return spec

    def install(self, meta_path: list, modules: dict) -> None:
        if self not in meta_path:
            meta_path.insert(0, self)
        for name in [n for n in modules if n == self.alias or n.startswith(self.alias + ".")]:
            if not getattr(modules[name], "__name__", "").startswith(self.target):
                del modules[name]  # another package's module of that name: later imports get ours

    def __eq__(self, other) -> bool:
        return isinstance(other, ModuleAlias) and (other.alias, other.target) == (self.alias, self.target)

    def __hash__(self) -> int:
        return hash((self.alias, self.target))
