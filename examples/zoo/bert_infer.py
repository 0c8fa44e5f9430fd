"""BERT-base inference (workload zoo, examples/zoo/README.md): the encoder of Devlin et al. 2018
(12 layers, hidden 768, 12 heads, FFN 3072, GELU, post-LN) built by transformers from
BertConfig with random weights, FP16, attention through PyTorch's scaled_dot_product_attention
("sdpa"), on a batch of 32 sequences of 128 tokens under torch.inference_mode.

    python3 examples/zoo/bert_infer.py [--steps N] [--warmup W]

One step = one forward pass. NVTX: each measured step inside "step", all of them inside
"measured" (after the warm-up steps and a synchronize). Prints loop_s=<seconds>.
"""
import torch
import transformers

import zoo_harness  # this folder's shared measured loop

args = zoo_harness.parser(steps=200).parse_args()

torch.manual_seed(0)
config = transformers.BertConfig(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    intermediate_size=3072, max_position_embeddings=512, attn_implementation="sdpa",
)
model = transformers.BertModel(config).to(device="cuda", dtype=torch.float16).eval()
input_ids = torch.randint(0, config.vocab_size, (32, 128), device="cuda")
attention_mask = torch.ones_like(input_ids)


@torch.inference_mode()
def step():
    return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


zoo_harness.run(step, args)
