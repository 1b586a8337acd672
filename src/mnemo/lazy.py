"""Modules bound now and imported on first use.

Importing numpy takes ~80 ms here, a fifth of what mnemo adds before a server's first answer, and
the handshake needs none of it: numpy works on vectors, which the first search brings (the
server's warm-up thread, started after the handshake, usually imports it first). Modules on the
way to that answer take numpy from here: ``from mnemo.lazy import numpy as np``.

Two threads must not import numpy at once: the server's warm-up thread and a first call did, and
one saw it half-loaded (importlib's LazyLoader: "module 'numpy' has no attribute 'zeros'"; two
plain imports: "cannot import name '__cpu_features__' from partially initialized module", as the
import system breaks the lock cycle between numpy and its C core by handing out a half-made
module). So the first attribute read imports under one lock, then copies the module's names so
later reads are plain attribute reads; and code about to import a library that imports numpy
itself (onnxruntime) calls ``import_now`` first.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

_IMPORTING = threading.Lock()


class _OnFirstUse(ModuleType):
    def __getattr__(self, name: str) -> Any:  # only for names not copied yet: before the first import
        return getattr(self._imported(), name)

    def _imported(self) -> ModuleType:
        with _IMPORTING:
            module = importlib.import_module(self.__name__)
            self.__dict__.update(vars(module))
        return module


def import_now(module: ModuleType) -> None:
    """Import a module taken from here now, in this thread, if no thread has yet."""
    if isinstance(module, _OnFirstUse) and "__version__" not in module.__dict__:
        module._imported()


if TYPE_CHECKING:
    import numpy
else:
    numpy = _OnFirstUse("numpy")
