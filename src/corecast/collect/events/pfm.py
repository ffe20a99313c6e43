"""libpfm4 through ctypes: full event names for any CPU model libpfm knows.

libpfm4 (Debian package `libpfm4`, `libpfm.so.4`) holds the event tables of every PMU it
supports, so corecast does not keep big tables by hand. It is used for two things:

- encoding a full event name (`INST_RETIRED:ANY_P`, `hsw::RESOURCE_STALLS:ROB`,
  `amd64_fam17h_zen2::DISPATCH_RESOURCE_STALL_CYCLES_1:INT_PHY_REG_FILE_RSRC_STALL`) into the
  perf_event attribute (type, config, config1, config2);
- listing the PMUs and events of this machine, or of any named PMU model.

Encoding for a model that is not this machine: libpfm honours `LIBPFM_FORCE_PMU=<pmu>` (that
model is taken to be the host's) and `LIBPFM_ENCODE_INACTIVE=1` (a `pmu::` prefix may name a
PMU that is not present). corecast sets the latter before initialising the library, so
`encode("INST_RETIRED:ANY_P", pmu="hsw")` gives Haswell's encoding on any machine; a user's own
`LIBPFM_FORCE_PMU` is left alone and decides which PMU unprefixed names belong to.
"""
from __future__ import annotations

import ctypes
import os
import threading
from dataclasses import dataclass

from ...errors import UserError
from .abi import PerfEventAttr

#: Where libpfm4 is looked for: a bare name is the dynamic loader's own search (its cache and
#: default folders, as for any library). Never ctypes.util.find_library: where the loader's
#: cache has no libpfm it runs gcc, cc, ld and objdump found through PATH -- as root, programs
#: from whatever folder PATH names first (a user's own, kept by `sudo -E`; the current folder,
#: for an empty entry), to find a library that is not there.
LIBPFM_PATHS = ("/usr/lib/x86_64-linux-gnu/libpfm.so.4", "libpfm.so.4", "libpfm.so")

PFM_OS_PERF_EVENT = 1
PFM_PLM0 = 0x01   # kernel
PFM_PLM3 = 0x08   # user
PFM_PMU_MAX = 4096   # upper bound on pfm_pmu_t values to scan

PFM_ERRORS = {
    -1: "not supported", -2: "invalid parameters", -3: "library not initialised",
    -4: "event not found", -5: "invalid combination of features", -6: "invalid or missing unit mask",
    -7: "out of memory", -8: "invalid event attribute", -9: "invalid event attribute value",
    -10: "attribute value already set", -11: "too many parameters", -12: "parameter too small",
}


class _PmuFlags(ctypes.Structure):
    _fields_ = [("is_present", ctypes.c_uint, 1), ("is_dfl", ctypes.c_uint, 1),
                ("reserved", ctypes.c_uint, 30)]


class PmuInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("desc", ctypes.c_char_p), ("size", ctypes.c_size_t),
                ("pmu", ctypes.c_int), ("type", ctypes.c_int), ("nevents", ctypes.c_int),
                ("first_event", ctypes.c_int), ("max_encoding", ctypes.c_int),
                ("num_cntrs", ctypes.c_int), ("num_fixed_cntrs", ctypes.c_int), ("flags", _PmuFlags)]


class _EvFlags(ctypes.Structure):
    _fields_ = [("is_precise", ctypes.c_uint, 1), ("is_speculative", ctypes.c_uint, 2),
                ("support_hw_smpl", ctypes.c_uint, 1), ("reserved", ctypes.c_uint, 28)]


class EventInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("desc", ctypes.c_char_p), ("equiv", ctypes.c_char_p),
                ("size", ctypes.c_size_t), ("code", ctypes.c_uint64), ("pmu", ctypes.c_int),
                ("dtype", ctypes.c_int), ("idx", ctypes.c_int), ("nattrs", ctypes.c_int),
                ("reserved", ctypes.c_int), ("flags", _EvFlags)]


