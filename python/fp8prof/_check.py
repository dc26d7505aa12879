"""Checks on what a caller hands to the C library: every array's dtype,
shape, layout and writability, every string's NULs, every integer's range.
C reads and writes raw memory; a wrong stride or a short buffer there is a
crash or silent garbage, so the mistake is named here instead."""
import numpy as np


def text(value, what):
    """str(value), refused when it holds a NUL (C would cut it there)."""
    s = str(value)
    if "\0" in s:
        raise ValueError("%s %r holds a NUL character; C strings end there" % (what, s))
    return s


def uint(value, what, bits=64):
    """An integer in 0 .. 2^bits - 1 (bool and non-integral floats refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError("%s must be an integer, not %r" % (what, value))
    v = int(value)
    if not 0 <= v < (1 << bits):
        raise ValueError("%s %d is outside 0..2^%d - 1" % (what, v, bits))
    return v


_STEP_MAX = 1 << 62


def step(value, what="step"):
    """A step: 0 .. 2^62 (what a run file holds)."""
    if type(value) is int and 0 <= value <= _STEP_MAX:  # (the usual case, once a call per probed tensor)
        return value
    v = uint(value, what, 63)
    if v > (1 << 62):
        raise ValueError("%s %d is outside 0..2^62" % (what, v))
    return v


def shape2(x, what):
    """(rows, cols) of an array as the probes see it: the last axis is the
    columns, the others are rows; a 0-d array is 1 x 1.  Empty refused."""
    if x.ndim == 0:
        return 1, 1
    cols = x.shape[-1]
    if x.size == 0:
        raise ValueError("%s is empty (shape %s)" % (what, x.shape))
    return x.size // cols, cols


def floats_in(x, what):
    """x as a C-contiguous float32 array (a copy when it is another dtype or
    layout: the caller's array is only read)."""
    a = np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise TypeError("%s must hold real numbers, not %s" % (what, a.dtype))
    return np.ascontiguousarray(a, dtype=np.float32)


def floats_out(out, like, what):
    """out, checked to take like's float32 values in place: an ndarray of
    float32, like's shape, C-contiguous, writable, and not overlapping like
    unless it is like itself."""
    if not isinstance(out, np.ndarray):
        raise TypeError("%s must be a numpy array, not %s" % (what, type(out).__name__))
    if out.dtype != np.float32:
        raise TypeError("%s must be float32 (it receives float32 values), not %s" % (what, out.dtype))
    if out.shape != like.shape:
        raise ValueError("%s has shape %s; the tensor has %s" % (what, out.shape, like.shape))
    if not out.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (strides %s): pass np.ascontiguousarray(...) or out=None" %
                         (what, out.strides))
    if not out.flags.writeable:
        raise ValueError("%s is read-only" % what)
    if out is not like and np.shares_memory(out, like) and \
            out.__array_interface__["data"][0] != like.__array_interface__["data"][0]:
        raise ValueError("%s overlaps the input without being it" % what)
    return out
