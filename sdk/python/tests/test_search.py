"""Content search: one page, every page by iteration, bad patterns, the async client."""

from __future__ import annotations

import pytest

import agentfs
from conftest import Bundle, expect_problem


def test_search_pages_and_matches(bundle: Bundle) -> None:
    c = bundle.client()
    c.put_file("src/a.py", b"def search():\n    return 1\n\ndef other():\n    pass\n")
    c.put_file("docs/b.md", b"# search\r\nmore\n")
    c.put_file("src/c.bin", b"search\x00")
    page = c.search("search", limit=1, context=1)
    assert isinstance(page, agentfs.SearchResults)
    m = page.data[0]
    assert (m.path, m.line, m.column, m.text, m.before, m.after) == ("docs/b.md", 1, 3, "# search\r", [], ["more"])
    assert page.has_more and page.next_cursor and page.index_complete
    assert page.files_skipped == agentfs.SearchSkipped(binary=1, too_large=0)
    assert [(x.path, x.line) for x in page] == [("docs/b.md", 1), ("src/a.py", 1)]
    last = list(page.iter_pages())[-1]
    assert (last.files_matched, last.has_more) == (2, False)
    assert [x.line for x in c.search("DEF", ignore_case=True, prefix="src/", glob="**/*.py")] == [1, 4]
    assert [x.text for x in c.search("()", literal=True)] == ["def search():", "def other():"]


def test_search_bad_pattern(bundle: Bundle) -> None:
    with pytest.raises(agentfs.Problem) as e:
        bundle.client().search("a(b")
    p = expect_problem(e.value, 422, "VALIDATION_FAILED")
    assert p.errors and p.errors[0].field == "q"


async def test_async_search(bundle: Bundle) -> None:
    async with bundle.async_client() as c:
        await c.put_file("x/one.txt", b"alpha\nbeta alpha\n")
        page = await c.search("alpha", limit=1)
        assert isinstance(page, agentfs.AsyncSearchResults)
        assert [(m.line, m.column) async for m in page] == [(1, 1), (2, 6)]