class _AttrDefaults(ctypes.Union):
    _fields_ = [("dfl_val64", ctypes.c_uint64), ("dfl_str", ctypes.c_char_p),
                ("dfl_bool", ctypes.c_int), ("dfl_int", ctypes.c_int)]


class AttrInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("desc", ctypes.c_char_p), ("equiv", ctypes.c_char_p),
                ("size", ctypes.c_size_t), ("code", ctypes.c_uint64), ("type", ctypes.c_int),
                ("idx", ctypes.c_int), ("ctrl", ctypes.c_int), ("flags", ctypes.c_uint),
                ("defaults", _AttrDefaults)]


class PerfEncodeArg(ctypes.Structure):
    _fields_ = [("attr", ctypes.POINTER(PerfEventAttr)), ("fstr", ctypes.POINTER(ctypes.c_char_p)),
                ("size", ctypes.c_size_t), ("idx", ctypes.c_int), ("cpu", ctypes.c_int),
                ("flags", ctypes.c_int), ("pad0", ctypes.c_int)]


@dataclass(frozen=True)
class PfmEncoding:
    """A libpfm4 event encoded for perf_event_open."""

    name: str              # fully qualified name as libpfm gives it (pmu::EVENT:UMASK:k=..)
    pmu: str               # libpfm PMU name
    type: int
    config: int
    config1: int
    config2: int
    exclude_user: bool
    exclude_kernel: bool
    description: str


@dataclass(frozen=True)
class PfmPmu:
    name: str
    description: str
    present: bool
    nevents: int
    counters: int
    fixed_counters: int


