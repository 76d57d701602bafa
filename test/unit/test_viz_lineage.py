"""`msir.viz.lineage` and `msir-lineage`: the page's table (rows, values,
blanks), its parallel-coordinates SVG (each run crossing each axis where its
value puts it), that it is self-contained, and the page rendered by a real
headless Chromium: the sort script reorders the rows (from the address, and
on a click driven through ChromeDriver), hovering highlights, the picture is drawn."""

from __future__ import annotations

import html.parser
import math
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from msir.viz import SummaryError, SummaryRecord, lineage

RUNS = {  # name: hyper-parameters, final loss, final accuracy, parameter arrays
    "a": ({"learning_rate": 0.1, "batch_size": 32, "optimizer": "Momentum", "epochs": 3}, 0.2, 0.9, [(10, 100)]),
    "b": ({"learning_rate": 0.01, "batch_size": 64, "optimizer": "Adam", "epochs": 3}, 0.5, 0.7, [(10, 100)]),
    "c": ({"learning_rate": 0.001, "batch_size": 128, "optimizer": "SGD", "epochs": 3}, 1.2, 0.4, [(20, 100)]),
    "d": ({"dropout": 0.5}, 0.05, None, None),  # no standard hyper-parameter, no accuracy, no model facts
}


def write_runs(root):
    for name, (params, loss, accuracy, shapes) in RUNS.items():
        with SummaryRecord(root / name) as summary:
            summary.set_hyper_params(params)
            if shapes is not None:
                summary.set_model_info(parameters=[np.zeros(s, np.float32) for s in shapes])
            for step, value in enumerate((2.0, 1.0, loss)):
                summary.add_value("scalar", "loss", value)
                summary.record(step)
            if accuracy is not None:
                summary.set_mode("eval")
                summary.add_value("scalar", "accuracy", accuracy)
                summary.record(2)


class Page(html.parser.HTMLParser):
    """The parts of the lineage page the tests read."""

    def __init__(self, text: str):
        super().__init__()
        self.headers: list[dict] = []
        self.rows: list[dict] = []
        self.axes: list[dict] = []
        self.runs: dict[str, dict] = {}
        self.scripts: list[str] = []
        self.tags: list[tuple[str, dict]] = []
        self._cell = self._header = self._run = self._axis = None
        self._in_script = False
        self._in_label = False  # inside a <text> or <title> of the picture
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "th":
            self._header = {"key": a["data-key"], "kind": a["data-kind"], "title": ""}
            self.headers.append(self._header)
        elif tag == "tr" and "data-run" in a:
            self.rows.append({"run": a["data-run"], "cells": []})
        elif tag == "td":
            self._cell = {"value": a.get("data-value"), "text": ""}
            self.rows[-1]["cells"].append(self._cell)
        elif tag == "g" and a.get("class") == "axis":
            self._axis = {"key": a["data-key"], "ticks": []}
            self.axes.append(self._axis)
        elif tag == "line" and self._axis is not None and "class" not in a:
            self._axis.update(x=float(a["x1"]), top=float(a["y1"]), bottom=float(a["y2"]))
        elif tag == "text" and self._axis is not None and a.get("class") == "tick-label":
            self._axis["ticks"].append([float(a["y"]) - 3.5, ""])
        elif tag == "g" and a.get("class") == "run":
            self._run = {"colour": re.search(r"--run-colour: (#[0-9a-f]{6})", a["style"]).group(1),
                         "path": None, "points": [], "title": ""}
            self.runs[a["data-run"]] = self._run
        elif tag == "path" and self._run is not None:
            self._run["path"] = a["d"]
        elif tag == "circle" and self._run is not None:
            self._run["points"].append((float(a["cx"]), float(a["cy"])))
        elif tag == "script":
            self._in_script = True
        if tag in ("text", "title"):
            self._in_label = True

    def handle_endtag(self, tag):
        if tag == "th":
            self._header = None
        elif tag == "td":
            self._cell = None
        elif tag == "g":
            self._axis = self._run = None
        elif tag == "script":
            self._in_script = False
        elif tag in ("text", "title"):
            self._in_label = False

    def handle_data(self, data):
        if self._header is not None:
            self._header["title"] += data
        elif self._cell is not None:
            self._cell["text"] += data
        elif self._in_script:
            self.scripts.append(data)
        elif self._in_label and self._axis is not None and self._axis["ticks"] and self.lasttag == "text":
            self._axis["ticks"][-1][1] += data
        elif self._in_label and self._run is not None and self.lasttag == "title":
            self._run["title"] += data

    def column(self, key: str) -> list[dict]:
        index = [h["key"] for h in self.headers].index(key)
        return [row["cells"][index] for row in self.rows]


