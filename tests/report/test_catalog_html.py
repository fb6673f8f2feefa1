"""`linkscope catalog --html FILE`: one self-contained page, its table drawn and filtered in headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.helpers import run_cli

CHROMIUM = Path("/usr/bin/chromium")
EVIL = "</script><img src=x onerror=alert(1)>"
EXTRA = f"""
provider: testcloud
offerings:
  - instance: "{EVIL}"
    gpu: H100
    gpus: 8
    scale_up: {{kind: nvswitch}}
    source: test
    as_of: 2026-11-01
"""


def _page(tmp_path: Path, *filters: str) -> Path:
    extra = tmp_path / "extra.yaml"
    extra.write_text(EXTRA)
    page = tmp_path / "catalog.html"
    result = run_cli("catalog", "--catalog", str(extra), "--html", str(page), *filters)
    assert result.exit_code == 0, result.output
    assert f"wrote {page}" in result.stdout
    return page


def test_the_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    text = _page(tmp_path).read_text()
    assert "<script src" not in text and "<link" not in text and "http://" not in text
    assert EVIL not in text  # the id travels as JSON with "</" written "<\\/"
    assert text.count("</script>") == 3
    assert '"id": "aws/p5.48xlarge"' in text and '"currency": "USD"' in text


def test_command_line_filters_apply_to_the_page(tmp_path: Path) -> None:
    text = _page(tmp_path, "--gpu", "B200", "--min-gpus", "8").read_text()
    families = set(re.findall(r'"family": "([^"]+)"', text))
    assert families == {"B200"}


def test_an_unwritable_page_is_a_user_error(tmp_path: Path) -> None:
    result = run_cli("catalog", "--html", str(tmp_path / "missing" / "x.html"))
    assert result.exit_code == 2 and "--html" in result.stderr and "does not exist" in result.stderr


def _dom(page: Path, fragment: str, tmp_path: Path) -> str:
    done = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", f"{page.as_uri()}#{fragment}"],
                          capture_output=True, text=True, timeout=600, check=False)
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(not CHROMIUM.exists(), reason="chromium not installed (apt-get install chromium)")
def test_the_table_is_drawn_filtered_and_sorted_in_a_browser(tmp_path: Path) -> None:
    page = _page(tmp_path)
    dom = _dom(page, "gpu=H100&ib=1&min_gpus=8&sort=price", tmp_path)
    count = re.search(r"<p id=\"count\">(\d+) of (\d+) offerings</p>", dom)
    assert count is not None, dom[:2000]
    shown, total = int(count.group(1)), int(count.group(2))
    assert 0 < shown < total
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", dom)]
    assert len(rows) == shown
    assert all(r[3] == "H100" and r[7] == "infiniband" and int(r[4]) >= 8 for r in rows)
    prices = [float(r[11]) for r in rows if r[11] != "unknown"]
    assert prices == sorted(prices) and prices
    evil = _dom(page, "provider=testcloud", tmp_path)
    body = evil[evil.index('<tbody id="body">'):evil.index("</tbody>")]
    assert "<img" not in body and "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in body
