"""Write the digits weights the course ships (common/digits_weights.pt) and their checksum.

    python scripts/train_digits.py

Trains ``common.data.train_digits_model()`` under the ``default`` instruction-set profile (the
plainest kernels, see ``autograder/maintenance/isa.py``), saves the weights, and writes their SHA-256 into
``common/data.py`` (``autograder/maintenance/weights.py``). Only on purpose: every number of M06–M08
follows from these weights, so re-execute those chapters (``pt2e-course execute``) and release them afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from autograder.maintenance.weights import rerun_capped, write_weights

    if (code := rerun_capped()) is not None:
        return code
    from common import data

    model = data.train_digits_model()
    digest = write_weights(model, data)
    correct = round(data.accuracy(model) * len(data.digits().test_y))
    print(
        f"{data.WEIGHTS.relative_to(ROOT)}: {correct} / {len(data.digits().test_y)} test images right, sha256 {digest}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
