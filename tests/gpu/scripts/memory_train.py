"""A small decoder trained a few steps, for PyTorch's memory categories (docs/memory.md,
tests/gpu/memory_test.cpp): 4 pre-norm transformer blocks (d=512, 8 heads, MLP 2048), sequence
256, batch 16, BF16 autocast over FP32 weights, AdamW. Prints, after the last step, what PyTorch
itself counted: max_allocated= (torch.cuda.max_memory_allocated), max_reserved=
(max_memory_reserved), parameters= and optimizer_state= (their storages' bytes).

    python3 memory_train.py [--steps N] [--leak MiB] [--hold] [--release] [--checkpoint]

--leak N    keeps N MiB more each step (a list the program never reads again): a planted leak.
--hold      keeps an FP32 copy of each step's logits "for logging" until the next step replaces
            it, after that step's loss: the same bytes every step, live at the next peak.
--release   deletes the step's logits and loss after the optimizer step: nothing of a step is
            kept into the next (without it, they are until the next forward pass replaces them).
--checkpoint  recomputes each block in the backward pass (torch.utils.checkpoint).
"""
import argparse

import torch
import torch.nn as nn
import torch.utils.checkpoint as ckpt

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=4)
ap.add_argument("--leak", type=int, default=0)
ap.add_argument("--hold", action="store_true")
ap.add_argument("--release", action="store_true")
ap.add_argument("--checkpoint", action="store_true")
ap.add_argument("--batch", type=int, default=16)
args = ap.parse_args()

D, H, L, T, V = 512, 8, 4, 256, 8192


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, H, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False, is_causal=True,
                          attn_mask=MASK)[0]
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = ckpt.checkpoint(b, x, use_reentrant=False) if args.checkpoint else b(x)
        return self.head(x)


torch.manual_seed(0)
MASK = nn.Transformer.generate_square_subsequent_mask(T, device="cuda")
model = Model().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
idx = torch.randint(0, V, (args.batch, T), device="cuda")
kept, held = [], None
for step in range(args.steps):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(idx)
        loss = nn.functional.cross_entropy(logits.float().view(-1, V), idx.view(-1))
    loss.backward()
    if args.hold:
        held = logits.detach().float()  # replaced next step: two copies at its peak
    opt.step()
    opt.zero_grad(set_to_none=True)
    if args.leak:
        kept.append(torch.empty(args.leak << 20, dtype=torch.uint8, device="cuda"))
    if args.release:
        del logits, loss
torch.cuda.synchronize()


def nbytes(tensors):
    return sum(t.untyped_storage().nbytes() for t in tensors)


state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.is_cuda]
print(f"max_allocated={torch.cuda.max_memory_allocated()} "
      f"max_reserved={torch.cuda.max_memory_reserved()} "
      f"parameters={nbytes(model.parameters())} optimizer_state={nbytes(state)}", flush=True)
