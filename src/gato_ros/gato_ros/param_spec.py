"""One parameter of the gato nodes' schema (:class:`Param`) and what is done with one: the
defaults for a robot (:func:`defaults`), the check of a requested value (:func:`coerce`,
:func:`validate`), a node's start-up configuration (:func:`resolve_config`) and its rclpy
descriptor (:func:`descriptor`). The schema itself is assembled in :mod:`gato_ros.params`
(ROS-free except :func:`descriptor`, which imports rclpy)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TYPES = ("double", "integer", "bool", "string", "string_array", "double_array")


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``default`` is a value or a callable ``robot -> value`` (robot-specific defaults:
    joint names, start pose). ``range`` (lo, hi) is inclusive, for double/integer;
    ``choices`` lists the allowed strings; ``read_only`` parameters are fixed after
    start-up (structural: changing them needs a new solver or new connections).
    ``check``: optional ``value -> reason or None``, the value's own structure (e.g. an
    obstacle array's length), run by :func:`validate` after the type and range checks.
    """

    name: str
    type: str
    default: Any
    description: str
    unit: str = ""
    range: tuple | None = None
    choices: tuple | None = None
    read_only: bool = False
    group: str = ""
    check: Any = None

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"{self.name}: type {self.type!r} not in {TYPES}")
        if self.range is not None and self.type not in ("double", "integer"):
            raise ValueError(f"{self.name}: a range needs a double or integer parameter")

    def default_for(self, robot: str):
        return self.default(robot) if callable(self.default) else self.default


def by_name(schema) -> dict:
    return {p.name: p for p in schema}


def defaults(schema, robot: str) -> dict:
    """{name: default} of a schema for ``robot``."""
    return {p.name: p.default_for(robot) for p in schema}


# ---------------------------------------------------------------- validation
def coerce(p: Param, value):
    """``value`` as the Python type of parameter ``p``, or raise ValueError (type check only)."""
    t = p.type
    if t == "double":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{p.name}: expected a number, got {value!r}")
        return float(value)
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{p.name}: expected an integer, got {value!r}")
        return int(value)
    if t == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{p.name}: expected true or false, got {value!r}")
        return value
    if t == "string":
        if not isinstance(value, str):
            raise ValueError(f"{p.name}: expected a string, got {value!r}")
        return value
    try:
        seq = list(value)
    except TypeError:
        raise ValueError(f"{p.name}: expected a list, got {value!r}") from None
    if t == "string_array":
        if not all(isinstance(v, str) for v in seq):
            raise ValueError(f"{p.name}: expected a list of strings, got {value!r}")
        return seq
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seq):
        raise ValueError(f"{p.name}: expected a list of numbers, got {value!r}")
    return [float(v) for v in seq]


def fmt_number(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def validate(schema, name: str, value, *, allow_read_only: bool = False) -> str | None:
    """Why setting ``name`` to ``value`` is refused (a one-line reason), or None if it is valid.

    Checks: known name, read-only (unless ``allow_read_only``: start-up values), type,
    finiteness, range (inclusive; the reason names it) and choices.
    """
    p = by_name(schema).get(name)
    if p is None:
        return f"{name}: unknown parameter"
    if p.read_only and not allow_read_only:
        return f"{name}: read-only (structural; set it in the parameter file and restart the node)"
    try:
        v = coerce(p, value)
    except ValueError as e:
        return str(e)
    if p.type in ("double", "integer") and not math.isfinite(v):
        return f"{name}: expected a finite value, got {value!r}"
    if p.type == "double_array" and not all(math.isfinite(x) for x in v):
        return f"{name}: contains NaN or Inf"
    if p.range is not None and not p.range[0] <= v <= p.range[1]:
        return f"{name}: {fmt_number(v)} is out of range [{fmt_number(p.range[0])}, {fmt_number(p.range[1])}]"
    if p.choices is not None and v not in p.choices:
        return f"{name}: {v!r} is not one of {', '.join(p.choices)}"
    if p.check is not None:
        return p.check(v)
    return None


# ---------------------------------------------------------------- rclpy descriptors
def resolve_config(schema, config: dict, what: str) -> dict:
    """A node's start-up configuration: ``config`` over the schema's defaults for
    ``config["robot"]``, every value validated like a parameter file (read-only
    parameters allowed) and coerced to its type. ValueError names the parameter
    (``what`` names the node kind in the unknown-parameter message)."""
    cfg = defaults(schema, config.get("robot", "iiwa14"))
    unknown = set(config) - set(cfg)
    if unknown:
        raise ValueError(f"unknown {what} parameter(s): {sorted(unknown)}")
    cfg.update(config)
    specs = by_name(schema)
    for name, value in cfg.items():
        reason = validate(schema, name, value, allow_read_only=True)
        if reason:
            raise ValueError(reason)
        cfg[name] = coerce(specs[name], value)
    return cfg


def descriptor(p: Param):
    """The rclpy ParameterDescriptor of ``p``: type, description (with unit and choices),
    read_only, and a FloatingPointRange / IntegerRange (step 0: continuous)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, ParameterType

    types = {"double": ParameterType.PARAMETER_DOUBLE, "integer": ParameterType.PARAMETER_INTEGER,
             "bool": ParameterType.PARAMETER_BOOL, "string": ParameterType.PARAMETER_STRING,
             "string_array": ParameterType.PARAMETER_STRING_ARRAY,
             "double_array": ParameterType.PARAMETER_DOUBLE_ARRAY}
    desc = p.description + (f" [{p.unit}]" if p.unit else "")
    d = ParameterDescriptor(name=p.name, type=types[p.type], description=desc, read_only=p.read_only)
    if p.choices is not None:
        d.additional_constraints = "one of: " + ", ".join(p.choices)
    if p.range is not None:
        if p.type == "double":
            d.floating_point_range = [FloatingPointRange(from_value=float(p.range[0]), to_value=float(p.range[1]),
                                                         step=0.0)]
        else:
            d.integer_range = [IntegerRange(from_value=int(p.range[0]), to_value=int(p.range[1]), step=0)]
    return d
