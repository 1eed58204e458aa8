"""Runs the peer engines of `npm run bench -- peers` on vectors exported by lateral.

Called by scripts/bench/peers.ts with the virtual environment under .cache/peers-venv; never
imported by lateral itself. Input folder (written by peers.ts):
  doc_vectors.npy  float32 [T, d]   every stored document token vector, decoded from lateral's segments
  doc_lens.npy     int64   [n]      tokens per document, in document order
  query_vectors.npy float32 [Tq, d] the query token vectors lateral's search encodes
  query_lens.npy   int64   [q]
  texts.json       {"docs": [str], "queries": [str]} for the text engine (bm25s)
  settings.json    {"top_k": int, "threads": int, "nprobe": int or null (xtr-warp-rs: null = its own defaults)}
Usage: python peers.py FOLDER PEER [--serve]. Each peer runs in its own process (a peer that
crashes, as maxsim-cpu can on CPUs its JIT misdetects, takes nothing else down).
Output: peer-<PEER>.json in the same folder:
  {"status": "ok", "build_s", "index_bytes", "latencies_ms": [...], "rankings": [[doc index, ...], ...], "settings": {...}}
  or {"status": "skipped", "reason": "..."}.
Each query is searched alone (batch of one) after one warm-up query, as lateral is measured.

--serve: the peer builds its index, then answers queries one at a time, so that peers.ts can send
each query to lateral and to the peer in turns (both see the same load). Protocol, one JSON object
a line (the process's fd 1 is moved to stderr, so a library's prints cannot corrupt it):
  peer -> peers.ts, once built: {"status": "ready", "build_s", "index_bytes", "queries": n}
                                (or {"status": "skipped", "reason"} and exit)
  peers.ts -> peer:             {"q": i}   (i: index into the query files)
  peer -> peers.ts:             {"q": i, "ms": search time, "ranking": [doc index, ...]}
  peers.ts -> peer:             end of input (stdin closed)
  peer -> peers.ts:             {"status": "done", "settings": {...}} and exit
The time is the search call alone, as in the batch path; reading and writing the lines is outside it.
"""

import json
import os
import shutil
import sys
import tempfile
import time
import traceback


def folder_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def split(flat, lens):
    out, at = [], 0
    for n in lens:
        out.append(flat[at : at + int(n)])
        at += int(n)
    return out


def accepted(fn, **kwargs):
    """The keyword arguments fn's signature takes (peers' APIs differ between releases)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def timed_one(search_one, q):
    """One query's search time in ms and its ranking (doc indices)."""
    t0 = time.perf_counter()
    ranking = search_one(q)
    ms = (time.perf_counter() - t0) * 1000.0
    return ms, [int(i) for i in ranking]


def timed_queries(search_one, queries):
    search_one(queries[0])  # warm-up, not counted
    latencies, rankings = [], []
    for q in queries:
        ms, ranking = timed_one(search_one, q)
        latencies.append(ms)
        rankings.append(ranking)
    return latencies, rankings


class Prepared:
    """A peer with its index built: `one(q)` searches one query of `queries` (vectors, or texts for bm25s)."""

    def __init__(self, build_s, index_bytes, one, queries, settings):
        self.build_s, self.index_bytes, self.one, self.queries = build_s, index_bytes, one, queries
        self._settings = settings

    def settings(self):
        return self._settings() if callable(self._settings) else self._settings


