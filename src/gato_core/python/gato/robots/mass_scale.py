"""Link-mass model errors of a URDF: ``mass_scale={URDF link: factor}`` scales that link's mass
and rotational inertia about its COM (the COM unchanged), for model-vs-reality experiments
against the nominal solver model."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np


# ---------------------------------------------------------------- model errors
_INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _urdf_inertial_links(urdf_path) -> tuple[list, set]:
    """(every <link> name of the URDF in file order, the names that carry an <inertial> with a <mass>)."""
    import xml.etree.ElementTree as ET

    root = ET.parse(str(urdf_path)).getroot()
    names, massive = [], set()
    for link in root.findall("link"):
        names.append(link.get("name"))
        if link.find("inertial/mass") is not None:
            massive.add(link.get("name"))
    return names, massive


def _check_mass_scale(mass_scale, urdf_path) -> dict:
    """Validated {URDF link name: factor (float, finite, > 0)}; {} for None / empty.

    ValueError names a link that is not in the URDF (listing the URDF's links), a link
    without an <inertial> (scaling it would change nothing) and a factor that is not a
    finite number > 0."""
    if mass_scale is None:
        return {}
    if not isinstance(mass_scale, dict):
        raise ValueError(f"mass_scale: expected None or a dict {{URDF link name: factor}}, got {mass_scale!r}")
    if not mass_scale:
        return {}
    links, massive = _urdf_inertial_links(urdf_path)
    out = {}
    for name, f in mass_scale.items():
        if name not in links:
            raise ValueError(f"mass_scale: link {name!r} is not in {Path(urdf_path).name}; its links are "
                             f"{', '.join(links)}")
        if name not in massive:
            raise ValueError(f"mass_scale: link {name!r} has no <inertial> mass in {Path(urdf_path).name} "
                             f"(links with a mass: {', '.join(n for n in links if n in massive)})")
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) \
                or not math.isfinite(f) or f <= 0:
            raise ValueError(f"mass_scale: factor for link {name!r} must be a finite number > 0, got {f!r}")
        out[str(name)] = float(f)
    return out


def _scaled_urdf_xml(urdf_path, mass_scale: dict) -> str:
    """The URDF text with each scaled link's <mass> and <inertia> (about the COM, in the
    inertial frame) multiplied by its factor; <origin> (the COM) unchanged."""
    import xml.etree.ElementTree as ET

    tree = ET.parse(str(urdf_path))
    for link in tree.getroot().findall("link"):
        f = mass_scale.get(link.get("name"))
        if f is None:
            continue
        mass = link.find("inertial/mass")
        mass.set("value", repr(float(mass.get("value")) * f))
        inertia = link.find("inertial/inertia")
        if inertia is not None:
            for k in _INERTIA_KEYS:
                if inertia.get(k) is not None:
                    inertia.set(k, repr(float(inertia.get(k)) * f))
    return ET.tostring(tree.getroot(), encoding="unicode")
