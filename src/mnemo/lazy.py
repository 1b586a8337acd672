"""Modules bound now and imported on first use.

Importing numpy takes ~80 ms here, a fifth of what mnemo adds before a server's first answer, and
the handshake needs none of it: numpy works on vectors, which the first search brings (the
server's warm-up thread, started after the handshake, usually imports it first). Modules on the
way to that answer take numpy from here: ``from mnemo.lazy import numpy as np``.

Not importlib's LazyLoader: on Python 3.11 a second thread can see its module half-loaded (the
warm-up thread and a first call did: "module 'numpy' has no attribute 'zeros'"). Here the first
attribute read runs a plain import, which the import system's per-module lock makes safe, and
then copies the module's names so later reads are plain attribute reads.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any


class _OnFirstUse(ModuleType):
    def __getattr__(self, name: str) -> Any:  # only for names not copied yet: before the first import
        module = importlib.import_module(self.__name__)
        self.__dict__.update(vars(module))
        return getattr(module, name)


if TYPE_CHECKING:
    import numpy
else:
    numpy = _OnFirstUse("numpy")
