#!/usr/bin/env python3
"""Derive the pip requirements of the Docker images from requirements/runtime.txt.

requirements/runtime.txt is the runtime lock: the pinned Python dependencies that
scripts/sim.sh and a robot need (scripts/setup.sh installs it into .venv, where
ROS 2 itself comes from PyPI wheels; the test set of requirements/lock.txt, torch,
JAX, warp, Ray and the test tools, is not in it: that file is the one source of
what an image leaves out). On an image with a ROS 2 distribution from apt, ROS
and colcon come from apt instead, so this script drops what apt provides and
keeps everything else, pins untouched:

* ``ros-*``    the ROS 2 wheels (rclpy, rmw, rosidl, ament, ... from apt).
* ``colcon-*`` colcon and its extensions (python3-colcon-* from apt).
* ``ros-wheels-bootstrapper`` (covered by ``ros-*``; named for clarity).
* ``rclpy``, ``std_msgs``, ``rosidl_parser``, ... : the Python distributions
  shipped *inside* the ROS wheels (``ros-rclpy`` installs ``rclpy-*.egg-info``).
  They appear in a ``pip freeze`` but are not on PyPI; a line ``X`` is one of
  these when ``ros-X`` (normalised) is in the lock too.
* ``catkin-pkg``, ``empy``, ``lark-parser``: build-tool dependencies of the ROS
  and colcon wheels. apt installs its own (python3-catkin-pkg, python3-empy,
  python3-lark) matched to the apt ROS tools; the pip versions would shadow
  them inside the image's venv (``--system-site-packages``), and rosidl's code
  generators then run with a different empy/lark than they were released with
  (Jazzy's rosidl needs empy 3; the lock pins empy 4).

Comments, blank lines and inline comments are left out of the output. pip
options (``--hash`` continuations, ``--extra-index-url``) are passed through.
Every kept requirement must be pinned (``==``, ``===`` or a direct ``@``
reference): this list is what makes the image reproducible.

Usage (stdlib only, any Python >= 3.8):

    python3 docker/lock_for_ros_image.py requirements/runtime.txt -o /tmp/lock-ros.txt
    python3 docker/lock_for_ros_image.py requirements/runtime.txt --explain
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

# Build-tool dependencies of the ROS/colcon wheels that apt provides on a ROS
# image (see the module docstring for why they must not shadow apt's).
APT_PROVIDED = frozenset({"catkin-pkg", "empy", "lark-parser", "ros-wheels-bootstrapper"})
DROPPED_PREFIXES = ("ros-", "colcon-")

_NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_INCLUDE_OPTIONS = ("-r", "--requirement", "-c", "--constraint")


class LockError(ValueError):
    """The lock file has a line this script cannot translate safely."""


def normalize(name: str) -> str:
    """PEP 503 name normalisation: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Line:
    lineno: int  # 1-based line of the (first physical line of the) entry
    text: str  # the requirement without comments / continuations
    name: Optional[str]  # normalised project name, None for pip option lines


def parse(lock_text: str) -> List[Line]:
    """Logical requirement lines of a requirements file, comments removed."""
    out: List[Line] = []
    pending = ""
    start = 0
    for lineno, raw in enumerate(lock_text.splitlines(), start=1):
        # A comment starts at '#' at line start or after whitespace (pip's rule).
        code = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = lineno
        if code.endswith("\\"):
            pending += code[:-1] + " "
            continue
        code = (pending + code).strip()
        pending = ""
        if not code:
            continue
        if code.startswith("-"):
            opt = code.split()[0].split("=")[0]
            if opt in _INCLUDE_OPTIONS:
                raise LockError(
                    f"line {start}: '{opt}' includes another file, which the image "
                    "does not copy; put its lines into the lock itself")
            out.append(Line(start, code, None))
            continue
        m = _NAME_RE.match(code)
        if not m:
            raise LockError(f"line {start}: cannot read a project name in {code!r}")
        out.append(Line(start, " ".join(code.split()), normalize(m.group(1))))
    if pending.strip():
        raise LockError("the file ends with a line continuation ('\\')")
    return out


def _is_pinned(text: str) -> bool:
    """``name==1.2``, ``name[extra]===1.2`` or ``name @ url`` (markers/hashes allowed)."""
    req = text.split(" --hash", 1)[0].split(";", 1)[0].strip()
    if "@" in req:
        return True
    return re.fullmatch(r"[A-Za-z0-9._-]+(\[[^\]]*\])?\s*===?\s*[^\s,=<>!~*]+", req) is not None


def classify(lock_text: str) -> Tuple[List[Line], List[Tuple[Line, str]]]:
    """Split the lock into (kept, [(dropped, reason), ...])."""
    lines = parse(lock_text)
    names = {ln.name for ln in lines if ln.name}
    kept: List[Line] = []
    dropped: List[Tuple[Line, str]] = []
    for ln in lines:
        if ln.name is None:
            kept.append(ln)
        elif ln.name in APT_PROVIDED:
            dropped.append((ln, "ROS/colcon build tool, apt provides it"))
        elif ln.name.startswith(DROPPED_PREFIXES):
            dropped.append((ln, f"{ln.name.split('-')[0]}-* wheel, apt provides it"))
        elif "ros-" + ln.name in names:
            dropped.append((ln, f"shipped inside the ros-{ln.name} wheel"))
        else:
            if not _is_pinned(ln.text):
                raise LockError(
                    f"line {ln.lineno}: {ln.text!r} is not pinned (expected 'name==version')")
            kept.append(ln)
    return kept, dropped


def filter_lock(lock_text: str) -> str:
    """The requirements text for the ROS images: kept lines, one per line."""
    kept, _ = classify(lock_text)
    return "".join(ln.text + "\n" for ln in kept)


def main(argv: Optional[Iterable[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("lock", help="path to requirements/runtime.txt")
    ap.add_argument("-o", "--output", help="write the filtered list here (default: stdout)")
    ap.add_argument("--explain", action="store_true",
                    help="print every dropped line and why to stderr")
    args = ap.parse_args(list(argv) if argv is not None else None)
    try:
        with open(args.lock, encoding="utf-8") as f:
            text = f.read()
        kept, dropped = classify(text)
        result = filter_lock(text)
    except (OSError, LockError) as e:
        print(f"lock_for_ros_image: {e}", file=sys.stderr)
        return 2
    if args.explain:
        for ln, why in dropped:
            print(f"  drop {ln.text:<45} {why}", file=sys.stderr)
    n_req = sum(1 for ln in kept if ln.name)
    print(f"lock_for_ros_image: kept {n_req} pinned requirements, "
          f"dropped {len(dropped)} provided by apt", file=sys.stderr)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(result)
    else:
        sys.stdout.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
