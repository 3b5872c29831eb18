"""zbpp — the zero-bubble pipeline planner from Python (ctypes over libzbpp.so).

    import zbpp
    costs = zbpp.Costs(f=1.0, b=1.0, w=0.8, comm=0.05)   # per rank: its F, B, W times, latency
    sched = zbpp.best(ranks=4, microbatches=8, costs=costs, mem_limit=6)
    print(sched.name, zbpp.simulate(sched).bubble_rate)
    open("pipe.csv", "w").write(sched.to_csv())   # torch: _load_csv("pipe.csv", "compute_only")

Everything returns plain Python objects (dataclasses); failures raise ZbError with the library's
one-line message. How the shared library is found: see zbpp._lib (ZBPP_LIBRARY first).
"""
import ctypes
import math
from dataclasses import dataclass, field, replace
from typing import List, Optional, Sequence, Union

from . import _lib

__all__ = ["ZbError", "Action", "Schedule", "Costs", "TimedAction", "RankTimeline",
           "Simulation", "Validation", "PlanRow", "families", "generate", "auto", "plan", "best",
           "validate", "simulate", "from_csv", "to_csv", "trace_json", "svg", "overlay_svg",
           "summary_json", "ascii_grid", "version", "library_path"]

_LIB, _PATH = _lib.load()

# zb_action_type_t, in order, and the PyTorch spellings of the compute kinds.
_TYPES = ["F", "B", "W", "BW", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "R", "O", "L"]
_PLACEMENTS = ["loop", "v"]
_STATUS = ["ok", "EINVAL", "ENOMEM", "EIO", "EFORMAT", "EUNSUPPORTED", "ESCHEDULE", "EDEADLOCK",
           "EMEMLIMIT", "ENUMERIC", "ESOLVER", "ECOMM", "ETIMEOUT", "EMISMATCH", "EABORT"]
_FMT = {"csv": 0, "csv-comms": 1, "json": 2, "trace": 3, "svg": 4, "svg-arrows": 5, "ascii": 6}


class ZbError(Exception):
    """A library failure: .status is the code name ("ESCHEDULE"), str() the one-line message."""

    def __init__(self, status: int, message: str):
        self.code = status
        self.status = _STATUS[status] if 0 <= status < len(_STATUS) else str(status)
        super().__init__(message or _LIB.zb_strerror(status).decode())


def _check(st: int, err: _lib.Err):
    if st != 0:
        raise ZbError(st, err.msg.decode(errors="replace"))


def version() -> str:
    """Version of the loaded libzbpp ("0.1.0")."""
    return _LIB.zb_version().decode()


def library_path() -> str:
    """The libzbpp file this module loaded."""
    return _PATH


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Action:
    """One action: kind is F, B (input grad), W (weight grad), BW (fused backward), or with
    comms SEND_F, RECV_F, SEND_B, RECV_B; stage and microbatch are 0-based."""
    kind: str
    stage: int
    mb: int

    def __str__(self):  # PyTorch CSV cell: our B is I, our BW is B
        k = {"B": "I", "BW": "B"}.get(self.kind, self.kind)
        return "%d%s%d" % (self.stage, k, self.mb)


@dataclass
class Schedule:
    """Per-rank ordered action lists (the schedule IR, docs/schedule.md)."""
    name: str
    ranks: int
    chunks: int
    stages: int
    microbatches: int
    placement: str                      # "loop" or "v"
    actions: List[List[Action]]         # [rank][i]
    note: str = ""                      # generator remark ("auto chose ...")
    costs: Optional["Costs"] = None     # the per-stage cost model it was made for (if any);
                                        # simulate/validate use it when given none

    def to_csv(self, comms: bool = False) -> str:
        """PyTorch pipelining CSV (torch.distributed.pipelining _load_csv: "compute_only", or
        "compute_comms" with comms=True)."""
        return to_csv(self, comms)

    def is_lowered(self) -> bool:
        return any(a.kind.startswith(("SEND", "RECV")) for row in self.actions for a in row)


Number = Union[float, int]
PerStage = Union[Number, Sequence[Number]]


