"""The shared library and the C signatures the package calls (ctypes).

Where the library is found, first match wins: the FP8PROF_LIB environment
variable; libfp8prof.so beside this file (what `pip install .` puts there);
the path `make install` wrote into _installed.py; build/ of the source tree
this package sits in; the system's library path.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int64, c_size_t,
                    c_uint16, c_uint32, c_uint64, c_void_p)


def _candidates():
    env = os.environ.get("FP8PROF_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    bundled = os.path.join(here, "libfp8prof.so")
    if os.path.exists(bundled):
        yield bundled
    try:
        from . import _installed  # written by make install
        yield _installed.LIBRARY
    except ImportError:
        pass
    yield os.path.join(here, "..", "..", "build", "libfp8prof.so")
    yield "libfp8prof.so.1"  # the loader's search path (LD_LIBRARY_PATH, ld.so.cache)
    found = ctypes.util.find_library("fp8prof")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("fp8prof: cannot load libfp8prof.so; tried: " + "; ".join(tried) +
                      ". Build it with make, install it with make install, or set FP8PROF_LIB.")


lib = _load()


class Format(Structure):
    """fp8_format (lib/format/fp8_format.h), field for field."""
    _fields_ = [("name", c_char * 24), ("title", c_char_p), ("kind", c_int), ("ebits", c_int),
                ("mbits", c_int), ("bias", c_int), ("sign_bits", c_int), ("bits", c_int),
                ("code_bytes", c_int), ("has_inf", c_int), ("has_nan", c_int), ("has_negzero", c_int),
                ("max_mag", c_uint32), ("sign_mask", c_uint32), ("nan_code", c_uint32),
                ("inf_code", c_uint32), ("emin", c_int), ("max", c_double), ("min_normal", c_double),
                ("min_subnormal", c_double)]


class CastMode(Structure):
    """fp8_cast_mode (lib/format/fp8_format.h)."""
    _fields_ = [("round", c_int), ("overflow", c_int), ("seed", c_uint64), ("offset", c_uint64)]


NCLASS = 7


class Counts(Structure):
    _fields_ = [("n", c_uint64 * NCLASS)]


class Field(Structure):
    """fp8_field (lib/store/fp8_bindings.h): a member of fp8_stats or fp8_summary."""
    _fields_ = [("name", c_char_p), ("type", c_int), ("offset", c_size_t), ("count", c_size_t)]


def _sig(name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


FmtP = POINTER(Format)
_sig("fp8_error_message", c_char_p)
_sig("fp8_format_find", FmtP, c_char_p, FmtP)
_sig("fp8_format_list", POINTER(FmtP), POINTER(c_size_t))
_sig("fp8_format_encode_array", c_int, FmtP, POINTER(CastMode), c_float, c_void_p, c_size_t, c_void_p,
     POINTER(Counts))
_sig("fp8_format_decode_array", c_int, FmtP, c_float, c_void_p, c_size_t, c_void_p)
_sig("fp8_class_name", c_char_p, c_int)
_sig("fp8_recipe_state_new", c_void_p, c_char_p, c_char_p)
_sig("fp8_recipe_state_free", None, c_void_p)
_sig("fp8_recipe_state_step", None, c_void_p)
_sig("fp8_quantize", c_int, c_void_p, c_void_p, c_size_t, c_size_t, c_void_p, c_void_p)
_sig("fp8_stats_fields", POINTER(Field), POINTER(c_size_t))
_sig("fp8_stats_size", c_size_t)
_sig("fp8_stats_format_name", c_char_p, c_void_p)
_sig("fp8_summary_fields", POINTER(Field), POINTER(c_size_t))
_sig("fp8_summary_size", c_size_t)
_sig("fp8_role_parse", c_int, c_char_p, POINTER(c_int))
# probes
_sig("fp8_probe_options_size", c_size_t)
_sig("fp8_probe_defaults_into", None, c_void_p)
_sig("fp8_probe_option_set", c_int, c_void_p, c_char_p, c_char_p)
_sig("fp8_probe_open", c_void_p, c_char_p, c_void_p, POINTER(c_char_p), c_int)
_sig("fp8_probe_declare", c_void_p, c_void_p, c_char_p, c_int, c_int, c_char_p, POINTER(c_char_p), c_int)
_sig("fp8_probe_record", c_int, c_void_p, c_int64, c_void_p, c_size_t, c_size_t)
_sig("fp8_probe_record_bits", c_int, c_void_p, c_int64, c_void_p, c_int, c_size_t, c_size_t)
_sig("fp8_probe_apply", c_int, c_void_p, c_int64, c_void_p, c_size_t, c_size_t, c_void_p)
_sig("fp8_probe_cast", c_int, c_void_p, c_void_p, c_size_t, c_size_t, c_void_p)
_sig("fp8_probe_scalar", c_int, c_void_p, c_char_p, c_int64, c_double)
_sig("fp8_probe_step_end", c_int, c_void_p, c_int64)
_sig("fp8_probe_flush", c_int, c_void_p)
_sig("fp8_probe_close", c_int, c_void_p)
_sig("fp8_probe_set_training", c_int, c_void_p, c_int)
_sig("fp8_probe_dropped", c_uint64, c_void_p)
_sig("fp8_probe_needs_tensor", c_int, c_void_p, c_int64)
_sig("fp8_probe_note_amax", c_int, c_void_p, c_int64, c_float, c_uint32)
_sig("fp8_probe_active_scale", c_int, c_void_p, POINTER(c_float), POINTER(c_float))
_sig("fp8_probe_recipes", c_int, c_void_p, POINTER(c_char_p), c_int)
_sig("fp8_probe_last_stats", c_int, c_void_p, c_int, POINTER(c_int64), c_void_p)
# reading runs
_sig("fp8_run_load", c_void_p, c_char_p)
_sig("fp8_run_load_summary", c_void_p, c_char_p, c_char_p)
_sig("fp8_run_free", None, c_void_p)
_sig("fp8_run_count", c_size_t, c_void_p, c_int)
_sig("fp8_run_name", c_char_p, c_void_p, c_int, c_size_t)
_sig("fp8_run_meta_value", c_char_p, c_void_p, c_size_t)
_sig("fp8_run_tensor_info", c_int, c_void_p, c_size_t, POINTER(c_int), POINTER(c_int))
_sig("fp8_run_schema", c_int, c_void_p)
_sig("fp8_run_summaries", c_void_p, c_void_p)
_sig("fp8_run_scalar", c_int, c_void_p, c_size_t, POINTER(c_uint32), POINTER(c_int64), POINTER(c_double))
_sig("fp8_run_snapshot_info", c_int, c_void_p, c_size_t, POINTER(c_uint32), POINTER(c_int64), POINTER(c_uint64),
     POINTER(c_uint64))
_sig("fp8_run_snapshot_read", c_int, c_void_p, c_size_t, c_void_p)

ROLES = ("activation", "weight", "gradient", "output", "other")
(RUN_META, RUN_TENSORS, RUN_RECIPES, RUN_SCALAR_NAMES, RUN_RECORDS, RUN_SCALARS, RUN_SNAPSHOTS, RUN_STEPS,
 RUN_UNREADABLE_RECORDS, RUN_UNREADABLE_ROWS) = range(10)
DTYPE_F32, DTYPE_BF16, DTYPE_F16 = 0, 1, 2


class Error(RuntimeError):
    """An fp8prof call failed; the message is the library's."""


