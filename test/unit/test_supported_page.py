"""docs/supported.md is what `msir.tools.supported` generates from the frontend's tables."""

from __future__ import annotations

import numpy as np
import pytest

from msir.frontend import numpy_handlers
from msir.tools import supported


def test_the_page_is_current():
    """Fails when a table changed and the page was not regenerated (python -m msir.tools.supported)."""
    assert supported.PAGE.read_text() == supported.render()


def test_check_flags_a_stale_page(tmp_path, capsys):
    page = tmp_path / "supported.md"
    page.write_text("old\n")
    assert supported.main(["--check", "-o", str(page)]) == 1
    assert "is stale" in capsys.readouterr().err
    assert supported.main(["-o", str(page)]) == 0
    assert supported.main(["--check", "-o", str(page)]) == 0


def test_a_handler_without_a_note_is_an_error(monkeypatch):
    monkeypatch.setitem(numpy_handlers._NUMPY_HANDLERS, np.nanmean, numpy_handlers._reduction("mean"))
    with pytest.raises(KeyError, match="'np.nanmean' is supported but has no entry in NOTES"):
        supported.render()


def test_a_note_for_nothing_is_an_error(monkeypatch):
    monkeypatch.setitem(supported.NOTES, "np.nanmean", supported.Note("yes", "a mean ignoring NaNs"))
    with pytest.raises(KeyError, match="NOTES describes what no table supports: np.nanmean"):
        supported.render()


def test_rows_come_from_the_tables():
    page = supported.render()
    assert "| `np.exp` | yes | yes | yes | `msir.exp`:" in page  # a primitive row: its own summary
    assert "| `np.floor` | yes | yes | no |" in page  # the primitive says: not differentiable
    assert "| `.T` | yes | yes | yes | a transpose |" in page
    assert "| `Try` | no | yes | - | refused: try/except |" in page
