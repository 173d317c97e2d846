"""Planning scenes and tasks for the sampling planner.

Scenes are ``mujoco.MjSpec`` objects (so cost terms can add the sensors they read):

- :func:`robot_spec`: a bundled robot through the same URDF -> MjSpec path as
  :class:`gato.worlds.MuJoCoWorld` (mesh resolution, contact masks, zeroed passive terms), plus
  one joint-space actuator per joint. "position": a PD servo (kp, kv) whose target is the
  command [rad], with gravity compensation routed through the actuator (``actgravcomp``) and
  the actuator force clamped to the URDF effort limit, i.e. a joint impedance controller of a
  torque-controlled arm; "motor": the command is the joint torque [N*m], clamped to the effort
  limit. Position commands are bounded to the URDF position limits less ``q_margin``;
- :func:`mjcf_spec`: any MJCF file;
- :func:`box_push_spec`: the iiwa14, a table and a free box (the contact task);
- :func:`rollout_start` / :func:`hold_targets`: start states and seeded commands on which the
  rollout engines (``mujoco.rollout``, ``mujoco_warp``) are compared (tests and benchmarks).

Tasks, as SimMPC configs and reference commands: :func:`fig8_task`, :func:`pickplace_task`,
:func:`box_push_task`. Units: m, rad, s, N*m; the EE is the URDF's end-effector frame (the
iiwa14's ``EE`` fixed joint, whose child body is ``contact``).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..core.references import min_jerk
from .config import SimMPCConfig, SimMPCStage
from .terms import SENSOR_PREFIX, ControlTask, SensorTask, StateTask

__all__ = ["robot_spec", "mjcf_spec", "box_push_spec", "ee_body", "ee_sensor", "add_frame_sensors",
           "fig8_task", "pickplace_task", "box_push_task", "box_push_scenarios", "IIWA14_GAINS", "BOX", "TOOL_GEOM",
           "HAND_GEOMS",
           "rollout_start", "hold_targets", "ROLLOUT_SCENES"]

#: iiwa14 joint servo gains (kp N*m/rad, kv N*m*s/rad): stiff proximal joints, soft wrist, so the
#: PD loop stays stable at a 2-10 ms step with the implicitfast integrator.
IIWA14_GAINS = dict(kp=[1500.0, 1500.0, 800.0, 800.0, 300.0, 200.0, 100.0],
                    kv=[120.0, 120.0, 60.0, 60.0, 20.0, 12.0, 6.0])

#: The box of the pushing task: half size [m], mass [kg], sliding friction.
BOX = dict(half=0.04, mass=0.4, friction=0.4)


def _urdf_effort_and_range(urdf: Path) -> dict:
    import xml.etree.ElementTree as ET

    out = {}
    for j in ET.parse(str(urdf)).getroot().findall("joint"):
        lim = j.find("limit")
        if j.get("type") in ("revolute", "prismatic", "continuous") and lim is not None:
            out[j.get("name")] = (float(lim.get("effort", "inf")), float(lim.get("lower", "-inf")),
                                  float(lim.get("upper", "inf")))
    return out


def ee_body(plant: str) -> str:
    """The MuJoCo body at the plant's end-effector frame (the EE fixed joint's child link)."""
    import xml.etree.ElementTree as ET

    from ..core.bsqp import robot_info, robot_urdf

    frame = robot_info(plant)["ee_frame"]
    for j in ET.parse(str(robot_urdf(plant))).getroot().findall("joint"):
        if j.get("name") == frame:
            return j.find("child").get("link")
    return frame  # the frame is a link name already


def robot_spec(plant: str = "iiwa14", *, timestep: float = 0.005, actuators: str = "position",
               kp: Optional[Sequence[float]] = None, kv: Optional[Sequence[float]] = None,
               table: Optional[dict] = None, integrator: str = "implicitfast", q_margin: float = 0.05):
    """MjSpec of a registered robot with joint actuators (see the module docstring).

    table: None (contacts off) or gato.worlds' plane dict ({"z": top height [m], ...}).
    kp / kv: per-joint servo gains of "position" actuators (defaults: IIWA14_GAINS for the iiwa14,
    else kp = 5 * effort, kv = kp / 15).
    """
    from ..core.bsqp import robot_urdf
    from ..robots.mjcf import _build_spec, _normalize_plane
    import mujoco

    if actuators not in ("position", "motor"):
        raise ValueError(f"actuators: expected 'position' or 'motor', got {actuators!r}")
    urdf = Path(robot_urdf(plant))
    spec = _build_spec(urdf, _normalize_plane(table), timestep, False, integrator)
    limits = _urdf_effort_and_range(urdf)
    joints = [j for j in spec.joints if j.name in limits]
    n = len(joints)
    if kp is None:
        kp = IIWA14_GAINS["kp"] if plant == "iiwa14" else [5.0 * limits[j.name][0] for j in joints]
    if kv is None:
        kv = IIWA14_GAINS["kv"] if plant == "iiwa14" else [k / 15.0 for k in kp]
    kp, kv = np.broadcast_to(np.asarray(kp, float), (n,)), np.broadcast_to(np.asarray(kv, float), (n,))
    for i, j in enumerate(joints):
        effort, lo, hi = limits[j.name]
        j.actfrclimited = mujoco.mjtLimited.mjLIMITED_TRUE
        j.actfrcrange = [-effort, effort]
        a = spec.add_actuator(name=j.name, target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        if actuators == "position":
            j.actgravcomp = True
            a.set_to_position(kp=float(kp[i]), kv=float(kv[i]))
            a.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            a.ctrlrange = [lo + q_margin, hi - q_margin]
        else:
            a.set_to_motor()
            a.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
            a.ctrlrange = [-effort, effort]
    if actuators == "position":
        for b in spec.bodies:
            if b.name != "world":
                b.gravcomp = 1.0
    return spec


def mjcf_spec(path) -> "object":
    """MjSpec of an MJCF file (ValueError if it does not exist or does not parse)."""
    import mujoco

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path: MJCF file not found: {p}")
    try:
        return mujoco.MjSpec.from_file(str(p))
    except Exception as e:  # noqa: BLE001 - MuJoCo raises several types
        raise ValueError(f"path: {p} is not a valid MJCF scene: {e}") from None


def add_frame_sensors(spec, body: str) -> tuple:
    """Names of framepos / framequat sensors of ``body`` (added to spec when missing)."""
    from .terms import _ensure_frame_sensor

    return _ensure_frame_sensor(spec, body, "pos"), _ensure_frame_sensor(spec, body, "quat")


def ee_sensor(plant: str = "iiwa14") -> str:
    """Name of the EE position sensor the task terms use (``sampling/<ee body>/pos``)."""
    return f"{SENSOR_PREFIX}{ee_body(plant)}/pos"


def box_push_spec(*, timestep: float = 0.005, table_z: float = 0.15, box_xy=(0.6, 0.0)):
    """The iiwa14 with a table (top at table_z, 0.8 x 0.8 m around (0.6, 0)) and a free box (BOX)
    at box_xy on it; the box collides with the robot and the table."""
    import mujoco

    table = dict(z=table_z, pos_xy=(0.6, 0.0), size_xy=(0.4, 0.4), friction=BOX["friction"])
    spec = robot_spec("iiwa14", timestep=timestep, table=table)
    h = BOX["half"]
    body = spec.worldbody.add_body(name="box", pos=[box_xy[0], box_xy[1], table_z + h])
    # the inertia of a solid cube, explicit: the URDF loader may set inertiafromgeom false
    body.explicitinertial = True
    body.mass = BOX["mass"]
    body.inertia = np.full(3, BOX["mass"] * 2 * h * h / 3)
    body.ipos, body.iquat = [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
    body.add_freejoint(name="box")
    body.add_geom(name="box", type=mujoco.mjtGeom.mjGEOM_BOX, size=[h, h, h], mass=BOX["mass"],
                  contype=3, conaffinity=3, friction=[BOX["friction"], 0.005, 0.0001])
    spec.add_sensor(name="box_pos", type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_BODY,
                    objname="box")
    tool = spec.body(ee_body("iiwa14"))
    if tool is not None and len(tool.geoms) and not tool.geoms[0].name:
        tool.geoms[0].name = TOOL_GEOM  # named, so StateTask's contact terms can pair it with the box
    for link, name in zip(("L7", "L6"), HAND_GEOMS[1:]):  # the wrist links' collision hulls, named likewise
        b = spec.body(link)
        if b is not None and len(b.geoms) and not b.geoms[0].name:
            b.geoms[0].name = name
    return spec


#: The name box_push_spec gives the iiwa14's sphere tool geom (StateTask contact terms use it).
TOOL_GEOM = "tool"
#: The geoms of the iiwa14's hand in box_push_spec: the sphere tool and the collision hulls of the
#: last two links (L7, L6). The hulls reach 5.5 cm from the tool's axis down to 8 mm below the
#: tool's centre, the sphere 3.3 cm: at the box's height the hand touches the box before the
#: sphere can (the sphere then stays 13-17 mm off the face).
HAND_GEOMS = (TOOL_GEOM, "hand_L7", "hand_L6")

#: Scenes of :func:`rollout_start`.
ROLLOUT_SCENES = ("robot", "box")


def rollout_start(scene: str = "robot"):
    """(MjModel, MjData after mj_forward) of an iiwa14 start state for comparing rollout engines.

    "robot": the arm alone (position servos, 5 ms step) at Q_READY; "box": :func:`box_push_spec`
    with the arm above the box, the box resting on the table (in contact from the first step).
    Both carry the EE framepos / framequat sensors (:func:`add_frame_sensors`).
    """
    import mujoco

    from ..sim.scenarios import Q_READY

    if scene not in ROLLOUT_SCENES:
        raise ValueError(f"scene: expected one of {ROLLOUT_SCENES}, got {scene!r}")
    spec = robot_spec("iiwa14") if scene == "robot" else box_push_spec()
    add_frame_sensors(spec, ee_body("iiwa14"))
    m = spec.compile()
    d = mujoco.MjData(m)
    if scene == "robot":
        d.qpos[:] = Q_READY["iiwa14"]
    else:
        d.qpos[:7] = [0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0]
        d.qpos[7:11] = [0.6, 0.0, 0.19, 1.0]  # box centre: table top 0.15 + half size 0.04
    mujoco.mj_forward(m, d)
    return m, d


def hold_targets(model, data, n: int, T: int, amplitude: float, *, hold: int = 25, seed: int = 0) -> np.ndarray:
    """(n, T, nu) joint targets [rad]: the start pose data.qpos[:nu] plus seeded uniform offsets in
    [-amplitude, amplitude], each held ``hold`` steps; rounded to float32 values so a float32
    engine (mujoco_warp) and a float64 one (mujoco.rollout) see the same commands."""
    for name, v in (("n", n), ("T", T), ("hold", hold)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    nu = model.nu
    rng = np.random.default_rng(seed)
    offsets = np.repeat(rng.uniform(-amplitude, amplitude, (n, -(-T // hold), nu)), hold, axis=1)[:, :T]
    return (data.qpos[None, None, :nu] + offsets).astype(np.float32).astype(np.float64)


# ---------------------------------------------------------------------------- tasks
def _config(H: int, num_samples: int, iterations: int, ctrl_std: float, timestep: float, seed: int):
    """The scenes' SimMPCConfig: H-step horizon, nodes every H // 5 steps, a coarse-then-fine stage."""
    return SimMPCConfig(num_samples=num_samples, horizon_steps=H, node_steps=max(1, H // 5),
                        ctrl_steps=max(1, H // 25), max_iterations=iterations, ctrl_std=ctrl_std,
                        stages=[SimMPCStage(iterations, [(0.25, None), (1.0, 4 * timestep)])],
                        terminal_scale=10.0, seed=seed)


def _ref_padded(rows: np.ndarray, length: int) -> np.ndarray:
    return rows if len(rows) >= length else np.vstack([rows, np.repeat(rows[-1:], length - len(rows), 0)])


def fig8_task(scenario: dict, *, timestep: float = 0.005, periods: float = 1.0, horizon_s: float = 0.5,
              num_samples: int = 64, iterations: int = 2, ee_weight: float = 2000.0, ctrl_std: float = 0.01,
              ctrl_weight: float = 1.0, seed: int = 0):
    """(config, ctrl_ref, ee_ref, num_steps) of a gato.tasks figure-8 scenario on the iiwa14.

    ctrl_ref (T, 7) rad: the differential-IK joint path of the figure-8 (gato.tasks.ik_track, from
    the scenario's q0), which the plans offset; the cost: ee_weight * |EE - path|^2 per step
    (SensorTask on the EE position sensor) plus a small ControlTask toward ctrl_ref. ee_ref (T, 3) m
    is the path at every sim step; num_steps the steps of ``periods`` periods.
    """
    import pinocchio as pin

    from ..sim import scenarios as tasks
    from ..core.bsqp import robot_urdf

    model = pin.buildModelFromUrdf(str(robot_urdf("iiwa14")))
    p = dict(scenario["params"])
    period = float(p["period"])
    num_steps = int(round(periods * period / timestep))
    H = int(round(horizon_s / timestep))
    xyz = tasks.fig8_path({**p, "cycles": periods + (H + 1) * timestep / period + 1e-9}, timestep)
    qs, _ = tasks.ik_track(model, scenario["ee_frame"], scenario["q0"], xyz)
    config = _config(H, num_samples, iterations, ctrl_std, timestep, seed)
    config = config.add(SensorTask(xyz, {ee_sensor(): ee_weight}, name="ee"))
    config = config.add(ControlTask(ctrl_weight, qs, name="ctrl"))
    return config, qs, xyz, num_steps


def pickplace_task(scenario: dict, *, timestep: float = 0.005, goal_s: float = 2.0, horizon_s: float = 0.5,
                   num_samples: int = 64, iterations: int = 2, ee_weight: float = 2000.0, ctrl_std: float = 0.01,
                   ctrl_weight: float = 1.0, seed: int = 0):
    """(config, ctrl_ref, ee_ref, num_steps) of a gato.tasks pick-and-place scenario on the iiwa14.

    Each goal holds for goal_s seconds; ctrl_ref (T, 7) rad steps to the scenario's IK solution of
    each goal (q_goals), ee_ref (T, 3) m to the goal; cost ee_weight * |EE - goal|^2 per step.
    """
    steps_goal = int(round(goal_s / timestep))
    H = int(round(horizon_s / timestep))
    goals, q_goals = np.asarray(scenario["goals"]), np.asarray(scenario["q_goals"])
    ee_ref = _ref_padded(np.repeat(goals, steps_goal, axis=0), len(goals) * steps_goal + H + 1)
    qs = _ref_padded(np.repeat(q_goals, steps_goal, axis=0), len(goals) * steps_goal + H + 1)
    config = _config(H, num_samples, iterations, ctrl_std, timestep, seed)
    config = config.add(SensorTask(ee_ref, {ee_sensor(): ee_weight}, name="ee"))
    config = config.add(ControlTask(ctrl_weight, qs, name="ctrl"))
    return config, qs, ee_ref, len(goals) * steps_goal


def box_push_scenarios(n: int, *, seed: int) -> list:
    """n seeded pushes: box start (x, y) uniform in [0.50, 0.62] x [-0.12, 0.12] m, goal 0.10-0.15 m
    away in a direction within 60 deg of +y or -y (sideways pushes keep the arm clear of the box)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        start = np.array([rng.uniform(0.50, 0.62), rng.uniform(-0.12, 0.12)])
        side = 1.0 if start[1] < 0 else -1.0
        ang = side * math.pi / 2 + rng.uniform(-math.pi / 3, math.pi / 3)
        dist = rng.uniform(0.10, 0.15)
        goal = start + dist * np.array([math.cos(ang), math.sin(ang)])
        out.append(dict(id=f"iiwa14/boxpush/{seed}/{i}", start=start, goal=goal))
    return out


def _min_jerk(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """(max(n, 2) - 1, 3) points of a minimum-jerk move from a (excluded) to b (gato.references)."""
    s = min_jerk(np.linspace(0.0, 1.0, max(n, 2))[1:])
    return a + s[:, None] * (b - a)


#: Phases of the pushing reference [s]: over the box, down behind it, the push, hold.
PUSH_PHASES = dict(approach=1.0, descend=0.7, push=2.0, hold=1.3)


def box_push_task(scenario: dict, *, timestep: float = 0.005, table_z: float = 0.15, horizon_s: float = 0.5,
                  num_samples: int = 64, iterations: int = 2, box_weight: float = 3000.0, ee_weight: float = 300.0,
                  ctrl_std: float = 0.03, seed: int = 0, guide: str = "path", standoff: float = 0.03,
                  contact_weight: float = 0.0, penetration_scale: float = 0.0, push_s: Optional[float] = None,
                  contact_until: str = "end", contact_target: str = "box", face_radius: float = 0.01,
                  contact_geoms: str = "tool"):
    """(spec, config, ctrl_ref, q0, num_steps) of a box push (a :func:`box_push_scenarios` entry).

    The EE reference: from the ready pose over the box's far side (0.12 m above), down behind it
    (at the box's centre height, the sphere tool 3 cm off the face), then a straight push that
    would leave the box at the goal, then hold (PUSH_PHASES). ctrl_ref (T, 7) rad is its
    differential-IK joint path (tool pointing down as at Q_READY), which the plans offset. The
    costs: box_weight * |box_xy - goal|^2 (SensorTask on the box position) from the push phase on,
    ee_weight * |EE - reference|^2, and a small ControlTask toward ctrl_ref. What the planner adds
    over the scripted path: the box's contact dynamics (slip, rotation, a push that falls short).

    ``standoff`` [m]: the tool's gap to the box face where the descent ends. ``guide="hold"``
    scripts no push: from the push phase on the EE reference (and ctrl_ref) hold there, and the
    EE cost is off, so only the box cost asks for the push, and it says nothing until the tool
    touches the box (with a standoff of several cm the draws seldom do). ``contact_weight`` > 0 adds a
    StateTask named "contacts" with RoboKit's contact terms (cost only, zero pose weights): the
    tool's contact with ``contact_target`` wanted (weight per metre of gap) from the push phase on,
    to the end of the run (``contact_until="end"``) or in the push phase only (``"push"``: wanted
    through the hold, the contact pulls the tool back onto a box already at its goal and can knock
    it off again), and, with ``penetration_scale``, the tool kept off the table (margin 0).
    ``contact_target``: "box" (a contact anywhere on it, its top or a corner too) or "face": a
    massless sphere of ``face_radius`` [m] that collides with nothing (geom "push_face", added to
    the box) on the centre of the face the push starts from (the face away from the goal), so the
    wanted contact says where to push from. ``contact_geoms``: the contact wanted of the sphere tool
    ("tool") or of any geom of the hand ("hand": HAND_GEOMS, the gap the smallest of theirs).
    ``push_s`` [s]: the push phase's length (None: PUSH_PHASES').
    """
    if guide not in ("path", "hold"):
        raise ValueError(f"guide: expected 'path' or 'hold', got {guide!r}")
    if contact_until not in ("end", "push"):
        raise ValueError(f"contact_until: expected 'end' or 'push', got {contact_until!r}")
    if contact_target not in ("box", "face"):
        raise ValueError(f"contact_target: expected 'box' or 'face', got {contact_target!r}")
    if contact_geoms not in ("tool", "hand"):
        raise ValueError(f"contact_geoms: expected 'tool' or 'hand', got {contact_geoms!r}")
    if not (isinstance(face_radius, (int, float)) and not isinstance(face_radius, bool) and face_radius > 0):
        raise ValueError(f"face_radius: expected a number > 0 [m], got {face_radius!r}")
    import pinocchio as pin

    from ..sim import scenarios as tasks
    from ..core.bsqp import robot_urdf

    start, goal = np.asarray(scenario["start"], float), np.asarray(scenario["goal"], float)
    spec = box_push_spec(timestep=timestep, table_z=table_z, box_xy=start)
    model = pin.buildModelFromUrdf(str(robot_urdf("iiwa14")))
    data = model.createData()
    q0 = tasks.Q_READY["iiwa14"].copy()
    fid = model.getFrameId("EE")
    pin.forwardKinematics(model, data, q0)
    ee0 = pin.updateFramePlacement(model, data, fid).translation.copy()
    h, r = BOX["half"], 0.033
    zc = table_z + h
    u = (goal - start) / np.linalg.norm(goal - start)
    pre = np.array([*(start - u * (h + r + standoff)), zc])
    end = np.array([*(goal - u * (h + r)), zc])
    phases = dict(PUSH_PHASES, **({} if push_s is None else {"push": float(push_s)}))
    steps = {k: int(round(v / timestep)) for k, v in phases.items()}
    above = pre + [0.0, 0.0, 0.12]
    push = _min_jerk(pre, end, steps["push"]) if guide == "path" else np.repeat(pre[None], steps["push"] - 1, 0)
    path = np.vstack([ee0[None], _min_jerk(ee0, above, steps["approach"]), _min_jerk(above, pre, steps["descend"]),
                      push, np.repeat((end if guide == "path" else pre)[None], steps["hold"], 0)])
    H = int(round(horizon_s / timestep))
    num_steps = len(path) - 1
    path = _ref_padded(path, num_steps + H + 2)
    qs, _ = tasks.ik_track(model, "EE", q0, path)
    push_from = steps["approach"] + steps["descend"]
    box_ref = np.tile([*goal, zc], (len(path), 1))
    box_w = np.zeros(len(path))
    box_w[push_from:] = 1.0
    config = _config(H, num_samples, iterations, ctrl_std, timestep, seed)
    config = config.add(_GatedSensorTask(box_ref, {"box_pos": [box_weight, box_weight, 0.0]}, box_w, name="box"))
    if guide == "path":
        config = config.add(SensorTask(path, {ee_sensor(): ee_weight}, name="ee"))
    else:
        config = config.add(_GatedSensorTask(path, {ee_sensor(): ee_weight}, 1.0 - box_w, name="ee"))
    config = config.add(ControlTask(1.0, qs, name="ctrl"))
    if contact_weight > 0:
        target = "box" if contact_target == "box" else _add_push_face(spec, u, face_radius)
        wanted = box_w.copy()
        if contact_until == "push":
            wanted[push_from + steps["push"]:] = 0.0
        m0 = spec.compile()
        config = config.add(StateTask(np.tile(m0.qpos0, (len(path), 1)), np.zeros((len(path), m0.nv)), np.zeros(m0.nv),
                                      0.0, (TOOL_GEOM, "table") if penetration_scale > 0 else None, penetration_scale,
                                      0.0, [(TOOL_GEOM if contact_geoms == "tool" else list(HAND_GEOMS), target,
                                             wanted, contact_weight)], name="contacts"))
    return spec, config, qs, q0, num_steps


def _add_push_face(spec, u: np.ndarray, radius: float) -> str:
    """Add to the box a massless sphere (radius [m]) that collides with nothing, on the centre of
    the face behind a push along the unit (x, y) direction u; its geom name ("push_face")."""
    import mujoco

    h = BOX["half"]
    # conaffinity 8 with no geom of contype 8: it never collides, and the compiler keeps it
    # (discardvisual drops geoms with contype = conaffinity = 0)
    spec.body("box").add_geom(name="push_face", type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0, 0],
                              pos=[-u[0] * h, -u[1] * h, 0.0], contype=0, conaffinity=8, density=0, group=3)
    return "push_face"


class _GatedSensorTask(SensorTask):
    """A SensorTask whose cost row k is multiplied by gate[k] (0 before the push phase)."""

    def __init__(self, sensor_ref, weight, gate, **kw):
        super().__init__(sensor_ref, weight, **kw)
        self.gate = np.asarray(gate, dtype=np.float64)

    def _g(self, b) -> np.ndarray:
        return self.gate[np.clip(b.ctrl_clock - self.ref_offset, 0, len(self.gate) - 1)][None]

    def cost(self, b):
        return super().cost(b) * self._g(b)

    def residuals(self, b):  # |r|^2 = the gated cost (the iLQR sees the gate too)
        return super().residuals(b) * np.sqrt(self._g(b))[..., None]

    def residual_input_jacobian(self, b):
        j = super().residual_input_jacobian(b)
        return None if j is None else {k: v * np.sqrt(self._g(b))[..., None, None] for k, v in j.items()}
