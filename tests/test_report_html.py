"""``casstore report`` (issue 14, item 5): one self-contained HTML file, rendered in a real
headless Chromium for one and for two runs: no console message or page error, every chart in
the DOM, a screenshot that is not blank; and what the page embeds is what the engine says."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest

from casstore.examples.job import write_example_job
from casstore.report.payload import EMPTY, ERRORED, NO_VERIFIER
from scoring import apply_rules
from tests.browser import console_messages, dump_dom, screenshot
from tests.helpers import run_cli
from tests.second_run import TB2, second_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs")
    a = write_example_job(root / "a", ["alpha", "beta", "gamma", "delta"], attempts=6, seed=3)
    b = write_example_job(root / "b", ["alpha", "beta", "gamma", "omega"], attempts=6, seed=4)
    return a, b


def _embedded(page: Path) -> dict:
    text = page.read_text()
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', text, re.S)
    assert found is not None and text.count('type="application/json"') == 1  # once
    return json.loads(found.group(1))


def _render(page: Path, tmp_path: Path) -> tuple[str, np.ndarray]:
    """The DOM and a screenshot; asserts the page ran clean (no console message, no error,
    every drawing step done)."""
    dom, log = dump_dom(page, tmp_path / "profile-dom")
    assert console_messages(log) == []
    assert 'data-ready="1"' in dom and "data-errors" not in dom
    image, log = screenshot(page, tmp_path / "shot.png", tmp_path / "profile-shot")
    assert console_messages(log) == []
    return dom, image


def _not_blank(image: np.ndarray) -> None:
    gray = image[..., :3].astype(np.float64).mean(axis=2)
    assert gray.std() > 20  # text, tables, charts: far from one colour
    assert np.count_nonzero(gray < 200) > 0.02 * gray.size
    rgb = image[..., :3].astype(np.int64)
    colourful = (np.abs(rgb[..., 0] - rgb[..., 1]) > 60) | (np.abs(rgb[..., 1] - rgb[..., 2]) > 60)
    assert np.count_nonzero(colourful) > 1000  # the curves, dots, heatmaps: colour drawn


def test_one_run_renders_in_chromium(runs, tmp_path: Path, capsys) -> None:
    a, _ = runs
    page = tmp_path / "one.html"
    code, out, err = run_cli(capsys, "report", str(a), "-o", str(page))
    assert (code, err) == (0, "") and out.startswith(f"{page}  ")
    dom, image = _render(page, tmp_path)
    assert 'id="curves-svg"' in dom and dom.count('class="curve"') == 2  # pass@k, pass^k
    assert 'id="heatmap-0"' in dom and 'id="scatter-0"' not in dom
    assert dom.count('class="card"') == 3  # reward, style, attempts
    assert "AgentTimeoutError" in dom or "no failure" in dom
    _not_blank(image)


def test_two_runs_render_the_comparison(runs, tmp_path: Path, capsys) -> None:
    a, b = runs
    page = tmp_path / "two.html"
    code, out, _ = run_cli(capsys, "report", str(a), str(b), "-o", str(page), "--json")
    assert code == 0 and json.loads(out)["comparisons"] == 1
    dom, image = _render(page, tmp_path)
    for chart in ("curves-svg", "heatmap-0", "heatmap-1", "scatter-0", "difference-0"):
        assert f'id="{chart}"' in dom
    assert dom.count('class="curve"') == 4
    assert "left out: 1 task(s) only in A, 1 only in B" in dom
    data = _embedded(page)
    assert len(data["comparisons"][0]["points"]) == 3
    _not_blank(image)


def test_bad_outputs_are_refused_before_any_work(runs, tmp_path: Path, capsys) -> None:
    a, _ = runs
    code, _, err = run_cli(capsys, "report", str(a), "-o", str(tmp_path))
    assert code == 2 and err == f"casstore: {tmp_path}: output is a directory; name the file\n"
    (tmp_path / "afile").write_text("")
    code, _, err = run_cli(capsys, "report", str(a), "-o", str(tmp_path / "afile/r.html"))
    assert code == 2 and "afile is not a directory" in err
    code, _, err = run_cli(
        capsys, "report", str(tmp_path / "no/such"), "-o", str(tmp_path / "r.html")
    )
    assert code == 2 and "no such file or directory" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written


def test_the_page_fetches_nothing(runs, tmp_path: Path) -> None:
    from casstore.report.api import write_report

    a, b = runs
    page = tmp_path / "r.html"
    write_report([a, b], page, tmp_path / "no-store")
    text = page.read_text()
    assert "https://" not in text and "@import" not in text and "url(" not in text
    assert set(re.findall(r"http://[^\"' ]*", text)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=", text)


@pytest.mark.realdata
def test_heatmap_cells_are_the_attempts(fixtures_dir: Path, tmp_path: Path) -> None:
    """tb2-haiku's page embeds each attempt's status or value, tasks by decreasing mean."""
    from casstore.report.api import write_report
    from casstore.trials import read_job

    job = fixtures_dir / TB2
    parsed = read_job(job)
    second_run(parsed.trials, tmp_path / "b.jsonl", seed=9, attempts=3, binary=False)
    page = tmp_path / "r.html"
    result = write_report([job, tmp_path / "b.jsonl"], page, tmp_path / "no-store")
    assert result.tasks == [89, 86] and result.bytes == page.stat().st_size
    heat = _embedded(page)["runs"][0]["heatmap"]
    cells = np.frombuffer(base64.b64decode(heat["cells"]), dtype=np.uint8)
    assert heat["columns"] == 1 and cells.size == 89
    table, rules = parsed.table, apply_rules(parsed.table)
    by_task = dict(zip([table.tasks[i] for i in table.task.tolist()], range(89), strict=True))
    expect = {2: ERRORED, 3: NO_VERIFIER}
    for name, cell in zip(heat["tasks"], cells.tolist(), strict=True):
        row = by_task[name]
        status = int(rules.status[row])
        assert cell == expect.get(status, round(float(rules.primary[row]) * 200))
    assert EMPTY not in cells.tolist()
    means = [c / 200 if c <= 200 else 0.0 for c in cells.tolist()]
    assert means == sorted(means, reverse=True)  # tasks by decreasing mean
    dom, image = _render(page, tmp_path)
    assert 'id="scatter-0"' in dom
    _not_blank(image)


def test_hostile_names_stay_text(runs, tmp_path: Path) -> None:
    """A task named like markup (``</script>`` included) is data on the page, never code."""
    import msgspec

    from casstore.report.api import write_report
    from casstore.trials import read_job, write_trials_jsonl

    a, _ = runs
    hostile = '</script><script>document.title="owned"</script><b>'
    records = [
        msgspec.structs.replace(record, task_name=hostile + record.task_name)
        for record in read_job(a).trials
    ]
    write_trials_jsonl(records, tmp_path / "hostile.jsonl")
    page = tmp_path / "hostile.html"
    write_report([tmp_path / "hostile.jsonl", a], page, tmp_path / "no-store")
    assert (
        "</script><script>" not in page.read_text().split('id="data">', 1)[1].split("</script>")[0]
    )
    dom, log = dump_dom(page, tmp_path / "profile")
    assert console_messages(log) == [] and 'data-ready="1"' in dom and "data-errors" not in dom
    assert "<title>casstore report" in dom and "owned" not in dom.split("</title>")[0]
