"""What a launch file starts, resolved without starting anything: once through the real
ROS 2 launch (launch / launch_ros Python API, the frontends ``ros2 launch`` uses) and once
through the project's pip-only runner (``python -m gato_ros.launch_runner --print``), in
one comparable form (test/test_launch_parity.py).

A process is described as ``{"name", "exe", "args", "node", "namespace", "params",
"remaps", "env", "on_exit"}``: ``exe`` the resolved executable path, ``args`` the
arguments before ``--ros-args``, ``params`` the parameters the node ends up with (every
``--params-file`` / ``-p`` in order, later ones winning, file sections that apply to the
node only), ``param_files`` the user's parameter files in order (paths), ``remaps`` the ``-r from:=to`` rules other than the node name / namespace.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml


# ------------------------------------------------------------------ shared normalisation
# launch_ros writes inline parameters (a dict) to a temporary file with this name prefix
_LAUNCH_ROS_TMP = "launch_params_"

def _section_applies(key: str, node: str, ns: str) -> bool:
    """Does a parameter-file section key (``/**``, ``name``, ``/ns/name``, ``/**/name``) address
    the node ``name`` in namespace ``ns``? (rcl's rules for the forms launch files use.)"""
    full = f"{ns.rstrip('/')}/{node}" if ns and ns != "/" else f"/{node}"
    key = key if key.startswith("/") else "/" + key
    return key in ("/**", full, f"/**/{node}")


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = v
    return out


def _params_from_file(path: str, node: str, ns: str, inline: dict | None = None) -> dict:
    doc = inline if inline is not None else yaml.safe_load(Path(path).read_text())
    out = {}
    for key, body in (doc or {}).items():
        if _section_applies(str(key), node, ns) and isinstance(body, dict):
            out.update(_flatten(body.get("ros__parameters") or {}))
    return out


def _split_cmd(cmd: list, inline_files: dict | None = None) -> dict:
    """args / node / namespace / params / remaps of a resolved ROS command line."""
    inline_files = inline_files or {}
    try:
        i = cmd.index("--ros-args")
    except ValueError:
        return {"args": list(cmd[1:]), "node": "", "namespace": "", "params": {}, "param_files": [], "remaps": []}
    args, ros = list(cmd[1:i]), list(cmd[i + 1:])
    node, ns, remaps, sources = "", "", [], []
    j = 0
    while j < len(ros):
        a = ros[j]
        if a == "--ros-args":
            j += 1
            continue
        if a in ("-r", "--remap") and j + 1 < len(ros):
            src, _, dst = ros[j + 1].partition(":=")
            if src == "__node":
                node = dst
            elif src == "__ns":
                ns = dst
            else:
                remaps.append([src, dst])
            j += 2
        elif a == "--params-file" and j + 1 < len(ros):
            sources.append(("file", ros[j + 1]))
            j += 2
        elif a in ("-p", "--param") and j + 1 < len(ros):
            name, _, val = ros[j + 1].partition(":=")
            sources.append(("value", (name, yaml.safe_load(val))))
            j += 2
        else:
            args.append(a)  # something else after --ros-args: keep it visible
            j += 1
    params: dict = {}
    files = []  # the user's parameter files, whole (ros2_control_node hands their other sections to its
    #             controllers); inline values are written to temporary files by both, grouped differently
    for kind, s in sources:
        if kind == "file":
            params.update(_params_from_file(s, node, ns, inline_files.get(s)))
            if s not in inline_files and not Path(s).name.startswith(_LAUNCH_ROS_TMP):
                files.append(os.path.realpath(s))
        else:
            params[s[0]] = s[1]
    return {"args": args, "node": node, "namespace": ns, "params": params, "param_files": files, "remaps": remaps}


def _exe_path(exe: str) -> str:
    """The program a command starts: a bare name as PATH finds it, resolved."""
    import shutil

    if os.sep not in exe:
        exe = shutil.which(exe) or exe
    return os.path.realpath(exe)


# ------------------------------------------------------------------ the project's runner
def describe_runner(path, args: dict, env=None) -> list:
    """The processes ``python -m gato_ros.launch_runner FILE name:=value ... --print`` lists."""
    cmd = [sys.executable, "-m", "gato_ros.launch_runner", str(path), *(f"{k}:={v}" for k, v in args.items()),
           "--print"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    from gato_ros.launch_runner import resolve_executable

    out = []
    for line in r.stdout.splitlines():
        if not line.startswith("{"):
            continue
        p = json.loads(line)
        exe = resolve_executable(p["cmd"][0])
        d = _split_cmd([exe, *p["cmd"][1:]], p.get("inline_params"))
        d.update(name=p["name"], exe=_exe_path(exe), env=dict(sorted(p.get("env", {}).items())),
                 on_exit=p.get("on_exit", "") or "", respawn=bool(p.get("respawn", False)),
                 respawn_delay=float(p.get("respawn_delay") or 0.0))
        out.append(d)
    return out


# ------------------------------------------------------------------ the real launch
def describe_real(path, args: dict) -> list:
    """The processes the real ``ros2 launch FILE name:=value ...`` would start, resolved with
    the launch Python API: the file is included like ``ros2 launch`` does, every entity is
    visited in a LaunchContext except the processes, whose substitutions (command line,
    parameters, remappings) are performed without executing them."""
    from launch import LaunchContext, LaunchDescription
    from launch.actions import ExecuteLocal, IncludeLaunchDescription, Shutdown
    from launch.launch_description_sources import AnyLaunchDescriptionSource
    from launch_ros.actions import Node

    ctx = LaunchContext()
    root = LaunchDescription([IncludeLaunchDescription(AnyLaunchDescriptionSource(str(path)),
                                                       launch_arguments=[(k, str(v)) for k, v in args.items()])])
    found = []

    def visit(entity):
        if isinstance(entity, ExecuteLocal):
            cond = entity.condition
            if cond is not None and not cond.evaluate(ctx):
                return
            if isinstance(entity, Node):
                entity._perform_substitutions(ctx)
                ros_args = {}
                if entity.node_name is not None and "<node_name_unspecified>" not in entity.node_name:
                    ros_args["name"] = f"__node:={entity.node_name.rsplit('/', 1)[-1]}"
                if entity.expanded_node_namespace not in ("", None):
                    ros_args["ns"] = f"__ns:={entity.expanded_node_namespace}"
                ctx.extend_locals({"ros_specific_arguments": ros_args})
            entity.prepare(ctx)
            det = entity.process_details
            on_exit = getattr(entity, "_ExecuteLocal__on_exit", None)
            on_exit = on_exit if isinstance(on_exit, list) else [on_exit] if on_exit is not None else []
            d = _split_cmd(list(det["cmd"]))
            extra_env = {k: v for k, v in (det["env"] or {}).items() if os.environ.get(k) != v}
            # launch names a process "<name or executable>-<count>"
            d.update(name=d["node"] or re.sub(r"-\d+$", "", det["name"]), exe=_exe_path(det["cmd"][0]),
                     env=dict(sorted(extra_env.items())),
                     on_exit="shutdown" if any(isinstance(a, Shutdown) for a in on_exit) else "",
                     respawn=bool(getattr(entity, "_ExecuteLocal__respawn", False)),
                     respawn_delay=float(getattr(entity, "_ExecuteLocal__respawn_delay", None) or 0.0))
            found.append(d)
            return
        for sub in entity.visit(ctx) or []:
            visit(sub)

    visit(root)
    return found


def main(argv=None) -> int:
    """``python test/launch_describe.py real|runner FILE name:=value ...``: print the JSON."""
    argv = list(sys.argv[1:] if argv is None else argv)
    which, path, rest = argv[0], argv[1], argv[2:]
    args = dict(a.split(":=", 1) for a in rest)
    desc = describe_real(path, args) if which == "real" else describe_runner(path, args)
    print(json.dumps(desc, indent=1, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
