"""Schedule primitives, one module per family. Importing this package imports every module in
it, and each module registers its primitives with `@primitive` (see ../instruction.py)."""

import importlib
import pkgutil

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _module.startswith("_"):
        importlib.import_module(f"{__name__}.{_module}")
