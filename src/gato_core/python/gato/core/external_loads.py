"""The loads the solver's dynamics carry beyond the URDF: a rigid payload on the EE body
(:meth:`ExternalLoadAPI.set_ee_payload`) and the external-wrench band per body and knot
(:meth:`ExternalLoadAPI.set_f_ext_B`). A mixin of :class:`gato.core.bsqp.BSQP`: it reads the
solver's ``_s`` (the backend's solver object), ``backend``, ``batch_size``, ``N`` and ``dtype``."""
from __future__ import annotations

import numpy as np

from .arrays import to_numpy


class ExternalLoadAPI:
    @property
    def n_bodies(self) -> int:
        """Moving bodies: the f_ext band holds 6 numbers per body per knot."""
        return self._s.nbodies

    def set_ee_payload(self, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None) -> None:
        """Plan with a rigid payload on the EE body (issue 32): the model's EE body becomes its URDF
        inertia plus ``mass`` kg (0: none, the URDF's again) centred at ``com`` (3,) m with the
        rotational inertia ``inertia`` (3, 3) kg m^2 about that centre (None: zero, a point mass),
        both in EE frame coordinates; every row's dynamics then carry its weight and inertia.
        ValueError naming payload for a negative mass, a non-finite number or a wrong shape;
        ValueError naming the backend where it does not exist (the CUDA ones: their models are
        baked per robot; plan there with a URDF that carries the payload)."""
        if not hasattr(self._s, "set_ee_payload"):
            raise ValueError(f"set_ee_payload: not available on the {self.backend!r} backend (CPU backend only); "
                             "use backend='cpu', or a URDF whose EE body carries the payload")
        try:
            m = float(mass)
            c = np.array(com, dtype=np.float64).reshape(-1)
            Ic = np.zeros((3, 3)) if inertia is None else np.array(inertia, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"payload: expected a mass [kg], com (3,) m and inertia (3, 3), got {mass!r}, "
                             f"{com!r}, {inertia!r}") from None
        if c.shape != (3,) or Ic.shape != (3, 3) or not (np.isfinite(m) and m >= 0) \
                or not np.all(np.isfinite(c)) or not np.all(np.isfinite(Ic)):
            raise ValueError(f"payload: expected a mass >= 0 kg, com (3,) m and inertia (3, 3) kg m^2, all finite; "
                             f"got {mass!r}, {com!r}, {inertia!r}")
        self._s.set_ee_payload(m, c, np.ascontiguousarray(Ic).reshape(-1))
        self.ee_payload = (m, c, Ic) if m > 0 else None

    def set_f_ext_B(self, f_ext_B) -> None:
        """Upload the external-wrench band the dynamics see.

        Each 6-slot is one body's spatial force in its JOINT-LOCAL frame about
        the joint origin, ordered [angular(3) N·m; linear(3) N] (see
        :func:`gato.common.world_wrench_to_joint_local` for world wrenches).
        Accepted shapes (wrench k applies over the interval [k, k+1]):
        (B, 6) EE wrench broadcast over knots; (B, 6*n_bodies) body-major
        broadcast over knots; (B, N, 6) per-knot EE wrench; (B, N, 6*n_bodies).
        """
        f = to_numpy(f_ext_B, "f_ext_B", np.float64)
        B, N, nb = self.batch_size, self.N, self.n_bodies
        band = np.zeros((B, N, 6 * nb))
        ee = self._s.ee_body
        if f.shape == (B, 6):
            band[:, :, 6 * ee:6 * ee + 6] = f[:, None, :]
        elif f.shape == (B, 6 * nb):
            band[:] = f[:, None, :]
        elif f.shape == (B, N, 6):
            band[:, :, 6 * ee:6 * ee + 6] = f
        elif f.shape == (B, N, 6 * nb):
            band[:] = f
        else:
            raise ValueError(f"f_ext_B: expected shape ({B}, 6), ({B}, {6 * nb}), ({B}, {N}, 6) or "
                             f"({B}, {N}, {6 * nb}), got {tuple(f.shape)}")
        if not np.all(np.isfinite(band)):
            raise ValueError("f_ext_B: contains NaN or Inf")
        self._s.set_fext(band.astype(self.dtype))

