"""Runner parity: for every shipped launch file (gato_bringup/launch/*) and representative
argument sets, the project's pip-only runner (``python -m gato_ros.launch_runner FILE
--print``) and the real ROS 2 launch (its Python API resolving the same file, as
``ros2 launch`` would, without starting anything: test/launch_describe.py) start the same
executables with the same node names, namespaces, parameters (the values each node ends
up with, typed, and the same parameter files in the same order: the controller_manager
hands their other sections to its controllers), remappings, arguments, extra environment, on_exit and respawn.
"""
from pathlib import Path

import pytest

from conftest import import_or_skip, require_ros2_tools

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
import_or_skip("gato_ros.launch_runner", _HINT)
import_or_skip("launch_ros", "needs the ROS 2 overlay (scripts/setup.sh; source scripts/activate.sh)")
import launch_describe as ld  # noqa: E402

pytestmark = pytest.mark.ros
LAUNCH_DIR = Path(__file__).resolve().parents[1] / "src" / "gato_bringup" / "launch"

# Representative argument sets per shipped launch file: the defaults, every boolean switch
# on, another robot, and the values that exercise typing (numbers, strings with ':').
ARG_SETS = {
    "sim.launch.yaml": [
        {},
        {"lockstep": "false", "duration": "0", "reference": "goals"},
        {"record": "true", "bag": "/tmp/gato_parity_bag"},
        {"robot": "fr3", "world": "pinocchio", "link_mass_scale": "L4:1.2,L6:0.9", "payload_mass_kg": "1.5",
         "duration": "2.5"},
        {"hypotheses": "estimator", "record": "true", "bag": "/tmp/gato_parity_bag",
         "external_wrench": "[0.0, 10.0, 0.0, 0.0, 0.0, 0.0]"},
        {"estimator": "true"},
        {"view": "true", "record": "true", "bag": "/tmp/gato_parity_bag", "view_port": "0", "foxglove": "false"},
        {"view": "true", "hypotheses": "estimator", "record": "true", "bag": "/tmp/gato_parity_bag",
         "view_host": "0.0.0.0"},
    ],
    "go2_sim.launch.yaml": [
        {},
        {"odometry": "false", "seed": "3", "base_height": "0.3", "duration": "2.5",
         "sim_summary": "/tmp/gato_parity_sim.json", "controller_summary": "/tmp/gato_parity_ctl.json"},
    ],
    "hardware.launch.xml": [
        {},
        {"reference": "true", "reference_mode": "goals", "record": "true", "bag": "/tmp/gato_parity_bag"},
        {"robot": "fr3", "controller_name": "my_effort_controller"},
        {"record": "true", "recorder": "gato", "bag": "/tmp/gato_parity_bag"},
        {"record": "true", "recorder": "ros2bag", "mujoco": "true", "bag": "/tmp/gato_parity_bag"},
        {"view": "true", "foxglove_port": "9876"},
        {"view": "true", "controller": "plugin", "mode": "embedded"},
    ],
}


def _hardware_extra_sets():
    """Argument sets of options hardware.launch.xml declares beyond the base ones (the
    plugin controller, MuJoCo hardware, respawn), taken from its own <arg> declarations so
    the test follows the shipped file."""
    import xml.etree.ElementTree as ET

    f = LAUNCH_DIR / "hardware.launch.xml"
    if not f.is_file():
        return []
    args = {a.get("name"): a for a in ET.parse(f).getroot().iter("arg")}
    out = []
    choice = {"controller": ["plugin"], "controller_mode": ["follow", "embedded"], "mujoco": ["true"],
              "respawn": ["true"], "use_sim_time": ["true"]}
    for name, values in choice.items():
        if name in args:
            out += [{name: v} for v in values]
    if "controller" in args and "controller_mode" in args:
        out += [{"controller": "plugin", "controller_mode": m} for m in choice["controller_mode"]]
    if "mujoco" in args:
        out.append({"mujoco": "true", "reference": "true", "record": "true", "bag": "/tmp/gato_parity_bag"})
        if "controller" in args:
            out.append({"mujoco": "true", "controller": "plugin"})
    return out


def _cases():
    files = sorted(p.name for p in LAUNCH_DIR.iterdir() if p.suffix in (".xml", ".yaml", ".yml"))
    cases = []
    for f in files:
        sets = ARG_SETS.get(f, [{}]) + (_hardware_extra_sets() if f == "hardware.launch.xml" else [])
        seen = []
        for a in sets:
            if a not in seen:
                seen.append(a)
                cases.append(pytest.param(f, a, id=f"{f}-" + ("-".join(f"{k}={v}" for k, v in a.items()) or "defaults")))
    return files, cases


FILES, CASES = _cases()


def test_every_shipped_launch_file_has_argument_sets():
    assert FILES, f"no launch files in {LAUNCH_DIR}"
    assert set(FILES) <= set(ARG_SETS), f"add argument sets for {sorted(set(FILES) - set(ARG_SETS))}"


@pytest.mark.parametrize("fname,args", CASES)
def test_runner_starts_what_ros2_launch_starts(fname, args, ros_env):
    require_ros2_tools()
    path = LAUNCH_DIR / fname
    real = ld.describe_real(path, args)
    runner = ld.describe_runner(path, args, env=ros_env)
    assert real, f"the real launch starts nothing for {fname} {args}"
    assert [p["name"] for p in runner] == [p["name"] for p in real], "processes (in start order)"
    for r, x in zip(runner, real):
        for key in ("exe", "node", "namespace", "args", "remaps", "env", "on_exit", "respawn", "respawn_delay",
                    "param_files"):
            assert r.get(key) == x.get(key), f"{fname} {args}: {x['name']}: {key}: runner {r.get(key)!r}, " \
                                             f"ros2 launch {x.get(key)!r}"
        keys = sorted(set(r["params"]) | set(x["params"]))
        diff = {k: (r["params"].get(k, "<unset>"), x["params"].get(k, "<unset>")) for k in keys
                if r["params"].get(k, "<unset>") != x["params"].get(k, "<unset>")
                or type(r["params"].get(k)) is not type(x["params"].get(k))}
        short = {k: tuple(repr(v)[:200] for v in pair) for k, pair in diff.items()}
        assert not diff, f"{fname} {args}: {x['name']}: parameters differ (runner, ros2 launch): {short}"


def test_parity_check_sees_a_difference(tmp_path, ros_env):
    """The comparison is not vacuous: both descriptions carry typed parameters and
    remappings, and another argument value shows up in them."""
    require_ros2_tools()
    f = tmp_path / "t.launch.xml"
    f.write_text('<launch><arg name="v" default="1"/><node pkg="gato_ros" exec="controller_node" name="n">'
                 '<param name="a" value="$(var v)"/><remap from="x" to="y"/></node></launch>')
    real, runner = ld.describe_real(f, {}), ld.describe_runner(f, {}, env=ros_env)
    assert real[0]["params"] == runner[0]["params"] == {"a": 1}
    assert real[0]["remaps"] == runner[0]["remaps"] == [["x", "y"]]
    assert ld.describe_real(f, {"v": "abc"})[0]["params"] == {"a": "abc"}
    assert ld.describe_runner(f, {"v": "2.5"}, env=ros_env)[0]["params"] == {"a": 2.5}
