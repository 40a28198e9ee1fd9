"""Makes the sync client when the package is built, so that it is never committed.

``src/agentfs/_client.py`` is what ``scripts/unasync.py`` makes of
``src/agentfs/_async_client.py``. A wheel (``pip install sdk/python``,
``python -m build``) gets it from this hook, made afresh from the async
client at every build; an editable install (``pip install -e``) imports
from ``src/``, so there the hook writes the file into ``src/agentfs/``
(git ignores it). An sdist carries the script and this hook instead, and
its wheel makes the file the same way.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def load_unasync(root: Path) -> ModuleType:
    """scripts/unasync.py as a module (it is not part of the package)."""
    spec = importlib.util.spec_from_file_location("unasync", root / "scripts" / "unasync.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {root / 'scripts' / 'unasync.py'}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["unasync"] = mod  # dataclasses and typing look modules up by name
    spec.loader.exec_module(mod)
    return mod


class UnasyncBuildHook(BuildHookInterface):
    """Adds each file unasync.py generates to the wheel being built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        unasync = load_unasync(root)
        self._tmp = Path(tempfile.mkdtemp(prefix="agentfs-unasync-"))
        for source, target in unasync.targets():
            text = unasync.generate(source.read_text(encoding="utf-8"), source.name)
            if version == "editable":
                target.write_text(text, encoding="utf-8")
                continue
            made = self._tmp / target.name
            made.write_text(text, encoding="utf-8")
            build_data["force_include"][str(made)] = target.relative_to(root / "src").as_posix()

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