@dataclass
class Costs:
    """Cost model. Times (f, b, w) and comm are per stage, i.e. per model chunk: either one
    number for every stage or one per stage. mem = (F, B, W) memory deltas (sum 0; a fused BW
    adds B+W), one triple or one per stage. mem_limit: per-rank limit on the running memory sum
    (None = no limit). mem_limit_ranks: one limit per rank instead (rank 0 first, math.inf =
    none); its length must be the schedule's P."""
    f: PerStage = 1.0
    b: PerStage = 1.0
    w: PerStage = 1.0
    comm: PerStage = 0.0
    mem: Union[Sequence[Number], Sequence[Sequence[Number]]] = (1.0, 0.0, -1.0)
    mem_limit: Optional[float] = None
    # Recompute (docs/schedule.md): r = duration of an R (None = the F's time), mem_keep = the
    # memory a non-saving F keeps (0 <= mem_keep <= the F's memory), uniform over stages.
    r: Optional[Number] = None
    mem_keep: Number = 0.0
    mem_limit_ranks: Optional[Sequence[Number]] = None
    # Offload (docs/offload.md): stash_bytes = what an O/L moves per stage (None = mem's F
    # value), copy_bw = device->host and host->device bandwidth in bytes per time unit (one
    # number: both; None = a copy takes the F's time), copy_latency = fixed time of a copy.
    stash_bytes: Optional[Number] = None
    copy_bw: Optional[Union[Number, Sequence[Number]]] = None
    copy_latency: Number = 0.0

    def split(self, ranks: int, chunks: int, placement: str = "loop") -> "Costs":
        """Per-rank costs (one stage per rank) spread over `chunks` chunks per rank: each chunk
        of rank r gets 1/chunks of r's times and memory, the message latency stays r's (as
        zb_costs_rechunk, which plan() uses)."""
        n = self.stage_count()
        if n not in (None, ranks):
            raise ZbError(1, "costs: split needs one stage per rank, have %d for P = %d"
                          % (n, ranks))
        if chunks == 1:
            return self
        if placement == "v" and chunks != 2:
            raise ZbError(1, "costs: V placement needs 2 chunks, not %d" % chunks)

        def rank_of(st):
            if placement == "v":
                return st if st < ranks else 2 * ranks - 1 - st
            return st % ranks

        def per(v, scale):
            if not isinstance(v, (list, tuple)):
                return v / scale
            return [v[rank_of(st)] / scale for st in range(ranks * chunks)]

        if self.mem and isinstance(self.mem[0], (list, tuple)):
            mem = [tuple(x / chunks for x in self.mem[rank_of(st)]) for st in range(ranks * chunks)]
        else:
            mem = tuple(x / chunks for x in self.mem)
        comm = self.comm
        if isinstance(comm, (list, tuple)):
            comm = [comm[rank_of(st)] for st in range(ranks * chunks)]
        return Costs(per(self.f, chunks), per(self.b, chunks), per(self.w, chunks), comm, mem,
                     self.mem_limit, None if self.r is None else self.r / chunks,
                     self.mem_keep / chunks, self.mem_limit_ranks,
                     None if self.stash_bytes is None else self.stash_bytes / chunks,
                     self.copy_bw, self.copy_latency)

    def stage_count(self) -> Optional[int]:
        """Stages the model describes, or None when every value is uniform."""
        n = None
        for v in (self.f, self.b, self.w, self.comm):
            if isinstance(v, (list, tuple)):
                if n is not None and len(v) != n:
                    raise ZbError(1, "costs: per-stage lists of different lengths")
                n = len(v)
        if self.mem and isinstance(self.mem[0], (list, tuple)):
            if n is not None and len(self.mem) != n:
                raise ZbError(1, "costs: per-stage mem has %d stages, times %d" % (len(self.mem), n))
            n = len(self.mem)
        return n


def _rank_limits(limits) -> List[float]:
    """mem_limit_ranks as floats: a non-empty sequence of numbers >= 0 (math.inf = none)."""
    if isinstance(limits, (str, bytes)) or not isinstance(limits, Sequence) or not limits:
        raise TypeError("mem_limit_ranks: need a non-empty sequence of numbers, one per rank, "
                        "got %r" % (limits,))
    out = []
    for r, x in enumerate(limits):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not x >= 0:
            raise ZbError(1, "mem_limit_ranks: rank %d's limit %r is not a number >= 0" % (r, x))
        out.append(float(x))
    return out


