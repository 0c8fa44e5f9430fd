"""CuPy kernels, no PyTorch (workload zoo, examples/zoo/README.md). Each step runs, on 64M-float
(256 MB) arrays:
  - a cupy.ElementwiseKernel: z = clip(a*x + b*y, lo, hi), a fused axpby + clip;
  - a cupy.ReductionKernel: the L2 norm sqrt(sum x^2);
  - cupy.sum along axis 0 and cupy.max along axis 1 of x viewed as 8192 x 8192;
  - a cupy.RawKernel: a 5-point stencil (Jacobi-style smoothing) over the 8192 x 8192 grid;
  - cupy.matmul of two 4096 x 4096 FP32 matrices (cuBLAS SGEMM; CuPy leaves TF32 off unless
    CUPY_TF32=1).
CuPy compiles the kernels with NVRTC in the first warm-up step; its kernel cache goes under the
system temp dir unless CUPY_CACHE_DIR is set. Before the timed loop the ReductionKernel is
checked once against cupy.linalg.norm (exit 1 if it differs).

    python3 examples/zoo/cupy_kernels.py [--steps N] [--warmup W]

NVTX through cupy.cuda.nvtx: each measured step inside "step", all of them inside "measured"
(after the warm-up steps and a synchronize). Prints loop_s=<seconds>.
"""
import os
import sys
import tempfile

os.environ.setdefault("CUPY_CACHE_DIR", os.path.join(tempfile.gettempdir(), "kprof-zoo-cupy"))

import cupy as cp  # noqa: E402 (after the cache dir is set)
import numpy as np  # noqa: E402
from cupy.cuda import nvtx  # noqa: E402

import zoo_harness  # noqa: E402 (this folder's shared measured loop; imports no torch)

axpby_clip = cp.ElementwiseKernel(
    "float32 x, float32 y, float32 a, float32 b, float32 lo, float32 hi", "float32 z",
    "z = fminf(fmaxf(a * x + b * y, lo), hi)", "zoo_axpby_clip")
l2_norm = cp.ReductionKernel(
    "float32 x", "float32 y", "x * x", "a + b", "y = sqrt(a)", "0", "zoo_l2_norm")
stencil = cp.RawKernel(r"""
extern "C" __global__ void zoo_stencil5(const float* in, float* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    long i = (long)y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) {
        out[i] = in[i];
    } else {
        out[i] = 0.5f * in[i] + 0.125f * (in[i - 1] + in[i + 1] + in[i - w] + in[i + w]);
    }
}
""", "zoo_stencil5")


def main():
    args = zoo_harness.parser(steps=200).parse_args()

    cp.random.seed(0)
    side = 8192
    x = cp.random.standard_normal(side * side, dtype=cp.float32)
    y = cp.random.standard_normal(side * side, dtype=cp.float32)
    z = cp.empty_like(x)
    smooth = cp.empty((side, side), dtype=cp.float32)
    a = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    b = cp.random.standard_normal((4096, 4096), dtype=cp.float32)
    consts = [np.float32(v) for v in (0.8, 0.2, -2.0, 2.0)]
    block = (32, 8)
    grid = ((side + block[0] - 1) // block[0], (side + block[1] - 1) // block[1])

    def step():
        axpby_clip(x, y, *consts, z)
        norm = l2_norm(z)
        grid2d = z.reshape(side, side)
        col_sum = cp.sum(grid2d, axis=0)
        row_max = cp.max(grid2d, axis=1)
        stencil(grid, block, (grid2d, smooth, np.int32(side), np.int32(side)))
        c = cp.matmul(a, b)
        return norm, col_sum, row_max, c

    zoo_harness.warm_up(step, args.warmup)
    norm = step()[0]
    want = cp.linalg.norm(z)
    if not bool(cp.isclose(norm, want, rtol=1e-3)):
        print(f"cupy_kernels: L2 norm {float(norm)} differs from cupy.linalg.norm {float(want)}",
              file=sys.stderr)
        return 1

    loop_s = zoo_harness.measure(step, args.steps, sync=lambda: cp.cuda.Device().synchronize(),
                                 push=nvtx.RangePush, pop=nvtx.RangePop)
    zoo_harness.report(loop_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