@pytest.fixture
def page_path(tmp_path):
    write_runs(tmp_path / "runs")
    return lineage(tmp_path / "runs")


def test_the_table_has_a_row_per_run_with_its_values_and_blanks(page_path):
    page = Page(page_path.read_text())
    assert page_path.name == "lineage.html"
    assert [h["key"] for h in page.headers] == [
        "run", "learning_rate", "batch_size", "optimizer", "epochs", "dropout", "final_loss", "final_accuracy",
        "param_count", "size_bytes", "time"]
    assert [h["kind"] for h in page.headers] == ["text", "number", "number", "text", "number", "number", "number",
                                                  "number", "number", "number", "number"]
    assert [r["cells"][0]["text"] for r in page.rows] == ["a", "b", "c", "d"]
    assert [c["text"] for c in page.column("learning_rate")] == ["0.1", "0.01", "0.001", ""]
    assert [c["value"] for c in page.column("learning_rate")] == ["0.1", "0.01", "0.001", None]
    assert [c["text"] for c in page.column("optimizer")] == ["Momentum", "Adam", "SGD", ""]
    assert [c["text"] for c in page.column("dropout")] == ["", "", "", "0.5"]
    assert [float(c["value"]) for c in page.column("final_loss")] == [0.2, 0.5, 1.2, 0.05]
    assert [c["text"] for c in page.column("final_accuracy")] == ["0.9", "0.7", "0.4", ""]
    assert [c["text"] for c in page.column("param_count")] == ["1000", "1000", "2000", ""]
    assert [c["text"] for c in page.column("size_bytes")] == ["4 kB", "4 kB", "8 kB", ""]
    assert [c["value"] for c in page.column("size_bytes")] == ["4000.0", "4000.0", "8000.0", None]
    durations = [float(c["value"]) for c in page.column("time")]
    assert all(0 <= d < 60 for d in durations)