def _with_limits(costs, ranks, mem_limit, mem_limit_ranks):
    """costs with the keyword limits applied; mem_limit_ranks must have one value per rank."""
    c = Costs() if costs is None else costs
    if mem_limit is not None:
        c = replace(c, mem_limit=mem_limit)
    if mem_limit_ranks is not None:
        c = replace(c, mem_limit_ranks=mem_limit_ranks)
    if c.mem_limit_ranks is not None and len(_rank_limits(c.mem_limit_ranks)) != ranks:
        raise ZbError(1, "mem_limit_ranks: %d limits given, ranks is %d (one limit per rank)"
                      % (len(c.mem_limit_ranks), ranks))
    return c


class _CCosts:
    """A zb_costs_t built from Costs for `stages` stages; freed with the object."""

    def __init__(self, costs: Costs, stages: int):
        c = costs if costs is not None else Costs()
        n = c.stage_count()
        if n is not None and n != stages:
            raise ZbError(1, "costs: %d per-stage values, the schedule has %d stages" % (n, stages))

        def at(v, s):
            return float(v[s] if isinstance(v, (list, tuple)) else v)

        def mem(s):
            m = c.mem[s] if (c.mem and isinstance(c.mem[0], (list, tuple))) else c.mem
            if len(m) != 3:
                raise ZbError(1, "costs: mem needs three values (F, B, W)")
            return [float(x) for x in m]

        limit = math.inf if c.mem_limit is None else float(c.mem_limit)
        err = _lib.Err()
        self.ptr = ctypes.c_void_p()
        m0 = mem(0)
        _check(_LIB.zb_api_costs_new(stages, at(c.f, 0), at(c.b, 0), at(c.w, 0), at(c.comm, 0),
                                     m0[0], m0[1], m0[2], limit, ctypes.byref(self.ptr),
                                     ctypes.byref(err)), err)
        if n is not None:
            for s in range(stages):
                m = mem(s)
                _check(_LIB.zb_api_costs_set_stage(self.ptr, s, at(c.f, s), at(c.b, s),
                                                   at(c.w, s), at(c.comm, s), m[0], m[1], m[2],
                                                   ctypes.byref(err)), err)
        if c.r is not None or c.mem_keep:
            r = math.nan if c.r is None else float(c.r)
            _check(_LIB.zb_api_costs_set_recompute(self.ptr, r, float(c.mem_keep),
                                                   ctypes.byref(err)), err)
        if c.stash_bytes is not None or c.copy_bw is not None or c.copy_latency:
            bw = c.copy_bw if c.copy_bw is not None else 0.0
            d2h, h2d = (bw, bw) if not isinstance(bw, (list, tuple)) else tuple(bw)
            sb = math.nan if c.stash_bytes is None else float(c.stash_bytes)
            _check(_LIB.zb_api_costs_set_offload(self.ptr, sb, float(d2h), float(h2d),
                                                 float(c.copy_latency), ctypes.byref(err)), err)
        if c.mem_limit_ranks is not None:
            lims = _rank_limits(c.mem_limit_ranks)
            arr = (ctypes.c_double * len(lims))(*lims)
            _check(_LIB.zb_api_costs_set_rank_limits(self.ptr, len(lims), arr,
                                                     ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "ptr", None):
            _LIB.zb_api_costs_free(self.ptr)
            self.ptr = None


class _CSchedule:
    """A zb_schedule_t owned by Python."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if getattr(self, "ptr", None):
            _LIB.zb_schedule_free(self.ptr)
            self.ptr = None

    @classmethod
    def of(cls, s: Schedule) -> "_CSchedule":
        if s.placement not in _PLACEMENTS:
            raise ZbError(1, "schedule: placement must be 'loop' or 'v', not %r" % s.placement)
        if len(s.actions) != s.ranks:
            raise ZbError(1, "schedule: %d action rows for %d ranks" % (len(s.actions), s.ranks))
        ptr = _LIB.zb_schedule_new(s.name.encode(), s.ranks, s.chunks,
                                   _PLACEMENTS.index(s.placement), s.microbatches)
        if not ptr:
            raise ZbError(1, "schedule: bad shape P=%d v=%d M=%d placement %s"
                          % (s.ranks, s.chunks, s.microbatches, s.placement))
        out = cls(ctypes.c_void_p(ptr))
        err = _lib.Err()
        for r, row in enumerate(s.actions):
            for a in row:
                if a.kind not in _TYPES:
                    raise ZbError(1, "schedule: unknown action kind %r" % (a.kind,))
                _check(_LIB.zb_api_schedule_push(out.ptr, r, _TYPES.index(a.kind), a.stage,
                                                 a.mb, ctypes.byref(err)), err)
        # an F whose (stage, mb) has an R is non-saving: the flag follows the R's presence
        _check(_LIB.zb_schedule_mark_recompute(out.ptr, ctypes.byref(err)), err)
        return out

    def to_py(self, note: str = "") -> Schedule:
        shape = (ctypes.c_int * 5)()
        _LIB.zb_api_schedule_shape(self.ptr, shape)
        ranks = shape[0]
        rows = []
        err = _lib.Err()
        for r in range(ranks):
            n = _LIB.zb_api_schedule_len(self.ptr, r)
            t, st, mb = (ctypes.c_int * n)(), (ctypes.c_int * n)(), (ctypes.c_int * n)()
            _check(_LIB.zb_api_schedule_actions(self.ptr, r, t, st, mb, ctypes.byref(err)), err)
            rows.append([Action(_TYPES[t[i]], st[i], mb[i]) for i in range(n)])
        return Schedule(name=_LIB.zb_api_schedule_name(self.ptr).decode(), ranks=ranks,
                        chunks=shape[1], stages=shape[2], microbatches=shape[3],
                        placement=_PLACEMENTS[shape[4]], actions=rows, note=note)


# ---------------------------------------------------------------- planning


def families() -> List[str]:
    """Names of the schedule families, as `zbpp schedule -s` takes them."""
    out = []
    while True:
        name = _LIB.zb_api_family(len(out))
        if name is None:
            return out
        out.append(name.decode())


_RECOMPUTE = ["none", "all", "auto"]


def _int_arg(name: str, value, lo: int = 1) -> int:
    """An integer argument: TypeError naming it when it is not an int (a str "4" included),
    ZbError naming it when it is below lo, before anything reaches the library."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %s %r" % (name, type(value).__name__, value))
    if value < lo:
        raise ZbError(1, "%s must be >= %d, got %d" % (name, lo, value))
    return value


