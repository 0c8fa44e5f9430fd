"""A nanoGPT-style GPT training step (workload zoo, examples/zoo/README.md), the model written here
from the GPT-2 design (Radford et al. 2019): token + learned position embeddings, pre-LayerNorm
blocks of causal self-attention (F.scaled_dot_product_attention, is_causal) and a 4x MLP with
GELU, a final LayerNorm and an LM head tied to the token embedding. 6 layers, d=384, 6 heads,
block 256, vocab 50304 (GPT-2's 50257 padded to a multiple of 64), about 30M parameters.
Batch 32 x 256 random tokens, BF16 autocast, AdamW(fused=True) with weight decay on matrices
only, gradient clipping at norm 1.0.

    python3 examples/zoo/nanogpt_train.py [--steps N] [--warmup W]
    python3 examples/zoo/nanogpt_train.py --compile                   # torch.compile, default mode
    python3 examples/zoo/nanogpt_train.py --compile --compile-mode reduce-overhead  # CUDA graphs
    python3 examples/zoo/nanogpt_train.py --layers 4 --width 512 --heads 8 --batch 16  # smaller

--compile-mode reduce-overhead (which implies --compile) replays the compiled forward and
backward as CUDA graphs; each step then starts with torch.compiler.cudagraph_mark_step_begin().
Compilation (and graph recording) happens in the warm-up steps, outside "measured"; it takes tens
of seconds on a cold inductor cache (under the system temp dir).

One step = forward, backward, clip, optimizer step. NVTX: each measured step inside "step", all
of them inside "measured" (after the warm-up steps and a synchronize). Prints loop_s=<seconds>.
"""
import itertools
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import zoo_harness  # this folder's shared measured loop

ap = zoo_harness.parser(steps=100)
ap.add_argument("--compile", action="store_true", help="torch.compile the model")
ap.add_argument("--compile-mode", choices=("default", "reduce-overhead"), default="default",
                help="torch.compile mode (default: default); reduce-overhead implies --compile")
ap.add_argument("--layers", type=int, default=6, help="transformer blocks (default 6)")
ap.add_argument("--width", type=int, default=384, help="model width d (default 384)")
ap.add_argument("--heads", type=int, default=6, help="attention heads (default 6)")
ap.add_argument("--batch", type=int, default=32, help="sequences per step (default 32)")
args = ap.parse_args()

N_LAYER, N_HEAD, D, BLOCK, VOCAB, BATCH = args.layers, args.heads, args.width, 256, 50304, args.batch


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)  # (b, heads, t, head_dim)
        k = k.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        v = v.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = CausalSelfAttention()
        self.ln2 = nn.LayerNorm(D)
        self.fc = nn.Linear(D, 4 * D)
        self.gelu = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * D, D)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.proj(self.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(BLOCK, D)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        for name, p in self.named_parameters():
            if p.dim() == 2:  # GPT-2's init; residual projections scaled by depth
                std = 0.02 / math.sqrt(2 * N_LAYER) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


torch.manual_seed(0)
model = GPT().cuda()
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                         {"params": no_decay, "weight_decay": 0.0}],
                        lr=6e-4, betas=(0.9, 0.95), fused=True)
cudagraphs = args.compile_mode == "reduce-overhead"
net = torch.compile(model, mode=args.compile_mode) if args.compile or cudagraphs else model
data = torch.randint(0, VOCAB, (4, BATCH, BLOCK + 1), device="cuda")
batches = [(d[:, :-1].contiguous(), d[:, 1:].contiguous()) for d in data]
step_index = itertools.count()  # 0, 1, ... over warm-up and measured steps alike


def step():
    if cudagraphs:
        torch.compiler.cudagraph_mark_step_begin()
    x, y = batches[next(step_index) % len(batches)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = net(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


zoo_harness.run(step, args)
