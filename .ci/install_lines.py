"""Check every ``pip install`` line of the README, the docs and the examples' READMEs.

Why: gactors is not on the package index, so a line such as ``pip install
'gactors[cluster]'`` fails for a newcomer with "No matching distribution" while every
test stays green. This script extracts each ``pip install`` command from ``README.md``,
``docs/**/*.md`` and ``examples/*/README.md`` (fenced code blocks and inline code spans,
``$`` prompts and ``&&`` chains included) and then:

1. checks its form: a requirement that names gactors must be the checkout itself
   (``.``, ``'.[extra]'``, ``-e .``, a ``./path`` into the checkout, or
   ``gactors[extra] @ file:///path/to/gactors``), never the bare name; gunicorn comes
   through the ``gunicorn`` extra (plain ``gunicorn`` lacks what ``-k gevent`` needs);
2. unless ``--static``, runs it as written in a fresh venv whose working directory is
   the checkout root (``/path/to/gactors`` is replaced by the checkout), with that
   venv's pip. Distinct commands run once each; pip's cache is kept.

Usage: ``python3 .ci/install_lines.py [--static] [--list]``. Exit status 1 names every
line that failed, with its file and line number.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER = "/path/to/gactors"

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE = re.compile(r"`([^`]+)`")
# the command runs from "pip install" to the end of its shell segment
_PIP = re.compile(r"(?:[\w./-]*/)?(?:pip3?|python3? -m pip) install\b[^;&|#`\n]*")


@dataclass(frozen=True)
class Line:
    """One ``pip install`` command found in a document."""

    path: Path
    lineno: int
    command: str

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.lineno}"

    def args(self) -> list[str]:
        """The arguments after ``install``."""
        words = shlex.split(self.command)
        return words[words.index("install") + 1 :]


def documents() -> list[Path]:
    """The files whose install lines a newcomer copies."""
    found = [ROOT / "README.md"]
    found += sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
    found += sorted((ROOT / "examples").glob("*/README.md"))
    return found


def extract(path: Path) -> list[Line]:
    """Every ``pip install`` command of one Markdown file, with its line number."""
    lines: list[Line] = []
    text = path.read_text(encoding="utf-8").splitlines()
    in_fence = False
    prose: list[tuple[int, str]] = []

    def flush_prose() -> None:
        # inline code spans may wrap over lines within a paragraph: join the paragraph
        if not prose:
            return
        joined = " ".join(t for _, t in prose)
        offsets = []
        pos = 0
        for lineno, t in prose:
            offsets.append((pos, lineno))
            pos += len(t) + 1
        for span in _INLINE.finditer(joined):
            lineno = max(n for start, n in offsets if start <= span.start())
            for m in _PIP.finditer(span.group(1)):
                lines.append(Line(path, lineno, m.group(0).strip()))
        prose.clear()

    for lineno, raw in enumerate(text, start=1):
        if _FENCE.match(raw):
            flush_prose()
            in_fence = not in_fence
            continue
        if in_fence:
            for m in _PIP.finditer(raw):
                lines.append(Line(path, lineno, m.group(0).strip()))
        elif raw.strip():
            prose.append((lineno, raw.strip()))
        else:
            flush_prose()
    flush_prose()
    return lines


def form_problem(line: Line) -> str | None:
    """Why this command cannot work from a checkout, or None when its form is fine."""
    try:
        args = line.args()
    except ValueError as exc:
        return f"cannot be parsed as a shell command ({exc})"
    if not any(not a.startswith("-") for a in args):
        return "installs nothing"
    for arg in args:
        if arg.startswith("-"):
            continue
        name = re.split(r"[\[<>=!~;@ ]", arg, maxsplit=1)[0].lower()
        if name == "gactors":
            if "@" not in arg or "file://" not in arg:
                return (
                    f"{arg!r} asks the package index for gactors, which is not published "
                    "there: install the checkout ('.[extra]', -e '.[extra]' or "
                    "'gactors[extra] @ file:///path/to/gactors')"
                )
        elif name == "gunicorn" and "[" not in arg:
            return (
                "plain 'gunicorn' cannot run -k gevent since gunicorn 27 (its gevent worker "
                "needs 'packaging', from gunicorn's gevent extra): use gactors' gunicorn "
                "extra, '.[gunicorn]'"
            )
        elif arg.startswith(("./", "../")) or arg == "." or arg.startswith(".["):
            target = ROOT / re.split(r"\[", arg, maxsplit=1)[0]
            if not target.exists():
                return f"{arg!r}: no such path in the checkout ({target})"
    return None


def run(line: Line, workdir: Path) -> tuple[bool, str, float]:
    """Run the command as written, with a fresh venv's pip, from the checkout root."""
    env_dir = workdir / f"venv-{abs(hash(line.command))}"
    venv.create(env_dir, with_pip=True, clear=True)
    args = [a.replace(PLACEHOLDER, str(ROOT)) for a in line.args()]
    cmd = [str(env_dir / "bin" / "python"), "-m", "pip", "install", *args]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - started
    return proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:], took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--static", action="store_true", help="check the forms only")
    parser.add_argument("--list", action="store_true", help="print the lines found")
    opts = parser.parse_args(argv)

    found = [line for doc in documents() for line in extract(doc)]
    if not found:
        print("no pip install line found: the extraction is broken", file=sys.stderr)
        return 1
    failures: list[str] = []
    for line in found:
        if opts.list:
            print(f"{line.where()}: {line.command}")
        problem = form_problem(line)
        if problem:
            failures.append(f"{line.where()}: `{line.command}`: {problem}")
    print(f"{len(found)} pip install lines in {len(documents())} files")

    if not opts.static and not failures:
        distinct: dict[tuple[str, ...], Line] = {}
        for line in found:
            distinct.setdefault(tuple(line.args()), line)
        with tempfile.TemporaryDirectory(prefix="gactors-install-lines-") as tmp:
            for args, line in distinct.items():
                ok, output, took = run(line, Path(tmp))
                print(f"  {'ok  ' if ok else 'FAIL'} {took:5.1f} s  pip install {' '.join(args)}")
                if not ok:
                    failures.append(f"{line.where()}: `{line.command}` failed:\n{output}")
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
