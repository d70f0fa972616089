"""The tilusvm package on the CPU interpreter with NumPy: loading (.tasm with defines, .tbc),
introspection, kernel calls checked against NumPy, every bad call's exception, scalar bit
patterns and bit packing against hand-computed values, and a16wx (pack, matmul, unpack)
against the dequantised reference."""
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:  # the cases below skip, saying why
    np = None

import tilusvm
from tilusvm import _dtypes, quant

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTOR_ADD = os.path.join(REPO, "programs", "vector_add.tasm")

# An f16 scalar stored 32 times, a sub-byte pointer, a bool scalar.
SCALARS = """
const T = f16
def fill<1>(T* out, T v) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(T, layout=spatial(32), init=v), g)

def copy4<1>(u4* src, u4* dst) threads=32:
    gs = ViewGlobal(src, shape=[64])
    gd = ViewGlobal(dst, shape=[64])
    StoreGlobal(LoadGlobal(gs, layout=spatial(32).local(2)), gd)

def flag<1>(i32* out, bool b) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(i32, layout=spatial(32), init=1 if b else 0), g)
"""


def needs_numpy(case):
    return unittest.skipIf(np is None, "NumPy is not installed for this Python")(case)


class DlpackOnly:
    """Exposes only the DLPack protocol of an array."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class InterfaceOnly:
    """Exposes only __array_interface__ of an array."""

    def __init__(self, array):
        self.array = array
        self.__array_interface__ = array.__array_interface__


@needs_numpy
class TestLoadAndInspect(unittest.TestCase):
    def test_load_tasm_with_defines_and_inspect(self):
        m = tilusvm.load(VECTOR_ADD, defines={"BLOCK": 512})
        self.assertEqual(m.programs, ["vector_add"])
        self.assertIn("vector_add", m)
        k = m["vector_add"]
        self.assertEqual([(p.name, p.dtype.name, p.is_pointer) for p in k.params],
                         [("x_ptr", "f32", True), ("y_ptr", "f32", True), ("z_ptr", "f32", True),
                          ("n", "i32", False)])
        self.assertEqual(repr(k), "vector_add(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n)")

    def test_a16wx_signature_follows_its_defines(self):
        m = tilusvm.load(quant.a16wx_path(),
                         defines={"AT": "bf16", "WT": "i6", "N": 64, "K": 256, "G": 128})
        self.assertEqual(m.programs, ["pack", "unpack", "matmul"])
        self.assertEqual(repr(m["matmul"]),
                         "matmul(bf16* a_ptr, u8* wq_ptr, bf16* s_ptr, bf16* z_ptr, bf16* c_ptr,"
                         " i32 m)")
        self.assertEqual(repr(m["pack"]), "pack(i6* w_ptr, u8* wq_ptr)")

    def test_unknown_kernel_is_a_key_error_listing_the_kernels(self):
        m = tilusvm.load(VECTOR_ADD)
        with self.assertRaisesRegex(KeyError, "no kernel named 'matmul'.*vector_add"):
            m["matmul"]

    def test_source_that_does_not_assemble_has_a_located_error(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bad.tasm")
            with open(path, "w") as f:
                f.write("def bad<1>(f32* out) threads=32:\n"
                        "    g = ViewGlobal(out, shape=[32])\n"
                        "    StoreGlobal(AllocateRegister(f16, layout=spatial(32)), g)\n")
            with self.assertRaises(tilusvm.LoadError) as e:
                tilusvm.load(path)
            self.assertTrue(str(e.exception).startswith(path + ":3:"), str(e.exception))
            self.assertIn("error[dtype-mismatch]", str(e.exception))
            self.assertEqual(e.exception.status, "TILUSVM_ERROR_CHECK")

    def test_bad_define_and_missing_file(self):
        with self.assertRaisesRegex(tilusvm.LoadError, "error\\[undefined-name\\].*NOPE"):
            tilusvm.load(VECTOR_ADD, defines={"NOPE": 1})
        with self.assertRaisesRegex(tilusvm.LoadError, "/nonexistent/x.tasm"):
            tilusvm.load("/nonexistent/x.tasm")
        with self.assertRaisesRegex(tilusvm.LoadError, "/nonexistent/x.tbc"):
            tilusvm.load("/nonexistent/x.tbc")

    def test_assemble_from_text(self):
        m = tilusvm.assemble(SCALARS, defines={"T": np.float32}, file_name="scalars.tasm")
        self.assertEqual(repr(m["fill"]), "fill(f32* out, f32 v)")
        out = np.zeros(32, np.float32)
        m["fill"](out, 2.5)
        self.assertTrue((out == 2.5).all())

    @unittest.skipUnless(os.environ.get("TILUS_ASM"), "TILUS_ASM (the tilus-asm tool) not set")
    def test_load_tbc_file_and_bytes(self):
        with tempfile.TemporaryDirectory() as d:
            tbc = os.path.join(d, "va.tbc")
            subprocess.run([os.environ["TILUS_ASM"], VECTOR_ADD, "-D", "BLOCK=256", "-o", tbc],
                           check=True)
            with self.assertRaisesRegex(tilusvm.ArgumentError, "defines apply to .tasm"):
                tilusvm.load(tbc, defines={"BLOCK": 1})
            with open(tbc, "rb") as f:
                data = f.read()
            for m in (tilusvm.load(tbc), tilusvm.load_bytes(data)):
                x = np.arange(300, dtype=np.float32)
                z = np.zeros(300, np.float32)
                m["vector_add"](x, x, z, 300)
                np.testing.assert_array_equal(z, 2 * x)
            with self.assertRaises(tilusvm.LoadError) as e:
                tilusvm.load_bytes(b"not bytecode at all")
            self.assertEqual(e.exception.status, "TILUSVM_ERROR_BYTECODE")


@needs_numpy
class TestCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.add = tilusvm.load(VECTOR_ADD)["vector_add"]
        cls.scalars = tilusvm.assemble(SCALARS, file_name="scalars.tasm")

    def test_vector_add_writes_the_output_array(self):
        rng = np.random.default_rng(1)
        for n in (1, 255, 256, 1000):  # partial and whole blocks of 256
            x = rng.standard_normal(n).astype(np.float32)
            y = rng.standard_normal(n).astype(np.float32)
            z = np.full(n, -1.0, np.float32)
            self.add(x, y, z, n)
            np.testing.assert_array_equal(z, x + y)
        # checked mode (races, bounds) gives the same
        z = np.zeros(n, np.float32)
        self.add(x, y, z, n, checked=True)
        np.testing.assert_array_equal(z, x + y)

    def test_numpy_scalars_and_bigger_arrays_are_accepted(self):
        x = np.ones(600, np.float32)
        z = np.zeros(600, np.float32)
        self.add(x, x, z, np.int32(500))  # arrays larger than the extent are fine
        np.testing.assert_array_equal(z[:500], 2)
        np.testing.assert_array_equal(z[500:], 0)

    def test_dlpack_and_array_interface_objects(self):
        x = np.arange(100, dtype=np.float32)
        z = np.zeros(100, np.float32)
        self.add(DlpackOnly(x), InterfaceOnly(x), DlpackOnly(z), 100)
        np.testing.assert_array_equal(z, 2 * x)
        z2 = np.zeros(100, np.float32)
        self.add(x, x, InterfaceOnly(z2), 100)
        np.testing.assert_array_equal(z2, 2 * x)

    def test_wrong_parameter_count(self):
        x = np.zeros(10, np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"vector_add takes 4 arguments \(x_ptr, y_ptr, z_ptr, n\), "
                                    r"got 3"):
            self.add(x, x, x)
        with self.assertRaisesRegex(tilusvm.ArgumentError, "takes 4 arguments.*got 5"):
            self.add(x, x, x, 10, 1)

    def test_wrong_dtype(self):
        x = np.zeros(10, np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"argument 2 \(y_ptr\) is f32\*: got a NumPy array of float64"):
            self.add(x, np.zeros(10, np.float64), x, 10)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"argument 1 \(x_ptr\) is f32\*: "
                                    r"expected an array or a tensor, got list"):
            self.add([1.0] * 10, x, x, 10)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"argument 4 \(n\) is an i32 scalar: "
                                    r"expected a number, got ndarray"):
            self.add(x, x, x, np.array([10]))
        with self.assertRaisesRegex(tilusvm.ArgumentError, "expected an integer, got 2.5"):
            self.add(x, x, x, 2.5)

    def test_too_small_an_array(self):
        x = np.zeros(100, np.float32)
        with self.assertRaises(tilusvm.ArgumentError) as e:
            self.add(x, x, np.zeros(99, np.float32), 100)
        self.assertIn("z_ptr holds 396 bytes; the program can touch 400 bytes", str(e.exception))
        self.assertEqual(e.exception.status, "TILUSVM_ERROR_INVALID_ARGUMENT")

    def test_layout_alignment_and_read_only(self):
        x = np.zeros(200, np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"\(x_ptr\).*not contiguous"):
            self.add(x[::2], x[:100], x[:100], 100)
        raw = np.zeros(401, np.uint8)
        misaligned = raw[1:].view(np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"\(y_ptr\): the address 0x[0-9a-f]+ is not aligned to 4 "
                                    r"bytes \(f32 elements\)"):
            self.add(x, misaligned, x, 100)
        frozen = np.zeros(100, np.float32)
        frozen.flags.writeable = False
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"\(z_ptr\).*read-only"):
            self.add(x, x, frozen, 100)

    def test_scalar_out_of_range(self):
        x = np.zeros(10, np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"2147483648 is out of its range \[-2147483648, 2147483647\]"):
            self.add(x, x, x, 2 ** 31)

    def test_host_arrays_to_a_cuda_kernel(self):
        x = np.zeros(10, np.float32)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"\(x_ptr\) is in host memory \(the CPU\) but the kernel runs "
                                    r"on cuda:0"):
            self.add(x, x, x, 10, device="cuda")
        with self.assertRaisesRegex(tilusvm.ArgumentError, "device must be"):
            self.add(x, x, x, 10, device="tpu")

    def test_f16_and_bool_scalars_reach_the_program(self):
        out = np.zeros(32, np.float16)
        self.scalars["fill"](out, -1.5)
        self.assertTrue((out.view(np.uint16) == 0xBE00).all())  # -1.5 in f16
        self.scalars["fill"](out, 1e6)  # beyond f16's max: rounds to +inf
        self.assertTrue((out.view(np.uint16) == 0x7C00).all())
        flags = np.zeros(32, np.int32)
        self.scalars["flag"](flags, True)
        self.assertTrue((flags == 1).all())
        with self.assertRaisesRegex(tilusvm.ArgumentError, "bool scalar"):
            self.scalars["flag"](flags, 2)

    def test_bf16_through_declared_uint16_storage(self):
        m = tilusvm.assemble(SCALARS, defines={"T": "bf16"})
        out = np.zeros(32, np.uint16)
        m["fill"](tilusvm.typed(out, "bf16"), -3.0)
        self.assertTrue((out == 0xC040).all())  # -3.0 in bf16
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"is bf16\*: got a NumPy array of "
                                    r"uint16; bf16 takes bfloat16 tensors"):
            m["fill"](out, 1.0)

    def test_sub_byte_arrays_are_uint8_storage(self):
        src = np.arange(32, dtype=np.uint8)  # 64 u4 elements
        dst = np.zeros(32, np.uint8)
        self.scalars["copy4"](src, dst)
        np.testing.assert_array_equal(dst, src)
        dst[:] = 0
        self.scalars["copy4"](tilusvm.typed(src, "u4"), tilusvm.typed(dst, "u4"))
        np.testing.assert_array_equal(dst, src)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"is u4\*: the storage is declared "
                                    r"as i4"):
            self.scalars["copy4"](tilusvm.typed(src, "i4"), dst)
        with self.assertRaisesRegex(tilusvm.ArgumentError, "u4 elements take uint8 storage"):
            self.scalars["copy4"](src.view(np.int8), dst)
        with self.assertRaisesRegex(tilusvm.ArgumentError, "holds 31 bytes; the program can "
                                    "touch 32 bytes"):
            self.scalars["copy4"](src, dst[:31])


class TestLibraryLookup(unittest.TestCase):
    def test_a_missing_library_is_named(self):
        env = dict(os.environ, TILUSVM_LIBRARY="/nonexistent/libtilusvm.so")
        code = ("import tilusvm\n"
                "try:\n"
                "    tilusvm.version()\n"
                "except tilusvm.LibraryNotFound as e:\n"
                "    print('LibraryNotFound:', e)\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True).stdout
        self.assertIn("LibraryNotFound: libtilusvm not found or not loadable "
                      "(/nonexistent/libtilusvm.so:", out)
        self.assertIn("set TILUSVM_LIBRARY", out)


class TestInstallLayout(unittest.TestCase):
    """tilusvm/_install.py as meson writes it: the installed library's path, followed when the
    whole prefix moved (meson install --destdir)."""

    def library_seen_from(self, package_dir):
        template = os.path.join(REPO, "python", "tilusvm", "_install.py.in")
        with open(template) as f:
            text = f.read()
        text = text.replace("@LIBRARY@", "/opt/tv/lib/x86_64-linux-gnu/libtilusvm.so")
        text = text.replace("@PACKAGE_DIR@", "/opt/tv/lib/python3/dist-packages/tilusvm")
        os.makedirs(package_dir, exist_ok=True)
        path = os.path.join(package_dir, "_install.py")
        with open(path, "w") as f:
            f.write(text)
        scope = {"__file__": path}
        exec(compile(text, path, "exec"), scope)
        return scope["LIBRARY"]

    def test_staged_prefix(self):
        with tempfile.TemporaryDirectory() as d:
            staged = os.path.join(d, "opt", "tv", "lib", "python3", "dist-packages", "tilusvm")
            self.assertEqual(self.library_seen_from(staged),
                             os.path.join(d, "opt", "tv", "lib", "x86_64-linux-gnu",
                                          "libtilusvm.so"))


class TestBits(unittest.TestCase):
    """Scalar bit patterns and packing against values worked out by hand."""

    def bits(self, spelling, value):
        return _dtypes.scalar_bits(tilusvm.dtype(spelling), value, "v")

    def test_float_scalars(self):
        self.assertEqual(self.bits("f16", 1.0), 0x3C00)
        self.assertEqual(self.bits("f16", -2.0), 0xC000)
        self.assertEqual(self.bits("f32", 1.0), 0x3F800000)
        self.assertEqual(self.bits("f64", -0.5), 0xBFE0000000000000)
        self.assertEqual(self.bits("bf16", 1.0), 0x3F80)
        self.assertEqual(self.bits("bf16", 1 + 2 ** -8), 0x3F80)  # a tie: to even
        self.assertEqual(self.bits("bf16", 1 + 3 * 2 ** -8), 0x3F82)  # a tie: to even (up)
        self.assertEqual(self.bits("bf16", float("nan")), 0x7FC0)
        self.assertEqual(self.bits("f8e4m3", 448.0), 0x7E)
        self.assertEqual(self.bits("f8e4m3", 464.0), 0x7E)  # saturates, never NaN
        self.assertEqual(self.bits("f8e4m3", -1.0), 0xB8)
        self.assertEqual(self.bits("f8e5m2", 57344.0), 0x7B)
        self.assertEqual(self.bits("f8e5m2", float("inf")), 0x7B)
        self.assertEqual(self.bits("f4e2m1", 6.0), 0x7)
        self.assertEqual(self.bits("f4e2m1", 2.5), 0x4)  # between 2 (0x4) and 3 (0x5): to even
        self.assertEqual(self.bits("f4e2m1", -0.5), 0x9)

    def test_integer_scalars(self):
        self.assertEqual(self.bits("i6", -32), 0x20)
        self.assertEqual(self.bits("i8", -1), 0xFF)
        self.assertEqual(self.bits("u4", 15), 0xF)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"16 is out of its range \[0, 15\]"):
            self.bits("u4", 16)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"-33 is out of its range"):
            self.bits("i6", -33)

    def test_dtype_spellings(self):
        self.assertEqual(tilusvm.dtype("f6e3m2").bits, 6)
        self.assertEqual(tilusvm.dtype("u1").storage_bytes(9), 2)
        for bad in ("i1", "f16e5m10", "u9", "f8e4m4", "float"):
            with self.assertRaises(ValueError):
                tilusvm.dtype(bad)
        self.assertEqual(_dtypes.float_max(tilusvm.dtype("f6e3m2")), 28.0)
        self.assertEqual(_dtypes.float_max(tilusvm.dtype("f8e4m3")), 448.0)

    @needs_numpy
    def test_pack_bits(self):
        # u4 [1, 2, 3, 4]: 0x21, 0x43. i6 [1, 2, 3, 4]: 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081
        np.testing.assert_array_equal(tilusvm.pack_bits([1, 2, 3, 4], "u4"), [0x21, 0x43])
        np.testing.assert_array_equal(tilusvm.pack_bits([1, 2, 3, 4], "i6"), [0x81, 0x30, 0x10])
        np.testing.assert_array_equal(tilusvm.pack_bits([-1, 0, -32, 31], "i6"),
                                      [0x3F, 0x00, 0x7E])  # 0x3F | 0x20 << 12 | 0x1F << 18
        np.testing.assert_array_equal(tilusvm.pack_bits([1, 0, 1, 1, 0, 0, 0, 1], "u1"), [0x8D])
        codes = np.random.default_rng(2).integers(0, 8, 40)
        np.testing.assert_array_equal(tilusvm.unpack_bits(tilusvm.pack_bits(codes, "u3"), "u3",
                                                          40), codes)


@needs_numpy
class TestA16wx(unittest.TestCase):
    """Quantisation, pack, matmul and unpack of programs/quant/a16wx.tasm on the CPU."""

    K, N, G, M = 256, 32, 128, 3

    def run_type(self, wt):
        rng = np.random.default_rng(3)
        w = rng.standard_normal((self.K, self.N))
        codes, scales, zeros = quant.quantize(w, wt, self.G)
        # Round to nearest: each weight within half a step of its dequantised value (one
        # step where an integer zero point clips the group's minimum).
        deq = quant.dequantize(codes, scales, zeros, wt, self.G)
        step = np.repeat(scales.astype(np.float64), self.G, axis=0)
        if tilusvm.dtype(wt).kind == "float":
            # relative to the nearer neighbour's spacing: bounded by the largest gap, scaled
            values = np.sort(quant.code_values(wt)[np.isfinite(quant.code_values(wt))])
            step = step * np.diff(values).max()
        bound = 1.0 if zeros is not None else 0.5
        self.assertTrue((np.abs(deq - w) <= bound * step * (1 + 1e-9)).all(), wt)
        m = tilusvm.load(quant.a16wx_path(),
                         defines=quant.a16wx_defines(wt, self.N, self.K, self.G))
        packed = tilusvm.pack_bits(codes, wt)
        wq = np.zeros_like(packed)
        m["pack"](packed, wq)
        back = np.zeros_like(packed)
        m["unpack"](wq, back)
        np.testing.assert_array_equal(back, packed)
        a = rng.standard_normal((self.M, self.K)).astype(np.float16)
        c = np.zeros((self.M, self.N), np.float16)
        m["matmul"](a, wq, scales, zeros if zeros is not None else np.zeros(0, np.float16), c,
                    self.M)
        ref = a.astype(np.float64) @ deq
        err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
        self.assertLess(err, 2e-3, wt)

    def test_u4_with_zero_points(self):
        self.run_type("u4")

    def test_i6(self):
        self.run_type("i6")

    def test_f4e2m1(self):
        self.run_type("f4e2m1")

    def test_split_k(self):
        # K = 1024, N = 64: four column tiles, eight steps of K, so the default SPLITK is 8
        # (docs/quant.md): eight blocks per tile combine f32 partial sums with atomics, in
        # checked mode (races, and the workspace left zeroed)
        k, n = 1024, 64
        rng = np.random.default_rng(5)
        codes, scales, zeros = quant.quantize(rng.standard_normal((k, n)), "u4", 128)
        deq = quant.dequantize(codes, scales, zeros, "u4", 128)
        m = tilusvm.load(quant.a16wx_path(), defines=quant.a16wx_defines("u4", n, k, 128))
        wq = np.zeros(k * n // 2, np.uint8)
        m["pack"](tilusvm.pack_bits(codes, "u4"), wq)
        for rows in (1, 5, 16):
            a = rng.standard_normal((rows, k)).astype(np.float16)
            c = np.zeros((rows, n), np.float16)
            m["matmul"](a, wq, scales, zeros, c, rows, checked=True)
            ref = a.astype(np.float64) @ deq
            err = np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max()
            self.assertLess(err, 2e-3, rows)
        # the workspace is the runtime's (or the caller's on a GPU); the CPU plans its own
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    "workspace= is for CUDA launches; the CPU interpreter"):
            m["matmul"](a, wq, scales, zeros, c, rows, workspace=np.zeros(1 << 20, np.uint8))
        with self.assertRaisesRegex(tilusvm.ArgumentError, "workspace_size is for CUDA"):
            m["matmul"].workspace_size(a, wq, scales, zeros, c, rows)

    def test_hand_computed_i4_group(self):
        # One column, one group of 128: max |w| = 7 gives s = 1, so codes are round(w)
        w = np.zeros((128, 1))
        w[:4, 0] = [7.0, -2.5, 1.5, -7.0]
        codes, scales, zeros = quant.quantize(w, "i4", 128)
        self.assertIsNone(zeros)
        self.assertEqual(float(scales[0, 0]), 1.0)
        self.assertEqual(list(codes[:4, 0]), [7, 0xE, 2, 0x9])  # 7, -2, 2, -7 (ties to even)

    def test_hand_computed_u2_group_with_zero_point(self):
        # min -1, max 2: s = 3 / 3 = 1, z = round(1) = 1, codes round(w) + 1
        w = np.zeros((128, 1))
        w[:4, 0] = [-1.0, 2.0, 0.4, 0.6]
        codes, scales, zeros = quant.quantize(w, "u2", 128)
        self.assertEqual((float(scales[0, 0]), float(zeros[0, 0])), (1.0, 1.0))
        self.assertEqual(list(codes[:4, 0]), [0, 3, 1, 2])


if __name__ == "__main__":
    unittest.main()
