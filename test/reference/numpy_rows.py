"""Pure-NumPy reference of gato's constraint row groups (docs/constraints.md), on top of
:class:`reference.numpy_bsqp.RefProblem`.

Independent of the fast solver's block structure: every row group is a list of
(value g (n,), Jacobian G (n, n_xu)) per knot of its window, and every term lands
in the DENSE KKT system of RefProblem.assemble_kkt:

* barrier: H += G' diag(mu b'') G, grad += G' (mu b'), cost += mu b(d) per side;
* AL (PHR): per side s (s <= 0 wanted), lam* = clip(lam + rho s, a, b),
  cost += lam* s - (lam* - lam)^2 / (2 rho), grad += G' (+-lam*),
  H += G' (rho [a < lam + rho s < b]) G; the dual update lam <- lam* once per solve
  on the returned plan;
* ADMM: H += rho G'G (fold), an inner loop of `iters` dense KKT solves with
  grad_j = grad + G'(y + rho (g0 - z)), then z <- clip(g0 + G dz + y/rho, lo, hi),
  y <- y + rho (g0 + G dz - z); the line search on the tracking merit.

Interval rows only (boxes, EE terminal equality, LIN_U rows); cones are tested
separately. Everything float64.
"""
from __future__ import annotations

import numpy as np

from .numpy_bsqp import LIMIT_MARGIN, line_search, trust_region


def relaxed_log(d, delta):
    """(b, b', b'') of the relaxed log barrier (elementwise)."""
    d = np.asarray(d, dtype=np.float64)
    hi = d >= delta
    dd = np.where(hi, d, 1.0)
    e = d - delta
    b = np.where(hi, -np.log(dd), -np.log(delta) - e / delta + e * e / (2 * delta * delta))
    db = np.where(hi, -1.0 / dd, -1.0 / delta + e / delta ** 2)
    ddb = np.where(hi, 1.0 / dd ** 2, 1.0 / delta ** 2)
    return b, db, ddb


def phr(s, lam, rho, a, b):
    """(psi, psi', psi'') of the PHR term of one scalar constraint value s <= 0."""
    t = lam + rho * s
    m = min(max(t, a), b)          # the updated multiplier = psi'
    return m * s - (m - lam) ** 2 / (2 * rho), m, (rho if a < t < b else 0.0)


