"""The one parameter schema (gato_ros.params) and everything generated from it: the
committed YAML files, ros2_control descriptions and docs/parameters.md equal what the
schema generates; descriptors carry ranges, descriptions and read-only flags; the
xacro descriptions expand and survive launch_ros' YAML typing."""
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import import_or_skip

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
params = import_or_skip("gato_ros.params", _HINT)

ROOT = Path(__file__).resolve().parents[1]


def test_committed_generated_files_equal_the_schema():
    files = params.generated_files(ROOT)
    assert len(files) == 2 + 3 * len(params.ROBOTS)   # docs, the plugin's parameter definition, 3 per robot
    stale = [str(p.relative_to(ROOT)) for p, text in files.items() if not p.is_file() or p.read_text() != text]
    assert not stale, f"regenerate with `python -m gato_ros.params --write`: {stale}"
    assert params.main(["--check", "--root", str(ROOT)]) == 0


def test_plugin_parameter_definition_and_controllers_files_follow_the_schema():
    """The ros2_control plugin's generate_parameter_library YAML (compiled into the plugin) and
    the gato_plugin block of every controllers file come from params.PLUGIN."""
    import yaml

    gpl = yaml.safe_load((ROOT / "src/gato_ros/src/gato_controller_parameters.yaml").read_text())
    gtypes = {"double": "double", "integer": "int", "bool": "bool", "string": "string",
              "string_array": "string_array", "double_array": "double_array"}
    assert list(gpl) == [params.PLUGIN_NAME]
    assert list(gpl[params.PLUGIN_NAME]) == [p.name for p in params.PLUGIN]
    for p in params.PLUGIN:
        entry = gpl[params.PLUGIN_NAME][p.name]
        assert entry["type"] == gtypes[p.type] and entry["read_only"] == p.read_only, p.name
        if p.range is not None:
            assert entry["validation"]["bounds<>"] == list(p.range), p.name
        if p.choices is not None:
            assert entry["validation"]["one_of<>"] == [list(p.choices)], p.name
    for robot in params.ROBOTS:
        cfg = yaml.safe_load((ROOT / f"src/gato_bringup/config/{robot}_controllers.yaml").read_text())
        assert cfg["controller_manager"]["ros__parameters"][params.PLUGIN_NAME]["type"] == params.PLUGIN_TYPE
        block = cfg[params.PLUGIN_NAME]["ros__parameters"]
        assert set(block) == {p.name for p in params.PLUGIN}, robot
        n = len(block["joints"])
        assert all(len(block[k]) == n and min(block[k]) > 0 for k in ("kp", "kd")), robot
        # the hold's damping is inertia-scaled (hold_frequency_hz): no joint-local extra by default
        assert len(block["hold_damping"]) == n and max(block["hold_damping"]) == 0.0, robot
        assert block["hold_frequency_hz"] > 0, robot
        embedded = cfg[params.PLUGIN_NAME + "_embedded"]["ros__parameters"]
        assert embedded == dict(block, mode="embedded"), robot


def test_every_parameter_is_in_each_robot_file_with_its_type():
    pytypes = {"double": float, "integer": int, "bool": bool, "string": str, "string_array": list,
               "double_array": list}
    for robot in params.ROBOTS:
        doc = yaml.safe_load((ROOT / "src/gato_bringup/config" / f"{robot}.yaml").read_text())
        assert set(doc) == set(params.NODE_NAMES)
        for node, schema in params.SCHEMAS.items():
            values = doc[node]["ros__parameters"]
            assert list(values) == [p.name for p in schema], (robot, node)
            for p in schema:
                assert type(values[p.name]) is pytypes[p.type], (robot, node, p.name, values[p.name])
                assert params.validate(schema, p.name, values[p.name], allow_read_only=True) is None
        assert doc["gato_controller"]["ros__parameters"]["robot"] == robot
        ctrl = yaml.safe_load((ROOT / "src/gato_bringup/config" / f"{robot}_controllers.yaml").read_text())
        assert ctrl["effort_controller"]["ros__parameters"]["joints"] == \
            doc["gato_controller"]["ros__parameters"]["joint_names"]


