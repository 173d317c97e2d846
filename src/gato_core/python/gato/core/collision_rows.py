"""The collision-clearance rows of :class:`gato.BSQP` (mixed into it beside
:class:`gato.core.rowgroups.RowGroupAPI`, whose group helpers they use): the robot's sphere
cover, the obstacle environment (spheres, capsules, cuboids, planes; m) and the COLLISION
row group. Mechanisms and measured weights: docs/constraints.md, "Collision clearance rows".
"""
from __future__ import annotations

import math

import numpy as np

from . import rowkinds as rk
from .arrays import vector
from .rowgroups import MAX_ROWS_PER_GROUP

#: Mechanism weights of the collision group when rho is not given (its rows fold onto the position
#: block; the values that enforce the clearance are measured in docs/constraints.md).
COLLISION_DEFAULT_WEIGHT = {"barrier": 0.01, "admm": 10.0, "al": 100.0, "telemetry": 0.0}


class CollisionRowAPI:
    """Collision-row methods of BSQP (``self._s``, ``self._groups`` set up by ``BSQP.__init__``)."""

    def _sphere_set(self) -> dict:
        """The robot's collision spheres (gato.spherize), loaded once: the ``spheres.json`` that
        gato.builder.codegen wrote beside the description, else spherized from the URDF (cached)."""
        if getattr(self, "_spheres", None) is None:
            if not hasattr(self._s, "set_collision"):
                raise ValueError(f"set_collision_environment: the {getattr(self, 'backend', '?')!r} backend has "
                                 "no collision rows (the CPU backend has them)")
            from pathlib import Path

            from ..robots import spherize
            from ..robots.registry import all_robots

            meta = all_robots().get(self.plant_type, {})
            res = meta.get("collision_res", spherize.DEFAULT_RES)
            if res is None:
                raise ValueError(f"set_collision_environment: robot {self.plant_type!r} was generated with "
                                 "collision_res=None (no collision spheres)")
            sp = None
            if meta.get("urdf_path"):
                sp = spherize.load_spheres(Path(meta["urdf_path"]).parent / "spheres.json")
            if sp is None:
                sp = spherize.cached_spheres(meta.get("source_urdf") or self.model_path, res)
            n = len(sp["radii"])
            if n > MAX_ROWS_PER_GROUP:
                raise ValueError(f"set_collision_environment: {n} collision spheres at collision_res={res} m; "
                                 f"the group holds at most {MAX_ROWS_PER_GROUP} (regenerate with a coarser "
                                 "collision_res)")
            frames = [int(self._s.frame_id(link)) for link in sp["links"]]
            if min(frames) < 0:
                raise ValueError(f"set_collision_environment: link {sp['links'][frames.index(-1)]!r} of the "
                                 f"sphere set is not a frame of {self.model_path}")
            self._spheres = dict(sp, frames=frames)
        return self._spheres

    @property
    def collision_spheres(self) -> dict:
        """The collision sphere set (one clearance row each): {"links": [link name] (n),
        "centres": (n, 3) in the link frames [m], "radii": (n,) [m], "res": spacing [m],
        "frames": frame ids}. Spherized at the registered ``collision_res`` (default 0.15 m)."""
        sp = self._sphere_set()
        return dict(links=list(sp["links"]), centres=np.array(sp["centres"]), radii=np.array(sp["radii"]),
                    res=sp["res"], frames=list(sp["frames"]))

    @staticmethod
    def _obstacle_table(value, name: str, widths: tuple, what: str) -> np.ndarray:
        """(n, w) float array of one obstacle kind: a list of tuples (or an array) of width in widths."""
        if value is None:
            return np.zeros((0, widths[0]))
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected a list of {what} tuples") from None
        if a.size == 0:
            return np.zeros((0, widths[0]))
        if a.ndim == 1 and a.shape[0] in widths:
            a = a[None, :]
        if a.ndim != 2 or a.shape[1] not in widths:
            raise ValueError(f"{name}: expected a list of {what} tuples ({' or '.join(map(str, widths))} numbers "
                             f"each), got shape {tuple(a.shape)}")
        bad = np.argwhere(~np.isfinite(a))
        if bad.size:
            raise ValueError(f"{name}: contains NaN or Inf (obstacle {int(bad[0][0])})")
        return a

    def set_collision_environment(self, spheres=None, capsules=None, cuboids=None, planes=None) -> None:
        """Upload the world obstacles of the COLLISION rows (world frame, metres); lists of tuples,
        one per obstacle:

        * spheres: (x, y, z, radius)
        * capsules: (ax, ay, az, bx, by, bz, radius) (segment a-b swept by the radius)
        * cuboids: (cx, cy, cz, hx, hy, hz) axis-aligned half extents, or with an orientation
          quaternion appended (..., qw, qx, qy, qz)
        * planes: (nx, ny, nz, offset): the half-space n.p <= offset is the obstacle (n is
          normalized; the free side is n.p > offset, e.g. (0, 0, 1, 0) is the floor z = 0)

        Each sphere's clearance is its signed distance to the nearest obstacle. May be called
        again at any time to move obstacles (the group keeps its state). Bad shapes, NaN/Inf,
        negative radii or extents and zero normals / quaternions raise ValueError naming the
        argument."""
        sp = self._obstacle_table(spheres, "spheres", (4,), "(x, y, z, radius)")
        ca = self._obstacle_table(capsules, "capsules", (7,), "(ax, ay, az, bx, by, bz, radius)")
        cu = self._obstacle_table(cuboids, "cuboids", (6, 10), "(cx, cy, cz, hx, hy, hz[, qw, qx, qy, qz])")
        pl = self._obstacle_table(planes, "planes", (4,), "(nx, ny, nz, offset)")
        for name, a, col, what in (("spheres", sp, 3, "radius"), ("capsules", ca, 6, "radius")):
            neg = np.argwhere(a[:, col] < 0)
            if neg.size:
                i = int(neg[0][0])
                raise ValueError(f"{name}: negative {what} (obstacle {i}: {float(a[i, col])!r})")
        neg = np.argwhere(cu[:, 3:6] < 0)
        if neg.size:
            raise ValueError(f"cuboids: negative half extent (obstacle {int(neg[0][0])})")
        rows = []
        for a in sp:
            rows.append([0, *a, 0, 0, 0, 0, 0, 0])
        for a in ca:
            rows.append([1, *a, 0, 0, 0])
        for i, a in enumerate(cu):
            q = np.array([1.0, 0, 0, 0]) if a.shape[0] == 6 else a[6:10]
            nq = np.linalg.norm(q)
            if nq < 1e-9:
                raise ValueError(f"cuboids: zero orientation quaternion (obstacle {i})")
            rows.append([2, *a[:6], *(q / nq)])
        for i, a in enumerate(pl):
            nn = np.linalg.norm(a[:3])
            if nn < 1e-9:
                raise ValueError(f"planes: zero normal (obstacle {i})")
            rows.append([3, *(a[:3] / nn), a[3] / nn, 0, 0, 0, 0, 0, 0])
        table = np.asarray(rows, dtype=np.float64).reshape(-1, 11)
        s = self._sphere_set()
        self._s.set_collision(s["frames"], np.asarray(s["centres"], dtype=np.float64).ravel(),
                              np.asarray(s["radii"], dtype=np.float64), table.ravel())
        self._collision_env = dict(spheres=sp, capsules=ca, cuboids=cu, planes=pl, table=table)

    @property
    def collision_environment(self) -> dict | None:
        """The obstacles of the last set_collision_environment ({"spheres", "capsules", "cuboids",
        "planes"} as (n, width) arrays), or None before the first call."""
        env = getattr(self, "_collision_env", None)
        return None if env is None else {k: np.array(v) for k, v in env.items() if k != "table"}

    def collision_clearance(self, q):
        """Clearances d (n_spheres,) [m] of the collision spheres at configuration q (nq,) to the
        current obstacles, and their Jacobian (n_spheres, nv) (exactly the rows' values and
        linearization). Needs set_collision_environment first."""
        if getattr(self, "_collision_env", None) is None:
            raise ValueError("collision_clearance: no collision environment; call set_collision_environment first")
        qa = vector(q, "q", self.nq)
        d, J = self._s.collision_clearance(np.ascontiguousarray(qa, dtype=self.dtype))
        return np.asarray(d, dtype=np.float64), np.asarray(J, dtype=np.float64)

    def _collision_group(self, what: str) -> int:
        for i, g in enumerate(self._groups):
            if g["kind"] == rk.COLLISION:
                return i
        raise ValueError(f"{what}: no collision group is installed (call enable_collision first)")

    def enable_collision(self, mech=None, margin=0.02, rho=None, delta=0.05, sigma=0.0, knot_lo=1,
                         admm_iters=0) -> int:
        """Append THE collision clearance group (at most one): per collision sphere i and knot k in
        [knot_lo, N-1] the row d_i(q_k) >= margin, d_i = signed clearance [m] of sphere i to the
        nearest obstacle of :meth:`set_collision_environment` (call that FIRST). The rows act on
        the position block with their exact Jacobians n_i' J_i(q_k). mech None follows the limit
        mechanism; rho None = COLLISION_DEFAULT_WEIGHT[mech] (docs/constraints.md). Mask knots
        with set_row_group_mask(g, (N,) bools). Returns the group index."""
        mech = self._appended_mech(mech, "enable_collision")
        if getattr(self, "_collision_env", None) is None:
            raise ValueError("enable_collision: no collision environment; call set_collision_environment first")
        if any(g["kind"] == rk.COLLISION for g in self._groups):
            raise ValueError("enable_collision: the collision group is already installed (one at most; "
                             "disable_row_groups() removes it)")
        if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating, np.integer)) \
                or not math.isfinite(margin):
            raise ValueError(f"margin: expected a finite number [m], got {margin!r}")
        if isinstance(knot_lo, bool) or not isinstance(knot_lo, (int, np.integer)) or not 0 <= knot_lo < self.N:
            raise ValueError(f"knot_lo: expected an integer in [0, {self.N - 1}], got {knot_lo!r}")
        if isinstance(admm_iters, bool) or not isinstance(admm_iters, (int, np.integer)) or admm_iters < 0:
            raise ValueError(f"admm_iters: expected an integer >= 0, got {admm_iters!r}")
        if mech == "telemetry":
            w = 0.0
        elif rho is not None:
            w = self._positive(rho, "rho")
        else:
            w = COLLISION_DEFAULT_WEIGHT[mech]
        n = len(self._sphere_set()["radii"])
        return self._append(dict(kind=rk.COLLISION, mech=rk.MECH_IDS[mech], n_rows=n, knot_lo=int(knot_lo),
                                 knot_hi=self.N, lo=np.full(n, float(margin)), hi=np.full(n, np.inf), mask=None,
                                 weight=w, delta=self._positive(delta, "delta"), sigma=self._nonneg(sigma, "sigma"),
                                 cone=False, admm_iters=int(admm_iters), form="collision"))

    def get_collision_row_duals(self) -> dict:
        """AL duals of the collision group: {"lam_hi", "lam_lo"}, each (B, N, n_spheres); lam_lo is
        the hinge dual of d_i >= margin (>= 0), lam_hi stays 0 (the rows are one-sided)."""
        gi = self._collision_group("get_collision_row_duals")
        n = self._groups[gi]["n_rows"]
        d = self.get_row_duals()
        return {k: np.ascontiguousarray(v[:, gi, :, :n]) for k, v in d.items()}

    def get_collision_admm_state(self) -> dict:
        """ADMM (z, y) of the collision group: {"z", "y"}, each (B, N, n_spheres) (z is the clipped
        clearance, y <= 0 the multiplier estimate of the lower bound)."""
        gi = self._collision_group("get_collision_admm_state")
        n = self._groups[gi]["n_rows"]
        d = self.get_admm_state()
        return {k: np.ascontiguousarray(v[:, gi, :, :n]) for k, v in d.items()}
