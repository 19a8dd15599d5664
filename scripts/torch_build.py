"""Say which torch build is installed and how much room it takes (bootstrap prints this).

A CUDA build is never called CPU: the build is read from ``torch.version.cuda``.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path


def installed_size(site: Path) -> int:
    """Bytes of torch and the packages only a CUDA build brings (nvidia-*, triton)."""
    parts = [site / "torch", *site.glob("nvidia*"), *site.glob("triton*")]
    return sum(f.stat().st_size for p in parts if p.exists() for f in p.rglob("*") if f.is_file())


def main() -> None:
    import warnings

    # numpy comes with the course's packages, after torch: torch's warning about it is noise here
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch

    site = Path(sysconfig.get_paths()["purelib"])
    build = "CPU 版" if torch.version.cuda is None else f"CUDA {torch.version.cuda} 版（不是 CPU 版；約多 2 GB）"
    print(f"==> 裝好的是 torch {torch.__version__}，{build}，佔 {installed_size(site) / 2**30:.2f} GB")


if __name__ == "__main__":
    main()
