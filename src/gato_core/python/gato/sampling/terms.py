"""Cost terms of the sampling planner, evaluated on whole rollout batches in NumPy.

Every term maps a :class:`RolloutBatch` (W rollouts x T rows) to a per-row cost (W, T); the
planner sums the rows with each term's running / terminal scale (:meth:`SimMPCConfig.add`).
What a term reads comes out of ``mujoco.rollout`` as state or sensordata, so a term that needs
body poses or contacts adds the MuJoCo sensors it reads to the scene's ``MjSpec``
(:meth:`Term.require`, names under ``sampling/``); with a compiled model only, those sensors
must already exist.

Clocks (absolute sim steps, which index every reference array; rows past a reference's end
reuse its last row):

- ``clock`` (T,): the step of the state in the row's qpos / qvel (the state AFTER the row's step);
- ``ctrl_clock`` (T,): the step whose command the row applied; MuJoCo computes the row's
  sensordata at the start of that step, so sensor terms use ``ctrl_clock`` too.

Units: positions m, angles rad, quaternions (w, x, y, z); a term's cost is in its weight's units.
"""
from __future__ import annotations

import math
from typing import Dict, Optional, Sequence, Union

import numpy as np

from . import term_residuals as _R
from .batch import RolloutBatch, _rows, _wrap, qpos_error, quat_error, quat_to_mat
from .residuals import SimResidualTask, SimTask
from .state_contacts import ContactTerms
from .task import ContextModel

__all__ = ["Term", "RolloutBatch", "StateTask", "SensorTask", "ControlTask", "AlignTask", "ContactTask",
           "GraspTask", "sensor_layout"]

SENSOR_PREFIX = "sampling/"


def sensor_layout(model) -> Dict[str, tuple]:
    """{sensor name: (address, dim)} of a compiled model's sensordata (or a ContextModel's, with its
    virtual pose / contact sensors)."""
    if isinstance(model, ContextModel):
        return dict(model.sensor_layout)
    out = {}
    for i in range(model.nsensor):
        out[model.sensor(i).name] = (int(model.sensor_adr[i]), int(model.sensor_dim[i]))
    return out


def _ref(a, name: str, width: int, allow_1d: bool = True) -> np.ndarray:
    """A (T, width) float reference; a (width,) row is one step held."""
    r = np.asarray(a, dtype=np.float64)
    if allow_1d and r.ndim == 1 and r.shape[0] == width:
        r = r[None, :]
    if r.ndim != 2 or r.shape[1] != width or r.shape[0] < 1 or not np.all(np.isfinite(r)):
        raise ValueError(f"{name}: expected a finite (T, {width}) array, got shape {r.shape}")
    return r


def _weight_vec(w, n: int, name: str) -> np.ndarray:
    a = np.asarray(w, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape != (n,) or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"{name}: expected a number >= 0 or ({n},) of them, got {w!r}")
    return a


# ----------------------------------------------------------------------------- base
class Term(SimTask):
    """A cost term: ``require`` (optional sensors), ``bind`` (indices in the planning model) or
    ``resolve(var_values, context)`` (RoboKit's: from a :class:`SimContext`), ``cost`` (W, T)."""

    #: Sim step of the references' row 0: row k applies at step ref_offset + k (a receding-horizon
    #: driver refills a short reference window and moves the offset instead of growing the arrays).
    ref_offset: int = 0

    def require(self, spec) -> None:
        """Add the sensors this term reads to ``spec`` where missing (default: none)."""

    def cost(self, batch: RolloutBatch) -> np.ndarray:  # pragma: no cover - abstract
        raise TypeError(f"{type(self).__name__} does not define cost()")


class ResidualTerm(Term, SimResidualTask):
    """A cost term with residuals (:mod:`gato.sampling.residuals`)."""


