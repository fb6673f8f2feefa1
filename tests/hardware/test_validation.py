"""Bad data files and bad filter values: one line naming file, entry and field; exit code 2; no traceback."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from linkscope.hardware.errors import DataError
from linkscope.hardware.loader import load_db
from tests.cli.helpers import run_cli

GOOD_OFFERING = """
provider: acme
offerings:
  - instance: big.8x
    gpu: H100
    gpus: 8
    scale_up: {kind: nvswitch}
    scale_out: {fabric: infiniband, nics: 8, nic_gbit_per_s: 400, gpudirect_rdma: true}
    price_per_hour: 20.0
    price_as_of: 2026-11-01
    source: acme price list
    as_of: 2026-11-01
"""


def _write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _assert_one_line_error(tmp_path: Path, text: str, *expected: str) -> str:
    path = _write(tmp_path, text)
    result = run_cli("catalog", "--catalog", str(path))
    assert result.exit_code == 2, result.stdout
    message = result.stderr.strip()
    assert "Traceback" not in message
    assert len(message.splitlines()) == 1, message
    assert "mine.yaml" in message
    for part in expected:
        assert part in message, message
    return message


def test_a_good_user_file_is_accepted(tmp_path: Path) -> None:
    db = load_db([_write(tmp_path, GOOD_OFFERING)])
    offering = db.offerings["acme/big.8x"]
    assert offering.system.node.gpu.id == "H100-SXM5-80GB"
    assert offering.system.node.scale_up.bw_gb_per_s == 450  # defaulted from the GPU's NVLink 4
    assert offering.price_per_gpu_hour == pytest.approx(2.5)


BAD_CASES = {
    "yaml syntax": ("offerings: [\n  - instance: x\n", ["not valid YAML", "line"]),
    "not a mapping": ("- just\n- a list\n", ["expected a mapping"]),
    "unknown section": ("offering:\n  - instance: x\n", ["unknown section 'offering'"]),
    "unknown gpu": (GOOD_OFFERING.replace("gpu: H100", "gpu: H1000"), ["acme/big.8x", "'gpu'", "unknown GPU 'H1000'"]),
    "negative bandwidth": (GOOD_OFFERING.replace("scale_up: {kind: nvswitch}",
                                                 "scale_up: {kind: nvswitch, bw_gb_per_s: -5}"),
                           ["big.8x", "scale_up.bw_gb_per_s", "greater than 0", "-5"]),
    "negative nic rate": (GOOD_OFFERING.replace("nic_gbit_per_s: 400", "nic_gbit_per_s: -400"),
                          ["scale_out.nic_gbit_per_s"]),
    "missing gpu count": (GOOD_OFFERING.replace("    gpus: 8\n", ""), ["big.8x", "'gpus'", "Field required"]),
    "missing source": (GOOD_OFFERING.replace("    source: acme price list\n", ""), ["'source'"]),
    "unknown fabric": (GOOD_OFFERING.replace("fabric: infiniband", "fabric: infiniband2"),
                       ["scale_out.fabric", "infiniband2"]),
    "fabric without nics": (GOOD_OFFERING.replace("nics: 8", "nics: 0"), ["needs at least one NIC"]),
    "rdma over tcp": (GOOD_OFFERING.replace("fabric: infiniband", "fabric: tcp"), ["GPUDirect RDMA is impossible"]),
    "nvls without nvswitch": (GOOD_OFFERING.replace("scale_up: {kind: nvswitch}",
                                                    "scale_up: {kind: pcie, in_network_reduction: nvls}"),
                              ["scale_up.in_network_reduction", "NVLS"]),
    "price without date": (GOOD_OFFERING.replace("    price_as_of: 2026-11-01\n", ""), ["price_as_of"]),
    "misspelt field": (GOOD_OFFERING.replace("nic_gbit_per_s", "nic_gbits"), ["scale_out.nic_gbits", "unknown field"]),
    "bad date": (GOOD_OFFERING.replace("as_of: 2026-11-01\n", "as_of: yesterday\n"), ["'as_of'"]),
    "no provider": (GOOD_OFFERING.replace("provider: acme\n", ""), ["big.8x", "no provider"]),
    "unknown link generation": (GOOD_OFFERING.replace("scale_up: {kind: nvswitch}",
                                                      "scale_up: {kind: nvswitch, generation: nvlink9}"),
                                ["scale_up.generation", "nvlink9"]),
    "duplicate id": (GOOD_OFFERING + GOOD_OFFERING.split("offerings:\n")[1], ["duplicate offering id", "acme/big.8x"]),
    "duplicate of a packaged preset": ("""
        systems:
          - id: dgx-h100
            gpu: H100
            gpus: 8
            scale_up: {kind: nvswitch}
            source: mine
            as_of: 2026-11-01
        """, ["duplicate system id", "dgx-h100", "presets.yaml"]),
    "gpus zero": (GOOD_OFFERING.replace("gpus: 8", "gpus: 0"), ["'gpus'", "greater than or equal to 1"]),
    "section not a list": ("offerings: {instance: x}\n", ["section 'offerings' must be a list"]),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_data_file(tmp_path: Path, case: str) -> None:
    text, expected = BAD_CASES[case]
    _assert_one_line_error(tmp_path, text, *expected)


def test_data_error_names_file_entry_and_field() -> None:
    err = DataError("x.yaml", "must be > 0", entry="aws/p5", field="scale_out.nics")
    assert str(err) == "x.yaml: entry 'aws/p5': field 'scale_out.nics': must be > 0"


def test_missing_catalog_file(tmp_path: Path) -> None:
    result = run_cli("catalog", "--catalog", str(tmp_path / "absent.yaml"))
    assert result.exit_code == 2
    assert "absent.yaml" in result.stderr and "no such file" in result.stderr


@pytest.mark.parametrize("args, expected", [
    (["--fabric", "carrier-pigeon"], "--fabric: unknown fabric 'carrier-pigeon'"),
    (["--sort", "vibes"], "--sort: unknown key 'vibes'"),
    (["--gpu", "Z9000"], "--gpu: unknown GPU 'Z9000'"),
    (["--provider", "nowhere"], "--provider: unknown provider 'nowhere'"),
    (["--max-price-per-gpu-hour", "-1"], "must not be negative"),
])
def test_bad_filter_values(args: list[str], expected: str) -> None:
    result = run_cli("catalog", *args)
    assert result.exit_code == 2
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_user_config_directory_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config"
    config.mkdir()
    _write(config, GOOD_OFFERING, "acme.yaml")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(config))
    assert "acme/big.8x" in load_db().offerings
