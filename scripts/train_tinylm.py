"""Write the TinyLM weights the course ships (common/tinylm_weights.pt) and their checksum.

    python scripts/train_tinylm.py

Trains ``common.tinylm.train_tinylm()`` (about twelve seconds on one thread) under the ``default``
instruction-set profile (the plainest kernels, see ``autograder/maintenance/isa.py``), saves the weights,
and writes their SHA-256 into ``common/tinylm.py`` (``autograder/maintenance/weights.py``). Only on
purpose: every number of M09 follows from these weights, so re-execute M09 and release it afterwards.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from autograder.maintenance.weights import rerun_capped, write_weights

    if (code := rerun_capped()) is not None:
        return code
    from common import tinylm

    start = time.perf_counter()
    model = tinylm.train_tinylm()
    seconds = time.perf_counter() - start
    digest = write_weights(model, tinylm)
    print(
        f"{tinylm.WEIGHTS.relative_to(ROOT)}: {tinylm.WEIGHTS.stat().st_size} bytes, trained in {seconds:.1f} s, "
        f"held-out {tinylm.score(model)}, sha256 {digest}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
