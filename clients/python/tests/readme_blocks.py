"""The Python blocks of a Markdown file (the SDK's README), as programs.

Every fenced block whose info string is ``python`` is one block. A block is a
whole program unless HTML comments on the lines just above its fence say
otherwise:

- ``<!-- fragment: SIGNATURE -->``: the block is the body of the function
  that SIGNATURE declares (``async def _(s: muster.Session) -> None``); its
  program is ``import muster``, then that function;
- ``<!-- not-run -->``: the block cannot run here (it names a host or a file of
  a real deployment); it is type-checked, never run.

``python tests/readme_blocks.py README.md DIR`` writes each block's program to
DIR/block_N.py and prints a line a block: the file, ``run`` or ``not-run``, and
the block's line in the Markdown file.
"""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"<!--\s*(fragment:\s*(?P<sig>.*?)|(?P<notrun>not-run))\s*-->")


@dataclass(frozen=True)
class Block:
    index: int
    line: int  #: the line of its opening fence, from 1
    code: str  #: as written in the Markdown file
    signature: str  #: "" for a whole program
    run: bool

    def program(self) -> str:
        """The block as a module: itself, or a fragment inside its function."""
        if not self.signature:
            return self.code
        return "import muster\n\n\n" + self.signature + ":\n" + textwrap.indent(self.code, "    ")


def blocks(markdown: str) -> list[Block]:
    """The python blocks of markdown, in order."""
    lines = markdown.splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```python":
            i += 1
            continue
        start = i
        sig, run = "", True
        j = i - 1
        while j >= 0 and (m := MARKER.fullmatch(lines[j].strip())):
            if m.group("notrun"):
                run = False
            else:
                sig = m.group("sig")
            j -= 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"line {start + 1}: a python block is never closed")
        found.append(Block(len(found), start + 1, "\n".join(body) + "\n", sig, run))
        i += 1
    return found


def write(markdown: str, out: Path) -> list[tuple[Block, Path]]:
    """Writes every block's program to out/block_N.py."""
    files = []
    for b in blocks(markdown):
        f = out / f"block_{b.index}.py"
        f.write_text(b.program())
        files.append((b, f))
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: readme_blocks.py README.md DIR", file=sys.stderr)
        return 2
    out = Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for b, f in write(Path(argv[1]).read_text(), out):
        print(f, "run" if b.run else "not-run", f"line {b.line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