class RefRows:
    """Row groups on a RefProblem.

    groups: list of dicts {kind: "q" | "qd" | "u" | "ee" | "lin_u", mech: "barrier" | "admm" |
    "al" | "telemetry", lo (n,), hi (n,), w (mechanism weight), delta, knots (iterable),
    C (m, nu), d (m,) for lin_u, target (3,) for ee}. :meth:`limit_groups` builds the
    canonical boxes.
    """

    def __init__(self, prob, groups, *, admm_iters=10, eps_abs=0.0, eps_rel=0.0, admm_merit=False):
        self.p = prob
        self.groups = [dict(g) for g in groups]
        self.admm_iters = int(admm_iters)
        self.eps_abs, self.eps_rel = float(eps_abs), float(eps_rel)
        self.admm_merit = bool(admm_merit)
        for g in self.groups:
            n = len(g["lo"])
            K = prob.N
            g["lam_hi"] = np.zeros((K, n))
            g["lam_lo"] = np.zeros((K, n))
            g["z"] = np.zeros((K, n))
            g["y"] = np.zeros((K, n))
            g["init"] = True

    @staticmethod
    def limit_boxes(prob):
        """{"q": (lo, hi), "qd": ..., "u": ...}: URDF limits shrunk by the margin."""
        m = LIMIT_MARGIN
        v = np.asarray(prob.model.velocityLimit, dtype=np.float64)
        e = np.asarray(prob.model.effortLimit, dtype=np.float64)
        return {"q": (np.asarray(prob.model.lowerPositionLimit) + m, np.asarray(prob.model.upperPositionLimit) - m),
                "qd": (-(v - m), v - m), "u": (-(e - m), e - m)}

    @classmethod
    def limit_groups(cls, prob, mech, weights, delta=0.05):
        b = cls.limit_boxes(prob)
        N = prob.N
        return [dict(kind="q", mech=mech, lo=b["q"][0], hi=b["q"][1], w=weights[0], delta=delta, knots=range(1, N)),
                dict(kind="qd", mech=mech, lo=b["qd"][0], hi=b["qd"][1], w=weights[1], delta=delta,
                     knots=range(1, N)),
                dict(kind="u", mech=mech, lo=b["u"][0], hi=b["u"][1], w=weights[2], delta=delta,
                     knots=range(0, N - 1))]

    # ------------------------------------------------------------ rows
    def rows(self, g, xu, k):
        """(value (n,), Jacobian (n, n_xu)) of group g at knot k of trajectory xu."""
        p = self.p
        nv, n_xu = p.nv, p.n_xu
        kind = g["kind"]
        if kind in ("q", "qd"):
            sl = p.x_index(k)
            off = sl.start + (0 if kind == "q" else nv)
            G = np.zeros((nv, n_xu))
            G[np.arange(nv), off + np.arange(nv)] = 1.0
            return xu[off:off + nv].copy(), G
        if kind == "u":
            sl = p.u_index(k)
            G = np.zeros((p.nu, n_xu))
            G[np.arange(p.nu), sl.start + np.arange(p.nu)] = 1.0
            return xu[sl].copy(), G
        if kind == "lin_u":
            sl = p.u_index(k)
            G = np.zeros((len(g["d"]), n_xu))
            G[:, sl] = g["C"]
            return g["C"] @ xu[sl] + g["d"], G
        if kind == "ee":
            sl = p.x_index(k)
            q = xu[sl][:nv]
            G = np.zeros((3, n_xu))
            G[:, sl.start:sl.start + nv] = p.ee_jac(q)
            return p.ee_pos(q) - g["target"], G
        raise ValueError(kind)

    def cost_terms(self, xu, H=None, grad=None, admm_term=False):
        """Barrier and AL cost at xu (and their derivatives into H, grad when given)."""
        cost = 0.0
        for g in self.groups:
            mech, w = g["mech"], g["w"]
            if mech == "telemetry" or (mech == "admm" and not admm_term):
                continue
            for k in g["knots"]:
                val, G = self.rows(g, xu, k)
                if mech == "admm":
                    r = val - g["z"][k]
                    cost += float(g["y"][k] @ r + 0.5 * w * r @ r)
                    continue
                v = np.zeros(len(val))
                h = np.zeros(len(val))
                for i in range(len(val)):
                    lo, hi = g["lo"][i], g["hi"][i]
                    if mech == "barrier":
                        if np.isfinite(lo):
                            b, db, ddb = relaxed_log(val[i] - lo, g["delta"])
                            cost += w * float(b)
                            v[i] += w * float(db)
                            h[i] += w * float(ddb)
                        if np.isfinite(hi):
                            b, db, ddb = relaxed_log(hi - val[i], g["delta"])
                            cost += w * float(b)
                            v[i] -= w * float(db)
                            h[i] += w * float(ddb)
                    else:  # al
                        if lo == hi:
                            c, dpsi, dd = phr(val[i] - lo, g["lam_hi"][k, i], w, -np.inf, np.inf)
                            cost += c
                            v[i] += dpsi
                            h[i] += dd
                        else:
                            if np.isfinite(hi):
                                c, dpsi, dd = phr(val[i] - hi, g["lam_hi"][k, i], w, 0.0, np.inf)
                                cost += c
                                v[i] += dpsi
                                h[i] += dd
                            if np.isfinite(lo):
                                c, dpsi, dd = phr(lo - val[i], g["lam_lo"][k, i], w, 0.0, np.inf)
                                cost += c
                                v[i] -= dpsi
                                h[i] += dd
                if H is not None:
                    H += G.T @ np.diag(h) @ G
                    grad += G.T @ v
        return cost

    def merit(self, xu, x_s, ref):
        return self.p.merit(xu, x_s, ref) + self.cost_terms(xu, admm_term=self.admm_merit)

    # ------------------------------------------------------------ SQP
    def _solve(self, H, Cc, grad, c):
        n, m = H.shape[0], Cc.shape[0]
        K = np.zeros((n + m, n + m))
        K[:n, :n] = H
        K[:n, n:] = Cc.T
        K[n:, :n] = Cc
        return np.linalg.solve(K, np.concatenate([-grad, c]))[:n]

    def _admm_groups(self):
        return [g for g in self.groups if g["mech"] == "admm"]

    def sqp(self, x_s, ref, xu_warm=None, iters=1):
        """`iters` SQP iterations (dense KKT solves), then the end-of-solve AL update.
        Returns (xu, records) like RefProblem.sqp; records carry (alpha, merit_before, merit_after, rho)."""
        p = self.p
        x_s = np.asarray(x_s, dtype=np.float64).copy()
        xu = p.cold_start(x_s) if xu_warm is None else np.asarray(xu_warm, dtype=np.float64).copy()
        xu[p.x_index(0)] = x_s
        f = p.drho_factor
        drho = 1.0
        records = []
        admm = self._admm_groups()
        for _ in range(int(iters)):
            blocks = p.kkt_blocks(xu, x_s, ref)
            H, Cc, grad, c = p.assemble_kkt(blocks, p.rho)
            self.cost_terms(xu, H, grad)
            phi0 = self.merit(xu, x_s, ref) if not admm else p.merit(xu, x_s, ref) + self.cost_terms(xu)
            if admm:
                rows = {}
                for gi, g in enumerate(admm):
                    for k in g["knots"]:
                        val, G = self.rows(g, xu, k)
                        rows[gi, k] = (val, G)
                        if g["init"]:
                            g["z"][k] = np.clip(val, g["lo"], g["hi"])
                            g["y"][k] = 0.0
                        H += g["w"] * G.T @ G
                    g["init"] = False
                exit_on = self.eps_abs > 0 or self.eps_rel > 0
                for _j in range(self.admm_iters):
                    gj = grad.copy()
                    for gi, g in enumerate(admm):
                        for k in g["knots"]:
                            val, G = rows[gi, k]
                            gj += G.T @ (g["y"][k] + g["w"] * (val - g["z"][k]))
                    dz = self._solve(H, Cc, gj, c)
                    ok = True
                    for gi, g in enumerate(admm):
                        rp = rd = zm = 0.0
                        for k in g["knots"]:
                            val, G = rows[gi, k]
                            gl = val + G @ dz
                            zn = np.clip(gl + g["y"][k] / g["w"], g["lo"], g["hi"])
                            rd = max(rd, float(np.max(np.abs(zn - g["z"][k]))))
                            g["z"][k] = zn
                            g["y"][k] = g["y"][k] + g["w"] * (gl - zn)
                            rp = max(rp, float(np.max(np.abs(gl - zn))))
                            zm = max(zm, float(np.max(np.abs(zn))))
                        g["r_prim"], g["r_dual"] = rp, g["w"] * rd
                        ok &= rp <= self.eps_abs + self.eps_rel * zm and \
                            g["w"] * rd <= self.eps_abs + self.eps_rel * g["w"] * zm
                    if exit_on and ok:
                        break
                if self.admm_merit:
                    phi0 = self.merit(xu, x_s, ref)
            else:
                dz = self._solve(H, Cc, grad, c)
            best_alpha, best_phi = line_search(lambda z: self.merit(z, x_s, ref), xu, dz)
            accepted = best_phi < phi0
            if accepted:
                xu = xu + best_alpha * dz
            if p.adapt_rho:
                p.rho, drho = trust_region(p.rho, drho, f, accepted)
            records.append((best_alpha if accepted else -1.0, phi0, best_phi if accepted else phi0, p.rho))
        self.finish(xu)
        return xu, records

    def finish(self, xu):
        """End of a solve: AL dual update and per-group (max, sum) violation of xu."""
        self.violation = []
        for g in self.groups:
            vmax = vsum = 0.0
            for k in g["knots"]:
                val, _ = self.rows(g, xu, k)
                viol = np.maximum(0.0, np.maximum(g["lo"] - val, val - g["hi"]))
                vmax = max(vmax, float(viol.max()))
                vsum += float(viol.sum())
                if g["mech"] != "al":
                    continue
                w = g["w"]
                for i in range(len(val)):
                    lo, hi = g["lo"][i], g["hi"][i]
                    if lo == hi:
                        g["lam_hi"][k, i] = g["lam_hi"][k, i] + w * (val[i] - lo)
                    else:
                        if np.isfinite(hi):
                            g["lam_hi"][k, i] = max(0.0, g["lam_hi"][k, i] + w * (val[i] - hi))
                        if np.isfinite(lo):
                            g["lam_lo"][k, i] = max(0.0, g["lam_lo"][k, i] + w * (lo - val[i]))
            self.violation.append((vmax, vsum))
