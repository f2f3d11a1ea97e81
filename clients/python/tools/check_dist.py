"""Checks the artifacts that ``python -m build`` left in DIST: one sdist and
one wheel, each holding every module of src/muster, its py.typed marker and
(the sdist) what a wheel is built from.

usage: python tools/check_dist.py DIST
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dist = Path(argv[1])
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    problems = []
    if len(sdists) != 1 or len(wheels) != 1:
        problems.append(f"want one sdist and one wheel in {dist}, found {[p.name for p in dist.iterdir()]}")
    package = sorted(p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "muster").glob("*.py"))
    package.append("muster/py.typed")
    for sdist in sdists:
        with tarfile.open(sdist) as t:
            top = sdist.name.removesuffix(".tar.gz")
            names = {n.removeprefix(top + "/") for n in t.getnames()}
        for want in ["pyproject.toml", "README.md", *(f"src/{p}" for p in package)]:
            if want not in names:
                problems.append(f"{sdist.name} lacks {want}")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            meta = [n for n in names if n.endswith(".dist-info/METADATA")]
            requires = z.read(meta[0]).decode() if meta else ""
        for want in package:
            if want not in names:
                problems.append(f"{wheel.name} lacks {want}")
        if "Requires-Dist: httpx" not in requires:
            problems.append(f"{wheel.name}: its METADATA does not require httpx")
    for p in problems:
        print("check_dist:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