def _ensure_frame_sensor(spec, body: str, kind: str) -> str:
    """Name of a framepos / framequat sensor of ``body`` in spec, added when missing."""
    import mujoco

    name = f"{SENSOR_PREFIX}{body}/{kind}"
    if any(s.name == name for s in spec.sensors):
        return name
    if spec.body(body) is None:
        raise ValueError(f"body: {body!r} is not a body of the scene")
    stype = mujoco.mjtSensor.mjSENS_FRAMEPOS if kind == "pos" else mujoco.mjtSensor.mjSENS_FRAMEQUAT
    spec.add_sensor(name=name, type=stype, objtype=mujoco.mjtObj.mjOBJ_BODY, objname=body)
    return name


def _require_named(spec, names) -> None:
    """Add the frame sensors named ``sampling/<body>/pos`` or ``sampling/<body>/quat`` that spec lacks."""
    have = {s.name for s in spec.sensors}
    for n in names:
        if n and n not in have and n.startswith(SENSOR_PREFIX) and n.rsplit("/", 1)[-1] in ("pos", "quat"):
            _ensure_frame_sensor(spec, n[len(SENSOR_PREFIX):].rsplit("/", 1)[0], n.rsplit("/", 1)[-1])


def _body_name(model_or_none, body) -> str:
    if isinstance(body, str):
        return body
    if model_or_none is None:
        raise ValueError(f"body: a body id ({body!r}) needs a compiled model or a spec; pass the body's name")
    import mujoco

    if isinstance(model_or_none, mujoco.MjSpec):   # its bodies in id order, world first
        bodies = model_or_none.bodies
        if not 0 <= int(body) < len(bodies):
            raise ValueError(f"body: id {body!r} is not a body of the scene ({len(bodies)} bodies)")
        return bodies[int(body)].name
    return model_or_none.body(int(body)).name


def _sensor_slice(layout: dict, name: str, dim: Optional[int], owner: str) -> slice:
    if name not in layout:
        raise ValueError(f"{owner}: sensor {name!r} not in the planning model (sensors: {sorted(layout)}); pass an "
                         "MjSpec scene so the planner can add it, or add it to the MJCF")
    adr, d = layout[name]
    if dim is not None and d != dim:
        raise ValueError(f"{owner}: sensor {name!r} has dim {d}, expected {dim}")
    return slice(adr, adr + d)


# ----------------------------------------------------------------------------- terms
class StateTask(ResidualTerm):
    """Per row, max(|dof_weight * (qpos - qpos_ref[k])| - pose_tolerance, 0) + vel_weight |qvel - qvel_ref[k]|,
    plus the optional contact terms.

    qpos_ref (T, nq), qvel_ref (T, nv), dof_weight (nv,) per tangent dof (free / ball joints
    compare rotation vectors), at the row's state step k. squared: the two norms squared (the
    tolerance applies before squaring). freeze_reference: every row uses the plan start's row.
    Contact terms (cost-only: the residuals cover the errors, so the sampler sees them and the
    iLQR does not; :mod:`gato.sampling.state_contacts`): penetration_groups (geoms_a, geoms_b)
    with penetration_scale and margin [m], contacts [(geoms_a, geoms_b, wanted (T,), weight)].
    Positional order as RoboKit's: the 5th to 8th arguments are the contact ones.
    """

    residuals = _R.state_residual
    residual_input_jacobian = _R.state_input_jacobian

    def __init__(self, qpos_ref, qvel_ref, dof_weight, vel_weight: float = 0.0, penetration_groups=None,
                 penetration_scale: float = 0.0, margin: float = 0.0, contacts=(), squared: bool = False,
                 freeze_reference: bool = False, pose_tolerance: float = 0.0, name: str = ""):
        for n, v in (("squared", squared), ("freeze_reference", freeze_reference)):
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"{n}: expected a bool, got {v!r} (RoboKit's order: qpos_ref, qvel_ref, dof_weight, "
                                 "vel_weight, penetration_groups, penetration_scale, margin, contacts, squared, ...)")
        self.penetration_groups, self.penetration_scale = penetration_groups, penetration_scale
        self.margin, self.contacts = margin, contacts
        self._contact = ContactTerms(penetration_groups, penetration_scale, margin, contacts)
        self.qpos_ref = np.asarray(qpos_ref, dtype=np.float64)
        self.qvel_ref = np.asarray(qvel_ref, dtype=np.float64)
        self.dof_weight = np.asarray(dof_weight, dtype=np.float64)
        if not (math.isfinite(vel_weight) and vel_weight >= 0):
            raise ValueError(f"vel_weight: expected a finite number >= 0, got {vel_weight!r}")
        if not (math.isfinite(pose_tolerance) and pose_tolerance >= 0):
            raise ValueError(f"pose_tolerance: expected a finite number >= 0, got {pose_tolerance!r}")
        self.vel_weight, self.squared = float(vel_weight), bool(squared)
        self.freeze_reference, self.pose_tolerance, self.name = bool(freeze_reference), float(pose_tolerance), name

    def require(self, spec):
        if self._contact:
            self._contact.require(spec)

    def bind(self, model):
        self._model = model
        self._qref = _ref(self.qpos_ref, "qpos_ref", model.nq)
        self._vref = _ref(self.qvel_ref, "qvel_ref", model.nv)
        self._w = _weight_vec(self.dof_weight, model.nv, "dof_weight")
        self._residual_dim = 2 * model.nv
        if self._contact:
            self._contact.bind(model, sensor_layout(model))

    def cost(self, b):
        c = self.residual_cost(b)
        if self._contact:
            c = c + self._contact.cost(b.sensordata, b.ctrl_clock, self.ref_offset)
        return c

    def residual_cost(self, b):
        clock = np.full_like(b.clock, b.t0) if self.freeze_reference else b.clock
        e = qpos_error(self._model, b.qpos, _rows(self._qref, clock - self.ref_offset)[None])
        pos = np.maximum(np.linalg.norm(e * self._w, axis=-1) - self.pose_tolerance, 0.0)
        vel = np.linalg.norm(b.qvel - _rows(self._vref, clock - self.ref_offset)[None], axis=-1)
        if self.squared:
            return pos ** 2 + self.vel_weight * vel ** 2
        return pos + self.vel_weight * vel