def prepare_xtr_warp(docs, queries, top_k, threads, work, nprobe=None):
    import torch
    from xtr_warp import XTRWarp

    path = os.path.join(work, "xtr-warp")
    t0 = time.perf_counter()
    index = XTRWarp(index=path, device="cpu")
    index.create([torch.from_numpy(d) for d in docs], **accepted(index.create, device="cpu", show_progress=False))
    index.load(device="cpu")
    build_s = time.perf_counter() - t0

    extra = accepted(index.search, show_progress=False, **({} if nprobe is None else {"nprobe": nprobe}))
    if nprobe is not None and "nprobe" not in extra:
        raise TypeError("this xtr-warp-rs release takes no nprobe")

    def one(q):
        res = index.search(torch.from_numpy(q).unsqueeze(0), top_k=top_k, num_threads=threads, **extra)
        return [pid for pid, _ in res[0]]

    def settings():
        # The hyperparameters its search chose (bound, nprobe, centroid score threshold, max candidates, t'), for the median query length.
        chosen = None
        try:
            mid = sorted(queries, key=len)[len(queries) // 2]
            chosen = index.optimize_hyperparams(top_k, torch.from_numpy(mid).unsqueeze(0))
        except Exception:  # noqa: BLE001 - an older or newer API: reported as unknown
            pass
        auto = dict(zip(["bound", "nprobe", "centroid_score_threshold", "max_candidates", "t_prime"], chosen)) if chosen else "unknown"
        return {"device": "cpu", "num_threads": threads, "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "nbits": 4, "nprobe": nprobe if nprobe is not None else "default", "defaults_chosen": auto}

    return Prepared(build_s, folder_bytes(path), one, queries, settings)


def prepare_fast_plaid(docs, queries, top_k, threads, work):
    import torch
    from fast_plaid import search as fp_search

    path = os.path.join(work, "fast-plaid")
    t0 = time.perf_counter()
    index = fp_search.FastPlaid(index=path, device="cpu")
    index.create([torch.from_numpy(d) for d in docs])
    build_s = time.perf_counter() - t0

    def one(q):
        res = index.search(torch.from_numpy(q).unsqueeze(0), top_k=top_k, show_progress=False)
        return [pid for pid, _ in res[0]]

    return Prepared(build_s, folder_bytes(path), one, queries, {"device": "cpu", "nbits": 4, "n_ivf_probe": 8, "n_full_scores": 4096})


def prepare_maxsim_cpu(docs, queries, top_k, threads, work):
    import numpy as np
    import maxsim_cpu

    t0 = time.perf_counter()
    normed = [np.ascontiguousarray(d, dtype=np.float32) for d in docs]
    build_s = time.perf_counter() - t0

    def one(q):
        scores = np.asarray(maxsim_cpu.maxsim_scores_variable(np.ascontiguousarray(q, dtype=np.float32), normed))
        k = min(top_k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    stored = sum(d.nbytes for d in normed)
    return Prepared(build_s, stored, one, queries, {"exact": True, "storage": "fp32 in RAM"})


def prepare_bm25s(texts_docs, texts_queries, top_k, work):
    import bm25s

    t0 = time.perf_counter()
    corpus_tokens = bm25s.tokenize(texts_docs, stopwords="en", show_progress=False)
    retriever = bm25s.BM25(k1=0.9, b=0.4)
    retriever.index(corpus_tokens, show_progress=False)
    build_s = time.perf_counter() - t0
    path = os.path.join(work, "bm25s")
    retriever.save(path)
    k = min(top_k, len(texts_docs))

    def one(q):
        toks = bm25s.tokenize([q], stopwords="en", show_progress=False)
        results, _ = retriever.retrieve(toks, k=k, show_progress=False)
        return results[0]

    return Prepared(build_s, folder_bytes(path), one, texts_queries, {"k1": 0.9, "b": 0.4, "stopwords": "en", "tokenizer": "bm25s default (words, no stemmer)"})


def batch(prepared):
    """The batch path: every query in order after one warm-up, the figures in one object."""
    lat, rankings = timed_queries(prepared.one, prepared.queries)
    return {"build_s": prepared.build_s, "index_bytes": prepared.index_bytes, "latencies_ms": lat, "rankings": rankings, "settings": prepared.settings()}


def serve(prepare, protocol):
    """The serving path (--serve): build, say ready, then answer {"q": i} lines until stdin closes."""

    def say(obj):
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    try:
        prepared = prepare()
    except ImportError as err:
        say({"status": "skipped", "reason": f"not importable: {err}"})
        return
    except Exception as err:  # noqa: BLE001 - reported as this peer's result, not a crash
        traceback.print_exc()
        say({"status": "skipped", "reason": f"{type(err).__name__}: {err}"})
        return
    say({"status": "ready", "build_s": prepared.build_s, "index_bytes": prepared.index_bytes, "queries": len(prepared.queries)})
    for line in sys.stdin:
        if not line.strip():
            continue
        i = int(json.loads(line)["q"])
        ms, ranking = timed_one(prepared.one, prepared.queries[i])
        say({"q": i, "ms": ms, "ranking": ranking})
    say({"status": "done", "settings": prepared.settings()})


def main():
    folder, name = sys.argv[1], sys.argv[2]
    serving = "--serve" in sys.argv[3:]
    protocol = None
    if serving:
        # The protocol keeps the real stdout; anything else written to fd 1 (a library's prints, Rust's println!) goes to stderr.
        protocol = os.fdopen(os.dup(1), "w", encoding="utf8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    import numpy as np

    settings = json.load(open(os.path.join(folder, "settings.json")))
    top_k, threads = int(settings["top_k"]), int(settings["threads"])
    try:
        import torch

        torch.set_num_threads(threads)
    except Exception:  # noqa: BLE001 - torch is optional for bm25s and maxsim-cpu
        pass
    docs = split(np.load(os.path.join(folder, "doc_vectors.npy")), np.load(os.path.join(folder, "doc_lens.npy")))
    queries = split(np.load(os.path.join(folder, "query_vectors.npy")), np.load(os.path.join(folder, "query_lens.npy")))
    texts = json.load(open(os.path.join(folder, "texts.json")))
    work = tempfile.mkdtemp(prefix="lateral-peers-")
    preparers = {
        "xtr-warp-rs": lambda: prepare_xtr_warp(docs, queries, top_k, threads, work, settings.get("nprobe")),
        "fast-plaid": lambda: prepare_fast_plaid(docs, queries, top_k, threads, work),
        "maxsim-cpu": lambda: prepare_maxsim_cpu(docs, queries, top_k, threads, work),
        "bm25s": lambda: prepare_bm25s(texts["docs"], texts["queries"], top_k, work),
    }
    if serving:
        try:
            serve(preparers[name], protocol)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        out = {"status": "ok", **batch(preparers[name]())}
    except ImportError as err:
        out = {"status": "skipped", "reason": f"not importable: {err}"}
    except Exception as err:  # noqa: BLE001 - reported as this peer's result, not a crash
        traceback.print_exc()
        out = {"status": "skipped", "reason": f"{type(err).__name__}: {err}"}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    json.dump(out, open(os.path.join(folder, f"peer-{name}.json"), "w"))


if __name__ == "__main__":
    main()