def test_the_picture_puts_each_run_where_its_values_are(page_path):
    page = Page(page_path.read_text())
    assert [a["key"] for a in page.axes] == ["learning_rate", "batch_size", "optimizer", "epochs", "dropout",
                                             "final_loss", "size_bytes", "final_accuracy"]  # the target last
    axis = {a["key"]: a for a in page.axes}

    def y(key, fraction):
        a = axis[key]
        return a["bottom"] - fraction * (a["bottom"] - a["top"])

    def crossing(run, key):
        found = [cy for cx, cy in page.runs[run]["points"] if cx == axis[key]["x"]]
        return found[0] if found else None

    for i, lr in enumerate((0.1, 0.01, 0.001)):  # a factor of 100: a log axis
        assert crossing(str(i), "learning_rate") == pytest.approx(y("learning_rate", math.log10(lr / 0.001) / 2),
                                                                  abs=0.06)
        batch = (32, 64, 128)[i]  # a factor of 4: linear
        assert crossing(str(i), "batch_size") == pytest.approx(y("batch_size", (batch - 32) / 96), abs=0.06)
        assert crossing(str(i), "epochs") == pytest.approx(y("epochs", 0.5), abs=0.06)  # one value: the middle
    for run, name in zip("012", ("Momentum", "Adam", "SGD"), strict=True):  # categories in name order
        expected = y("optimizer", ["Adam", "Momentum", "SGD"].index(name) / 2)
        assert crossing(run, "optimizer") == pytest.approx(expected, abs=0.06)
    for run, loss in zip("0123", (0.2, 0.5, 1.2, 0.05), strict=True):  # a factor of 24: log
        assert crossing(run, "final_loss") == pytest.approx(y("final_loss", math.log(loss / 0.05) / math.log(24)),
                                                            abs=0.06)
    assert crossing("0", "final_accuracy") == pytest.approx(axis["final_accuracy"]["top"])
    assert crossing("2", "final_accuracy") == pytest.approx(axis["final_accuracy"]["bottom"])
    assert [label for _, label in axis["optimizer"]["ticks"]] == ["Adam", "Momentum", "SGD"]
    assert [label for _, label in axis["batch_size"]["ticks"]] == ["32", "64", "128"]

    # the run without most keys crosses only its two axes, with gaps elsewhere, in the no-target grey
    d = page.runs["3"]
    assert [cx for cx, _ in d["points"]] == [axis["dropout"]["x"], axis["final_loss"]["x"]]
    assert d["path"].count("M") == 1 and d["path"].count("L") == 1 and d["colour"] == "#9e9e9e"
    # seven axes but dropout: four points joined by three segments, a gap, then three points and two segments
    assert [page.runs[r]["path"].count("L") for r in "012"] == [5, 5, 5]
    assert [page.runs[r]["path"].count("M") for r in "012"] == [2, 2, 2]
    assert [page.runs[r]["title"] for r in "0123"] == ["a", "b", "c", "d"]
    # coloured by the final accuracy: the best and the worst run at the two ends of the scale
    assert page.runs["0"]["colour"] == "#bddf26" and page.runs["2"]["colour"] == "#440154"


def test_the_page_is_self_contained_and_carries_its_sort_script(page_path):
    text = page_path.read_text()
    page = Page(text)
    assert not [t for t, a in page.tags if t in ("link", "iframe", "img") or "src" in a or "href" in a]
    assert re.findall(r"https?://[^\s\"']+", text) == ["http://www.w3.org/2000/svg"]  # the SVG namespace only
    assert "@import" not in text and re.findall(r"url\(([^)]*)\)", text) == ["#target-scale"]
    script = "".join(page.scripts)
    assert "function sortBy(index, descending)" in script and 'addEventListener("click"' in script
    assert "location.hash" in script


def test_an_empty_folder_is_a_clear_error(tmp_path):
    with pytest.raises(SummaryError, match=r"no msir summary runs under '.*'"):
        lineage(tmp_path)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "msir.tools.msir_lineage", *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def test_msir_lineage_writes_the_page_and_reports_errors_in_one_line(tmp_path):
    write_runs(tmp_path / "runs")
    done = run_cli(tmp_path / "runs", "-o", tmp_path / "out" / "page.html", "--title", "Three runs")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "out" / "page.html")
    assert "<h1>Three runs</h1>" in (tmp_path / "out" / "page.html").read_text()

    (tmp_path / "empty").mkdir()
    done = run_cli(tmp_path / "empty")
    assert done.returncode == 1
    assert done.stderr == (f"msir-lineage: error: no msir summary runs under '{tmp_path / 'empty'}' (a run is a "
                           "directory holding scalars.jsonl or lineage.jsonl, written by msir.viz.SummaryRecord)\n")

    (tmp_path / "runs" / "a" / "scalars.jsonl").write_text('{"format": 1, "file": "scalars", "wall_time": 0}\nnot\n')
    done = run_cli(tmp_path / "runs")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"{tmp_path / 'runs' / 'a' / 'scalars.jsonl'}:2:1: error: a summary line that "
                                  "is not JSON")


# -- in a real browser ----------------------------------------------------------------------------------


def browser() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


needs_browser = pytest.mark.skipif(browser() is None, reason="no headless Chromium on PATH (.ci/run installs "
                                                             "Debian's chromium with apt-get where it can)")


