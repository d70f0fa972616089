"""tilusvm with PyTorch: kernels on CPU and CUDA tensors, the bad calls' exceptions on the GPU,
QuantizedLinear against the dequantised reference (u4, i6, G = 128), its quantisation against
the NumPy version, the custom operator's fake implementation, torch.compile and CUDA graphs.
Every case skips, saying why, without PyTorch (or without a CUDA device for the GPU ones)."""
import os
import unittest

try:
    import torch
except ImportError:
    torch = None
try:
    import numpy as np
except ImportError:
    np = None

import tilusvm
from tilusvm import quant

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTOR_ADD = os.path.join(REPO, "programs", "vector_add.tasm")

needs_torch = unittest.skipIf(torch is None, "PyTorch is not installed for this Python")
needs_cuda = unittest.skipIf(torch is None or not torch.cuda.is_available(),
                             "PyTorch or a CUDA device is missing")
needs_numpy = unittest.skipIf(np is None, "NumPy is not installed for this Python")


def relative_error(y, ref):
    y, ref = y.double(), ref.double()
    return ((y - ref).abs().max() / ref.abs().max()).item()


def reference(layer, x):
    """x @ W^T with the weights as the kernel sees them, float64."""
    return x.double() @ layer.dequantized_weight().to(x.device).t()


