"""Shared fixtures of the validation tests (the logs themselves: ``nccl_logs``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_logs import DATA


@pytest.fixture
def data_dir() -> Path:
    """The folder of the copied nccl-tests logs."""
    return DATA