def headless(tmp_path, url, *args):
    """Chromium without a sandbox, GPU or network chatter, with a new profile (the flags the machine's notes give)."""
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    profile.mkdir()
    command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", *args, url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@needs_browser
def test_the_sort_script_reorders_the_rows_in_chromium(page_path, tmp_path):
    for fragment, order in (("final_loss", "dabc"), ("batch_size:desc", "cbad"), ("optimizer", "bacd"),
                            ("final_accuracy:desc", "abcd")):
        page = Page(headless(tmp_path, f"{page_path.as_uri()}#sort={fragment}", "--dump-dom"))
        assert "".join(r["cells"][0]["text"] for r in page.rows) == order, fragment
        key, _, descending = fragment.partition(":")
        sorted_header = [h for h, (t, a) in zip(page.headers, [x for x in page.tags if x[0] == "th"], strict=True)
                         if a.get("aria-sort") != "none"]
        assert [h["key"] for h in sorted_header] == [key]
        assert ('data-sorted-by', key) in [(k, v) for t, a in page.tags if t == "body" for k, v in a.items()]
        assert len(page.runs) == 4 and all(page.runs[r]["points"] for r in "0123")


@needs_browser
def test_the_picture_is_drawn_in_chromium(page_path, tmp_path):
    image = pytest.importorskip("matplotlib.image", reason="matplotlib is not installed (pip install -e '.[test]')")
    shot = tmp_path / "shot.png"
    headless(tmp_path, page_path.as_uri(), "--window-size=1200,900", "--hide-scrollbars", f"--screenshot={shot}")
    rgb = np.round(image.imread(shot)[..., :3] * 255).astype(int)
    assert rgb.shape == (900, 1200, 3)
    assert np.mean(np.any(rgb < 245, axis=-1)) > 0.02  # not blank
    colours = {r: v["colour"] for r, v in Page(page_path.read_text()).runs.items()}
    for run in "012":  # each run's line, far more of its colour than the table's swatch holds
        colour = np.array([int(colours[run][k:k + 2], 16) for k in (1, 3, 5)])
        on_white = 0.85 * colour + 0.15 * 255  # the lines' opacity
        near = np.all(np.abs(rgb - on_white) <= 24, axis=-1) | np.all(np.abs(rgb - colour) <= 24, axis=-1)
        assert np.sum(near) > 800, (run, colours[run], int(np.sum(near)))


