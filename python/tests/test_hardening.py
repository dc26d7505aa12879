"""Arrays, strings, numbers and handles a caller gets wrong: each is refused
with an exception that names it, before C reads or writes anything (the
campaign of "Hardening II": out-of-bounds writes through out=, silent
reinterpretation, wrapped integers, a probe outliving its run)."""
import os
import tempfile
import threading
import unittest

import numpy as np

import fp8prof

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


class Scratch(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fp8prof-py-")

    def path(self, name):
        return os.path.join(self.dir, name)


class TestApplyArrays(Scratch):
    def setUp(self):
        super().setUp()
        self.run = fp8prof.Run(self.path("a.h5"))
        self.p = self.run.probe("x", "activation", 0, "e4m3:current")
        self.x = np.random.default_rng(1).standard_normal((64, 1024)).astype(np.float32)

    def tearDown(self):
        self.run.close()

    def test_out_too_small_is_refused_not_overrun(self):
        out = np.zeros(16, np.float32)
        guard = np.zeros(1 << 16, np.float32)
        with self.assertRaisesRegex(ValueError, "out has shape"):
            self.p.apply(0, self.x, out=out)
        self.assertFalse(out.any())
        self.assertFalse(guard.any())

    def test_out_negative_stride_readonly_dtype_layout(self):
        with self.assertRaisesRegex(ValueError, "not C-contiguous"):
            self.p.apply(0, self.x, out=np.zeros_like(self.x)[::-1])
        ro = np.frombuffer(bytes(self.x.nbytes), np.float32).reshape(self.x.shape)
        with self.assertRaisesRegex(ValueError, "read-only"):
            self.p.apply(0, self.x, out=ro)
        self.assertFalse(ro.any())  # the bytes behind it untouched
        with self.assertRaisesRegex(TypeError, "float32"):
            self.p.apply(0, self.x, out=np.zeros(self.x.shape, np.float64))
        with self.assertRaisesRegex(ValueError, "not C-contiguous"):
            self.p.apply(0, self.x, out=np.zeros(self.x.shape[::-1], np.float32).T)
        with self.assertRaisesRegex(TypeError, "numpy array"):
            self.p.apply(0, self.x, out=[0.0] * self.x.size)

    def test_float64_and_transposed_x_give_the_values_of_their_copy(self):
        ref = self.p.cast(np.ascontiguousarray(self.x.T))
        got = self.p.cast(self.x.T)                 # a view with other strides
        self.assertTrue(np.array_equal(ref, got))
        got64 = self.p.cast(self.x.T.astype(np.float64))
        self.assertTrue(np.array_equal(ref, got64))

    def test_in_place_needs_a_float32_contiguous_writable_x(self):
        y = self.x.copy()
        want = self.p.cast(y)
        self.p.apply(0, y, out=y)
        self.assertTrue(np.array_equal(y, want))
        with self.assertRaisesRegex(TypeError, "float32"):
            z = self.x.astype(np.float64)
            self.p.apply(1, z, out=z)

    def test_overlapping_out_is_refused(self):
        buf = np.zeros(2 * self.x.size, np.float32)
        a = buf[: self.x.size].reshape(self.x.shape)
        b = buf[5: 5 + self.x.size].reshape(self.x.shape)
        a[...] = self.x
        with self.assertRaisesRegex(ValueError, "overlaps"):
            self.p.apply(0, a, out=b)


class TestSilentConversions(Scratch):
    def test_bfloat16_needs_bits(self):
        with fp8prof.Run(self.path("b.h5")) as run:
            p = run.probe("x", "activation", 0, "e4m3:current")
            with self.assertRaisesRegex(TypeError, "raw 16-bit patterns"):
                p.record(0, np.ones((8, 8), np.float32), dtype="bfloat16")
            with self.assertRaisesRegex(TypeError, "pass dtype="):
                p.record(0, np.ones((8, 8), np.uint16))
            with self.assertRaisesRegex(ValueError, "dtype"):
                p.record(0, np.ones((8, 8), np.uint16), dtype="bf16")
            p.record(0, (np.ones((8, 8), np.float32).view(np.uint32) >> 16).astype(np.uint16), dtype="bfloat16")
            run.step_end(0)
        r = fp8prof.open_run(self.path("b.h5"))
        self.assertEqual(int(r.records["cols"][0]), 8)  # 8 columns, not 16 reinterpreted halves
        self.assertEqual(float(r.records["amax"][0]), 1.0)
        r.close()

    def test_decode_refuses_codes_out_of_range(self):
        with self.assertRaisesRegex(ValueError, "outside 0..255"):
            fp8prof.decode([0x138, 1], "e4m3")
        with self.assertRaisesRegex(ValueError, "outside 0..255"):
            fp8prof.decode([-200], "e4m3")
        with self.assertRaisesRegex(TypeError, "whole numbers"):
            fp8prof.decode([1.9], "e4m3")
        self.assertEqual(float(fp8prof.decode([0x38], "e4m3")[0]), 1.0)

    def test_nul_in_names_meta_specs(self):
        with self.assertRaisesRegex(ValueError, "NUL"):
            fp8prof.quantize(np.ones(4), "e4m3\0junk")
        with self.assertRaisesRegex(ValueError, "NUL"):
            fp8prof.Run(self.path("c.h5"), meta={"model": "a\0b"})
        with fp8prof.Run(self.path("d.h5")) as run:
            with self.assertRaisesRegex(ValueError, "NUL"):
                run.probe("x\0y", "activation")
            with self.assertRaisesRegex(ValueError, "NUL"):
                run.probe("x", "activation", 0, "e4m3:current", ["e4m3:current\0junk"])

    def test_seeds_and_steps_out_of_range(self):
        with self.assertRaisesRegex(ValueError, "seed"):
            fp8prof.cast(np.ones(4), "e4m3", round="stochastic", seed=1 << 64)
        with self.assertRaisesRegex(ValueError, "seed"):
            fp8prof.cast(np.ones(4), "e4m3", round="stochastic", seed=-1)
        with fp8prof.Run(self.path("e.h5")) as run:
            p = run.probe("x", "activation", 0, "e4m3:current")
            with self.assertRaisesRegex(ValueError, "step"):
                p.record((1 << 62) + 1, np.ones((2, 2)))
            with self.assertRaisesRegex(ValueError, "step"):
                p.record(-1, np.ones((2, 2)))


class TestHandles(Scratch):
    def test_probe_after_close_raises(self):
        run = fp8prof.Run(self.path("h.h5"))
        p = run.probe("x", "activation", 0, "e4m3:current")
        run.close()
        run2 = fp8prof.Run(self.path("h2.h5"))  # the allocator may reuse the old addresses
        run2.probe("y", "activation", 0, "e4m3:current")
        with self.assertRaisesRegex(fp8prof.Error, "closed"):
            p.record(0, np.ones((4, 4)))
        run2.close()
        r = fp8prof.open_run(self.path("h2.h5"))
        self.assertEqual(len(r.records), 0)  # nothing reached the newer run
        r.close()

    def test_close_waits_for_recording_threads(self):
        run = fp8prof.Run(self.path("t.h5"))
        probes = [run.probe("t%d" % i, "activation", 0, "e4m3:current", ["mxfp8"]) for i in range(4)]
        x = np.random.default_rng(2).standard_normal((256, 1024)).astype(np.float32)
        errors = []
        started = threading.Barrier(len(probes) + 1)

        def work(p):
            for s in range(200):
                if s == 3:
                    started.wait()  # every thread is recording when close() comes
                try:
                    p.record(s, x)
                except fp8prof.Error as e:
                    self.assertIn("closed", str(e))
                    return
                except Exception as e:  # pragma: no cover
                    errors.append(e)
                    return

        ts = [threading.Thread(target=work, args=(p,)) for p in probes]
        for t in ts:
            t.start()
        started.wait()
        run.close()  # while they record: must neither crash nor lose the file
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        r = fp8prof.open_run(self.path("t.h5"))
        self.assertGreaterEqual(len(r.records), 4 * 3 * 2)  # what was recorded before close is there
        r.close()

    def test_second_writer_of_one_path(self):
        with fp8prof.Run(self.path("same.h5")) as run:
            with self.assertRaisesRegex(fp8prof.Error, "already open for writing"):
                fp8prof.Run(self.path("same.h5"))
            p = run.probe("x", "activation", 0, "e4m3:current")
            p.record(0, np.ones((2, 2)))
            run.step_end(0)
        r = fp8prof.open_run(self.path("same.h5"))
        self.assertEqual(len(r.records), 1)  # the first writer lost nothing
        r.close()


def _damage_chunk(path, dataset, row):
    """Overwrite 8 bytes inside the stored chunk of `dataset` holding `row`
    (found with HDF5's own chunk index, through ctypes), as a torn write
    leaves a chunk."""
    import ctypes
    import ctypes.util
    h5 = ctypes.CDLL(ctypes.util.find_library("hdf5_serial") or "libhdf5_serial.so")
    h5.H5open()
    h5.H5Fopen.restype = h5.H5Dopen2.restype = ctypes.c_int64
    h5.H5Fopen.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_int64]
    h5.H5Dopen2.argtypes = [ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64]
    h5.H5Dclose.argtypes = h5.H5Fclose.argtypes = [ctypes.c_int64]
    f = h5.H5Fopen(path.encode(), 0, 0)
    d = h5.H5Dopen2(f, dataset.encode(), 0)
    off = (ctypes.c_uint64 * 2)(row, 0)
    mask, addr, size = ctypes.c_uint(), ctypes.c_uint64(), ctypes.c_uint64()
    rc = h5.H5Dget_chunk_info_by_coord(ctypes.c_int64(d), off, ctypes.byref(mask), ctypes.byref(addr),
                                       ctypes.byref(size))
    h5.H5Dclose(d), h5.H5Fclose(f)
    assert rc >= 0 and size.value > 16
    with open(path, "r+b") as fh:
        fh.seek(addr.value + size.value // 2)
        fh.write(b"\x5a" * 8)


class TestDamagedFile(Scratch):
    def test_a_damaged_file_loads_up_to_its_damage_and_says_what_it_lost(self):
        """/records in chunks of 64 rows: the 40th chunk damaged leaves the
        first 2,496 of 3,000 records, and 504 counted; /steps (1,024 rows a
        chunk) damaged in its 2nd chunk leaves 1,024 of its 3,000 rows."""
        path = self.path("dmg.h5")
        with fp8prof.Run(path) as run:
            p = run.probe("x", "activation", 0, "e4m3:current")
            for s in range(3000):
                p.record(s, np.full((1, 4), 1.0 + s % 7, np.float32))
                run.step_end(s)
        r = fp8prof.open_run(path)
        self.assertEqual((len(r.records), r.unreadable_records, r.unreadable_rows), (3000, 0, 0))
        r.close()
        _damage_chunk(path, "records", 39 * 64)
        _damage_chunk(path, "steps", 1024)
        r = fp8prof.open_run(path)
        self.assertEqual(len(r.records), 39 * 64)
        self.assertEqual(r.unreadable_records, 3000 - 39 * 64)
        self.assertEqual(r.unreadable_rows, 3000 - 1024)
        self.assertEqual(list(r.records["step"][:3]), [0, 1, 2])
        r.close()


@unittest.skipIf(torch is None, "torch not installed (apt-get install python3-torch)")
class TestTorchHooks(Scratch):
    def test_zero_token_batch_and_keyword_input(self):
        import fp8prof.torch as ft
        for apply in (False, True):
            torch.manual_seed(0)
            m = torch.nn.Linear(16, 8)
            path = self.path("z%d.h5" % apply)
            with ft.Profiler(m, path, recipe="e4m3:current", apply=apply) as prof:
                y = m(torch.zeros(0, 16))          # an expert with no tokens
                self.assertEqual(tuple(y.shape), (0, 8))
                y.sum().backward()
                prof.step()
                x = torch.randn(4, 16)
                y = m(input=x)                     # nn.Linear's keyword
                y.pow(2).sum().backward()
                prof.step()
            r = fp8prof.open_run(path)
            steps = sorted(set(int(s) for s in r.records["step"]))
            self.assertEqual(steps, [1], "apply=%s" % apply)  # step 0 (no tokens) recorded nothing
            self.assertEqual(len(set(int(t) for t in r.records["tensor"])), 3)
            r.close()


if __name__ == "__main__":
    unittest.main()
