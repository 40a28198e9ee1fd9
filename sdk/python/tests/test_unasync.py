"""scripts/unasync.py: the rewrite's rules hold.

Needs no server: it reads the source tree, not the installed package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SDK = Path(__file__).resolve().parents[1]


def _load_unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync", SDK / "scripts" / "unasync.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["unasync"] = mod  # dataclasses and typing look modules up by name
    spec.loader.exec_module(mod)
    return mod


unasync = _load_unasync()


REWRITES = {
    "async def, await": (
        "async def f():\n    await g()\n",
        "def f():\n    g()\n"),
    "async with, async for, renamed methods": (
        "async def f(a):\n    async with a as b:\n        async for x in b.aiter_bytes():\n"
        "            await b.aclose()\n",
        "def f(a):\n    with a as b:\n        for x in b.iter_bytes():\n            b.close()\n"),
    "async with await": (
        "async def f(c):\n    async with await c.open() as o:\n        return await o.aread()\n",
        "def f(c):\n    with c.open() as o:\n        return o.read()\n"),
    "asyncio.sleep": (
        "import asyncio\nimport os\n\nsleep, sep = asyncio.sleep, os.sep\n",
        "import os\nimport time\n\nsleep, sep = time.sleep, os.sep\n"),
    "asyncio.to_thread with arguments": (
        "async def f(out, chunk):\n    await asyncio.to_thread(out.write, chunk, n=len(chunk))\n",
        "def f(out, chunk):\n    out.write(chunk, n=len(chunk))\n"),
    "asyncio.to_thread without": (
        "async def f():\n    return await asyncio.to_thread(g)\n",
        "def f():\n    return g()\n"),
    "Awaitable[X]": (
        "sleep: Callable[[float], Awaitable[Any]]\n",
        "sleep: Callable[[float], Any]\n"),
    "aligned continuation lines follow their bracket": (
        "async def f(a: int,\n            b: AsyncPage[T]) -> None:\n    return await g(a,\n                   b)\n",
        "def f(a: int,\n      b: Page[T]) -> None:\n    return g(a,\n             b)\n"),
    "hanging indents stay": (
        "async def f(\n    a: int,\n) -> None:\n    return await g(\n        a)\n",
        "def f(\n    a: int,\n) -> None:\n    return g(\n        a)\n"),
    "a docstring made sync word by word": (
        'class AsyncContent:\n    """Close it (or use ``async with``), or aread it all."""\n',
        'class Content:\n    """Close it (or use ``with``), or read it all."""\n'),
    "a second docstring is the sync one, word for word": (
        'async def f():\n    """Await it; see Client.f."""\n'
        '    """What f does, at length (AsyncClient has it too)."""\n',
        'def f():\n    """What f does, at length (AsyncClient has it too)."""\n'),
    "a module's sync docstring after its __future__ import": (
        '"""The asyncio one."""\n\nfrom __future__ import annotations\n\n"""The sync one."""\n\nx = 1\n',
        '"""The sync one."""\n\nfrom __future__ import annotations\n\nx = 1\n'),
    "imports sorted again, the unused dropped": (
        "from typing import Any, AsyncIterator, Awaitable\nfrom m import (\n    AsyncPage,\n    Batch,\n"
        "    Page,\n)\n\nx: AsyncIterator[Any] = AsyncPage(Batch)\n",
        "from typing import Any, Iterator\nfrom m import (\n    Batch,\n    Page,\n)\n\n"
        "x: Iterator[Any] = Page(Batch)\n"),
}


@pytest.mark.parametrize("name", REWRITES)
def test_rewrite(name: str) -> None:
    source, want = REWRITES[name]
    assert unasync.generate(source, "m.py") == unasync.header("m.py") + want


REFUSALS = {
    "asyncio without a sync twin": ("import asyncio\n\nasync def f(g):\n    await asyncio.gather(g())\n",
                                    "no sync twin for this use of asyncio"),
    "an async word left in a docstring": ('def f():\n    """Runs on the asyncio loop."""\n',
                                          "speaks of async after the rewrite"),
    "an async name with no rule": ("x = AsyncThing()\n", "would still say 'AsyncThing'"),
}


@pytest.mark.parametrize("name", REFUSALS)
def test_refusal(name: str) -> None:
    source, why = REFUSALS[name]
    with pytest.raises(unasync.UnasyncError, match=why):
        unasync.generate(source, "m.py")