def check(status, what=""):
    if status != 0:
        msg = lib.fp8_error_message()
        raise Error((what + ": " if what else "") + (msg.decode() if msg else "error %d" % status))
    return status


def last_error():
    msg = lib.fp8_error_message()
    return msg.decode() if msg else "unknown error"


def role_id(role):
    if isinstance(role, int):
        if 0 <= role < len(ROLES):
            return role
        raise ValueError("role %d is not one of 0..%d" % (role, len(ROLES) - 1))
    out = c_int()
    if lib.fp8_role_parse(str(role).encode(), ctypes.byref(out)) != 0:
        raise ValueError("role %r is not one of %s" % (role, ", ".join(ROLES)))
    return out.value


def field_dtype(fields_fn, size_fn):
    """A numpy dtype laid out exactly as the C struct the fields describe."""
    import numpy as np
    n = c_size_t()
    ptr = fields_fn(ctypes.byref(n))
    kinds = {0: "<u8", 1: "<f8", 2: "<u4", 3: "<i8", 4: "<i4"}
    names, formats, offsets = [], [], []
    for i in range(n.value):
        f = ptr[i]
        names.append(f.name.decode())
        formats.append((kinds[f.type], (f.count,)) if f.count != 1 else kinds[f.type])
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size_fn()})


c_uint16_p = POINTER(c_uint16)
