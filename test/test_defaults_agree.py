"""Every solver default is written once, in the C++ struct (gato/types.hpp ``gato::Settings``,
``gato::AdmmConfig``), and read from there by the Python dataclass (gato.SolverParams), BSQP,
the ROS parameter schema (gato_ros/params.py) and the files generated from it
(docs/parameters.md, the plugin's gato_controller_parameters.yaml). These tests hold every place that shows a default to the struct,
except the controller's defaults of the fields gato.planners.shipped_weights lists for an arm (the one table of those)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

import gato
from gato import _core
from gato.config import DEFAULT_LINSYS, SolverParams
from gato.planners.shipped_weights import SHIPPED_WEIGHTS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src" / "gato_ros"))
from gato_ros import params as ros_params  # noqa: E402

STRUCT = _core.Settings()


def struct_value(name: str):
    """The struct's default of ``name`` as the APIs spell it (enums by their lowercase name)."""
    v = getattr(STRUCT, name)
    return v.name.lower() if hasattr(v, "name") else v


def docs_defaults(section: str) -> dict:
    """{name: default as shown} of one table of docs/parameters.md (the ``## `section...` `` heading)."""
    text = (ROOT / "docs" / "parameters.md").read_text()
    start = text.index(f"## `{section}")
    end = text.find("\n## ", start + 1)
    out = {}
    for line in text[start:end if end > 0 else None].splitlines():
        m = re.match(r"\| `([^`]+)` \| [a-z_]+ \| `(.*?)` \|", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def shared(schema) -> list:
    names = [p.name for p in schema if p.name in STRUCT.fields]
    assert names, "no solver setting in this schema"
    return names


def test_struct_fields_are_the_dataclass_fields():
    """Every numeric setting of the struct is a SolverParams field (integrator is BSQP's
    constructor argument), so no default can live in only one of them."""
    dc = {f for f in SolverParams.__dataclass_fields__}
    assert set(STRUCT.fields) - dc == {"integrator"}
    assert dc - set(STRUCT.fields) == {"exact_hessian"}


def test_dataclass_defaults_are_the_structs():
    p = SolverParams()
    for name in STRUCT.fields:
        if name == "integrator":
            continue
        got = DEFAULT_LINSYS if name == "linsys" and p.linsys is None else getattr(p, name)
        assert got == struct_value(name), name
        assert type(got) is type(struct_value(name)), name
    assert p.to_settings() == STRUCT
    assert SolverParams().to_settings().to_dict() == _core.Settings().to_dict()


def test_bsqp_runs_the_structs_defaults():
    s = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 4, 0.03)
    assert s._s.settings == STRUCT
    assert s.linsys == struct_value("linsys") and s.integrator == struct_value("integrator")
    admm = _core.AdmmConfig()
    assert (s.admm_iters, s.admm_eps_abs, s.admm_eps_rel, s.admm_check_every, s.admm_linsys) == \
        (admm.iters, admm.eps_abs, admm.eps_rel, admm.check_every, admm.linsys.name.lower())


def schema_default(schema_name: str, name: str, robot: str):
    """What the schema must give as the default of solver field ``name`` for ``robot``: the arm's
    shipped value for the controller's fields the table lists, the struct's otherwise (the plugin's
    embedded solver has no u_ref: the struct's defaults throughout)."""
    if schema_name == "CONTROLLER" and name in SHIPPED_WEIGHTS.get(robot, {}):
        return SHIPPED_WEIGHTS[robot][name]
    return struct_value(name)


@pytest.mark.parametrize("schema_name", ["CONTROLLER", "PLUGIN"])
def test_ros_schema_defaults_are_the_structs(schema_name):
    schema = getattr(ros_params, schema_name)
    for name in shared(schema):
        p = ros_params.by_name(schema)[name]
        for robot in ros_params.ROBOTS:
            want = schema_default(schema_name, name, robot)
            assert p.default_for(robot) == want and type(p.default_for(robot)) is type(want), \
                f"{schema_name}.{name} ({robot})"
            # the schema's own range accepts its default
            assert ros_params.validate(schema, name, p.default_for(robot), allow_read_only=True) is None
    if schema_name == "CONTROLLER":     # exactly the table's fields are per-arm defaults
        assert {n for n in shared(schema) if callable(ros_params.by_name(schema)[n].default)} \
            == set().union(*SHIPPED_WEIGHTS.values())


@pytest.mark.parametrize("section,schema_name", [("gato_controller", "CONTROLLER"), ("gato_plugin", "PLUGIN")])
def test_docs_parameters_show_the_structs_defaults(section, schema_name):
    table = docs_defaults(section)
    names = shared(getattr(ros_params, schema_name))
    assert set(names) <= set(table), f"docs/parameters.md {section}: missing {set(names) - set(table)}"
    for name in names:
        # the page writes YAML scalars (2.0e-06, "bdsv", true), robot-specific ones for iiwa14 + " (per robot)"
        shown = yaml.safe_load(table[name].removesuffix(" (per robot)"))
        want = schema_default(schema_name, name, "iiwa14")
        assert shown == want, f"docs/parameters.md {section}.{name}: {table[name]}"
        assert type(shown) is type(want), name



def test_plugin_parameter_file_carries_the_structs_defaults():
    """The C++ plugin's generate_parameter_library file (embedded-mode solver tunables)."""
    spec = yaml.safe_load((ROOT / "src" / "gato_ros" / "src" / "gato_controller_parameters.yaml").read_text())
    (params,) = spec.values()
    names = shared(ros_params.PLUGIN)
    for name in names:
        shown = params[name]["default_value"]
        assert shown == struct_value(name) and type(shown) is type(struct_value(name)), f"plugin {name}: {shown!r}"
