"""Shared test set-up: keep every test away from the user's real config and data directories."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("LINKSCOPE_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("LINKSCOPE_DB", str(home / "runs.db"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))


FIXTURES = Path(__file__).parent / "fixtures"