def test_markdown_lists_every_parameter_with_range_and_access():
    md = (ROOT / "docs/parameters.md").read_text()
    for node, schema in params.SCHEMAS.items():
        assert f"## `{node}`" in md
        for p in schema:
            row = next(line for line in md.splitlines() if line.startswith(f"| `{p.name}` |"))
            assert ("read-only" if p.read_only else "tunable") in row
            if p.range is not None:
                assert "[" in row
    assert "| `q_cost` | double | `2.0` |  | [0, 10000] | tunable |" in md


def test_descriptors_carry_ranges_descriptions_and_read_only():
    import_or_skip("rcl_interfaces.msg", "install the ROS 2 wheels (scripts/setup.sh)")
    from rcl_interfaces.msg import ParameterType

    spec = params.by_name(params.CONTROLLER)
    d = params.descriptor(spec["q_cost"])
    assert d.type == ParameterType.PARAMETER_DOUBLE and not d.read_only
    assert (d.floating_point_range[0].from_value, d.floating_point_range[0].to_value) == (0.0, 1e4)
    assert "end-effector" in d.description
    d = params.descriptor(spec["max_sqp_iters"])
    assert d.type == ParameterType.PARAMETER_INTEGER and (d.integer_range[0].from_value,
                                                         d.integer_range[0].to_value) == (1, 100)
    d = params.descriptor(spec["N"])
    assert d.read_only and d.integer_range[0].to_value == 512
    d = params.descriptor(spec["linsys"])
    assert "pcg, bdsv, bdsv_first, auto" in d.additional_constraints
    d = params.descriptor(spec["joint_names"])
    assert d.type == ParameterType.PARAMETER_STRING_ARRAY and d.read_only
    # every tunable of the brief is in the schema and tunable; every structural one read-only
    for name in ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost", "mu", "rho",
                 "max_sqp_iters", "max_pcg_iters", "pcg_tol", "linsys", "budget_s", "limits"):
        assert not spec[name].read_only, name
    for name in ("robot", "N", "dt", "batch_size", "backend", "control_rate_hz", "controller_name", "joint_names"):
        assert spec[name].read_only, name
    assert spec["limits"].choices == ("off", "telemetry", "barrier", "al", "admm")


def test_validate_names_the_problem():
    C = params.CONTROLLER
    assert params.validate(C, "q_cost", 5.0) is None
    assert params.validate(C, "q_cost", 5) is None                         # an int is a valid double
    assert params.validate(C, "q_cost", 1e5) == "q_cost: 100000 is out of range [0, 10000]"
    assert "read-only" in params.validate(C, "dt", 0.01)
    assert params.validate(C, "dt", 0.01, allow_read_only=True) is None
    assert "finite" in params.validate(C, "mu", float("nan"))
    assert "one of" in params.validate(C, "limits", "soft")
    assert "expected a number" in params.validate(C, "rho", "big")
    assert "unknown parameter" in params.validate(C, "q_cots", 1.0)
    assert "NaN" in params.validate(params.SIM, "external_wrench", [0, 0, float("inf"), 0, 0, 0],
                                    allow_read_only=True)


@pytest.mark.parametrize("robot", params.ROBOTS)
def test_ros2_control_description_expands_with_xacro(robot, tmp_path):
    import_or_skip("xacro", "pip install xacro (in requirements/lock.txt)")
    import xml.etree.ElementTree as ET

    import gato

    xacro = shutil.which("xacro")
    assert xacro, "the xacro command is not on PATH"
    src = ROOT / "src/gato_bringup/urdf" / f"{robot}.urdf.xacro"
    r = subprocess.run([xacro, str(src), "hardware_plugin:=my_driver/MySystem"], capture_output=True, text=True,
                       timeout=120)
    if r.returncode and "gato_description" in r.stderr:
        pytest.skip(f"gato_description is not on AMENT_PREFIX_PATH (source install/setup.bash): {r.stderr[-300:]}")
    assert r.returncode == 0, r.stderr
    root = ET.fromstring(r.stdout)
    blocks = root.findall("ros2_control")
    rc = next(b for b in blocks if b.get("name") == f"gato_{robot}")
    assert rc.find("hardware/plugin").text == "my_driver/MySystem"
    joints = [j.get("name") for j in rc.findall("joint")]
    assert joints == gato.robot_info(robot)["joints"]
    for j in rc.findall("joint"):
        assert j.find("command_interface").get("name") == "effort"
        lo, hi = (float(p.text) for p in j.findall("command_interface/param"))
        assert lo == -hi and hi > 0
    assert len(root.findall("link")) > len(joints)           # the robot's own links came in
    # launch_ros types a substituted parameter value with YAML: the description must stay a string
    assert isinstance(yaml.safe_load(r.stdout), str)
    # The description's own URDF must not bring a ros2_control block of its own:
    # ros2_control would see the joints claimed twice.
    others = [b.get("name") for b in blocks if b is not rc]
    assert not others, f"{robot}: the gato_description URDF already has ros2_control block(s) {others}"


