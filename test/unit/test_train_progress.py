"""`msir.train.ProgressBar` (issue 15, step 1): the bar drawn under a pseudo-terminal,
LossMonitor's lines written whole above it, and silence where stderr is no terminal.

The terminal is a real pseudo-terminal (`os.openpty`, given a window size, as
a terminal emulator does); what it shows is read from its master side and
reduced to the text a terminal leaves on each line (the last carriage-return
segment of each line, escape sequences removed).
"""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import sys
import termios
import threading

import numpy as np
import pytest

import msir as ms
from msir import nn
from msir.train import Callback, LossMonitor, Model, ProgressBar

LOSS_LINE = re.compile(r"^epoch: (\d+) step: (\d+), loss is (\S+)$")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def pynative():
    # eager steps: these tests are about the callback, not the compiler
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=ms.GRAPH_MODE)


def _model():
    ms.set_seed(3)
    net = nn.SequentialCell(nn.Dense(4, 8), nn.ReLU(), nn.Dense(8, 3))
    return Model(net, nn.CrossEntropyLoss(), nn.SGD(net.trainable_params(), 0.1),
                 metrics={"accuracy": nn.Accuracy()})


def _data(batches=3, batch_size=8):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((batch_size, 4)).astype(np.float32), rng.integers(0, 3, batch_size).astype(np.int32))
            for _ in range(batches)]


class PseudoTerminal:
    """A pty of 24 rows and 120 columns whose output a thread collects."""

    def __init__(self):
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        self.file = io.TextIOWrapper(os.fdopen(slave, "wb", buffering=0), encoding="utf-8", write_through=True)
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the slave side closed
                return
            if not chunk:
                return
            self._chunks.append(chunk)

    def close(self) -> str:
        """Everything written, once the writer side is closed."""
        self.file.close()
        self._reader.join(timeout=10)
        os.close(self.master)
        return b"".join(self._chunks).decode("utf-8")


def _visible_lines(raw: str) -> list[str]:
    """What a terminal shows on each line: the text after the line's last carriage return."""
    lines = ANSI.sub("", raw).split("\r\n")
    return [line.split("\r")[-1].rstrip() for line in lines if line.split("\r")[-1].strip()]


class NoteOnStderrAtStep(Callback):
    """Writes a line to stderr, where warnings go, in two writes."""

    def __init__(self, step):
        self.step = step

    def step_end(self, run_context):
        if run_context.original_args().cur_step_num == self.step:
            sys.stderr.write("UserWarning: a note ")
            sys.stderr.write("while the bar is drawn\n")


def _train_on_terminal(monkeypatch, callbacks_stdout_too=True):
    terminal = PseudoTerminal()
    monkeypatch.setattr(sys, "stderr", terminal.file)
    if callbacks_stdout_too:
        monkeypatch.setattr(sys, "stdout", terminal.file)
    model = _model()
    model.train(2, _data(), callbacks=[LossMonitor(), ProgressBar(mininterval=0), NoteOnStderrAtStep(5)])
    stdout_after = sys.stdout
    monkeypatch.undo()
    return terminal.close(), stdout_after, terminal.file


def test_progress_bar_under_a_pseudo_terminal(monkeypatch):
    raw, stdout_after, terminal_file = _train_on_terminal(monkeypatch)
    assert stdout_after is terminal_file  # the run gave stdout back
    shown = _visible_lines(raw)
    # LossMonitor's six lines and the line on stderr, whole and in order, then the finished bar
    assert shown.pop(5) == "UserWarning: a note while the bar is drawn", shown
    assert [LOSS_LINE.match(line) is not None for line in shown] == [True] * 6 + [False], shown
    assert [(m[1], m[2]) for m in map(LOSS_LINE.match, shown[:6])] == [
        (e, s) for e in "12" for s in "123"]
    bar = shown[-1]
    assert re.fullmatch(r"epoch 2/2 step 3/3 \|█+\| 6/6, loss (\S+), (\S+) samples/s, 00:00 left", bar), bar
    assert float(re.search(r"loss (\S+),", bar)[1]) == pytest.approx(float(LOSS_LINE.match(shown[5])[3]), rel=1e-3)
    # while it ran, the bar went through every step of the run
    drawn = {(int(m[1]), int(m[2]), int(m[3])) for m in
             re.finditer(r"epoch (\d)/2 step (\d)/3 \|[^|]*\| (\d)/6", ANSI.sub("", raw))}
    assert {(e, s, 3 * (e - 1) + s) for e in (1, 2) for s in (1, 2, 3)} <= drawn
    # every drawing of the bar names its epoch, the first one too
    drawings = [seg for seg in re.split(r"[\r\n]+", ANSI.sub("", raw)) if "|" in seg]
    assert drawings and all(seg.startswith("epoch ") for seg in drawings), drawings[:2]


def test_progress_bar_for_an_evaluation_and_its_delay(monkeypatch):
    model = _model()
    model.train(1, _data())
    for delay, expect_bar in ((0, True), (60, False)):
        terminal = PseudoTerminal()
        monkeypatch.setattr(sys, "stderr", terminal.file)
        metrics = model.eval(_data(), callbacks=[ProgressBar(eval_delay=delay, mininterval=0)])
        monkeypatch.undo()
        shown = _visible_lines(terminal.close())
        assert set(metrics) == {"accuracy"}
        if expect_bar:
            assert len(shown) == 1 and re.fullmatch(
                r"eval step 3/3 \|█+\| 3/3, loss \S+, \S+ samples/s, 00:00 left", shown[0]), shown
        else:
            assert shown == []  # an evaluation shorter than the delay shows nothing


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch, capsys):
    model = _model()
    model.train(2, _data(), callbacks=[LossMonitor(), ProgressBar()])
    captured = capsys.readouterr()
    assert captured.err == ""
    assert [LOSS_LINE.match(line) is not None for line in captured.out.splitlines()] == [True] * 6


def test_bar_on_request_anywhere_and_never_when_disabled(capsys):
    model = _model()
    asked, off = io.StringIO(), io.StringIO()
    model.train(1, _data(), callbacks=[LossMonitor(), ProgressBar(file=asked, disable=False, mininterval=0)])
    model.train(1, _data(), callbacks=[ProgressBar(file=off, disable=True)])
    assert "epoch 1/1 step 3/3 |" in asked.getvalue() and "3/3, loss " in asked.getvalue()
    assert off.getvalue() == ""
    # LossMonitor's lines stay on stdout, unchanged: stdout is no terminal, so it is not redirected
    assert [LOSS_LINE.match(line) is not None for line in capsys.readouterr().out.splitlines()] == [True] * 3


def test_a_failing_run_gives_stdout_and_stderr_back(monkeypatch):
    terminal = PseudoTerminal()
    monkeypatch.setattr(sys, "stderr", terminal.file)
    monkeypatch.setattr(sys, "stdout", terminal.file)
    model = _model()
    bad = [(np.full((8, 4), np.nan, np.float32), np.zeros(8, np.int32))]
    with pytest.raises(ValueError, match="loss is NAN or INF"):
        model.train(1, bad, callbacks=[ProgressBar(), LossMonitor()])
    assert sys.stdout is terminal.file and sys.stderr is terminal.file
    monkeypatch.undo()
    terminal.close()


def test_progress_bar_arguments_are_checked():
    with pytest.raises(TypeError, match="ProgressBar: disable must be None, True or False, got 'yes'"):
        ProgressBar(disable="yes")
    with pytest.raises(ValueError, match="ProgressBar: eval_delay must be a number of seconds at least 0, got -1"):
        ProgressBar(eval_delay=-1)