def _num_arg(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number, not %s %r" % (name, type(value).__name__, value))
    return float(value)


def _typed_arg(name: str, value, cls, optional: bool = False):
    """value must be a cls (or None when optional): TypeError naming the argument otherwise."""
    if value is None and optional:
        return value
    if not isinstance(value, cls):
        raise TypeError("%s must be a %s%s, not %s" % (name, cls.__name__,
                                                      " or None" if optional else "",
                                                      type(value).__name__))
    return value


def _shape_args(ranks, microbatches, costs=None, time_limit=0.0, chunks=None):
    _int_arg("ranks", ranks)
    _int_arg("microbatches", microbatches)
    if chunks is not None:
        _int_arg("chunks", chunks, lo=0)
    _typed_arg("costs", costs, Costs, optional=True)
    _num_arg("time_limit", time_limit)


def _recompute_mode(recompute: str) -> int:
    if recompute not in _RECOMPUTE:
        raise ZbError(1, "recompute: %r is not none, all or auto" % (recompute,))
    return _RECOMPUTE.index(recompute)


def _offload_mode(offload: str) -> int:
    if offload not in _RECOMPUTE:
        raise ZbError(1, "offload: %r is not none, all or auto" % (offload,))
    return _RECOMPUTE.index(offload)


def generate(family: str, ranks: int, microbatches: int, chunks: int = 0,
             costs: Optional[Costs] = None, any_placement: bool = False,
             time_limit: float = 0.0, recompute: str = "none",
             offload: str = "none") -> Schedule:
    """Generate a compute-only schedule of `family` (see families()) for P ranks and M
    microbatches. chunks 0 = the family's default (or the per-stage costs' count / P). Costs
    are needed by auto and optimal and respected by every family that looks at them.
    recompute: "none", "all" (every F non-saving, an R before each backward; any family) or
    "auto" (family auto only: the search picks what to recompute; costs.r, costs.mem_keep).
    offload: "none", "all" (every stash to host memory after its F, an O, and back for its B,
    an L) or "auto" (keep, offload or recompute each stash to fit the memory limit): see
    zb_generate_offload; costs.stash_bytes, copy_bw, copy_latency price the copies. Not with
    recompute; any_placement is ignored with it."""
    _typed_arg("family", family, str)
    _shape_args(ranks, microbatches, costs, time_limit, chunks)
    mode = _recompute_mode(recompute)
    omode = _offload_mode(offload)
    if omode and mode:
        raise ZbError(1, "offload %s and recompute %s cannot be combined: offload auto weighs "
                      "recompute too" % (offload, recompute))
    if omode and not chunks:
        n = costs.stage_count() if costs is not None else None
        chunks = n // ranks if n else _LIB.zb_api_default_chunks(family.encode(), ranks,
                                                                   microbatches)
    if omode:
        c = costs if costs is not None else Costs()
        cc = _CCosts(c, chunks * ranks)
        err = _lib.Err()
        ptr = ctypes.c_void_p()
        note = ctypes.create_string_buffer(96)
        _check(_LIB.zb_api_generate_offload(family.encode(), ranks, microbatches, chunks,
                                            cc.ptr, float(time_limit), omode, ctypes.byref(ptr),
                                            note, 96, ctypes.byref(err)), err)
        out = _CSchedule(ptr).to_py(note.value.decode())
        out.costs = c
        return out
    n = costs.stage_count() if costs is not None else None
    if not chunks:
        if n is not None:
            if n % ranks:
                raise ZbError(1, "costs: %d stages is not a multiple of P = %d" % (n, ranks))
            chunks = n // ranks
        else:
            chunks = _LIB.zb_api_default_chunks(family.encode(), ranks, microbatches)
    cc = _CCosts(costs, chunks * ranks) if costs is not None else _CCosts(Costs(), chunks * ranks)
    err = _lib.Err()
    ptr = ctypes.c_void_p()
    note = ctypes.create_string_buffer(256)
    _check(_LIB.zb_api_generate_rc(family.encode(), ranks, microbatches, chunks, cc.ptr,
                                   int(any_placement), float(time_limit), mode,
                                   ctypes.byref(ptr), note, 256, ctypes.byref(err)), err)
    out = _CSchedule(ptr).to_py(note.value.decode())
    if costs is not None:
        out.costs = costs
        if out.chunks != chunks or out.placement != "loop":
            if chunks == 1:  # auto with any_placement chose another chunking: split to match
                out.costs = costs.split(ranks, out.chunks, out.placement)
    return out


