"""A Llama-style decoder training step (workload zoo, examples/zoo/README.md): the architecture of
Touvron et al. 2023 (pre-RMSNorm blocks, rotary position embeddings, SwiGLU MLP) with grouped-
query attention (16 query heads sharing 4 key/value heads), built by transformers from
LlamaConfig with random weights: hidden 1024, 8 layers, MLP 2816, vocab 32000 (about 155M
parameters). Batch 8 x 512 random tokens, causal LM loss (labels=input_ids), BF16 autocast over
FP32 weights, "sdpa" attention, AdamW (PyTorch's default foreach implementation).

    python3 examples/zoo/llama_train.py [--steps N] [--warmup W]

One step = forward, backward, optimizer step. NVTX: each measured step inside "step", all of them
inside "measured" (after the warm-up steps and a synchronize). Prints loop_s=<seconds>.
"""
import torch
import transformers

import zoo_harness  # this folder's shared measured loop

args = zoo_harness.parser(steps=50).parse_args()

torch.manual_seed(0)
config = transformers.LlamaConfig(
    vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
    num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=512,
    use_cache=False, attn_implementation="sdpa",
)
model = transformers.LlamaForCausalLM(config).to("cuda").train()
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
input_ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


zoo_harness.run(step, args)
