"""Finding and loading libzbpp.so, and the ctypes signatures of the planner facade
(include/zbpp/planner_api.h).

Where the library is looked for, first match wins:
  1. the ZBPP_LIBRARY environment variable: the path of libzbpp.so (or libzbpp.so.0);
  2. the location recorded by `cmake --install` (zbpp/_install.py, written at install time);
  3. the build tree this package sits in: <source>/build/libzbpp.so.0 (and $ZBPP_BUILD_DIR);
  4. the system loader: "libzbpp.so.0" on the default library path (ldconfig, LD_LIBRARY_PATH).
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libzbpp.so.0"


def _candidates():
    env = os.environ.get("ZBPP_LIBRARY")
    if env:
        # An explicit choice is final: a wrong path is an error, not a silent fallback.
        return [env], True
    out = []
    try:
        from . import _install  # written by cmake --install
        out.append(_install.LIBRARY)
    except ImportError:
        pass
    build = os.environ.get("ZBPP_BUILD_DIR")
    if build:
        out.append(os.path.join(build, _SONAME))
    out.append(os.path.join(_HERE, "..", "..", "build", _SONAME))
    out.append(_SONAME)
    return out, False


def load():
    """Load libzbpp; raises OSError naming every place tried."""
    paths, explicit = _candidates()
    tried = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            tried.append(p + " (missing)")
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError as e:
            tried.append("%s (%s)" % (p, e))
            continue
        _declare(lib)
        return lib, _resolved_path(lib, p)
    how = "ZBPP_LIBRARY" if explicit else "the search path"
    raise OSError("zbpp: cannot load libzbpp via %s; tried: %s" % (how, "; ".join(tried)))


def _resolved_path(lib, fallback):
    """The file the dynamic loader actually mapped (via dladdr on one of its symbols)."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        libdl = ctypes.CDLL(None)
        dladdr = libdl.dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        info = DlInfo()
        addr = ctypes.cast(lib.zb_version, ctypes.c_void_p)
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.realpath(info.dli_fname.decode())
    except (AttributeError, OSError):
        pass
    return os.path.realpath(fallback) if os.sep in fallback else fallback


class Err(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("msg", ctypes.c_char * 512)]


class PlanRow(ctypes.Structure):
    _fields_ = [("family", ctypes.c_char * 48), ("reason", ctypes.c_char * 512),
                ("note", ctypes.c_char * 256), ("chunks", ctypes.c_int),
                ("placement", ctypes.c_int), ("fits", ctypes.c_int),
                ("makespan", ctypes.c_double), ("bubble_rate", ctypes.c_double),
                ("peak_max", ctypes.c_double), ("messages", ctypes.c_double),
                ("volume", ctypes.c_double)]


def _declare(lib):
    P, I, D, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_double, ctypes.c_char_p
    PP = ctypes.POINTER(ctypes.c_void_p)
    E = ctypes.POINTER(Err)
    IP, DP = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_double)
    sig = {
        "zb_version": (S, []),
        "zb_strerror": (S, [I]),
        "zb_api_costs_new": (I, [I, D, D, D, D, D, D, D, D, PP, E]),
        "zb_api_costs_set_stage": (I, [P, I, D, D, D, D, D, D, D, E]),
        "zb_api_costs_rechunk": (I, [P, I, I, I, PP, E]),
        "zb_api_costs_free": (None, [P]),
        "zb_api_family": (S, [I]),
        "zb_api_default_chunks": (I, [S, I, I]),
        "zb_api_generate": (I, [S, I, I, I, P, I, D, PP, ctypes.c_char_p, ctypes.c_size_t, E]),
        "zb_api_schedule_shape": (None, [P, IP]),
        "zb_api_schedule_name": (S, [P]),
        "zb_api_schedule_len": (I, [P, I]),
        "zb_api_schedule_actions": (I, [P, I, IP, IP, IP, E]),
        "zb_api_schedule_push": (I, [P, I, I, I, I, E]),
        "zb_schedule_new": (P, [S, I, I, I, I]),
        "zb_schedule_free": (None, [P]),
        "zb_insert_comms": (I, [P, PP, E]),
        "zb_strip_comms": (I, [P, PP, E]),
        "zb_validate": (I, [P, P, E]),
        "zb_csv_read": (I, [ctypes.c_char_p, ctypes.c_size_t, PP, E]),
        "zb_api_simulate": (I, [P, P, PP, E]),
        "zb_api_sim_free": (None, [P]),
        "zb_api_sim_totals": (None, [P, DP]),
        "zb_api_sim_rank": (I, [P, I, DP, E]),
        "zb_api_sim_times": (I, [P, I, DP, DP, E]),
        "zb_api_sim_set_times": (I, [P, I, DP, DP, E]),
        "zb_api_write": (I, [I, P, P, P, S, D, PP, ctypes.POINTER(ctypes.c_size_t), E]),
        "zb_api_write_overlay": (I, [P, P, S, S, PP, ctypes.POINTER(ctypes.c_size_t), E]),
        "zb_api_text_free": (None, [P]),
        "zb_api_plan": (I, [I, I, P, D, PP, E]),
        "zb_api_plan_rc": (I, [I, I, P, D, I, PP, E]),
        "zb_api_costs_set_recompute": (I, [P, D, D, E]),
        "zb_api_plan_ro": (I, [I, I, P, D, I, I, PP, E]),
        "zb_api_costs_set_offload": (I, [P, D, D, D, D, E]),
        "zb_api_offload": (I, [P, I, P, PP, ctypes.c_char_p, ctypes.c_size_t, E]),
        "zb_api_generate_offload": (I, [S, I, I, I, P, D, I, PP, ctypes.c_char_p,
                                        ctypes.c_size_t, E]),
        "zb_api_costs_set_rank_limits": (I, [P, I, DP, E]),
        "zb_api_generate_rc": (I, [S, I, I, I, P, I, D, I, PP, ctypes.c_char_p, ctypes.c_size_t,
                                   E]),
        "zb_schedule_mark_recompute": (I, [P, E]),
        "zb_api_plan_count": (I, [P]),
        "zb_api_plan_row": (I, [P, I, ctypes.POINTER(PlanRow), E]),
        "zb_api_plan_free": (None, [P]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