_RESIDUALS = ("linear", "angle", "quaternion", "yaw", "yaw_unwrapped", "heading")


class SensorTask(ResidualTerm):
    """Per row, sum over the weighted sensors s of w_s |sensordata_s - sensor_ref[k]_s|^2.

    ``weight``: {sensor name: weight or per-component weights}, or a (nsensordata,) array (the
    zero entries' sensors are skipped). ``sensor_ref``: (T, nsensordata) in the model's sensor
    layout, or (T, D) with D the weighted sensors' dims concatenated in the weight dict's order.
    norm: |w_s * r_s| unsquared instead. residual: "linear", "angle" (wrapped to [-pi, pi]),
    "quaternion" (wxyz sensors: rotation vector of ref^-1 q), "yaw" (wxyz sensors and
    references: wrapped yaw difference), "yaw_unwrapped" (wxyz sensors, references one yaw angle
    per sensor in rad, unwrapped: the rows' yaw unwrapped along the horizon and compared without
    wrapping) or "heading" (wxyz sensors and references: (cos, sin) of the yaw minus the
    reference's); term_residuals.yaw_residual. hinge: each sensor's error counts only beyond it.
    relative: a sensor subtracted from each weighted one first (e.g. an object's position).
    """

    def __init__(self, sensor_ref, weight: Union[Dict[str, Union[float, Sequence[float]]], np.ndarray],
                 norm: bool = False, residual: str = "linear", hinge: Optional[float] = None,
                 freeze_reference: bool = False, relative: Optional[str] = None, name: str = ""):
        if residual not in _RESIDUALS:
            raise ValueError(f"residual: expected one of {_RESIDUALS}, got {residual!r}")
        if hinge is not None and not (math.isfinite(hinge) and hinge >= 0):
            raise ValueError(f"hinge: expected None or a finite number >= 0, got {hinge!r}")
        self.sensor_ref = np.asarray(sensor_ref, dtype=np.float64)
        self.weight, self.norm, self.residual, self.hinge = weight, bool(norm), residual, hinge
        self.freeze_reference, self.relative, self.name = bool(freeze_reference), relative, name

    residuals = _R.sensor_residual
    residual_input_jacobian = _R.sensor_input_jacobian
    _sensor_columns = _R.sensor_columns

    def require(self, spec):
        names = list(self.weight) if isinstance(self.weight, dict) else []
        _require_named(spec, names + [self.relative])

    def bind(self, model):
        layout = sensor_layout(model)
        items = []
        if isinstance(self.weight, dict):
            for s, w in self.weight.items():
                sl = _sensor_slice(layout, s, None, "weight")
                items.append((s, sl, _weight_vec(w, sl.stop - sl.start, f"weight[{s!r}]")))
        else:
            wv = _weight_vec(self.weight, model.nsensordata, "weight")
            for s, (adr, d) in layout.items():
                if np.any(wv[adr:adr + d] > 0):
                    items.append((s, slice(adr, adr + d), wv[adr:adr + d]))
        if not items:
            raise ValueError("weight: no sensor has a positive weight")
        dims = [_R.REF_DIM.get(self.residual, sl.stop - sl.start) for _, sl, _ in items]  # ref columns
        compact = sum(dims)
        width = self.sensor_ref.shape[-1] if self.sensor_ref.ndim else -1
        if width == model.nsensordata:
            self._ref_cols = [slice(sl.start, sl.start + d) for (_, sl, _), d in zip(items, dims)]
        elif width == compact:
            offs = np.cumsum([0] + dims)
            self._ref_cols = [slice(int(a), int(b)) for a, b in zip(offs[:-1], offs[1:])]
        else:
            raise ValueError(f"sensor_ref: expected (T, {model.nsensordata}) (the model's sensordata) or "
                             f"(T, {compact}) (the weighted sensors), got {self.sensor_ref.shape}")
        self._ref = _ref(self.sensor_ref, "sensor_ref", width)
        need = 4 if self.residual in _R.QUAT_RESIDUAL_DIM else None
        for s, sl, _ in items:
            if need and sl.stop - sl.start != need:
                raise ValueError(f"residual: {self.residual!r} needs 4-D quaternion sensors; {s!r} has "
                                 f"{sl.stop - sl.start}")
        self._rel = None if self.relative is None else _sensor_slice(layout, self.relative, None, "relative")
        self._items = items
        self._residual_dim = _R.sensor_residual_dim(self)

    def cost(self, b):
        clock = np.full_like(b.ctrl_clock, b.t0) if self.freeze_reference else b.ctrl_clock
        ref = _rows(self._ref, clock - self.ref_offset)[None]
        total = np.zeros(b.sensordata.shape[:2])
        for (s, sl, w), rc in zip(self._items, self._ref_cols):
            val = b.sensordata[..., sl]
            if self._rel is not None:
                val = val - b.sensordata[..., self._rel]
            r_ref = ref[..., rc]
            if self.residual == "linear":
                r = val - r_ref
            elif self.residual == "angle":
                r = _wrap(val - r_ref)
            elif self.residual == "quaternion":
                r = quat_error(val, np.broadcast_to(r_ref, val.shape))
                w = w[:3] if w.shape[0] == 4 else w
            else:
                r = _R.yaw_residual(self.residual, val, np.broadcast_to(r_ref, val.shape[:-1] + r_ref.shape[-1:]))
                w = w[:1]
            e = np.linalg.norm(r * (w if self.norm else np.sqrt(w)), axis=-1)
            if self.hinge is not None:
                e = np.maximum(e - self.hinge, 0.0)
            total += e if self.norm else e ** 2
        return total