def best(ranks: int, microbatches: int, costs: Optional[Costs] = None,
         mem_limit: Optional[float] = None, time_limit: float = 0.0,
         recompute: str = "none",
         mem_limit_ranks: Optional[Sequence[Number]] = None) -> Schedule:
    """The schedule plan() ranks first (smallest makespan within the memory limit), generated
    with the costs split over its chunking; its .costs is that per-stage model. costs are per
    rank (one stage per rank). Raises ZbError(EMEMLIMIT) when no family fits."""
    _shape_args(ranks, microbatches, costs, time_limit)
    c = _with_limits(costs, ranks, mem_limit, mem_limit_ranks)
    rows = plan(ranks, microbatches, c, time_limit=time_limit, recompute=recompute)
    if not rows or not rows[0].fits:
        raise ZbError(8, "best: no schedule family fits (%s)"
                      % ("; ".join("%s: %s" % (r.family, r.reason) for r in rows[:3])))
    row = rows[0]
    per_stage = c.split(ranks, row.chunks, row.placement)
    family, rc = row.family, "none"
    if family.endswith("+R"):  # a recompute variant: the family with R's
        family, rc = family[:-2], "all"
        if family == "auto":
            rc = recompute
    if family == "auto":  # auto's winner may be any chunking: search it the same way
        s = generate("auto", ranks, microbatches, chunks=1, costs=c, any_placement=True,
                     time_limit=time_limit, recompute=rc)
    else:
        s = generate(family, ranks, microbatches, chunks=row.chunks, costs=per_stage,
                     time_limit=time_limit, recompute=rc)
    v = validate(s)
    if not v.ok:
        raise ZbError(_STATUS.index(v.status), "best: %s" % v.message)
    return s