@needs_torch
class TestTorchCpu(unittest.TestCase):
    def test_cpu_tensors_run_on_the_interpreter(self):
        add = tilusvm.load(VECTOR_ADD)["vector_add"]
        x = torch.randn(300)
        y = torch.randn(300)
        z = torch.zeros(300)
        add(x, y, z, 300)
        self.assertTrue(torch.equal(z, x + y))

    @needs_numpy
    def test_quantisation_matches_numpy(self):
        from tilusvm import torch as tt
        # seeds 72 and 195 give scales whose float16 rounding PyTorch's own float64 -> float16
        # conversion (through float32, two roundings) gets wrong
        for seed in (0, 72, 195):
            torch.manual_seed(seed)
            w = torch.randn(256, 48, dtype=torch.float64)
            for wt in ("u4", "i6", "f4e2m1", "u8", "i2"):
                codes, scales, zeros = tt.quantize(w, wt, 128)
                ncodes, nscales, nzeros = quant.quantize(w.numpy(), wt, 128)
                self.assertTrue(np.array_equal(codes.numpy(), ncodes), (seed, wt))
                self.assertTrue(np.array_equal(scales.numpy(), nscales), (seed, wt))
                if nzeros is None:
                    self.assertEqual(zeros.numel(), 0)
                else:
                    self.assertTrue(np.array_equal(zeros.numpy(), nzeros), (seed, wt))
                self.assertTrue(np.array_equal(tt.pack_bits(codes, wt).numpy(),
                                               tilusvm.pack_bits(ncodes, wt)), (seed, wt))

    def test_scales_round_once_from_float64(self):
        from tilusvm.torch import _round_from_float64
        # hand-computed: float16 keeps 10 fraction bits, bfloat16 7
        cases16 = [(1 + 2**-11 + 2**-40, 1 + 2**-10),  # just above the tie: up
                   (1 + 2**-11, 1.0),  # the tie: to even
                   (1 + 3 * 2**-11, 1 + 2**-9),  # the tie: to even (up)
                   (1 + 2**-11 - 2**-40, 1.0),  # just below the tie: down
                   (-(1 + 2**-11 + 2**-40), -(1 + 2**-10)),
                   (65519.99, 65504.0), (65520.0, float("inf")),  # the largest finite, overflow
                   (2**-25, 0.0), (2**-25 + 2**-60, 2**-24)]  # subnormal tie, just above it
        x = torch.tensor([c[0] for c in cases16], dtype=torch.float64)
        self.assertEqual(_round_from_float64(x, torch.float16).tolist(), [c[1] for c in cases16])
        casesb = [(1 + 2**-8 + 2**-40, 1 + 2**-7), (1 + 2**-8, 1.0), (1 + 3 * 2**-8, 1 + 2**-6)]
        x = torch.tensor([c[0] for c in casesb], dtype=torch.float64)
        self.assertEqual(_round_from_float64(x, torch.bfloat16).tolist(), [c[1] for c in casesb])
        self.assertEqual(_round_from_float64(x, torch.float32).dtype, torch.float32)

    @needs_numpy
    def test_scales_round_as_numpy_near_ties(self):
        from tilusvm.torch import _round_from_float64
        g = torch.Generator().manual_seed(1)
        h = (torch.randn(200000, dtype=torch.float64, generator=g) * 8).to(torch.float16)
        up = torch.nextafter(h, torch.full_like(h, float("inf")))
        mid = (h.to(torch.float64) + up.to(torch.float64)) / 2  # halfway between neighbours
        for d in (0.0, 2**-40, -2**-40):
            x = mid * (1 + d)
            ours = _round_from_float64(x, torch.float16).numpy().view(np.uint16)
            theirs = x.numpy().astype(np.float16).view(np.uint16)
            self.assertTrue(np.array_equal(ours, theirs), d)

    def test_quantized_linear_on_the_cpu(self):
        from tilusvm.torch import QuantizedLinear
        torch.manual_seed(0)
        linear = torch.nn.Linear(256, 32, bias=True)
        q = QuantizedLinear.from_linear(linear, "i6", 128)
        x = torch.randn(3, 256).half()
        y = q(x)
        self.assertEqual(y.shape, (3, 32))
        ref = reference(q, x) + q.bias.double()
        self.assertLess(relative_error(y, ref), 2e-3)
        # quantisation error of i6 is small against the original layer too
        self.assertLess(relative_error(y, linear(x.float())), 0.05)

    def test_quantized_linear_prefill_on_the_cpu(self):
        from tilusvm.torch import QuantizedLinear
        torch.manual_seed(2)
        q = QuantizedLinear(256, 128, "u4", 128, prefill=True)
        q.quantize_(torch.randn(128, 256))
        self.assertEqual(q.wq_prefill.numel(), q.wq.numel())
        # its own layout of the same codes (column-major bit streams, not mma fragments)
        self.assertFalse(torch.equal(q.wq_prefill, q.wq))
        for rows in (130, 3):  # the prefill kernel from 128 rows, the decode kernel below
            x = torch.randn(rows, 256).half()
            y = q(x)
            self.assertEqual(y.shape, (rows, 128))
            self.assertLess(relative_error(y, reference(q, x)), 2e-3, rows)
        with self.assertRaisesRegex(ValueError, "multiple of 128"):
            QuantizedLinear(256, 64, "u4", 128, prefill=True)

    def test_fake_implementation_gives_the_shape(self):
        from tilusvm.torch import a16wx_matmul
        x = torch.empty(2, 5, 256, dtype=torch.float16, device="meta")
        wq = torch.empty(256 * 64 // 2, dtype=torch.uint8, device="meta")
        s = torch.empty(2, 64, dtype=torch.float16, device="meta")
        z = torch.empty(2, 64, dtype=torch.float16, device="meta")
        y = a16wx_matmul(x, wq, s, z, "u4", 128, 64)
        self.assertEqual((tuple(y.shape), y.dtype, y.device.type), ((2, 5, 64), torch.float16,
                                                                   "meta"))

    @unittest.skipUnless(torch is not None and hasattr(torch.library, "opcheck"),
                         "torch.library.opcheck needs PyTorch 2.4 or later")
    def test_opcheck(self):
        from tilusvm.torch import QuantizedLinear, a16wx_matmul
        q = QuantizedLinear(256, 32, "u4", 128)
        q.quantize_(torch.randn(32, 256))
        x = torch.randn(2, 256).half()
        torch.library.opcheck(a16wx_matmul.default, (x, q.wq, q.scales, q.zeros, "u4", 128, 32))

    def test_bad_shapes_and_types(self):
        from tilusvm.torch import QuantizedLinear
        with self.assertRaisesRegex(ValueError, "multiples of 128"):
            QuantizedLinear(200, 32, "u4", 128)
        with self.assertRaisesRegex(ValueError, "multiple of 16"):
            QuantizedLinear(256, 30, "u4", 128)
        with self.assertRaisesRegex(ValueError, "1 to 8 bits"):
            QuantizedLinear(256, 32, "f16", 128)
        q = QuantizedLinear(256, 32, "u4", 128)
        with self.assertRaisesRegex(TypeError, "float32"):
            q(torch.randn(1, 256))


@needs_cuda
class TestTorchCuda(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.add = tilusvm.load(VECTOR_ADD)["vector_add"]

    def test_kernel_on_cuda_tensors(self):
        for n in (1, 1000, 1 << 20):
            x = torch.randn(n, device="cuda")
            y = torch.randn(n, device="cuda")
            z = torch.full((n,), -1.0, device="cuda")
            self.add(x, y, z, n)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(z, x + y))

    def test_launch_goes_on_the_current_stream(self):
        s = torch.cuda.Stream()
        x = torch.randn(1 << 22, device="cuda")
        z = torch.zeros_like(x)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            if hasattr(torch.cuda, "_sleep"):
                torch.cuda._sleep(200_000_000)  # keep s busy: a launch elsewhere would run first
            y = x * 2  # queued on s: the kernel must see it done
            self.add(x, y, z, x.numel())
            w = z + 1
        s.synchronize()
        self.assertTrue(torch.equal(w, 3 * x + 1))

    def test_bad_calls(self):
        x = torch.zeros(100, device="cuda")
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"\(y_ptr\) is f32\*: got a cuda tensor of float64"):
            self.add(x, x.double(), x, 100)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    "z_ptr holds 396 bytes; the program can touch 400 bytes"):
            self.add(x, x, x[:99], 100)
        with self.assertRaisesRegex(tilusvm.ArgumentError,
                                    r"\(y_ptr\) is in host memory \(the CPU\) but the kernel runs "
                                    r"on cuda:0 \(the device of x_ptr\)"):
            self.add(x, x.cpu(), x, 100)
        with self.assertRaisesRegex(tilusvm.ArgumentError, "takes 4 arguments.*got 2"):
            self.add(x, x)
        with self.assertRaisesRegex(tilusvm.ArgumentError, "not contiguous"):
            self.add(torch.zeros(200, device="cuda")[::2], x, x, 100)
        with self.assertRaisesRegex(tilusvm.ArgumentError, r"in GPU memory \(cuda:0\) but the "
                                    r"kernel runs on the CPU"):
            self.add(x, x, x, 100, device="cpu")

    def check_layer(self, weight_type, dtype=None):
        from tilusvm.torch import QuantizedLinear
        dtype = dtype or torch.float16
        torch.manual_seed(1)
        linear = torch.nn.Linear(1024, 512, bias=False, device="cuda", dtype=dtype)
        q = QuantizedLinear.from_linear(linear, weight_type, 128)
        for shape in ((1, 1024), (16, 1024), (2, 7, 1024)):
            x = torch.randn(shape, device="cuda", dtype=dtype)
            y = q(x)
            self.assertEqual(y.shape, (*shape[:-1], 512))
            err = relative_error(y, reference(q, x))
            self.assertLess(err, 4e-3 if dtype == torch.bfloat16 else 2e-3,
                            f"{weight_type} {shape}")
        return q

    def test_quantized_linear_u4(self):
        q = self.check_layer("u4")
        self.assertTrue(q.zero_point)

    def test_quantized_linear_i6(self):
        q = self.check_layer("i6")
        self.assertFalse(q.zero_point)

    def test_quantized_linear_bf16(self):
        self.check_layer("u4", torch.bfloat16)

    @unittest.skipUnless(torch is not None and torch.cuda.is_available() and
                         torch.cuda.get_device_capability() == (9, 0),
                         "the prefill kernel needs a Hopper GPU (sm_90a)")
    def test_quantized_linear_prefill(self):
        from tilusvm.torch import QuantizedLinear
        for weight_type, dtype in (("u4", torch.float16), ("i6", torch.bfloat16)):
            torch.manual_seed(3)
            linear = torch.nn.Linear(1024, 512, bias=False, device="cuda", dtype=dtype)
            q = QuantizedLinear.from_linear(linear, weight_type, 128, prefill=True)
            for shape in ((300, 1024), (2, 200, 1024), (5, 1024)):
                x = torch.randn(shape, device="cuda", dtype=dtype)
                y = q(x)
                # one rounding to the activation type (a bias would add a second one)
                self.assertLess(relative_error(y, reference(q, x)),
                                4e-3 if dtype == torch.bfloat16 else 2e-3,
                                f"{weight_type} {shape}")

    @needs_numpy
    def test_gpu_quantisation_and_packing_match_numpy(self):
        from tilusvm.torch import QuantizedLinear
        w = torch.randn(64, 256, device="cuda")
        q = QuantizedLinear(256, 64, "u4", 128, device="cuda")
        q.quantize_(w)
        codes, scales, zeros = quant.quantize(w.t().double().cpu().numpy(), "u4", 128)
        self.assertTrue(np.array_equal(q.codes().cpu().numpy(), codes))
        self.assertTrue(np.array_equal(q.scales.cpu().numpy(), scales))
        self.assertTrue(np.array_equal(q.zeros.cpu().numpy(), zeros))
        # the GPU's pack kernel gives the interpreter's bytes
        m = tilusvm.load(quant.a16wx_path(), defines=quant.a16wx_defines("u4", 64, 256, 128))
        wq = np.zeros(256 * 64 // 2, np.uint8)
        m["pack"](tilusvm.pack_bits(codes, "u4"), wq)
        self.assertTrue(np.array_equal(q.wq.cpu().numpy(), wq))

    def model(self):
        from tilusvm.torch import QuantizedLinear
        torch.manual_seed(2)
        return torch.nn.Sequential(
            QuantizedLinear.from_linear(torch.nn.Linear(1024, 512, device="cuda").half(), "u4"),
            torch.nn.SiLU(),
            QuantizedLinear.from_linear(torch.nn.Linear(512, 1024, device="cuda").half(), "i6",
                                        group_size=128))

    def test_torch_compile(self):
        model = self.model()
        compiled = torch.compile(model, fullgraph=True)
        for batch in (1, 16):
            x = torch.randn(batch, 1024, device="cuda", dtype=torch.float16)
            eager = model(x)
            out = compiled(x)
            torch.cuda.synchronize()
            self.assertLess(relative_error(out, eager), 2e-3)

    def test_torch_compile_reduce_overhead(self):
        model = self.model()
        compiled = torch.compile(model, mode="reduce-overhead")
        for i in range(4):  # warm-up, recording, replays
            x = torch.randn(4, 1024, device="cuda", dtype=torch.float16)
            out = compiled(x).clone()
            self.assertLess(relative_error(out, model(x)), 2e-3, f"call {i}")

    def test_workspace_of_split_k_shapes(self):
        # both layers split K (K = 1024, N = 512: SPLITK = 8; K = 512, four steps of K: SPLITK =
        # 4) and need a workspace; a launch with the caller's workspace gives the
        # runtime-workspace launch's result (up to the order of the f32 partial sums). A layer
        # of one step of K (K = 128) has nothing to split and needs none.
        from tilusvm.torch import _module_for
        model = self.model()
        x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
        one_step = _module_for("f16", "i6", 1024, 128, 128, False)
        f16 = dict(device="cuda", dtype=torch.float16)
        self.assertEqual(one_step["matmul"].workspace_size(
            torch.zeros(16, 128, **f16), torch.zeros(128 * 1024 * 6 // 8, device="cuda",
                                                     dtype=torch.uint8),
            torch.zeros(1, 1024, **f16), torch.zeros(1, 1024, **f16),
            torch.zeros(16, 1024, **f16), 16), 0)
        for layer in (model[0], model[2]):
            module = _module_for("f16", layer.weight_type, layer.out_features,
                                 layer.in_features, 128, layer.zero_point)
            inp = x if layer is model[0] else torch.randn(16, 512, **f16)
            y = torch.zeros(16, layer.out_features, **f16)
            args = (inp, layer.wq, layer.scales, layer.zeros, y, 16)
            size = module["matmul"].workspace_size(*args)
            self.assertGreater(size, 0)
            # the kernel computes x @ W^T; the layer adds its bias after it
            ref = reference(layer, inp)
            workspace = torch.full((size,), 0xAB, dtype=torch.uint8, device="cuda")
            for _ in range(3):  # zeroed clean regions before each launch
                y.zero_()
                module["matmul"](*args, workspace=workspace)
                self.assertLess(relative_error(y, ref), 2e-3)
            with self.assertRaisesRegex(tilusvm.Error, "workspace"):
                module["matmul"](*args, workspace=workspace[:size - 256])

    def test_cuda_graph_replays_with_new_inputs(self):
        model = self.model()
        static_x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(static_x)  # compiles the kernels outside the capture
        torch.cuda.current_stream().wait_stream(side)
        # captured on torch.cuda.graph's own stream, whose runtime workspace the warm-up did not
        # grow: the split-K layer takes its workspace from the graph's memory pool
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = model(static_x)
        for i in range(20):
            x = torch.randn(16, 1024, device="cuda", dtype=torch.float16)
            static_x.copy_(x)
            graph.replay()
            expected = model(x)
            torch.cuda.synchronize()
            # equal up to the order in which split-K adds its f32 partial sums (docs/quant.md)
            self.assertLess(relative_error(static_y, expected), 2e-3, f"replay {i}")


if __name__ == "__main__":
    unittest.main()
