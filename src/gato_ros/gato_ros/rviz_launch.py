"""``python -m gato_ros.rviz_launch CONFIG [rviz2 args]``: RViz 2 with ``CONFIG`` where ``rviz2``
is installed (the process becomes rviz2: exec), else one line on stdout and exit 0, so a launch
file's ``rviz:=true`` works on machines without RViz (this workspace's overlay has none)."""
from __future__ import annotations

import os
import shutil
import sys


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m gato_ros.rviz_launch CONFIG [rviz2 arguments]", file=sys.stderr)
        return 2
    exe = shutil.which("rviz2")
    if exe is None:
        print(f"rviz:=true: rviz2 is not installed here; skipped (config: {args[0]})", flush=True)
        return 0
    os.execv(exe, [exe, "-d", *args])
    return 0    # not reached


if __name__ == "__main__":
    sys.exit(main())