def _topic_types():
    """{topic: pkg/msg/Type} of the bringup's recorded topics (sim.launch.yaml: its recorder's
    topics, or the recorder's default controller graph when it gives none)."""
    doc = yaml.safe_load((ROOT / "src/gato_bringup/launch/sim.launch.yaml").read_text())
    rec = next(e["node"] for e in doc["launch"] if "node" in e and e["node"]["exec"] == "recorder_node")
    topics = next((p["value"] for p in rec["param"] if p.get("name") == "topics"), None)
    if topics is None:
        from gato_ros.recorder_node import controller_graph_topics

        ctrl = next((p["value"] for p in rec["param"] if p.get("name") == "controller_node"), "/gato_controller")
        return controller_graph_topics(ctrl)
    return dict(t.split(":", 1) for t in topics)


def _resolve(path, types):
    """Check that '/topic/field[/sub][index]' names a numeric field of the topic's message."""
    import importlib
    import re

    topic = next((t for t in sorted(types, key=len, reverse=True) if path.startswith(t + "/")), None)
    assert topic, f"{path}: no recorded topic is a prefix"
    pkg, _, name = types[topic].partition("/msg/")
    cls = getattr(importlib.import_module(f"{pkg}.msg"), name)
    for part in path[len(topic) + 1:].split("/"):
        m = re.fullmatch(r"(\w+)(\[\d+\])?", part)
        assert m, f"{path}: bad field {part!r}"
        ftypes = cls.get_fields_and_field_types()
        assert m.group(1) in ftypes, f"{path}: {cls.__name__} has no field {m.group(1)!r}"
        ftype = ftypes[m.group(1)]
        if m.group(2):
            assert ftype.startswith("sequence<"), f"{path}: {m.group(1)} is not an array"
            ftype = ftype[len("sequence<"):-1]
        if "/" in ftype:
            pkg2, name2 = ftype.split("/")
            cls = getattr(importlib.import_module(f"{pkg2}.msg"), name2)
        else:
            assert ftype in ("double", "float", "int32", "int64", "uint64", "boolean"), f"{path}: {ftype} not numeric"


def test_rqt_perspective_and_plotjuggler_layout_name_real_fields():
    import ast
    import json
    import xml.etree.ElementTree as ET

    import_or_skip("gato_msgs.msg", _HINT)
    types = _topic_types()
    cfg = ROOT / "src/gato_bringup/config"
    persp = json.loads((cfg / "gato.perspective").read_text())
    pm = persp["groups"]["pluginmanager"]
    running = ast.literal_eval(pm["keys"]["running-plugins"]["repr"])
    assert running == {"rqt_reconfigure/Param": [1], "rqt_plot/Plot": [1, 2]}
    assert set(pm["groups"]) == {"plugin__rqt_reconfigure__Param__1", "plugin__rqt_plot__Plot__1",
                                 "plugin__rqt_plot__Plot__2"}
    plotted = []
    for i in (1, 2):
        keys = pm["groups"][f"plugin__rqt_plot__Plot__{i}"]["groups"]["plugin"]["keys"]
        plotted += ast.literal_eval(keys["topics"]["repr"])
    assert "/gato_controller/solver_stats/solve_time_us" in plotted
    root = ET.parse(cfg / "gato_plotjuggler.xml").getroot()
    curves = [c.get("name") for c in root.iter("curve")]
    assert len(curves) >= 10
    sel = root.find("Plugins/plugin[@ID='ROS2 Topic Subscriber']/selected_topics").get("value").split(";")
    assert set(sel) == {"/gato_controller/solver_stats", "/gato_controller/step_result", "/gato_controller/status"}
    for path in plotted + curves:
        _resolve(path, types)
