"""GPT-2 small greedy generation with a KV cache (workload zoo, examples/zoo/README.md): the
decoder of Radford et al. 2019 at GPT2Config's defaults (12 layers, hidden 768, 12 heads, vocab
50257) built by transformers with random weights, FP16, "sdpa" attention. Each step generates
64 new tokens for a batch of 8 random 32-token prompts by a manual greedy loop: one forward over
the prompt (use_cache=True), then 63 one-token forwards, each fed the cache the previous one
returned (past_key_values=out.past_key_values). The next token is chosen on the GPU (argmax):
no host sync inside a step, so the decode loop is bound by launch and framework overhead.

    python3 examples/zoo/gpt2_generate.py [--steps N] [--warmup W]

One step = one generated batch of sequences. NVTX: each measured step inside "step", all of them
inside "measured" (after the warm-up steps and a synchronize). Prints loop_s=<seconds>.
"""
import torch
import transformers

import zoo_harness  # this folder's shared measured loop

args = zoo_harness.parser(steps=5).parse_args()

NEW_TOKENS = 64
torch.manual_seed(0)
config = transformers.GPT2Config(attn_implementation="sdpa")
model = transformers.GPT2LMHeadModel(config).to(device="cuda", dtype=torch.float16).eval()
prompt = torch.randint(0, config.vocab_size, (8, 32), device="cuda")


@torch.inference_mode()
def generate():
    out = model(input_ids=prompt, use_cache=True)
    token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    tokens = [token]
    for _ in range(NEW_TOKENS - 1):
        out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
        token = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        tokens.append(token)
    return torch.cat(tokens, dim=1)


zoo_harness.run(generate, args)