class WebDriver:
    """Chromium driven through ChromeDriver's W3C WebDriver protocol (plain
    HTTP on localhost, so the test needs no client library): clicks and mouse
    moves as a user makes them."""

    ELEMENT = "element-6066-11e4-a52e-4f735466cecf"

    def __init__(self, tmp_path):
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.process = subprocess.Popen([shutil.which("chromedriver"), f"--port={self.port}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_until_ready()
        profile = tmp_path / "driver-profile"
        profile.mkdir()
        options = {"binary": browser(), "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                                                 "--no-first-run", "--disable-background-networking",
                                                 "--disable-component-update", "--disable-sync",
                                                 f"--user-data-dir={profile}", "--window-size=1200,900"]}
        reply = self.call("POST", "/session", {"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}})
        self.session = f"/session/{reply['sessionId']}"

    def _wait_until_ready(self):
        import time
        import urllib.error

        deadline = time.monotonic() + 30
        while True:
            try:
                if self.call("GET", "/status")["ready"]:
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, "chromedriver did not start in 30 s"
            time.sleep(0.1)

    def call(self, method, path, body=None):
        import json
        import urllib.request

        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["value"]

    def open(self, url):
        self.call("POST", f"{self.session}/url", {"url": url})

    def element(self, css):
        return self.call("POST", f"{self.session}/element", {"using": "css selector", "value": css})[self.ELEMENT]

    def click(self, css):
        self.call("POST", f"{self.session}/element/{self.element(css)}/click", {})

    def hover(self, css):
        move = {"type": "pointerMove", "duration": 0, "origin": {self.ELEMENT: self.element(css)}, "x": 0, "y": 0}
        self.call("POST", f"{self.session}/actions", {"actions": [
            {"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [move]}]})

    def run(self, script):
        return self.call("POST", f"{self.session}/execute/sync", {"script": script, "args": []})

    def quit(self):
        try:
            self.call("DELETE", self.session)
        finally:
            self.process.terminate()
            self.process.wait(timeout=30)


needs_driver = pytest.mark.skipif(browser() is None or shutil.which("chromedriver") is None,
                                  reason="no chromium and chromedriver on PATH (.ci/run installs Debian's "
                                         "chromium and chromium-driver with apt-get where it can)")


@needs_driver
def test_clicking_a_header_sorts_and_hovering_highlights_in_chromium(page_path, tmp_path):
    driver = WebDriver(tmp_path)
    try:
        driver.open(page_path.as_uri())
        names = "return Array.from(document.querySelectorAll('#runs tbody tr')).map(r => r.cells[0].textContent)"
        assert driver.run(names) == ["a", "b", "c", "d"]
        driver.click('th[data-key="final_loss"]')
        assert driver.run(names) == ["d", "a", "b", "c"]
        driver.click('th[data-key="final_loss"]')  # again: the other way
        assert driver.run(names) == ["c", "b", "a", "d"]
        driver.click('th[data-key="final_accuracy"]')  # d has none: last either way
        assert driver.run(names) == ["c", "b", "a", "d"]
        assert driver.run("return location.hash") == "#sort=final_accuracy"
        driver.click('th[data-key="final_accuracy"]')
        assert driver.run(names) == ["a", "b", "c", "d"]

        driver.hover('#runs tr[data-run="1"]')
        highlighted = "return Array.from(document.querySelectorAll('.highlight')).map(e => e.tagName + e.dataset.run)"
        assert sorted(driver.run(highlighted)) == ["TR1", "g1"]
        assert driver.run("return document.getElementById('lineage-picture').classList.contains('has-highlight')")
        driver.hover("h1")
        assert driver.run(highlighted) == []
    finally:
        driver.quit()


def test_odd_and_missing_values_show_as_they_are_never_as_errors(tmp_path):
    with SummaryRecord(tmp_path / "numbers") as summary:
        summary.set_hyper_params({"learning_rate": 0.1, "augment": True, "layers": [784, 10]})
        summary.add_value("scalar", "loss", float("nan"))  # diverged
        summary.record(0)
    with SummaryRecord(tmp_path / "schedule") as summary:
        summary.set_hyper_params({"learning_rate": "cosine", "augment": False})
        summary.add_value("scalar", "loss", 0.5)
        summary.record(0)
    SummaryRecord(tmp_path / "nothing").close()  # a run that recorded nothing
    page = Page(lineage(tmp_path).read_text())
    assert [r["cells"][0]["text"] for r in page.rows] == ["nothing", "numbers", "schedule"]
    assert [c["text"] for c in page.column("learning_rate")] == ["", "0.1", "cosine"]
    assert [c["text"] for c in page.column("augment")] == ["", "true", "false"]
    assert [c["text"] for c in page.column("layers")] == ["", "[784, 10]", ""]
    assert [c["text"] for c in page.column("final_loss")] == ["", "nan", "0.5"]
    assert [c["value"] for c in page.column("final_loss")] == [None, "NaN", "0.5"]
    kinds = {h["key"]: h["kind"] for h in page.headers}
    assert kinds["learning_rate"] == "text" and kinds["final_loss"] == "number"
    axis = {a["key"]: a for a in page.axes}
    assert [label for _, label in axis["learning_rate"]["ticks"]] == ["0.1", "cosine"]  # mixed: categories
    assert [label for _, label in axis["augment"]["ticks"]] == ["false", "true"]
    assert page.runs["0"]["points"] == [] and page.runs["0"]["path"] is None
    loss_x = axis["final_loss"]["x"]
    assert [x for x, _ in page.runs["1"]["points"]].count(loss_x) == 0  # NaN: a gap on the loss axis
    assert [x for x, _ in page.runs["2"]["points"]].count(loss_x) == 1