def auto(ranks: int, microbatches: int, costs: Optional[Costs] = None,
         mem_limit: Optional[float] = None, any_placement: bool = True,
         time_limit: float = 0.0, recompute: str = "none",
         mem_limit_ranks: Optional[Sequence[Number]] = None) -> Schedule:
    """The automatic search (ZB paper's heuristic + local improvement) under a memory limit.
    costs are per stage of one chunk per rank (per rank); mem_limit overrides costs.mem_limit,
    mem_limit_ranks (one limit per rank) costs.mem_limit_ranks.
    With any_placement the search also tries 2 chunks per rank (loop and V); .note says which
    won, and .chunks/.placement tell the chunking of the result. recompute "auto" lets the
    search recompute activations (costs.r, costs.mem_keep) where that fits the limit faster;
    "all" recomputes every F."""
    _shape_args(ranks, microbatches, costs, time_limit)
    c = _with_limits(costs, ranks, mem_limit, mem_limit_ranks)
    return generate("auto", ranks, microbatches, chunks=1, costs=c, any_placement=any_placement,
                    time_limit=time_limit, recompute=recompute)


@dataclass
class PlanRow:
    """One family in the comparison (zbpp plan)."""
    family: str
    chunks: int
    placement: str
    fits: bool
    reason: str            # why not, when it does not fit
    note: str
    makespan: float
    bubble_rate: float     # ZB paper's (T - busy_max) / T
    peak_memory: float     # max over ranks
    messages: int          # cross-rank messages per step
    volume: float


def plan(ranks: int, microbatches: int, costs: Optional[Costs] = None,
         mem_limit: Optional[float] = None, time_limit: float = 0.0,
         recompute: str = "none",
         mem_limit_ranks: Optional[Sequence[Number]] = None,
         offload: str = "none") -> List[PlanRow]:
    """Every family for P ranks and M microbatches under one cost model (one stage per rank:
    the times of a rank's whole model part) and memory limit: fitting rows first, best
    (smallest makespan) first, then the others with a reason. recompute "all" or "auto" adds
    a "<family>+R" row per family (every F recomputed) and "auto+R" (auto in that mode).
    offload "all" or "auto" adds a "<family>+O" row per family (generate(offload=...))."""
    _shape_args(ranks, microbatches, costs, time_limit)
    mode = _recompute_mode(recompute)
    omode = _offload_mode(offload)
    c = _with_limits(costs, ranks, mem_limit, mem_limit_ranks)
    cc = _CCosts(c, ranks)
    err = _lib.Err()
    ptr = ctypes.c_void_p()
    _check(_LIB.zb_api_plan_ro(ranks, microbatches, cc.ptr, float(time_limit), mode, omode,
                               ctypes.byref(ptr), ctypes.byref(err)), err)
    try:
        rows = []
        for i in range(_LIB.zb_api_plan_count(ptr)):
            r = _lib.PlanRow()
            _check(_LIB.zb_api_plan_row(ptr, i, ctypes.byref(r), ctypes.byref(err)), err)
            rows.append(PlanRow(r.family.decode(), r.chunks, _PLACEMENTS[r.placement],
                                bool(r.fits), r.reason.decode(), r.note.decode(), r.makespan,
                                r.bubble_rate, r.peak_max, int(r.messages), r.volume))
        return rows
    finally:
        _LIB.zb_api_plan_free(ptr)


@dataclass
class Validation:
    """ok, or the status ("ESCHEDULE", "EMEMLIMIT", "EDEADLOCK", ...) and the message."""
    ok: bool
    status: str
    message: str

    def __bool__(self):
        return self.ok


