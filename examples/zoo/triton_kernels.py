"""Three Triton kernels written here (workload zoo, examples/zoo/README.md), after the classic
designs of Triton's tutorials:
  - matmul: C = A.B, FP16 in, FP32 accumulation, FP16 out, M = N = K = 4096, fixed 128 x 128 x 32
    tiles (8 warps, 3 pipeline stages) with grouped tile order (8 row-tiles share each B column
    strip, for L2 reuse);
  - row softmax of an 8192 x 4096 FP16 matrix, one program per row (max-subtracted, FP32 math);
  - LayerNorm forward of an 8192 x 4096 FP16 matrix with weight and bias, one program per row.
Each step launches each kernel once. After the warm-up (which compiles them) the results are
checked once against PyTorch (allclose with FP16 tolerances): exit 1 if one differs.

    python3 examples/zoo/triton_kernels.py [--steps N] [--warmup W]

Triton's cache goes under the system temp dir unless TRITON_CACHE_DIR is set. NVTX: each
measured step inside "step", all of them inside "measured" (after the warm-up steps and a
synchronize). Prints loop_s=<seconds>.
"""
import os
import sys
import tempfile

os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tempfile.gettempdir(), "kprof-zoo-triton"))

import torch  # noqa: E402 (after the cache dir is set)
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import zoo_harness  # noqa: E402 (this folder's shared measured loop)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    # Grouped order: consecutive programs walk GROUP_M row-tiles down one column of tiles.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # No masks: the host checks that the tiles divide M, N and K.
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # noqa: B007 (k unused)
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc=acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16))


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, in_stride, out_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * out_stride + cols, (e / tl.sum(e, axis=0)).to(tl.float16), mask=mask)


@triton.jit
def layernorm_kernel(out_ptr, in_ptr, w_ptr, b_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride + cols, (xc * rstd * w + b).to(tl.float16), mask=mask)


BM, BN, BK = 128, 128, 32


def matmul(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    assert M % BM == 0 and N % BN == 0 and K % BK == 0
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=8,
                        num_warps=8, num_stages=3)


def softmax(x, out):
    rows, cols = x.shape
    softmax_kernel[(rows,)](out, x, cols, x.stride(0), out.stride(0),
                            BLOCK=triton.next_power_of_2(cols), num_warps=8)


def layernorm(x, w, b, out, eps=1e-5):
    rows, cols = x.shape
    layernorm_kernel[(rows,)](out, x, w, b, cols, x.stride(0), eps,
                              BLOCK=triton.next_power_of_2(cols), num_warps=8)


def main():
    args = zoo_harness.parser(steps=500).parse_args()

    torch.manual_seed(0)
    dev, f16 = "cuda", torch.float16
    n = 4096
    # Inputs scaled so that each product entry has unit variance (FP16 keeps 3 decimal digits).
    a = (torch.randn(n, n, device=dev) / 8).to(f16)
    b = (torch.randn(n, n, device=dev) / 8).to(f16)
    c = torch.empty(n, n, device=dev, dtype=f16)
    x = torch.randn(8192, 4096, device=dev, dtype=f16)
    sm_out = torch.empty_like(x)
    ln_out = torch.empty_like(x)
    w = torch.randn(4096, device=dev, dtype=f16)
    bias = torch.randn(4096, device=dev, dtype=f16)

    def step():
        matmul(a, b, c)
        softmax(x, sm_out)
        layernorm(x, w, bias, ln_out)

    zoo_harness.warm_up(step, args.warmup)
    step()  # the results checked below, whatever --warmup is
    torch.cuda.synchronize()
    checks = (
        ("matmul", c, torch.matmul(a.float(), b.float()).to(f16), 1e-2, 1e-2),
        ("softmax", sm_out, torch.softmax(x.float(), dim=-1).to(f16), 1e-3, 1e-2),
        ("layernorm", ln_out, F.layer_norm(x.float(), (4096,), w.float(), bias.float()).to(f16),
         2e-2, 1e-2),
    )
    for name, got, want, atol, rtol in checks:
        if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
            err = (got.float() - want.float()).abs().max().item()
            print(f"triton_kernels: {name} differs from PyTorch (max abs error {err:.4g})",
                  file=sys.stderr)
            return 1
    del checks
    zoo_harness.report(zoo_harness.measure(step, args.steps))  # synchronizes first
    return 0


if __name__ == "__main__":
    sys.exit(main())
