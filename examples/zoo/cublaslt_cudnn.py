"""cuDNN and cuBLASLt through PyTorch (workload zoo, examples/zoo/README.md). Each step runs:
  - a training step of a small ResNet-style CNN (He et al. 2015's basic blocks: a 7x7 stride-2
    stem conv, BatchNorm, ReLU, 3x3 max-pool, then four basic blocks of two 3x3 convs with
    BatchNorm and ReLU and a projection shortcut where the shape changes, 64 -> 512 channels,
    global average pool, a 1000-way Linear) on 64 random 224 x 224 images, channels_last, FP16
    autocast over FP32 weights, SGD with momentum behind a GradScaler (whose step reads an
    inf check back to the host, as FP16 training does);
  - torch.addmm(bias, x, w) in BF16, 8192 x 4096 x 4096: PyTorch sends a 1-D bias with beta=1 to
    cuBLASLt with the bias folded into the GEMM's epilogue (at::cuda::blas::gemm_and_bias);
  - F.linear(x, w, bias) then F.gelu (the same cuBLASLt bias epilogue, then GELU as its own
    element-wise kernel) and torch._addmm_activation(bias, x, w, use_gelu=True) (cuBLASLt's
    fused GELU_BIAS epilogue: one kernel).
Library per op: the convolutions (forward, data grad, weight grad) and the BatchNorms (forward
and backward, FP16 input with FP32 weights) run in cuDNN, with torch.backends.cudnn.benchmark
on (its algorithm search happens in the first warm-up step); the CNN's Linear is an FP16
addmm with bias (cuBLASLt) and its gradients plain cuBLAS GEMMs (which cuBLAS may serve with
its Lt kernels); ReLU, pooling, the loss, GradScaler and SGD are PyTorch's own kernels.
Setting DISABLE_ADDMM_CUDA_LT=1 sends the addmm calls to plain cuBLAS (a comparison run).

    python3 examples/zoo/cublaslt_cudnn.py [--steps N] [--warmup W]

NVTX: each measured step inside "step", all of them inside "measured" (after the warm-up steps
and a synchronize). Prints loop_s=<seconds>.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import zoo_harness  # this folder's shared measured loop

args = zoo_harness.parser(steps=50).parse_args()

torch.manual_seed(0)
torch.backends.cudnn.benchmark = True
dev = "cuda"


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


cnn = nn.Sequential(
    nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
    nn.MaxPool2d(3, 2, 1),
    BasicBlock(64, 64, 1), BasicBlock(64, 128, 2), BasicBlock(128, 256, 2),
    BasicBlock(256, 512, 2),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000),
).to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scaler = torch.amp.GradScaler("cuda")
images = torch.randn(64, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
labels = torch.randint(0, 1000, (64,), device=dev)

bf16 = torch.bfloat16
x = torch.randn(8192, 4096, device=dev, dtype=bf16)
w = torch.randn(4096, 4096, device=dev, dtype=bf16) * 0.02    # (in, out): addmm's mat2
w_lin = torch.randn(4096, 4096, device=dev, dtype=bf16) * 0.02  # (out, in): F.linear's weight
bias = torch.randn(4096, device=dev, dtype=bf16)


def step():
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.cross_entropy(cnn(images), labels)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    torch.addmm(bias, x, w)
    F.gelu(F.linear(x, w_lin, bias), approximate="tanh")
    torch._addmm_activation(bias, x, w, use_gelu=True)


zoo_harness.run(step, args)
