"""The declarations as the CLI reads them: declared.json beside this module, which `python
scripts/readme_commands.py` writes from the registry (nsysql.analyses.catalog). A file rather than the registry
itself: the declarations import polars and every analysis, which a command imports only once its cold load has
read the export, a warm one never (nsysql.cli.warm), and `nsysql --help` never."""

from __future__ import annotations

import json
from pathlib import Path

MANIFEST = Path(__file__).with_name("declared.json")
DECLARED: dict[str, dict] = json.loads(MANIFEST.read_text(encoding="utf-8"))
