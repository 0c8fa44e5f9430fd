"""The inference loop of issue 30: a small decoder (4 blocks, d=256, 4 heads, sequence 64, batch
8, fp16) compiled with torch.compile(mode="reduce-overhead"), so that Inductor's CUDA graphs are
captured during the first calls and replayed after; ITERS iterations, each inside the NVTX range
"iter" (torch.cuda.nvtx), a synchronization at the end of each.
Usage: compiled_infer.py [ITERS=3000] [--eager]
  --eager: the same loop without torch.compile (no graphs).
Prints one line, the same under any profiler: "compiled_infer: ok iters=N warmup=W" (W: the
iterations before the loop, which capture the graphs), and the loop's time per iteration on a
second line ("compiled_infer_time: ms_per_iter=...")."""
import sys
import time

import torch
import torch.nn.functional as F

iters = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 3000
eager = "--eager" in sys.argv
torch.manual_seed(0)
D, HEADS, SEQ, BATCH, VOCAB, BLOCKS = 256, 4, 64, 8, 1024, 4


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.proj = torch.nn.Linear(D, D)
        self.ln2 = torch.nn.LayerNorm(D)
        self.up = torch.nn.Linear(D, 4 * D)
        self.down = torch.nn.Linear(4 * D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, D))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = torch.nn.Linear(D, VOCAB)

    def forward(self, idx):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


model = Decoder().cuda().half().eval()
fn = model if eager else torch.compile(model, mode="reduce-overhead")
tokens = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
WARMUP = 3
with torch.inference_mode():
    for _ in range(WARMUP):
        fn(tokens)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        torch.cuda.nvtx.range_push("iter")
        out = fn(tokens)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    dt = time.perf_counter() - t0
ok = bool(torch.isfinite(out.float()).all().item())
print(f"compiled_infer: {'ok' if ok else 'WRONG'} iters={iters} warmup={WARMUP}")
print(f"compiled_infer_time: ms_per_iter={dt * 1e3 / iters:.4f}")
sys.exit(0 if ok else 3)
