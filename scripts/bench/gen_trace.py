#!/usr/bin/env python3
"""Generates a synthetic PyTorch-profiler-like Chrome trace of a given size (for reader benchmarks).

The event mix follows a real Kineto trace of a training step: cpu_op ranges with shape args,
cudaLaunchKernel runtime calls, kernels with launch configuration, ac2g flow pairs, some memcpy /
memset, user_annotation ranges and python_function frames. Output is deterministic (seeded).

usage: gen_trace.py OUT.json [--mb 1024] [--seed 1]
"""
import argparse
import random
import sys

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trt",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*, float const*, float const*, float*, float*, float*)",
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4>)",
]
OPS = ["aten::linear", "aten::addmm", "aten::gelu", "aten::layer_norm", "aten::native_layer_norm",
       "aten::scaled_dot_product_attention", "aten::add", "aten::sum", "aten::empty", "aten::view"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    target = int(a.mb * 1e6)
    pid, tid, dev, stream = 733, 733, 0, 7
    out = open(a.out, "w")
    out.write('{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {"id": 0, "name": "NVIDIA H100 80GB HBM3", '
              '"totalGlobalMem": 85017493504, "computeMajor": 9, "computeMinor": 0, "numSms": 132}\n  ],\n'
              '  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": 1790857026000000000,\n  "traceEvents": [\n')
    out.write('  {"name": "process_name", "ph": "M", "ts": 0, "pid": %d, "tid": 0, "args": {"name": "python3"}}' % pid)
    written = 0
    t = 4476703214413.097
    gpu_t = t
    corr = 0
    ext = 0
    while written < target:
        chunk = []
        for _ in range(2000):
            corr += 1
            ext += 1
            op = OPS[rnd.randrange(len(OPS))]
            op_dur = rnd.uniform(20, 200)
            chunk.append(
                '  {\n    "ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d,\n'
                '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d,"Sequence number": %d, '
                '"Fwd thread id": 0, "Record function id": 0, "Concrete Inputs": ["", "[512]", "", ""], '
                '"Input type": ["float", "ScalarList", "float", "float"], "Input Strides": [[65536, 512, 1], [], [1], [1]], '
                '"Input Dims": [[4, 128, 512], [], [512], [512]], "Ev Idx": %d\n    }\n  }'
                % (op, pid, tid, t, op_dur, ext, ext % 997, ext))
            if rnd.random() < 0.1:
                chunk.append('  {\n    "ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1762): _call_impl", '
                             '"pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "Python parent id": %d, '
                             '"Python id": %d, "Ev Idx": %d\n    }\n  }' % (pid, tid, t, op_dur, ext, ext + 1, ext))
            if rnd.random() < 0.05:
                chunk.append('  {\n    "ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": %d, "tid": %d,\n'
                             '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d, "Ev Idx": %d\n    }\n  }'
                             % (pid, tid, t, op_dur, ext, ext))
            launch_t = t + op_dur * 0.3
            launch_dur = rnd.uniform(3, 12)
            r = rnd.random()
            if r < 0.9:
                k = KERNELS[rnd.randrange(len(KERNELS))]
                api, cbid = "cudaLaunchKernel", 211
                kd = rnd.uniform(2, 60)
                gpu_t = max(gpu_t, launch_t + 5)
                chunk.append(
                    '  {\n    "ph": "X", "cat": "kernel", "name": "%s", "pid": %d, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
                    '    "args": {\n      "External id": %d,\n      "queued": 0, "device": %d, "context": 1,\n'
                    '      "stream": %d, "correlation": %d,\n      "registers per thread": 39, "shared memory": 24,\n'
                    '      "blocks per SM": 3.878788, "warps per SM": 15.515152,\n      "grid": [512, 1, 1],\n'
                    '      "block": [32, 4, 1],\n      "est. achieved occupancy %%": 24\n    }\n  }'
                    % (k, dev, stream, gpu_t, kd, ext, dev, stream, corr))
            elif r < 0.97:
                api, cbid = "cudaMemcpyAsync", 41
                kd = rnd.uniform(1, 20)
                gpu_t = max(gpu_t, launch_t + 5)
                chunk.append(
                    '  {\n    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": %d, "tid": %d,\n'
                    '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d,\n      "device": %d, "context": 1,\n'
                    '      "stream": %d, "correlation": %d,\n      "bytes": 1048576, "memory bandwidth (GB/s)": 12.5\n    }\n  }'
                    % (dev, stream, gpu_t, kd, ext, dev, stream, corr))
            else:
                api, cbid = "cudaMemsetAsync", 51
                kd = rnd.uniform(1, 5)
                gpu_t = max(gpu_t, launch_t + 5)
                chunk.append(
                    '  {\n    "ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": %d, "tid": %d,\n'
                    '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d,\n      "device": %d, "context": 1,\n'
                    '      "stream": %d, "correlation": %d,\n      "bytes": 4096, "memory bandwidth (GB/s)": 1.5\n    }\n  }'
                    % (dev, stream, gpu_t, kd, ext, dev, stream, corr))
            chunk.append('  {\n    "ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d,\n'
                         '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d,\n      "cbid": %d, "correlation": %d\n    }\n  }'
                         % (api, pid, tid, launch_t, launch_dur, ext, cbid, corr))
            chunk.append('  {\n    "ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g"\n  }'
                         % (corr, pid, tid, launch_t))
            chunk.append('  {\n    "ph": "f", "id": %d, "pid": %d, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }'
                         % (corr, dev, stream, gpu_t))
            gpu_t += kd
            t += op_dur + rnd.uniform(1, 10)
        text = ",\n" + ",\n".join(chunk)
        out.write(text)
        written += len(text)
    out.write('\n],\n  "traceName": "synthetic.json"\n}\n')
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
