"""`linkscope report`: a self-contained page, labels escaped, and plots that a real browser draws without errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from linkscope.results.records import PairRow
from linkscope.results.store import ResultStore
from tests.cli.helpers import run_cli

NCCL = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"
EVIL = "<script>alert(1)</script>"


def _page(tmp_path: Path) -> Path:
    db, out = tmp_path / "r.db", tmp_path / "report.html"
    assert run_cli("import", "nccl-tests", str(NCCL / "v2.13_all_reduce_h100_2x8.txt"), "--db", str(db),
                   "--label", EVIL).exit_code == 0
    with ResultStore(db) as store:
        imported = store.list_runs(limit=1)[0].run_id
        from linkscope.results.records import RunInfo

        p2p = store.create_run(RunInfo(kind="p2p", label="pairs", hosts=[EVIL], world_size=2))
        store.add_pair_rows(p2p, [PairRow(0, 1, 1 << 20, 10.0, 20.0, 5.0), PairRow(1, 0, 1 << 20, 9.0, 20.0, 5.0)])
        store.finish_run(p2p, "complete")
    result = run_cli("report", imported, p2p, "-o", str(out), "--db", str(db))
    assert result.exit_code == 0, result.output
    return out


def test_report_is_self_contained_and_escapes_labels(tmp_path: Path) -> None:
    text = _page(tmp_path).read_text(encoding="utf-8")
    assert EVIL not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script src=" not in text  # plotly.js is inlined, nothing is fetched
    assert text.count("Plotly.newPlot") >= 2  # busbw plot + heatmap
    assert "<script type=\"text/javascript\">" in text or "<script>" in text


def test_report_refuses_unknown_run(tmp_path: Path) -> None:
    assert run_cli("report", "nope", "-o", str(tmp_path / "x.html"), "--db", str(tmp_path / "r.db")).exit_code == 2


CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.mark.skipif(not (CHROMIUM.exists() and DRIVER.exists()), reason="chromium/chromedriver not installed "
                    "(apt-get install chromium chromium-driver)")
def test_report_draws_in_a_headless_browser(tmp_path: Path) -> None:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed")
    from selenium.webdriver.chrome.service import Service

    page = _page(tmp_path)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        driver.get(page.as_uri())
        plots = driver.find_elements("css selector", ".js-plotly-plot")
        assert len(plots) >= 2
        assert all(p.find_elements("css selector", "svg") for p in plots)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        assert driver.execute_script("return document.title") == "linkscope report"
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_report_of_a_check_run_shows_its_verdicts(tmp_path: Path) -> None:
    from linkscope.report.html import render_report
    from linkscope.results.records import RunInfo

    items = [{"name": "nvlink.links", "status": "FAIL", "measured": 143, "expected": 144, "unit": "links up",
              "source": "expected System dgx-h100", "fix": EVIL}]
    info = RunInfo(kind="check", run_id="abc", label="check",
                   extra={"check": {"verdict": "FAIL", "expected_system": "dgx-h100", "items": items}})
    page = render_report([(info, [], [])])
    assert "Check abc check: FAIL against dgx-h100" in page and "nvlink.links" in page
    assert EVIL not in page


def test_a_run_whose_collective_is_unknown_gets_no_chart_of_zeros(tmp_path: Path) -> None:
    # A 3-rank paste with its header cut: 13 fields of zeros at 8-32 B, no binary named (nccl-tests #280).
    corpus = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "nccl_tests"
    db, out = tmp_path / "r.db", tmp_path / "r.html"
    imported = run_cli("import", "nccl-tests", str(corpus / "nccl_tests_280_unindented_rows_and_failure.txt"),
                       "--db", str(db))
    run_id = imported.stdout.split("imported run ")[1].split(":")[0]
    result = run_cli("report", run_id, "-o", str(out), "--db", str(db))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "the output names no collective" in page and "unknown: busbw vs size" not in page