class Libpfm:
    """A loaded and initialised libpfm4."""

    def __init__(self, path: str):
        self.path = path
        lib = ctypes.CDLL(path)
        lib.pfm_initialize.restype = ctypes.c_int
        lib.pfm_strerror.restype = ctypes.c_char_p
        lib.pfm_strerror.argtypes = [ctypes.c_int]
        lib.pfm_get_version.restype = ctypes.c_int
        lib.pfm_get_os_event_encoding.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        lib.pfm_get_os_event_encoding.restype = ctypes.c_int
        lib.pfm_get_pmu_info.argtypes = [ctypes.c_int, ctypes.POINTER(PmuInfo)]
        lib.pfm_get_event_info.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(EventInfo)]
        lib.pfm_get_event_attr_info.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(AttrInfo)]
        lib.pfm_get_event_next.argtypes = [ctypes.c_int]
        lib.pfm_find_event.argtypes = [ctypes.c_char_p]
        self.lib = lib
        rc = lib.pfm_initialize()
        if rc != 0:
            raise OSError(f"pfm_initialize failed: {lib.pfm_strerror(rc).decode()}")
        v = lib.pfm_get_version()
        self.version = f"{v >> 16}.{v & 0xffff}"
        self._pmus: list[tuple[int, PmuInfo]] | None = None

    def strerror(self, rc: int) -> str:
        return PFM_ERRORS.get(rc) or self.lib.pfm_strerror(rc).decode()

    def _pmu_infos(self) -> list[tuple[int, PmuInfo]]:
        if self._pmus is None:
            out = []
            for pid in range(PFM_PMU_MAX):
                info = PmuInfo()
                info.size = ctypes.sizeof(PmuInfo)
                if self.lib.pfm_get_pmu_info(pid, ctypes.byref(info)) == 0 and info.name:
                    out.append((pid, info))
            self._pmus = out
        return self._pmus

    def pmus(self) -> list[PfmPmu]:
        return [PfmPmu(i.name.decode(), (i.desc or b"").decode(), bool(i.flags.is_present),
                       i.nevents, i.num_cntrs, i.num_fixed_cntrs) for _, i in self._pmu_infos()]

    def pmu_names(self) -> set[str]:
        return {p.name for p in self.pmus()}

    def encode(self, name: str, pmu: str | None = None, plm: int = PFM_PLM0 | PFM_PLM3) -> PfmEncoding:
        """Encode one event; `pmu` prefixes the name with `pmu::` unless it already has one.

        Raises LookupError (not found in libpfm) or ValueError (found but malformed)."""
        full = name if (pmu is None or "::" in name) else f"{pmu}::{name}"
        attr = PerfEventAttr()
        fstr = ctypes.c_char_p()
        arg = PerfEncodeArg()
        arg.attr = ctypes.pointer(attr)
        arg.fstr = ctypes.pointer(fstr)
        arg.size = ctypes.sizeof(PerfEncodeArg)
        rc = self.lib.pfm_get_os_event_encoding(full.encode(), plm, PFM_OS_PERF_EVENT, ctypes.byref(arg))
        if rc == -4:
            raise LookupError(f"libpfm4 has no event '{full}'")
        if rc != 0:
            raise ValueError(f"libpfm4 cannot encode '{full}': {self.strerror(rc)}")
        fq = fstr.value.decode() if fstr.value else full
        # the fully qualified string was malloc'ed by libpfm; leak it rather than free through
        # a different allocator (a few bytes per resolved event)
        info = EventInfo()
        info.size = ctypes.sizeof(EventInfo)
        desc = ""
        pmu_name = fq.split("::", 1)[0] if "::" in fq else (pmu or "")
        if self.lib.pfm_get_event_info(arg.idx, PFM_OS_PERF_EVENT, ctypes.byref(info)) == 0:
            desc = (info.desc or b"").decode()
            for pid, pinfo in self._pmu_infos():
                if pid == info.pmu:
                    pmu_name = pinfo.name.decode()
        return PfmEncoding(name=fq, pmu=pmu_name, type=attr.type, config=attr.config,
                           config1=attr.config1, config2=attr.config2,
                           exclude_user=attr.get_flag("exclude_user"),
                           exclude_kernel=attr.get_flag("exclude_kernel"), description=desc)

    def events(self, pmu: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
        """(event name, description, [(umask or modifier, description)]) of one PMU."""
        found = [(pid, i) for pid, i in self._pmu_infos() if i.name.decode() == pmu]
        if not found:
            raise LookupError(f"libpfm4 {self.version} knows no PMU '{pmu}'")
        _, pinfo = found[0]
        out = []
        idx = pinfo.first_event
        while idx != -1:
            info = EventInfo()
            info.size = ctypes.sizeof(EventInfo)
            if self.lib.pfm_get_event_info(idx, PFM_OS_PERF_EVENT, ctypes.byref(info)) != 0:
                break
            attrs = []
            for a in range(info.nattrs):
                ainfo = AttrInfo()
                ainfo.size = ctypes.sizeof(AttrInfo)
                if self.lib.pfm_get_event_attr_info(idx, a, PFM_OS_PERF_EVENT, ctypes.byref(ainfo)) == 0:
                    attrs.append(((ainfo.name or b"").decode(), (ainfo.desc or b"").decode()))
            out.append((info.name.decode(), (info.desc or b"").decode(), attrs))
            idx = self.lib.pfm_get_event_next(idx)
        return out


_LOCK = threading.Lock()
_LIB: Libpfm | None = None
_LOAD_ERROR: str | None = None


def load() -> Libpfm | None:
    """The initialised library, or None when it is not installed (see `unavailable_reason`)."""
    global _LIB, _LOAD_ERROR
    with _LOCK:
        if _LIB is not None or _LOAD_ERROR is not None:
            return _LIB
        os.environ.setdefault("LIBPFM_ENCODE_INACTIVE", "1")
        candidates = [os.environ["CORECAST_LIBPFM"]] if os.environ.get("CORECAST_LIBPFM") else []
        candidates += list(LIBPFM_PATHS)
        errors = []
        for path in candidates:
            try:
                _LIB = Libpfm(path)
                return _LIB
            except OSError as err:
                errors.append(f"{path}: {err}")
        _LOAD_ERROR = ("libpfm4 is not installed (apt-get install libpfm4); full event names "
                       "are unavailable")
        return None


def unavailable_reason() -> str | None:
    load()
    return _LOAD_ERROR


def require() -> Libpfm:
    lib = load()
    if lib is None:
        raise UserError(_LOAD_ERROR or "libpfm4 is unavailable")
    return lib