class ControlTask(ResidualTerm):
    """Per row, sum(weight * (ctrl - ctrl_ref[k])**2) over the actuators (norm: |weight * (...)|);
    ctrl_ref (T, nu) indexed at the row's command step, default 0."""

    def __init__(self, weight: Union[float, Sequence[float]], ctrl_ref: Optional[np.ndarray] = None,
                 norm: bool = False, name: str = ""):
        self.weight, self.ctrl_ref, self.norm, self.name = weight, ctrl_ref, bool(norm), name

    residuals = _R.control_residual
    residual_input_jacobian = _R.control_input_jacobian

    def bind(self, model):
        self._w = _weight_vec(self.weight, model.nu, "weight")
        self._ref = np.zeros((1, model.nu)) if self.ctrl_ref is None else _ref(self.ctrl_ref, "ctrl_ref", model.nu)
        self._residual_dim = model.nu

    def cost(self, b):
        r = b.ctrl - _rows(self._ref, b.ctrl_clock - self.ref_offset)[None]
        if self.norm:
            return np.linalg.norm(r * self._w, axis=-1)
        return np.sum(self._w * r * r, axis=-1)


class AlignTask(ResidualTerm):
    """Per row, weight * (1 + u.v / (|u| |v|)) with u = sensor - origin, v = target_ref[k] - origin,
    over ``components`` (default x, y) of 3-D position sensors; 0 where u or v vanishes."""

    def __init__(self, origin: str, sensor: str, target_ref: np.ndarray, weight: float,
                 components: Sequence[int] = (0, 1), freeze_reference: bool = False, name: str = ""):
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"weight: expected a finite number >= 0, got {weight!r}")
        comps = list(components)
        if not comps or any(c not in (0, 1, 2) for c in comps) or len(set(comps)) != len(comps):
            raise ValueError(f"components: expected distinct axes among 0, 1, 2, got {components!r}")
        self.origin, self.sensor, self.target_ref, self.weight = origin, sensor, target_ref, float(weight)
        self.components, self.freeze_reference, self.name = comps, bool(freeze_reference), name

    residuals = _R.align_residual
    _sensor_columns = _R.align_columns

    def require(self, spec):
        _require_named(spec, [self.origin, self.sensor])

    def bind(self, model):
        layout = sensor_layout(model)
        self._o = _sensor_slice(layout, self.origin, 3, "origin")
        self._s = _sensor_slice(layout, self.sensor, 3, "sensor")
        self._ref = _ref(self.target_ref, "target_ref", 3)
        self._residual_dim = len(self.components)

    def cost(self, b):
        clock = np.full_like(b.ctrl_clock, b.t0) if self.freeze_reference else b.ctrl_clock
        o = b.sensordata[..., self._o][..., self.components]
        u = b.sensordata[..., self._s][..., self.components] - o
        v = _rows(self._ref, clock - self.ref_offset)[None][..., self.components] - o
        nu_, nv_ = np.linalg.norm(u, axis=-1), np.linalg.norm(v, axis=-1)
        ok = (nu_ > 1e-12) & (nv_ > 1e-12)
        cos = np.where(ok, np.sum(u * v, axis=-1) / np.maximum(nu_ * nv_, 1e-24), -1.0)
        return self.weight * (1.0 + cos)


