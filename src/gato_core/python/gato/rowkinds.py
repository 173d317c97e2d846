"""Row-group KIND and MECHANISM ids: the Python mirror of the C++ core's
``gato/rowgroups.hpp`` (enum RowKind / enum RowMech).

:meth:`gato.BSQP.get_row_groups` reports these ids; the constraint API
(interface.py) and the tests import them from here instead of re-declaring
literals. The method behind every kind and mechanism: ``docs/constraints.md``.
"""
from __future__ import annotations

__all__ = [
    "Q_BOX", "QD_BOX", "U_BOX", "EE_TERMINAL", "LIN_U", "COLLISION", "CONTACT_POS",
    "TELEMETRY", "BARRIER", "ADMM", "AL", "KIND_NAMES", "MECH_NAMES", "MECH_IDS", "BLOCK",
    "LIMIT_KINDS", "is_vector_kind",
]

# ---- kinds (RowKind)
Q_BOX = 0        #: joint position box, rows q_k (knots 1..N-1)
QD_BOX = 1       #: joint velocity box, rows qd_k (knots 1..N-1)
U_BOX = 2        #: joint torque box, rows u_k (controls 0..N-2)
EE_TERMINAL = 3  #: EE terminal position equality, rows p(q_{N-1}) - target
LIN_U = 4        #: linear control rows C u_k + d (optionally a second-order cone)
COLLISION = 5    #: collision clearance rows (CUDA builds only; not on the CPU backend)
CONTACT_POS = 6  #: contact-frame position rows (CUDA builds only; not on the CPU backend)

KIND_NAMES = {Q_BOX: "q_box", QD_BOX: "qd_box", U_BOX: "u_box", EE_TERMINAL: "ee_terminal",
              LIN_U: "lin_u", COLLISION: "collision", CONTACT_POS: "contact_pos"}

#: The block of the KKT system a kind's rows act on ("q" position, "qd" velocity, "u" control).
BLOCK = {Q_BOX: "q", QD_BOX: "qd", U_BOX: "u", EE_TERMINAL: "q", LIN_U: "u", COLLISION: "q",
         CONTACT_POS: "q"}

#: The canonical limit groups, installed by ``enable_limit_*`` as groups 0, 1, 2.
LIMIT_KINDS = (Q_BOX, QD_BOX, U_BOX)

# ---- mechanisms (RowMech)
TELEMETRY = 0  #: measure the violation only
BARRIER = 1    #: relaxed log barrier (cost and merit term)
ADMM = 2       #: ADMM projection (inner loop per SQP iteration)
AL = 3         #: PHR augmented Lagrangian (dual update once per solve)

MECH_NAMES = {TELEMETRY: "telemetry", BARRIER: "barrier", ADMM: "admm", AL: "al"}
MECH_IDS = {v: k for k, v in MECH_NAMES.items()}


def is_vector_kind(kind: int, cone: bool = False) -> bool:
    """True when a group's rows are gated per knot as one vector (second-order cones,
    collision groups): its mask is (N,) instead of (N, n_rows)."""
    return int(kind) == COLLISION or (int(kind) == LIN_U and bool(cone))
