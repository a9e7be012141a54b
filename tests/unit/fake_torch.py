"""A stand-in torch for tests/unit/test_sitecustomize.py: the modules the flight-recorder reader of
launcher/watch/sitecustomize.py looks up in sys.modules (it never imports torch), shaped as torch 1.13 and torch 2.11
have them. install_torch1() and install_torch2() put them into sys.modules; uninstall() takes them out.

torch 1.13 (Debian 12's python3-torch): torch._C._distributed_c10d has the process-group classes and no recorder
dump; torch.distributed.distributed_c10d keeps its groups in module globals (_pg_names, _pg_group_ranks), with no
_world.
torch 2.11 (measured on the GPU machine, tests/fixtures/fr/MANIFEST): torch._C._distributed_c10d has
_dump_fr_trace_json (gloo's recorder) and _dump_nccl_trace_json (NCCL's), each called with the keywords
includeCollectives and onlyActive and returning the JSON document as bytes, without "entries" when
includeCollectives is false; distributed_c10d._world has pg_names {group: name} and pg_group_ranks
{group: {global rank: group rank}}."""
import json
import sys
import types

NAMES = ("torch", "torch.distributed", "torch.distributed.distributed_c10d", "torch._C", "torch._C._distributed_c10d")


class Dump:
    """One recorder: doc is its whole JSON document (a dict, as torch's dump or a fixture has it). calls counts the
    dumps asked for, entries those that carried the entries; fail makes the next dumps raise, as a recorder torn
    down under the sampler does."""

    def __init__(self, doc):
        self.doc = doc
        self.calls = 0
        self.entries = 0
        self.fail = None

    def __call__(self, includeCollectives=None, onlyActive=None):
        self.calls += 1
        if self.fail:
            raise self.fail
        d = dict(self.doc)
        if includeCollectives:
            self.entries += 1
        else:
            d.pop("entries", None)
        return json.dumps(d).encode()


class Group:
    """A process group object, as the keys of torch's _world maps are."""

    def __init__(self, name):
        self.name = name


def _modules(initialized):
    torch = types.ModuleType("torch")
    dist = types.ModuleType("torch.distributed")
    c10d_py = types.ModuleType("torch.distributed.distributed_c10d")
    c = types.ModuleType("torch._C")
    c10d = types.ModuleType("torch._C._distributed_c10d")
    torch.distributed, torch._C, c._distributed_c10d, dist.distributed_c10d = dist, c, c10d, c10d_py
    state = {"initialized": initialized}
    dist.is_available = lambda: True
    dist.is_initialized = lambda: state["initialized"]
    for cls in ("ProcessGroup", "ProcessGroupGloo", "Store", "TCPStore", "Work"):
        setattr(c10d, cls, type(cls, (), {}))
    for m in (torch, dist, c10d_py, c, c10d):
        sys.modules[m.__name__] = m
    return torch, dist, state


def install_torch1(initialized=True, groups=None):
    """torch 1.13: no recorder. groups: {name: [global ranks]}, kept where 1.13 keeps them. Returns (torch, state):
    state["initialized"] is what dist.is_initialized() answers."""
    torch, dist, state = _modules(initialized)
    objs = {name: Group(name) for name in groups or {}}
    dist.distributed_c10d._pg_names = {g: name for name, g in objs.items()}
    dist.distributed_c10d._pg_group_ranks = {g: {r: i for i, r in enumerate(groups[name])} for name, g in objs.items()}
    return torch, state


def install_torch2(gloo=None, nccl=None, groups=None, initialized=True):
    """torch 2.11: gloo and nccl are the Dump objects _dump_fr_trace_json and _dump_nccl_trace_json answer with
    (None: that function is missing). groups: {name: [global ranks]} in the order the program made them, as _world
    holds them. Returns (torch, state) as install_torch1."""
    torch, dist, state = _modules(initialized)
    c10d = torch._C._distributed_c10d
    if gloo is not None:
        c10d._dump_fr_trace_json = gloo
    if nccl is not None:
        c10d._dump_nccl_trace_json = nccl
    objs = {name: Group(name) for name in groups or {}}
    dist.distributed_c10d._world = types.SimpleNamespace(
        pg_names={g: name for name, g in objs.items()},
        pg_group_ranks={g: {r: i for i, r in enumerate(groups[name])} for name, g in objs.items()},
    )
    return torch, state


def uninstall():
    for name in NAMES:
        sys.modules.pop(name, None)