class ContactTask(Term):
    """Reward geoms' contacts inside their target regions; penalize touches outside every allowed disc.

    Per row and geom g, from the geom's closest contact (a MuJoCo contact sensor, added to the
    spec as ``sampling/contact/<geom>``: found, dist [m], pos (3) [m]):

    - reward: if the contact lies in g's target region (the disc of ``radius`` around ``target``
      (x, y), or with ``box`` = (half_x, half_y) that box, and with ``height`` = (low, high) only
      at those z), cost -weight * max(1 - max(dist, 0) / 1 m, 0);
    - penalty: if ``penalty`` > 0 and the contact (dist <= margin) lies outside every allowed disc
      (x, y, r) of g, cost +penalty.

    Shapes: target (T, G, 2) or (G, 2); radius (T, G), (1, T, G), (T, G, 1), (G,) or a number; allowed (T, G, A, 3) or
    (G, A, 3) or None (no disc allowed); G = len(geoms); T indexed at the row's command step.
    """

    def __init__(self, geoms: Sequence[str], target: np.ndarray, radius, allowed: Optional[np.ndarray] = None,
                 weight: float = 1.0, penalty: float = 0.0, margin: float = 0.0,
                 box: Optional[Sequence[float]] = None, height: Optional[Sequence[float]] = None, name: str = ""):
        self.geoms = [geoms] if isinstance(geoms, str) else list(geoms)
        if not self.geoms or not all(isinstance(g, str) for g in self.geoms):
            raise ValueError(f"geoms: expected geom names, got {geoms!r}")
        for nm, v in (("weight", weight), ("penalty", penalty), ("margin", margin)):
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{nm}: expected a finite number >= 0, got {v!r}")
        G = len(self.geoms)
        t = np.asarray(target, dtype=np.float64)
        self.target = t[None] if t.ndim == 2 else t
        if self.target.ndim != 3 or self.target.shape[1:] != (G, 2):
            raise ValueError(f"target: expected (T, {G}, 2) or ({G}, 2), got {t.shape}")
        r = np.asarray(radius, dtype=np.float64)
        r = np.full((1, G), float(r)) if r.ndim == 0 else (r[None] if r.ndim == 1 else r)
        if r.ndim == 3 and r.shape[-1] == 1 and r.shape[1] == G:
            r = r.reshape(r.shape[0], G)     # (T, G, 1)
        elif r.ndim == 3 and r.shape[0] == 1 and r.shape[2] == G:
            r = r[0]                         # (1, T, G): radius over time with a leading axis, as RoboKit's example
        self.radius = r
        if self.radius.ndim != 2 or self.radius.shape[1] != G or np.any(self.radius < 0):
            raise ValueError(f"radius: expected (T, {G}), ({G},) or a number >= 0, got {np.shape(radius)}")
        if allowed is not None:
            a = np.asarray(allowed, dtype=np.float64)
            a = a[None] if a.ndim == 3 else a
            if a.ndim != 4 or a.shape[1] != G or a.shape[3] != 3:
                raise ValueError(f"allowed: expected (T, {G}, A, 3) or ({G}, A, 3) discs, got {np.shape(allowed)}")
            allowed = a
        if box is not None and (len(box) != 2 or min(box) < 0):
            raise ValueError(f"box: expected (half_x, half_y) >= 0, got {box!r}")
        if height is not None and (len(height) != 2 or height[0] > height[1]):
            raise ValueError(f"height: expected (low, high), got {height!r}")
        self.allowed, self.weight, self.penalty, self.margin = allowed, float(weight), float(penalty), float(margin)
        self.box, self.height, self.name = box, height, name

    def _sensor_name(self, geom):
        return f"{SENSOR_PREFIX}contact/{geom}"

    def require(self, spec):
        import mujoco

        names = {s.name for s in spec.sensors}
        for g in self.geoms:
            if self._sensor_name(g) in names:
                continue
            if spec.geom(g) is None:
                raise ValueError(f"geoms: {g!r} is not a named geom of the scene")
            f = mujoco.mjtConDataField
            dataspec = (1 << int(f.mjCONDATA_FOUND)) | (1 << int(f.mjCONDATA_DIST)) | (1 << int(f.mjCONDATA_POS))
            spec.add_sensor(name=self._sensor_name(g), type=mujoco.mjtSensor.mjSENS_CONTACT,
                            objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=g, intprm=[int(dataspec), 1, 1])

    def bind(self, model):
        layout = sensor_layout(model)
        self._sl = [_sensor_slice(layout, self._sensor_name(g), 5, "geoms") for g in self.geoms]

    def cost(self, b):
        clock = b.ctrl_clock
        tgt = _rows(self.target, clock - self.ref_offset)[None]   # (1, T, G, 2)
        rad = _rows(self.radius, clock - self.ref_offset)[None]   # (1, T, G)
        total = np.zeros(b.sensordata.shape[:2])
        for g, sl in enumerate(self._sl):
            s = b.sensordata[..., sl]
            found, dist, pos = s[..., 0] > 0, s[..., 1], s[..., 2:5]
            dxy = pos[..., :2] - tgt[..., g, :]
            if self.box is not None:
                inside = (np.abs(dxy[..., 0]) <= self.box[0]) & (np.abs(dxy[..., 1]) <= self.box[1])
            else:
                inside = np.linalg.norm(dxy, axis=-1) <= rad[..., g]
            if self.height is not None:
                inside &= (pos[..., 2] >= self.height[0]) & (pos[..., 2] <= self.height[1])
            reward = np.maximum(1.0 - np.maximum(dist, 0.0), 0.0)
            total -= self.weight * np.where(found & inside, reward, 0.0)
            if self.penalty > 0:
                ok = np.zeros_like(found)
                if self.allowed is not None:
                    discs = _rows(self.allowed, clock - self.ref_offset)[None][..., g, :, :]   # (1, T, A, 3)
                    d = np.linalg.norm(pos[..., None, :2] - discs[..., :2], axis=-1)
                    ok = np.any(d <= discs[..., 2], axis=-1)
                touch = found & (dist <= self.margin)
                total += self.penalty * (touch & ~ok)
        return total


