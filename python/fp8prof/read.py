"""Reading a run file: tensors, recipes and records as numpy arrays."""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib, check

_SUMMARY_DTYPE = None


def summary_dtype():
    """numpy dtype of one record (fp8_summary: the statistics without the
    histograms), laid out as the C struct."""
    global _SUMMARY_DTYPE
    if _SUMMARY_DTYPE is None:
        _SUMMARY_DTYPE = _lib.field_dtype(lib.fp8_summary_fields, lib.fp8_summary_size)
    return _SUMMARY_DTYPE


class RunData:
    """A run file, read: meta (dict), tensors (structured array: name, role,
    layer), recipes (list of canonical specs), records (structured array,
    one row per tensor x recipe x recorded step; tensor and recipe are
    indices into the two above), scalars(name), snapshot(i).  A damaged file
    (a writer killed mid-write) loads up to its damage: unreadable_records
    and unreadable_rows (the every-step series and indexes) count what was
    left out, 0 for an intact file."""

    def __init__(self, path, tensor=None):
        self.path = str(path)
        self._h = lib.fp8_run_load_summary(self.path.encode(), None if tensor is None else str(tensor).encode())
        if not self._h:
            raise _lib.Error(_lib.last_error())
        h = self._h
        self.schema = lib.fp8_run_schema(h)
        self.meta = {lib.fp8_run_name(h, _lib.RUN_META, i).decode(): lib.fp8_run_meta_value(h, i).decode()
                     for i in range(lib.fp8_run_count(h, _lib.RUN_META))}
        nt = lib.fp8_run_count(h, _lib.RUN_TENSORS)
        self.tensors = np.zeros(nt, dtype=[("name", object), ("role", "U10"), ("layer", "<i4")])
        role, layer = ctypes.c_int(), ctypes.c_int()
        for t in range(nt):
            check(lib.fp8_run_tensor_info(h, t, ctypes.byref(role), ctypes.byref(layer)))
            self.tensors[t] = (lib.fp8_run_name(h, _lib.RUN_TENSORS, t).decode(), _lib.ROLES[role.value], layer.value)
        self.recipes = [lib.fp8_run_name(h, _lib.RUN_RECIPES, i).decode()
                        for i in range(lib.fp8_run_count(h, _lib.RUN_RECIPES))]
        self.scalar_names = [lib.fp8_run_name(h, _lib.RUN_SCALAR_NAMES, i).decode()
                             for i in range(lib.fp8_run_count(h, _lib.RUN_SCALAR_NAMES))]
        self.unreadable_records = lib.fp8_run_count(h, _lib.RUN_UNREADABLE_RECORDS)
        self.unreadable_rows = lib.fp8_run_count(h, _lib.RUN_UNREADABLE_ROWS)
        n = lib.fp8_run_count(h, _lib.RUN_RECORDS)
        dt = summary_dtype()
        ptr = lib.fp8_run_summaries(h)
        if n and ptr:
            raw = (ctypes.c_char * (n * dt.itemsize)).from_address(ptr)
            self.records = np.frombuffer(raw, dtype=dt, count=n).copy()
        else:
            self.records = np.zeros(0, dtype=dt)

    def tensor_id(self, name):
        hits = np.nonzero(self.tensors["name"] == name)[0]
        if not len(hits):
            raise KeyError("no tensor %r in %s" % (name, self.path))
        return int(hits[0])

    def scalars(self, name):
        """(steps int64, values float64) of a scalar series, in file order."""
        if name not in self.scalar_names:
            raise KeyError("no scalar %r in %s (it has %s)" % (name, self.path, ", ".join(self.scalar_names) or "none"))
        want = self.scalar_names.index(name)
        sid, st, val = ctypes.c_uint32(), ctypes.c_int64(), ctypes.c_double()
        steps, values = [], []
        for i in range(lib.fp8_run_count(self._h, _lib.RUN_SCALARS)):
            check(lib.fp8_run_scalar(self._h, i, ctypes.byref(sid), ctypes.byref(st), ctypes.byref(val)))
            if sid.value == want:
                steps.append(st.value)
                values.append(val.value)
        return np.array(steps, dtype=np.int64), np.array(values, dtype=np.float64)

    @property
    def nsnapshots(self):
        return lib.fp8_run_count(self._h, _lib.RUN_SNAPSHOTS)

    def snapshot(self, i):
        """(tensor name, step, float32 array rows x cols) of snapshot i."""
        t, st, r, c = ctypes.c_uint32(), ctypes.c_int64(), ctypes.c_uint64(), ctypes.c_uint64()
        check(lib.fp8_run_snapshot_info(self._h, i, ctypes.byref(t), ctypes.byref(st), ctypes.byref(r), ctypes.byref(c)))
        out = np.empty((r.value, c.value), dtype=np.float32)
        check(lib.fp8_run_snapshot_read(self._h, i, out.ctypes.data), "snapshot")
        return str(self.tensors["name"][t.value]), st.value, out

    def close(self):
        if self._h:
            lib.fp8_run_free(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def open_run(path, tensor=None):
    """Read a run file (tensor: an fnmatch pattern of the tensors to keep)."""
    return RunData(path, tensor)