def validate(schedule: Schedule, costs: Optional[Costs] = None) -> Validation:
    """Completeness, placement, dependencies, memory (when costs has a mem_limit) and deadlock
    freedom of the lowered program."""
    _typed_arg("schedule", schedule, Schedule)
    _typed_arg("costs", costs, Costs, optional=True)
    cs = _CSchedule.of(schedule)
    costs = costs if costs is not None else schedule.costs
    cc = _CCosts(costs, schedule.stages) if costs is not None else None
    err = _lib.Err()
    st = _LIB.zb_validate(cs.ptr, cc.ptr if cc else None, ctypes.byref(err))
    return Validation(st == 0, _STATUS[st], err.msg.decode(errors="replace"))


# ---------------------------------------------------------------- simulation


@dataclass
class TimedAction:
    action: Action
    start: float
    end: float


@dataclass
class RankTimeline:
    span: float            # end of the last action - start of the first F
    busy: float            # compute time
    peak_memory: float
    peak_time: float
    actions: List[TimedAction] = field(default_factory=list)


@dataclass
class Simulation:
    """A timeline: simulated by simulate(), or any measured one with the same actions (edit the
    start/end times and pass it to overlay_svg)."""
    schedule: Schedule
    costs: Costs
    makespan: float        # first start to last end over all ranks
    span_max: float        # T
    busy_max: float
    bubble_rate: float     # (T - busy_max) / T, the ZB paper's definition
    ranks: List[RankTimeline]

    @property
    def idle_fraction(self) -> float:
        """Plain idle share of all rank-time over the makespan (1 - sum busy / (P x makespan))."""
        tot = self.makespan * len(self.ranks)
        return 1.0 - sum(r.busy for r in self.ranks) / tot if tot > 0 else 0.0


class _CSim:
    def __init__(self, schedule: Schedule, costs: Optional[Costs]):
        costs = costs if costs is not None else schedule.costs
        self.sched = _CSchedule.of(schedule)
        self.costs = _CCosts(costs if costs is not None else Costs(), schedule.stages)
        self.ptr = ctypes.c_void_p()
        err = _lib.Err()
        _check(_LIB.zb_api_simulate(self.sched.ptr, self.costs.ptr, ctypes.byref(self.ptr),
                                    ctypes.byref(err)), err)

    def __del__(self):
        if getattr(self, "ptr", None):
            _LIB.zb_api_sim_free(self.ptr)
            self.ptr = None

    @classmethod
    def of(cls, sim: Simulation) -> "_CSim":
        """Re-simulate and put the Python object's (possibly measured) times in."""
        c = cls(sim.schedule, sim.costs)
        err = _lib.Err()
        for r, rt in enumerate(sim.ranks):
            n = len(rt.actions)
            if n != _LIB.zb_api_schedule_len(c.sched.ptr, r):
                raise ZbError(1, "timeline: rank %d has %d actions, its schedule %d"
                              % (r, n, _LIB.zb_api_schedule_len(c.sched.ptr, r)))
            st = (ctypes.c_double * n)(*[a.start for a in rt.actions])
            en = (ctypes.c_double * n)(*[a.end for a in rt.actions])
            _check(_LIB.zb_api_sim_set_times(c.ptr, r, st, en, ctypes.byref(err)), err)
        return c


def simulate(schedule: Schedule, costs: Optional[Costs] = None) -> Simulation:
    """Event-driven simulation (compute-only: comm latency on cross-rank dependencies; lowered:
    messages arrive `comm` after their send). costs default to schedule.costs, else unit costs.
    Raises ZbError(EDEADLOCK) if it cannot finish."""
    _typed_arg("schedule", schedule, Schedule)
    _typed_arg("costs", costs, Costs, optional=True)
    costs = costs if costs is not None else schedule.costs
    c = _CSim(schedule, costs)
    tot = (ctypes.c_double * 4)()
    _LIB.zb_api_sim_totals(c.ptr, tot)
    err = _lib.Err()
    ranks = []
    for r in range(schedule.ranks):
        pr = (ctypes.c_double * 4)()
        _check(_LIB.zb_api_sim_rank(c.ptr, r, pr, ctypes.byref(err)), err)
        n = len(schedule.actions[r])
        st, en = (ctypes.c_double * n)(), (ctypes.c_double * n)()
        _check(_LIB.zb_api_sim_times(c.ptr, r, st, en, ctypes.byref(err)), err)
        ranks.append(RankTimeline(pr[0], pr[1], pr[2], pr[3],
                                  [TimedAction(a, st[i], en[i])
                                   for i, a in enumerate(schedule.actions[r])]))
    return Simulation(schedule, costs if costs is not None else Costs(), tot[0], tot[1], tot[2],
                      tot[3], ranks)


