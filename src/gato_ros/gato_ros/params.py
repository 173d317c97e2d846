"""The one parameter schema of the gato nodes, and everything generated from it.

Every parameter of the controller node (and of the simulation-world and reference
nodes) is declared ONCE here: type, default, unit, description, range or choices,
and whether it is read-only (structural: fixed at start-up) or tunable at run time.
From this schema come:

- the rclpy ``ParameterDescriptor`` of each parameter, with its
  ``FloatingPointRange`` / ``IntegerRange`` and description (what rqt_reconfigure
  and ``ros2 param describe`` show): :func:`descriptor`;
- the validation of a requested change (range, choices, read-only, type):
  :func:`validate`; the controller adds a capability check (limit mechanisms);
- the per-robot YAML parameter files in ``gato_bringup/config/``, the
  ros2_control controller-manager files next to them and the ros2_control robot
  descriptions in ``gato_bringup/urdf/``: :func:`robot_yaml`,
  :func:`controllers_yaml`, :func:`ros2_control_xacro`;
- the Markdown reference ``docs/parameters.md``: :func:`markdown`.

``python -m gato_ros.params --write`` regenerates the YAML files and the Markdown
from this module (``--check`` exits 1 when a committed file differs; the tests
run the same comparison). ROS-free except :func:`descriptor` (imports rclpy).

The schema is one table assembled from its groups, one module each, every name importable from
here: :mod:`gato_ros.param_spec` (the :class:`Param` type, validation, descriptors),
:mod:`gato_ros.param_controller` (``CONTROLLER``), :mod:`gato_ros.param_nodes` (``SIM``,
``REFERENCE``, ``ESTIMATOR``, ``VIEW`` and the node table ``SCHEMAS``),
:mod:`gato_ros.param_plugin` (``PLUGIN``), :mod:`gato_ros.param_defaults` (the robot-specific
and core defaults) and :mod:`gato_ros.param_files` (the generated files, ``main``).
"""
from __future__ import annotations

import sys

from .param_controller import CONTROLLER
from .param_defaults import COLLISION_MECHS, ROBOTS, q_ready as _q_ready  # noqa: F401 - _q_ready: gato_ros.mjcf
from .param_files import (controllers_yaml, generated_files, main, markdown, plugin_parameter_yaml,
                          robot_yaml, ros2_control_xacro)
from .param_nodes import ESTIMATOR, NODE_NAMES, REFERENCE, SCHEMAS, SIM, VIEW
from .param_plugin import PLUGIN, PLUGIN_NAME, PLUGIN_TYPE
from .param_spec import TYPES, Param, by_name, coerce, defaults, descriptor, resolve_config, validate

__all__ = ["Param", "CONTROLLER", "SIM", "REFERENCE", "ESTIMATOR", "VIEW", "SCHEMAS", "NODE_NAMES", "ROBOTS", "by_name",
           "defaults",
           "validate", "coerce", "descriptor", "robot_yaml", "controllers_yaml", "ros2_control_xacro", "markdown",
           "main"]

if __name__ == "__main__":
    sys.exit(main())