class GraspTask(ResidualTerm):
    """Per row, weight[k] * max(|p_gripper - (p_obj + R_obj offset[k])| - tolerance[k], 0).

    gripper / obj: body names or ids; offset (T, 3) or (3,) [m], in the object's frame
    (object_frame=True) or the world's; weight (T,) or a number; tolerance [m] a number or (T,).
    Reads framepos / framequat sensors ``sampling/<body>/pos|quat`` (added to the spec).
    """

    def __init__(self, gripper: Union[str, int], obj: Union[str, int], offset: np.ndarray, weight,
                 tolerance: float = 0.0, object_frame: bool = True, name: str = ""):
        self.gripper, self.obj = gripper, obj
        self.offset = _ref(offset, "offset", 3)
        w = np.asarray(weight, dtype=np.float64)
        self.weight = w.reshape(-1) if w.ndim else w.reshape(1)
        if not np.all(np.isfinite(self.weight)) or np.any(self.weight < 0):
            raise ValueError(f"weight: expected numbers >= 0, got {weight!r}")
        tol = np.asarray(tolerance, dtype=np.float64)
        if tol.ndim > 1 or tol.size == 0 or not np.all(np.isfinite(tol)) or np.any(tol < 0):
            raise ValueError(f"tolerance: expected a finite number >= 0 or a (T,) array of them, got {tolerance!r}")
        self.tolerance = float(tol) if tol.ndim == 0 else tol
        self.object_frame, self.name = bool(object_frame), name

    residuals = _R.grasp_residual
    _sensor_columns = _R.grasp_columns

    def require(self, spec):
        _ensure_frame_sensor(spec, _body_name(spec, self.gripper), "pos")
        _ensure_frame_sensor(spec, _body_name(spec, self.obj), "pos")
        if self.object_frame:
            _ensure_frame_sensor(spec, _body_name(spec, self.obj), "quat")

    def bind(self, model):
        layout = sensor_layout(model)
        g, o = _body_name(model, self.gripper), _body_name(model, self.obj)
        self._g = _sensor_slice(layout, f"{SENSOR_PREFIX}{g}/pos", 3, "gripper")
        self._o = _sensor_slice(layout, f"{SENSOR_PREFIX}{o}/pos", 3, "obj")
        self._q = _sensor_slice(layout, f"{SENSOR_PREFIX}{o}/quat", 4, "obj") if self.object_frame else None
        self._residual_dim = 3

    def cost(self, b):
        clock = b.ctrl_clock
        off = _rows(self.offset, clock - self.ref_offset)[None]
        if self._q is not None:
            off = np.einsum("wtij,wtj->wti", quat_to_mat(b.sensordata[..., self._q]),
                            np.broadcast_to(off, b.sensordata.shape[:2] + (3,)))
        d = np.linalg.norm(b.sensordata[..., self._g] - (b.sensordata[..., self._o] + off), axis=-1)
        return _rows(self.weight, clock - self.ref_offset)[None] * np.maximum(d - self._tol(clock), 0.0)

    def _tol(self, clock) -> np.ndarray:
        """(T,) tolerance of the rows at ``clock`` (a number: every row)."""
        t = np.atleast_1d(np.asarray(self.tolerance, dtype=np.float64))
        return _rows(t, clock - self.ref_offset)
