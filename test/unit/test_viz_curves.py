"""`msir.viz.curves`: loss / accuracy / learning-rate panels as PNG, loaded
back with matplotlib and checked for their panels and each run's colour."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from msir.viz import SummaryError, SummaryRecord, VizError, curves, load_runs
from msir.viz.curves import curves_figure

image = pytest.importorskip("matplotlib.image", reason="matplotlib is not installed (pip install -e '.[test]')")

TAB_BLUE, TAB_ORANGE, TAB_GREEN = (0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C)


def write_run(log_dir, lr, *, accuracy=True, steps=20):
    with SummaryRecord(log_dir) as summary:
        summary.set_hyper_params({"learning_rate": lr})
        for step in range(steps):
            summary.add_value("scalar", "loss", 2.0 * np.exp(-lr * step))
            summary.add_value("scalar", "lr", lr * 0.9 ** step)
            summary.record(step)
        if accuracy:
            summary.set_mode("eval")
            summary.add_value("scalar", "acc", 1 - np.exp(-lr * steps))
            summary.record(steps - 1)


def pixels(path):
    """The PNG as 0..255 RGB."""
    rgb = image.imread(path)[..., :3]
    return np.round(rgb * 255).astype(int)


def count_colour(rgb, colour, tolerance=30):
    return int(np.sum(np.all(np.abs(rgb - np.array(colour)) <= tolerance, axis=-1)))


def test_runs_under_a_root_are_overlaid_one_panel_per_quantity(tmp_path):
    for i, lr in enumerate((0.3, 0.1, 0.03)):
        write_run(tmp_path / f"run{i}", lr)
    out = curves(tmp_path, tmp_path / "out" / "curves.png", dpi=80)
    assert out == tmp_path / "out" / "curves.png"
    rgb = pixels(out)
    assert rgb.shape == (round(3.4 * 80), round(3 * 4.2 * 80), 3)  # three panels side by side
    assert np.mean(np.any(rgb < 250, axis=-1)) > 0.05  # not blank
    # the three runs in matplotlib's first three colours, in every one of the three panels
    for colour in (TAB_BLUE, TAB_ORANGE, TAB_GREEN):
        for panel in np.array_split(rgb, 3, axis=1):
            assert count_colour(panel, colour) > 40, colour


def test_one_run_and_only_the_quantities_it_recorded(tmp_path):
    write_run(tmp_path, 0.1, accuracy=False)
    out = curves(tmp_path, dpi=60)
    assert out == tmp_path / "curves.png"
    rgb = pixels(out)
    assert rgb.shape == (round(3.4 * 60), round(2 * 4.2 * 60), 3)  # loss and learning rate: no accuracy panel
    assert count_colour(rgb, TAB_BLUE) > 40 and count_colour(rgb, TAB_ORANGE) == 0


def test_no_known_quantity_names_the_tags_there_are(tmp_path):
    with SummaryRecord(tmp_path) as summary:
        summary.add_value("scalar", "grad_norm", 1.0)
        summary.record(0)
    with pytest.raises(SummaryError, match="no run of .* recorded loss, accuracy, learning_rate; the tags recorded "
                                           "are: grad_norm"):
        curves(tmp_path)
    out = curves(tmp_path, quantities=["grad_norm"], dpi=50)
    assert np.any(pixels(out) < 250)


def test_without_matplotlib_the_error_names_the_extra(tmp_path, monkeypatch):
    write_run(tmp_path, 0.1)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it imports
    with pytest.raises(VizError, match=r"matplotlib, which is not installed: pip install 'msir\[viz\]'"):
        curves(tmp_path)


def test_the_lines_are_the_recorded_values_and_a_wide_learning_rate_is_log(tmp_path):
    write_run(tmp_path / "fast", 0.3)
    write_run(tmp_path / "slow", 0.003)
    runs = load_runs(tmp_path)
    figure = curves_figure(runs, title="two runs")
    loss, accuracy, learning_rate = figure.axes
    assert [a.get_title() for a in figure.axes] == ["loss", "accuracy", "learning rate"]
    assert figure.get_suptitle() == "two runs"
    for line, run in zip(loss.lines, runs, strict=True):
        assert line.get_label() == run.name
        np.testing.assert_array_equal(line.get_xydata(), np.column_stack(run.series("loss")))
    assert [line.get_label() for line in accuracy.lines] == ["fast (eval)", "slow (eval)"]
    assert [line.get_linestyle() for line in accuracy.lines] == ["--", "--"]
    np.testing.assert_array_equal(learning_rate.lines[1].get_xydata(), np.column_stack(runs[1].series("lr")))
    assert learning_rate.get_yscale() == "log" and loss.get_yscale() == "linear"  # 0.3 over 0.003 * 0.9**19
    assert curves_figure(runs[:1]).axes[2].get_yscale() == "linear"  # 0.3 to 0.3 * 0.9**19: a factor of 7
