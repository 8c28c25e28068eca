"""README.md's example outputs are what nsysql prints today (scripts/readme_examples.py regenerates them)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.long
def test_readme_examples_are_current():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "readme_examples.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr
