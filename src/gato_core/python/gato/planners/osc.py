"""Batched operational-space (task-space impedance) controller, Khatib's formulation.

Two variants over the same C++ law (``gato._core.OscController``, include/gato/osc.hpp;
docs/osc.md states the law, its parameters and their units):

- :class:`ControllerOperationalSpaceModelFree`: the caller supplies each robot's tool pose,
  tool twist, tool-point Jacobian, mass matrix and gravity torques every step.
- :class:`ControllerOperationalSpace`: the same controller with those computed from the
  robots' URDFs (pinocchio, batched in C++) from ``joint_q`` / ``joint_qd``.

Every port is per robot (first axis: one entry per robot, ordered as the robots are),
except the joint-space ones (``gravity_force``, ``joint_q``, ``joint_qd``, the null-space
targets and gains, ``outputs.joint_f``), which are compact: robot 0's DOFs first, then
robot 1's. Only the Jacobian and the mass matrix are padded to ``max_controlled_dofs``.

Conventions: float64 NumPy arrays on the host; transforms are 7 numbers
(px, py, pz, qx, qy, qz, qw) [m, unit quaternion]; quaternions (x, y, z, w); spatial
vectors are (linear, angular). Quaternions are normalised when read.

Allocate the structs with :meth:`input` / :meth:`output` and write into their arrays in
place (``inputs.tool_pose_world[:] = ...``); fields of disabled or construction-baked
features are None and must stay None. Each :meth:`step` checks every field's type (a
host NumPy float64 array: the controller's only device), shape and layout, and NaN / Inf
in what it reads, raising ValueError that names the field. The C++ step allocates nothing.
"""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np

from ..core.native import core as _core

__all__ = ["ControllerOperationalSpaceModelFree", "ControllerOperationalSpace", "OscInputs", "OscOutputs",
           "IDENTITY_TRANSFORM", "IDENTITY_QUAT"]

#: Identity transform (px, py, pz, qx, qy, qz, qw) and identity quaternion (x, y, z, w).
IDENTITY_TRANSFORM = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)

# The C++ core's field order (gato::OscField, _core.OscController.field_names); the Inputs
# struct has exactly these fields.
FIELDS = ("tool_pose_world", "tool_twist_world", "jacobian_tool_world", "mass_matrix", "gravity_force",
          "desired_tool_pose_operational", "desired_twist_operational", "desired_wrench_world",
          "measured_wrench_world", "operational_frame_pose_world", "motion_stiffness", "motion_damping",
          "wrench_stiffness", "linear_selection_frame_operational", "angular_selection_frame_operational",
          "joint_q", "joint_qd", "joint_q_des_null", "joint_qd_des_null", "null_space_stiffness",
          "null_space_damping")
# Poses and quaternions: allocated at the identity (w = 1), not at zero.
_ROTATIONS = frozenset(("tool_pose_world", "desired_tool_pose_operational", "operational_frame_pose_world",
                        "linear_selection_frame_operational", "angular_selection_frame_operational"))


class OscInputs:
    """Input struct of the OSC, from :meth:`ControllerOperationalSpaceModelFree.input`.

    Fields (None when the feature is disabled or the value is fixed at construction;
    R = controlled_robot_count, T = total_controlled_dofs, D = max_controlled_dofs):

    - tool_pose_world (R, 7): current world pose of the tool frame [m, unitless quaternion]
    - tool_twist_world (R, 6): current tool twist (linear, angular), world coordinates [m/s, rad/s]
    - jacobian_tool_world (R, 6, D): tool-point Jacobian in world coordinates; rows 0-2 map a DOF's
      velocity to the tool point's linear velocity [1 or m], rows 3-5 to its angular velocity
      [1/m or 1] (prismatic or revolute DOF); columns past a robot's DOF count are not read
    - mass_matrix (R, D, D): joint-space mass matrix of the controlled DOFs, [kg] translational,
      [kg·m] mixed, [kg·m²] rotational; rows / columns past a robot's DOF count are not read.
      None unless use_inertia_decoupling
    - gravity_force (T,): gravity generalized forces [N or N·m]. None unless use_gravity_compensation
    - desired_tool_pose_operational (R, 7): desired tool pose relative to the operational frame
    - desired_twist_operational (R, 6): desired tool twist, operational-frame components [m/s, rad/s]
    - desired_wrench_world (R, 6): desired contact wrench (force, moment) the tool applies to the
      environment, world coordinates [N, N·m]. None unless wrench control is enabled
    - measured_wrench_world (R, 6): measured contact wrench, same convention [N, N·m]. None unless
      use_wrench_feedback
    - operational_frame_pose_world (R, 7): world pose of the operational frame. None when fixed at
      construction
    - motion_stiffness, motion_damping (R, 6): Kp [1/s²] / Kd [1/s] with inertia decoupling,
      otherwise [N/m, N·m/rad] / [N·s/m, N·m·s/rad]. None when fixed at construction
    - wrench_stiffness (R, 6): dimensionless wrench feedback gain. None when fixed at construction
      or without use_wrench_feedback
    - linear_selection_frame_operational, angular_selection_frame_operational (R, 4): orientation
      of S_f / S_tau relative to the operational frame. None when fixed at construction or
      without wrench control
    - joint_q (T,) [m or rad], joint_qd (T,) [m/s or rad/s]: current joint state. None unless
      use_null_space_control (always present in the model-based variant)
    - joint_q_des_null (T,) [m or rad], joint_qd_des_null (T,) [m/s or rad/s]: posture targets of
      the null-space task. None unless use_null_space_control
    - null_space_stiffness, null_space_damping (T,): posture gains, [1/s²] / [1/s] with inertia
      decoupling, otherwise [N/m or N·m/rad] / [N·s/m or N·m·s/rad]. None when fixed at
      construction or without use_null_space_control
    """

    __slots__ = FIELDS

    def __init__(self, shapes: dict):
        for name in FIELDS:
            shape = shapes.get(name)
            if shape is None:
                setattr(self, name, None)
                continue
            a = np.zeros(shape)
            if name in _ROTATIONS:
                a[..., -1] = 1.0
            setattr(self, name, a)


class OscOutputs:
    """Output struct: ``joint_f`` (T,) joint torque command [N or N·m], compact over robots."""

    __slots__ = ("joint_f",)

    def __init__(self, total: int):
        self.joint_f = np.zeros(total)


# ------------------------------------------------------------------ argument parsing
def _is_scalar(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _per_robot(value, name: str, R: int, width: int, *, scalar_ok: bool) -> np.ndarray:
    """(R, width) from a scalar (if allowed), one (width,) row for every robot, or (R, width)."""
    if scalar_ok and _is_scalar(value):
        a = np.full((R, width), float(value))
    else:
        try:
            a = np.array(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected numbers, got {value!r}") from None
        if a.shape == (width,):
            a = np.tile(a, (R, 1))
        elif a.shape != (R, width):
            what = "a scalar, " if scalar_ok else ""
            raise ValueError(f"{name}: expected {what}shape ({width},) or ({R}, {width}), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return a


def _per_dof(value, name: str, T: int) -> np.ndarray:
    if _is_scalar(value):
        a = np.full(T, float(value))
    else:
        a = np.array(value, dtype=np.float64)
        if a.shape != (T,):
            raise ValueError(f"{name}: expected a scalar or shape ({T},), got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return a


def _unit_quats(a: np.ndarray, name: str) -> None:
    n = np.linalg.norm(a, axis=-1)
    if np.any(n < 1e-9):
        raise ValueError(f"{name}: quaternion of zero norm")


class ControllerOperationalSpaceModelFree:
    """Task-space (operational-space) impedance controller with caller-supplied kinematics and dynamics.

    Per robot, with the operational frame O (world pose p_o, R_o):

        e   = [R_o^T (p_des - p),  R_o^T log(R_des R^T)]      pose error (operational frame)
        de  = desired_twist - [R_o^T v, R_o^T w]              twist error (operational frame)
        a   = blkdiag(R_o, R_o) (Kp * e + Kd * de)            the spring-damper term (world)
        F   = Lambda Omega_m a   (decoupling)  or  Omega_m a  (no decoupling)
        F  += Omega_w (F_des [feedforward] + Kw * (F_des - F_meas) [feedback, Kw per operational axis])
        tau = J^T F + g [gravity compensation] + N^T tau_0 [null space]

    with Lambda = (J M^-1 J^T)^-1 (partial: the translational and rotational blocks inverted
    separately, no coupling), Omega_m / Omega_w the motion / wrench selection axes as diagonal
    weights in the linear / angular selection frames, tau_0 = M (Kn (q_des - q) + Dn (qd_des - qd))
    (without M when decoupling is off) and N^T = I - J^T Lambda J M^-1 (dynamically consistent,
    full decoupling) or I - J^T (J J^T)^-1 J (Moore-Penrose, otherwise). docs/osc.md has it all.

    Args (keyword only; R robots, T total DOFs):
        controlled_dofs_per_robot: controlled DOF count per robot (each > 0; >= 6 with inertia
            decoupling; > 6 with null-space control). Sets R (len), T (sum), D (max).
        motion_stiffness: Kp, per axis in the operational frame: [1/s²] with inertia decoupling,
            otherwise [N/m] (position) and [N·m/rad] (orientation). A scalar (every axis, every
            robot), 6 values (every robot), (R, 6), or None (read inputs.motion_stiffness each step).
        motion_damping: Kd, same format: [1/s] with decoupling, else [N·s/m] / [N·m·s/rad].
        operational_frame_pose_world: world pose of the operational frame (7,), (R, 7), or None
            (read inputs.operational_frame_pose_world each step). Default identity.
        use_inertia_decoupling: premultiply the spring-damper term by Lambda.
        use_partial_inertia_decoupling: Lambda without translation / rotation coupling (needs
            use_inertia_decoupling).
        use_gravity_compensation: add inputs.gravity_force to the torque.
        use_wrench_feedforward: command inputs.desired_wrench_world directly (through Omega_w).
        use_wrench_feedback: add wrench_stiffness * (desired - measured) (operational-frame gains).
        motion_selection_axes: 6 weights (linear x, y, z in S_f; angular x, y, z in S_tau), or
            (R, 6). Only with wrench control; default all 1.
        wrench_selection_axes: the same for the wrench term; required with wrench control.
        wrench_stiffness: dimensionless feedback gain per operational axis (scalar, 6, (R, 6)) or
            None (read inputs.wrench_stiffness each step). Only with use_wrench_feedback.
        linear_selection_frame_operational / angular_selection_frame_operational: orientation of
            S_f / S_tau relative to the operational frame, a quaternion (4,), (R, 4), or None (read
            from the inputs each step). Must stay identity without wrench control.
        use_null_space_control: secondary joint-space posture task in the null space of the task.
        null_space_stiffness / null_space_damping: Kn [1/s²] / Dn [1/s] with decoupling, else
            [N/m or N·m/rad] / [N·s/m or N·m·s/rad]: scalar, (T,), or None (read from the inputs).
        device: None or "cpu" (the C++ core runs on the host).
        requires_grad: must be False (no gradients through the C++ core).

    Raises ValueError naming the argument for every inconsistent or malformed setting.
    """

    Inputs = OscInputs
    Outputs = OscOutputs

    def __init__(self, *, controlled_dofs_per_robot, motion_stiffness, motion_damping,
                 operational_frame_pose_world=IDENTITY_TRANSFORM, use_inertia_decoupling=True,
                 use_partial_inertia_decoupling=False, use_gravity_compensation=True,
                 use_wrench_feedforward=False, use_wrench_feedback=False, motion_selection_axes=None,
                 wrench_selection_axes=None, wrench_stiffness=None,
                 linear_selection_frame_operational=IDENTITY_QUAT,
                 angular_selection_frame_operational=IDENTITY_QUAT, use_null_space_control=False,
                 null_space_stiffness=None, null_space_damping=None, device=None, requires_grad=False):
        self._setup(controlled_dofs_per_robot, locals(), urdfs=None, tool_frames=None)

    # ------------------------------------------------------------------ construction
    def _setup(self, dofs, a: dict, urdfs, tool_frames) -> None:
        if a["device"] not in (None, "cpu"):
            raise ValueError(f"device: only the host ('cpu' or None) is supported, got {a['device']!r}")
        if a["requires_grad"]:
            raise ValueError("requires_grad: the C++ core computes no gradients; pass False")
        for k in ("use_inertia_decoupling", "use_partial_inertia_decoupling", "use_gravity_compensation",
                  "use_wrench_feedforward", "use_wrench_feedback", "use_null_space_control"):
            if not isinstance(a[k], (bool, np.bool_)):
                raise ValueError(f"{k}: expected a bool, got {a[k]!r}")
        try:
            d = np.asarray(dofs)
        except Exception:
            d = np.array([])
        if d.ndim != 1 or d.size == 0 or not np.issubdtype(d.dtype, np.integer):
            raise ValueError(f"controlled_dofs_per_robot: expected a non-empty 1-D sequence of ints, got {dofs!r}")
        if np.any(d <= 0):
            raise ValueError(f"controlled_dofs_per_robot: every entry must be positive, got {d.tolist()}")
        dec, partial = bool(a["use_inertia_decoupling"]), bool(a["use_partial_inertia_decoupling"])
        ff, fb, ns = bool(a["use_wrench_feedforward"]), bool(a["use_wrench_feedback"]), bool(a["use_null_space_control"])
        wrench = ff or fb
        if dec and np.any(d < 6):
            raise ValueError(f"controlled_dofs_per_robot: {d.tolist()}: use_inertia_decoupling needs every robot "
                             "to have at least 6 DOFs (Lambda is invertible only for a Jacobian spanning 6 axes)")
        if ns and np.any(d <= 6):
            raise ValueError(f"controlled_dofs_per_robot: {d.tolist()}: use_null_space_control needs every robot "
                             "to have more than 6 DOFs")
        if partial and not dec:
            raise ValueError("use_partial_inertia_decoupling: only meaningful with use_inertia_decoupling=True")
        R, T = int(d.size), int(d.sum())
        cfg = dict(dofs=d.astype(int).tolist(), inertia_decoupling=dec, partial_decoupling=partial,
                   gravity_compensation=bool(a["use_gravity_compensation"]), wrench_feedforward=ff,
                   wrench_feedback=fb, null_space=ns)
        for arg, key in (("motion_stiffness", "motion_stiffness"), ("motion_damping", "motion_damping")):
            if a[arg] is not None:
                cfg[key] = _per_robot(a[arg], arg, R, 6, scalar_ok=True).ravel().tolist()
        if a["operational_frame_pose_world"] is not None:
            op = _per_robot(a["operational_frame_pose_world"], "operational_frame_pose_world", R, 7, scalar_ok=False)
            _unit_quats(op[:, 3:], "operational_frame_pose_world")
            cfg["operational_pose"] = op.ravel().tolist()
        lin, ang = a["linear_selection_frame_operational"], a["angular_selection_frame_operational"]
        if not wrench:
            for k in ("motion_selection_axes", "wrench_selection_axes", "wrench_stiffness"):
                if a[k] is not None:
                    raise ValueError(f"{k}: only used with wrench control (use_wrench_feedforward / "
                                     "use_wrench_feedback); leave it unset")
            for k, v in (("linear_selection_frame_operational", lin), ("angular_selection_frame_operational", ang)):
                if v is None or not np.array_equal(np.asarray(v, dtype=np.float64), IDENTITY_QUAT):
                    raise ValueError(f"{k}: must stay at the identity default without wrench control")
        else:
            if a["wrench_selection_axes"] is None:
                raise ValueError("wrench_selection_axes: required when wrench control is enabled")
            cfg["wrench_axes"] = _per_robot(a["wrench_selection_axes"], "wrench_selection_axes", R, 6,
                                            scalar_ok=False).ravel().tolist()
            if a["motion_selection_axes"] is not None:
                cfg["motion_axes"] = _per_robot(a["motion_selection_axes"], "motion_selection_axes", R, 6,
                                                scalar_ok=False).ravel().tolist()
            if a["wrench_stiffness"] is not None:
                if not fb:
                    raise ValueError("wrench_stiffness: only used with use_wrench_feedback=True")
                cfg["wrench_stiffness"] = _per_robot(a["wrench_stiffness"], "wrench_stiffness", R, 6,
                                                     scalar_ok=True).ravel().tolist()
            for k, v, key in (("linear_selection_frame_operational", lin, "linear_selection"),
                              ("angular_selection_frame_operational", ang, "angular_selection")):
                if v is not None:
                    qs = _per_robot(v, k, R, 4, scalar_ok=False)
                    _unit_quats(qs, k)
                    cfg[key] = qs.ravel().tolist()
        for k in ("null_space_stiffness", "null_space_damping"):
            if a[k] is not None:
                if not ns:
                    raise ValueError(f"{k}: only used with use_null_space_control=True")
                cfg[k] = _per_dof(a[k], k, T).tolist()
        self._core = _core.OscController(cfg, urdfs, tool_frames)
        self._R, self._T, self._D = R, T, int(d.max())
        self._dofs = d.astype(np.int32)
        self._model_based = urdfs is not None
        self._shapes = self._field_shapes(cfg)
        self._checks = tuple((name, self._shapes.get(name)) for name in FIELDS)

    def _field_shapes(self, cfg: dict) -> dict:
        R, T, D = self._R, self._T, self._D
        wrench = cfg["wrench_feedforward"] or cfg["wrench_feedback"]
        s = {"tool_pose_world": (R, 7), "tool_twist_world": (R, 6), "jacobian_tool_world": (R, 6, D),
             "desired_tool_pose_operational": (R, 7), "desired_twist_operational": (R, 6)}
        if cfg["inertia_decoupling"]:
            s["mass_matrix"] = (R, D, D)
        if cfg["gravity_compensation"]:
            s["gravity_force"] = (T,)
        if wrench:
            s["desired_wrench_world"] = (R, 6)
            for k, key in (("linear_selection_frame_operational", "linear_selection"),
                           ("angular_selection_frame_operational", "angular_selection")):
                if key not in cfg:
                    s[k] = (R, 4)
        if cfg["wrench_feedback"]:
            s["measured_wrench_world"] = (R, 6)
            if "wrench_stiffness" not in cfg:
                s["wrench_stiffness"] = (R, 6)
        if "operational_pose" not in cfg:
            s["operational_frame_pose_world"] = (R, 7)
        for k in ("motion_stiffness", "motion_damping"):
            if k not in cfg:
                s[k] = (R, 6)
        if cfg["null_space"]:
            for k in ("joint_q", "joint_qd", "joint_q_des_null", "joint_qd_des_null"):
                s[k] = (T,)
            for k in ("null_space_stiffness", "null_space_damping"):
                if k not in cfg:
                    s[k] = (T,)
        if self._model_based:
            for k in ("tool_pose_world", "tool_twist_world", "jacobian_tool_world", "mass_matrix", "gravity_force"):
                s.pop(k, None)
            s["joint_q"] = s["joint_qd"] = (T,)
        return s

    # ------------------------------------------------------------------ API
    @property
    def controlled_robot_count(self) -> int:
        """Number of robots, the length of every per-robot port."""
        return self._R

    @property
    def max_controlled_dofs(self) -> int:
        """Largest DOF count over the robots: the padded width of the Jacobian and mass matrix."""
        return self._D

    @property
    def total_controlled_dofs(self) -> int:
        """Sum of the DOF counts: the length of outputs.joint_f and the compact joint-space ports."""
        return self._T

    @property
    def controlled_dofs_per_robot(self) -> np.ndarray:
        return self._dofs.copy()

    def input(self) -> OscInputs:
        """A fresh :class:`OscInputs`: zero arrays (identity for poses and quaternions), None for
        fields of disabled or construction-fixed features."""
        return OscInputs(self._shapes)

    def output(self) -> OscOutputs:
        """A fresh :class:`OscOutputs` with a compact zero torque array (T,)."""
        return OscOutputs(self._T)

    def is_graphable(self) -> bool:
        """False: there is no graph capture on the host; every step validates its inputs."""
        return False

    def step(self, *, inputs: OscInputs, outputs: OscOutputs, dt=None) -> None:
        """One operational-space control step: writes outputs.joint_f [N or N·m] in place.

        ``dt`` is unused (API compatibility). Raises ValueError naming the field for a field that
        is not a host float64 NumPy array of its shape, a field that must stay None and does
        not, NaN / Inf in a field read this step, a zero quaternion, a mass matrix that is not
        positive definite or a singular task-space matrix (kinematic singularity).
        """
        if not isinstance(inputs, OscInputs):
            raise ValueError(f"inputs: expected the struct from input(), got {type(inputs).__name__}")
        if not isinstance(outputs, OscOutputs):
            raise ValueError(f"outputs: expected the struct from output(), got {type(outputs).__name__}")
        vals = []
        for name, shape in self._checks:
            v = getattr(inputs, name)
            if shape is None:
                if v is not None:
                    raise ValueError(f"{name}: must stay None (the feature is disabled, fixed at construction "
                                     "or computed from the model)")
                vals.append(None)
                continue
            if type(v) is not np.ndarray:
                raise ValueError(f"{name}: expected a host numpy.ndarray (device 'cpu'), got {type(v).__name__}")
            if v.shape != shape:
                raise ValueError(f"{name}: expected shape {shape}, got {v.shape}")
            if v.dtype != np.float64 or not v.flags.c_contiguous:
                raise ValueError(f"{name}: expected a C-contiguous float64 array, got {v.dtype}"
                                 f"{'' if v.flags.c_contiguous else ' (not C-contiguous)'}")
            vals.append(v)
        jf = outputs.joint_f
        if type(jf) is not np.ndarray or jf.shape != (self._T,) or jf.dtype != np.float64 \
                or not jf.flags.c_contiguous or not jf.flags.writeable:
            raise ValueError(f"joint_f: expected a writable C-contiguous float64 numpy array of shape ({self._T},)")
        self._core.step(tuple(vals), jf)


class ControllerOperationalSpace(ControllerOperationalSpaceModelFree):
    """The operational-space controller with its model computed from URDFs (pinocchio, in C++).

    Each step computes every robot's tool pose, world twist, world tool Jacobian, mass matrix
    (with inertia decoupling) and gravity torques (with gravity compensation) from
    ``inputs.joint_q`` [rad or m] / ``inputs.joint_qd`` [rad/s or m/s] (compact, always present),
    then applies the law of :class:`ControllerOperationalSpaceModelFree`, whose other arguments
    this takes unchanged. The model-input fields of the struct are None.

    Args:
        robots: one entry per robot: a registered robot name (``gato.robot_info``) or a URDF path
            (fixed base, 1-DoF joints; every joint is controlled).
        tool_frames: one URDF frame per robot, or None: the registered robots' end-effector frame
            (required for a URDF path).
    """

    def __init__(self, *, robots: Sequence[str], tool_frames: Sequence[str] | None = None,
                 motion_stiffness, motion_damping, operational_frame_pose_world=IDENTITY_TRANSFORM,
                 use_inertia_decoupling=True, use_partial_inertia_decoupling=False, use_gravity_compensation=True,
                 use_wrench_feedforward=False, use_wrench_feedback=False, motion_selection_axes=None,
                 wrench_selection_axes=None, wrench_stiffness=None,
                 linear_selection_frame_operational=IDENTITY_QUAT,
                 angular_selection_frame_operational=IDENTITY_QUAT, use_null_space_control=False,
                 null_space_stiffness=None, null_space_damping=None, device=None, requires_grad=False):
        from ..core.bsqp import robot_info, robot_urdf
        from pathlib import Path

        args = dict(locals())
        if isinstance(robots, str) or not len(robots):
            raise ValueError(f"robots: expected a non-empty list of robot names or URDF paths, got {robots!r}")
        if tool_frames is not None and (isinstance(tool_frames, str) or len(tool_frames) != len(robots)):
            raise ValueError(f"tool_frames: expected one frame per robot ({len(robots)}), got {tool_frames!r}")
        urdfs, frames, dofs = [], [], []
        for i, r in enumerate(robots):
            info = robot_info(str(r))
            if info:
                if info.get("floating_base"):
                    raise ValueError(f"robots: {r!r} has a floating base; the OSC controls fixed-base arms")
                urdfs.append(str(robot_urdf(str(r))))
                frames.append(tool_frames[i] if tool_frames is not None else info["ee_frame"])
            elif Path(str(r)).is_file():
                if tool_frames is None:
                    raise ValueError(f"tool_frames: required for the URDF path {r!r}")
                urdfs.append(str(Path(str(r)).resolve()))
                frames.append(tool_frames[i])
            else:
                raise ValueError(f"robots: {r!r} is neither a registered robot nor a URDF file")
        import pinocchio as pin

        nv_of = {}  # DOF counts for the argument checks (one parse per URDF); the C++ model re-reads them
        for path in urdfs:
            if path not in nv_of:
                nv_of[path] = int(pin.buildModelFromUrdf(path).nv)
            dofs.append(nv_of[path])
        self.robots = list(map(str, robots))
        self.tool_frames = frames
        self._setup(dofs, args, urdfs=urdfs, tool_frames=frames)

    def kinematics(self, joint_q, joint_qd) -> dict:
        """The model inputs a step computes, as fresh arrays: tool_pose_world (R, 7),
        tool_twist_world (R, 6), jacobian_tool_world (R, 6, D), mass_matrix (R, D, D) and
        gravity_force (T,), from joint_q / joint_qd (T,)."""
        return dict(self._core.kinematics(np.ascontiguousarray(joint_q, dtype=np.float64),
                                          np.ascontiguousarray(joint_qd, dtype=np.float64)))
