"""Row-group KIND and MECHANISM ids: the integer values of the C++ core's enums
``gato/rowgroups.hpp`` RowKind / RowMech, read from their bindings
(``gato._core.RowKind`` / ``gato._core.RowMech``), so the ids are written once.

:meth:`gato.BSQP.get_row_groups` reports these ids; the constraint API
(interface.py) and the tests import them from here instead of re-declaring
literals. The method behind every kind and mechanism: ``docs/constraints.md``.
"""
from __future__ import annotations

from .native import core as _core

__all__ = [
    "Q_BOX", "QD_BOX", "U_BOX", "EE_TERMINAL", "LIN_U", "COLLISION", "CONTACT_POS",
    "TELEMETRY", "BARRIER", "ADMM", "AL", "KIND_NAMES", "MECH_NAMES", "MECH_IDS", "BLOCK",
    "LIMIT_KINDS", "is_vector_kind",
]

# ---- kinds (RowKind)
Q_BOX = int(_core.RowKind.Q_BOX)              #: joint position box, rows q_k (knots 1..N-1)
QD_BOX = int(_core.RowKind.QD_BOX)            #: joint velocity box, rows qd_k (knots 1..N-1)
U_BOX = int(_core.RowKind.U_BOX)              #: joint torque box, rows u_k (controls 0..N-2)
EE_TERMINAL = int(_core.RowKind.EE_TERMINAL)  #: EE terminal position equality, rows p(q_{N-1}) - target
LIN_U = int(_core.RowKind.LIN_U)              #: linear control rows C u_k + d (optionally a second-order cone)
COLLISION = int(_core.RowKind.COLLISION)      #: collision clearance rows d_i(q_k) >= margin, one per sphere
CONTACT_POS = int(_core.RowKind.CONTACT_POS)  #: contact-frame position rows (CUDA builds only; not on the CPU)

KIND_NAMES = {int(v): k.lower() for k, v in _core.RowKind.__members__.items()}

#: The block of the KKT system a kind's rows act on ("q" position, "qd" velocity, "u" control).
BLOCK = {Q_BOX: "q", QD_BOX: "qd", U_BOX: "u", EE_TERMINAL: "q", LIN_U: "u", COLLISION: "q",
         CONTACT_POS: "q"}

#: The canonical limit groups, installed by ``enable_limit_*`` as groups 0, 1, 2.
LIMIT_KINDS = (Q_BOX, QD_BOX, U_BOX)

# ---- mechanisms (RowMech)
TELEMETRY = int(_core.RowMech.TELEMETRY)  #: measure the violation only
BARRIER = int(_core.RowMech.BARRIER)      #: relaxed log barrier (cost and merit term)
ADMM = int(_core.RowMech.ADMM)            #: ADMM projection (inner loop per SQP iteration)
AL = int(_core.RowMech.AL)                #: PHR augmented Lagrangian (dual update once per solve)

MECH_NAMES = {int(v): k.lower() for k, v in _core.RowMech.__members__.items()}
MECH_IDS = {v: k for k, v in MECH_NAMES.items()}


def is_vector_kind(kind: int, cone: bool = False) -> bool:
    """True when a group's rows are gated per knot as one vector (second-order cones,
    collision groups): its mask is (N,) instead of (N, n_rows)."""
    return int(kind) == COLLISION or (int(kind) == LIN_U and bool(cone))