# ---------------------------------------------------------------- formats


def _text(fmt: str, schedule: Schedule, costs: Optional[Costs] = None, title=None,
          scale: float = 0.0, sim: Optional[Simulation] = None) -> str:
    _typed_arg("schedule", schedule, Schedule)
    _typed_arg("costs", costs, Costs, optional=True)
    c = _CSim.of(sim) if sim is not None else _CSim(schedule, costs)
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    err = _lib.Err()
    _check(_LIB.zb_api_write(_FMT[fmt], c.sched.ptr, c.costs.ptr, c.ptr,
                             title.encode() if title else None, float(scale), ctypes.byref(out),
                             ctypes.byref(n), ctypes.byref(err)), err)
    try:
        return ctypes.string_at(out, n.value).decode()
    finally:
        _LIB.zb_api_text_free(out)


def to_csv(schedule: Schedule, comms: bool = False) -> str:
    """PyTorch pipelining CSV: compute only (_load_csv(path, "compute_only")) or, with comms,
    SEND/RECV inserted (_load_csv(path, "compute_comms"))."""
    _typed_arg("schedule", schedule, Schedule)
    cs = _CSchedule.of(schedule)
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    err = _lib.Err()
    _check(_LIB.zb_api_write(_FMT["csv-comms" if comms else "csv"], cs.ptr, None, None, None,
                             0.0, ctypes.byref(out), ctypes.byref(n), ctypes.byref(err)), err)
    try:
        return ctypes.string_at(out, n.value).decode()
    finally:
        _LIB.zb_api_text_free(out)


def from_csv(text: str) -> Schedule:
    """Parse a PyTorch pipelining CSV (as zbpp simulate reads it). Not validated."""
    data = text.encode()
    ptr = ctypes.c_void_p()
    err = _lib.Err()
    _check(_LIB.zb_csv_read(data, len(data), ctypes.byref(ptr), ctypes.byref(err)), err)
    return _CSchedule(ptr).to_py()


def trace_json(schedule: Schedule, costs: Optional[Costs] = None,
               us_per_unit: float = 1000.0, sim: Optional[Simulation] = None) -> str:
    """Chrome/Perfetto trace JSON of the simulated (or given) timeline; one time unit shows as
    us_per_unit microseconds (1000: one cost unit = 1 ms)."""
    return _text("trace", schedule, costs, scale=us_per_unit, sim=sim)


def svg(schedule: Schedule, costs: Optional[Costs] = None, title: Optional[str] = None,
        arrows: bool = False, sim: Optional[Simulation] = None) -> str:
    """SVG Gantt chart (with message arrows between ranks when arrows=True)."""
    return _text("svg-arrows" if arrows else "svg", schedule, costs, title=title, sim=sim)


def summary_json(schedule: Schedule, costs: Optional[Costs] = None) -> str:
    """The JSON summary `zbpp schedule --format json` prints."""
    return _text("json", schedule, costs)


def ascii_grid(schedule: Schedule, costs: Optional[Costs] = None, width: int = 0) -> str:
    """The terminal grid `zbpp schedule` prints (width 0 = 200 columns)."""
    return _text("ascii", schedule, costs, scale=width)


def overlay_svg(measured: Simulation, predicted: Simulation, title: Optional[str] = None,
                time_unit: Optional[str] = None) -> str:
    """Measured against predicted in one SVG chart (two lanes per rank, one time axis)."""
    m, p = _CSim.of(measured), _CSim.of(predicted)
    out = ctypes.c_void_p()
    n = ctypes.c_size_t()
    err = _lib.Err()
    _check(_LIB.zb_api_write_overlay(m.ptr, p.ptr, title.encode() if title else None,
                                     time_unit.encode() if time_unit else None,
                                     ctypes.byref(out), ctypes.byref(n), ctypes.byref(err)), err)
    try:
        return ctypes.string_at(out, n.value).decode()
    finally:
        _LIB.zb_api_text_free(out)
