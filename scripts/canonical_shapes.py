"""Write queries/v1/canonical/empty_shapes.json: the columns and types of every canonical table as a run of the
canonical files on empty inputs makes them, and the statements the loader runs for a file it does not run
(`@empty_without`: nsysql/loader/shapes.py). Run it after changing what a canonical file defines:
`python scripts/canonical_shapes.py` (tests/test_empty_inputs.py fails until then)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsysql.loader import shapes  # noqa: E402

if __name__ == "__main__":
    print(shapes.write())
