"""A ViT-base FP16 inference loop built by transformers from a ViTConfig with random weights
(Dosovitskiy et al. 2020: 12 layers, hidden 768, 12 heads, FFN 3072, 224x224 images, 16x16
patches), its weights moved to the GPU once from pageable memory with .cuda() and converted with
.half(), then `--steps` forward passes of a batch of `--batch` images under
torch.inference_mode: issue 33's case of one-time set-up that must be start-up, not a hint.

    python3 vit_infer.py [--steps N] [--batch B]

Prints loop_s=<seconds> (the forward passes, after one warm-up pass and a synchronize).
"""
import argparse
import time

import torch
import transformers

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--batch", type=int, default=32)
args = ap.parse_args()

torch.manual_seed(0)
config = transformers.ViTConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                intermediate_size=3072, image_size=224, patch_size=16)
model = transformers.ViTModel(config, add_pooling_layer=False).eval()
model = model.cuda().half()  # pageable fp32 weights uploaded once, then converted
images = torch.randn(args.batch, 3, 224, 224, device="cuda", dtype=torch.float16)


@torch.inference_mode()
def step():
    return model(pixel_values=images).last_hidden_state


step()
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(args.steps):
    step()
torch.cuda.synchronize()
print("loop_s=%.4f" % (time.perf_counter() - t0))
