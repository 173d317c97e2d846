"""The launch-file half of :mod:`gato_ros.launch_runner`: XML / YAML launch files parsed into
entities, substitutions evaluated, and the processes to start (:func:`load`). The supported
subset and its errors are listed in :mod:`gato_ros.launch_runner`'s docstring.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import yaml

__all__ = ["LaunchError", "Entity", "Process", "parse_file", "Context", "resolve_executable", "load"]


_TRUE, _FALSE = ("true", "1"), ("false", "0")


class LaunchError(Exception):
    """A launch file uses something this runner does not support, or is invalid."""


@dataclass
class Entity:
    """A frontend-neutral launch entity: tag, attributes, child entities."""

    tag: str
    attrs: dict
    children: list = field(default_factory=list)
    where: str = ""


@dataclass
class Process:
    """One OS process to start: the resolved command line."""

    name: str
    cmd: list
    env: dict = field(default_factory=dict)
    on_exit: str = ""
    output: str = "screen"
    respawn: bool = False
    respawn_delay: float = 0.0
    # the parameter files this runner wrote for inline params: {path: YAML document}
    inline_params: dict = field(default_factory=dict)


# ------------------------------------------------------------------ parsing
def _xml_entities(path: Path) -> list:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise LaunchError(f"{path}: invalid XML: {e}") from None
    if root.tag != "launch":
        raise LaunchError(f"{path}: root element is <{root.tag}>, expected <launch>")

    def conv(el):
        return Entity(el.tag, dict(el.attrib), [conv(c) for c in el], f"{path.name}: <{el.tag}>")

    return [conv(c) for c in root]


_YAML_CHILD_KEYS = {"node": ("param", "remap", "env"), "executable": ("env",), "include": ("arg",),
                    "group": ("children",)}


def _yaml_entities(path: Path) -> list:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise LaunchError(f"{path}: invalid YAML: {e}") from None
    if not isinstance(doc, dict) or list(doc) != ["launch"] or not isinstance(doc["launch"], list):
        raise LaunchError(f"{path}: expected a top-level 'launch:' list")

    def conv(item):
        if not isinstance(item, dict) or len(item) != 1:
            raise LaunchError(f"{path}: each launch entry must be a one-key mapping, got {item!r}")
        tag, body = next(iter(item.items()))
        body = dict(body or {})
        kids = []
        for key in _YAML_CHILD_KEYS.get(tag, ()):
            for c in body.pop(key, None) or []:
                kids.append(conv(c) if key == "children" else Entity(key, dict(c), [], f"{path.name}: {key}"))
        return Entity(tag, body, kids, f"{path.name}: {tag}")

    return [conv(i) for i in doc["launch"]]


def parse_file(path) -> list:
    """Entities of an XML (.xml) or YAML (.yaml / .yml) launch file."""
    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"launch file not found: {path}")
    if path.suffix == ".xml":
        return _xml_entities(path)
    if path.suffix in (".yaml", ".yml"):
        return _yaml_entities(path)
    raise LaunchError(f"{path}: unsupported launch file type (supported: .xml, .yaml, .yml; "
                      "Python launch files need ros2 launch)")


# ------------------------------------------------------------------ substitutions
def _package_prefix(pkg: str) -> str:
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        return get_package_prefix(pkg)
    except (PackageNotFoundError, LookupError, ValueError):
        raise LaunchError(f"package {pkg!r} not found in the ament index (AMENT_PREFIX_PATH); source "
                          "install/setup.bash, or install it (ros2_control, robot_state_publisher, ... come "
                          "with a full ROS 2 install)") from None


class Context:
    """Launch configurations and the current file (for $(dirname))."""

    def __init__(self, configs=None, file=None):
        self.configs = dict(configs or {})
        self.file = file

    def child(self, file=None):
        return Context(self.configs, file or self.file)

    def subst(self, text) -> str:
        """Perform the $(...) substitutions in ``text`` (innermost first)."""
        if not isinstance(text, str):
            return text
        out, i = [], 0
        while True:
            j = text.find("$(", i)
            if j < 0:
                out.append(text[i:])
                return "".join(out)
            out.append(text[i:j])
            depth, k, quote = 0, j + 2, None
            while k < len(text):
                ch = text[k]
                if quote:
                    if ch == quote:
                        quote = None
                elif ch in "'\"":
                    quote = ch
                elif text.startswith("$(", k):
                    depth += 1
                    k += 1
                elif ch == ")":
                    if depth == 0:
                        break
                    depth -= 1
                k += 1
            if k >= len(text):
                raise LaunchError(f"unterminated substitution in {text!r}")
            out.append(self._one(self.subst(text[j + 2:k])))
            i = k + 1

    def _one(self, body: str) -> str:
        try:
            parts = shlex.split(body)
        except ValueError as e:
            raise LaunchError(f"$({body}): {e}") from None
        if not parts:
            raise LaunchError("empty substitution $()")
        name, args = parts[0], parts[1:]
        if name == "var":
            if len(args) != 1:
                raise LaunchError(f"$(var ...) takes one name, got {args}")
            if args[0] not in self.configs:
                raise LaunchError(f"$(var {args[0]}): launch configuration not set (declare an <arg>)")
            return str(self.configs[args[0]])
        if name in ("find-pkg-share", "find-pkg-prefix"):
            if len(args) != 1:
                raise LaunchError(f"$({name} ...) takes one package name, got {args}")
            prefix = _package_prefix(args[0])
            return os.path.join(prefix, "share", args[0]) if name == "find-pkg-share" else prefix
        if name == "env":
            if not 1 <= len(args) <= 2:
                raise LaunchError(f"$(env NAME [default]) got {args}")
            if args[0] in os.environ:
                return os.environ[args[0]]
            if len(args) == 2:
                return args[1]
            raise LaunchError(f"$(env {args[0]}): environment variable not set")
        if name == "dirname":
            return str(Path(self.file).parent) if self.file else os.getcwd()
        if name == "equals":  # launch's EqualsSubstitution on plain strings
            if len(args) != 2:
                raise LaunchError(f"$(equals A B) takes two values, got {args}")
            return "true" if args[0] == args[1] else "false"
        if name == "command":
            cmd = " ".join(args)
            r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            if r.returncode != 0:
                raise LaunchError(f"$(command {cmd}) failed ({r.returncode}): {r.stderr.strip()[-500:]}")
            return r.stdout
        raise LaunchError(f"unsupported substitution $({name} ...); supported: var, find-pkg-share, "
                          "find-pkg-prefix, env, dirname, command, equals")

    def truth(self, value, where: str) -> bool:
        v = self.subst(value) if isinstance(value, str) else value
        if isinstance(v, bool):
            return v
        s = str(v).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise LaunchError(f"{where}: condition {value!r} evaluated to {s!r}, expected true/false/1/0")


def _typed(value):
    """A parameter value typed like launch_ros does: YAML rules on the substituted string."""
    if not isinstance(value, str):
        return value
    try:
        v = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list) and v and len({type(x) for x in v}) == 1 and type(v[0]) in (bool, int, float, str):
        return v
    return value


# ------------------------------------------------------------------ evaluation
_NODE_ATTRS = {"pkg", "exec", "name", "namespace", "args", "ros_args", "on_exit", "output", "respawn",
               "respawn_delay", "if", "unless"}
_EXEC_ATTRS = {"cmd", "name", "on_exit", "output", "respawn", "respawn_delay", "if", "unless"}


def _respawn(e: Entity, ctx: Context) -> dict:
    """respawn / respawn_delay of a node or executable (launch_ros semantics)."""
    respawn = ctx.truth(e.attrs["respawn"], e.where) if "respawn" in e.attrs else False
    delay = _attr(e, "respawn_delay", ctx, default="0")
    try:
        delay = float(delay)
    except (TypeError, ValueError):
        raise LaunchError(f"{e.where}: respawn_delay {delay!r} is not a number of seconds") from None
    if not delay >= 0:
        raise LaunchError(f"{e.where}: respawn_delay must be >= 0 s, got {delay:g}")
    return {"respawn": respawn, "respawn_delay": delay}


def _attr(e: Entity, key: str, ctx: Context, default=None, required=False):
    if key not in e.attrs:
        if required:
            raise LaunchError(f"{e.where}: missing attribute '{key}'")
        return default
    return ctx.subst(e.attrs[key])


class _Loader:
    def __init__(self, tmpdir: Path):
        self.tmpdir = tmpdir
        self.processes: list = []
        self._n_tmp = 0
        self._written: dict = {}  # path -> document of the inline parameter files

    def _params_file(self, node_name: str, params: dict) -> str:
        self._n_tmp += 1
        path = self.tmpdir / f"params_{self._n_tmp}_{node_name or 'node'}.yaml"
        doc = {"/**": {"ros__parameters": params}}
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        self._written[str(path)] = doc
        return str(path)

    def run(self, entities, ctx: Context):
        for e in entities:
            if "if" in e.attrs and not ctx.truth(e.attrs["if"], e.where):
                continue
            if "unless" in e.attrs and ctx.truth(e.attrs["unless"], e.where):
                continue
            handler = getattr(self, f"_{e.tag.replace('-', '_')}", None)
            if handler is None or e.tag.startswith("_"):
                raise LaunchError(f"{e.where}: unsupported launch entity '{e.tag}'; this runner supports arg, "
                                  "let, node, executable, include, group (see gato_ros/launch_runner.py)")
            handler(e, ctx)

    def _arg(self, e, ctx):
        name = _attr(e, "name", ctx, required=True)
        if name in ctx.configs:
            return
        if "default" not in e.attrs:
            raise LaunchError(f"{e.where}: argument '{name}' has no default and was not given ({name}:=...)")
        ctx.configs[name] = ctx.subst(e.attrs["default"])

    def _let(self, e, ctx):
        ctx.configs[_attr(e, "name", ctx, required=True)] = _attr(e, "value", ctx, required=True)

    def _group(self, e, ctx):
        scoped = ctx.truth(e.attrs.get("scoped", "true"), e.where)
        self.run(e.children, ctx.child() if scoped else ctx)

    def _include(self, e, ctx):
        path = Path(_attr(e, "file", ctx, required=True))
        sub = ctx.child(file=str(path))
        for a in e.children:
            if a.tag != "arg":
                raise LaunchError(f"{e.where}: <include> supports <arg> children only, got <{a.tag}>")
            sub.configs[_attr(a, "name", ctx, required=True)] = _attr(a, "value", ctx, required=True)
        self.run(parse_file(path), sub)

    def _env_children(self, e, ctx) -> dict:
        env = {}
        for c in e.children:
            if c.tag == "env":
                env[_attr(c, "name", ctx, required=True)] = _attr(c, "value", ctx, required=True)
        return env

    def _node(self, e, ctx):
        unknown = set(e.attrs) - _NODE_ATTRS
        if unknown:
            raise LaunchError(f"{e.where}: unsupported node attribute(s) {sorted(unknown)}")
        pkg = _attr(e, "pkg", ctx, required=True)
        exe = _attr(e, "exec", ctx, required=True)
        name = _attr(e, "name", ctx, default="")
        ns = _attr(e, "namespace", ctx, default="")
        ros_args = ["--ros-args"]
        if name:
            ros_args += ["-r", f"__node:={name}"]
        if ns:
            ros_args += ["-r", f"__ns:={ns if ns.startswith('/') else '/' + ns}"]
        inline: dict = {}
        for c in e.children:
            if c.tag == "param":
                if "from" in c.attrs:
                    if inline:
                        ros_args += ["--params-file", self._params_file(name, inline)]
                        inline = {}
                    f = _attr(c, "from", ctx)
                    if not Path(f).is_file():
                        raise LaunchError(f"{c.where}: parameter file not found: {f}")
                    ros_args += ["--params-file", f]
                else:
                    pname = _attr(c, "name", ctx, required=True)
                    if "value" not in c.attrs:
                        raise LaunchError(f"{c.where}: param '{pname}' needs value or from")
                    v = c.attrs["value"]
                    inline[pname] = [_typed(ctx.subst(x)) for x in v] if isinstance(v, list) else _typed(ctx.subst(v))
            elif c.tag == "remap":
                ros_args += ["-r", f"{_attr(c, 'from', ctx, required=True)}:={_attr(c, 'to', ctx, required=True)}"]
            elif c.tag != "env":
                raise LaunchError(f"{c.where}: unsupported node child '{c.tag}' (param, remap, env)")
        if inline:
            ros_args += ["--params-file", self._params_file(name, inline)]
        extra = shlex.split(_attr(e, "ros_args", ctx, default="") or "")
        args = shlex.split(_attr(e, "args", ctx, default="") or "")
        cmd = [f"{pkg}/{exe}"] + args + ros_args + extra
        self.processes.append(Process(name=name or exe, cmd=cmd, env=self._env_children(e, ctx),
                                      on_exit=_attr(e, "on_exit", ctx, default="") or "",
                                      output=_attr(e, "output", ctx, default="screen"), **_respawn(e, ctx),
                                      inline_params={f: self._written[f] for f in cmd if f in self._written}))

    def _executable(self, e, ctx):
        unknown = set(e.attrs) - _EXEC_ATTRS
        if unknown:
            raise LaunchError(f"{e.where}: unsupported executable attribute(s) {sorted(unknown)}")
        cmd = shlex.split(_attr(e, "cmd", ctx, required=True))
        self.processes.append(Process(name=_attr(e, "name", ctx, default=Path(cmd[0]).name), cmd=["@" + cmd[0]]
                                      + cmd[1:], env=self._env_children(e, ctx),
                                      on_exit=_attr(e, "on_exit", ctx, default="") or "", **_respawn(e, ctx)))


def resolve_executable(spec: str) -> str:
    """'pkg/exec' -> <prefix>/lib/<pkg>/<exec>; '@cmd' -> cmd."""
    if spec.startswith("@"):
        return spec[1:]
    pkg, _, exe = spec.partition("/")
    path = Path(_package_prefix(pkg)) / "lib" / pkg / exe
    if not path.is_file():
        raise LaunchError(f"executable {exe!r} of package {pkg!r} not found at {path}")
    return str(path)


def load(path, args: dict, tmpdir) -> list:
    """Processes of the launch file at ``path`` with launch arguments ``args`` ({name: value})."""
    loader = _Loader(Path(tmpdir))
    ctx = Context({k: str(v) for k, v in args.items()}, str(path))
    loader.run(parse_file(path), ctx)
    for p in loader.processes:
        if p.on_exit not in ("", "shutdown"):
            raise LaunchError(f"{p.name}: on_exit={p.on_exit!r} unsupported (only 'shutdown')")
    return loader.processes
