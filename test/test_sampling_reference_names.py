"""Checklist of RoboKit SimMPC's public names and parameters (../shared/reference/robokit_sim_mpc_docs.txt)
against gato.sampling.

Every documented class / function, its constructor parameters in their positional order, and every
documented member ("Class.member") is looked up in gato.sampling; what is absent must be listed in
NOT_HERE with its reason (docs/sampling_reference.md, "Differences from RoboKit's SimMPC"), and what is listed
there must really be absent, so the list stays exact.
"""
import inspect
import re
from pathlib import Path

import pytest

import gato.sampling as gs

REFERENCE = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / "robokit_sim_mpc_docs.txt"
#: RoboKit name -> gato.sampling name (the CPU simulator plays MjWarpSim's part and is the Sim protocol's).
RENAMED = {"MjWarpSim": "MjSim", "Sim": "MjSim"}
#: "Class" / "Class(param)" / "Class.member" absent from gato.sampling, with the reason.
NOT_HERE = {
    "MjWarpSim(njmax)": "the warp backend's buffers are SimMPCConfig.njmax (backend 'warp'), not the simulator's",
    "MjWarpSim(nconmax)": "the warp backend's buffers are SimMPCConfig.nconmax (backend 'warp')",
    "MjWarpSim(key)": "a keyframe start: pass data=MjData (mj_resetDataKeyframe) instead",
    "MjWarpSim(device)": "the CPU simulator; SimMPCConfig.device picks the warp backend's device",
    "MjWarpSim.set_torch_stream": "no CUDA streams on the CPU",
}


def _reference():
    lines = REFERENCE.read_text().splitlines()
    classes, members = {}, {}
    for i, line in enumerate(lines):
        m = re.match(r"^robokit\.[\w.]+\.(\w+)\($", line)
        if m:
            params, j = [], i + 1
            while not lines[j].startswith(")"):
                pm = re.match(r"^(\w+)(:|\s*=|,|$)", lines[j].strip())
                if lines[j].strip() and pm:
                    params.append(pm.group(1))
                j += 1
            classes[m.group(1)] = params
        m = re.match(r"^robokit\.[\w.]+\.(\w+)$", line)
        if m:
            classes.setdefault(m.group(1), None)
    for line in lines:
        m = re.match(r"^(\w+)\.(\w+)(\(|:| *$)", line)
        if m and m.group(1) in classes:
            members.setdefault(m.group(1), set()).add(m.group(2))
    return classes, members


def _instances():
    """Instances whose members are set on construction (dataclass fields, a simulator's worlds)."""
    import mujoco

    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                                           "</worldbody></mujoco>")
    return {"SimMPCConfig": gs.SimMPCConfig(), "MjSim": gs.MjSim(model, 2)}


def _absent():
    classes, members = _reference()
    inst = _instances()
    out = set()
    for name, params in classes.items():
        obj = getattr(gs, RENAMED.get(name, name), None)
        if obj is None:
            out.add(name)
            continue
        if params:
            have = list(inspect.signature(obj).parameters)
            have = [p for p in have if p != "self"]
            for p in params:
                if p not in have:
                    out.add(f"{name}({p})")
            present = [p for p in params if p in have]
            assert [p for p in have if p in present] == present, f"{name}: parameters out of the reference's order"
            assert have[:len(present)] == present or name in ("MjWarpSim",), \
                f"{name}: the reference's parameters must come first, in order: {have}"
        target = inst.get(RENAMED.get(name, name), obj)
        for mem in members.get(name, ()):
            if not hasattr(target, mem):
                out.add(f"{name}.{mem}")
    return out


@pytest.mark.skipif(not REFERENCE.exists(), reason=f"the reference text is not on this machine ({REFERENCE})")
def test_reference_names_are_here_or_listed():
    absent = _absent()
    assert absent - set(NOT_HERE) == set(), "absent and not listed in NOT_HERE"
    assert set(NOT_HERE) - absent == set(), "listed in NOT_HERE but present: remove them from the list"
