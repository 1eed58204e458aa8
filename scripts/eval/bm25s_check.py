"""BM25 as a textbook implementation scores it: bm25s (PyPI) over the collections that
`npm run eval -- fusion --bm25-only --export DIR` wrote, with the same nDCG@10 (linear gain, the
ideal ranking from every positive judgment) as scripts/lib/metrics.ts.

  python3 -m venv /tmp/bm25s-venv && /tmp/bm25s-venv/bin/pip install bm25s PyStemmer
  npm run eval -- fusion --bm25-only --export /tmp/bm25-export
  /tmp/bm25s-venv/bin/python scripts/eval/bm25s_check.py /tmp/bm25-export

k1 0.9, b 0.4 (Anserini's defaults), bm25s's "lucene" variant; four analyses: with or without
bm25s's English stop words, with or without the Snowball English stemmer.
"""
import json
import math
import os
import sys

import bm25s
import Stemmer


def ndcg10(ranking, judged):
    dcg = sum(max(judged.get(d, 0), 0) / math.log2(r + 2) for r, d in enumerate(ranking[:10]))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def main(folder):
    for name in sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json")):
        data = json.load(open(os.path.join(folder, name + ".json")))
        ids = [d["id"] for d in data["docs"]]
        texts = [d["text"] for d in data["docs"]]
        queries = data["queries"]
        for stop in (None, "en"):
            for stem in (None, "english"):
                stemmer = Stemmer.Stemmer(stem) if stem else None
                retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
                retriever.index(bm25s.tokenize(texts, stopwords=stop, stemmer=stemmer, show_progress=False), show_progress=False)
                q = bm25s.tokenize([x["text"] for x in queries], stopwords=stop, stemmer=stemmer, show_progress=False)
                docs, _ = retriever.retrieve(q, k=10, show_progress=False)
                scores = [ndcg10([ids[j] for j in docs[i]], data["qrels"][x["id"]]) for i, x in enumerate(queries)]
                label = f"stop words {'en' if stop else 'none'}, stemmer {stem or 'none'}"
                print(f"{name}: bm25s {bm25s.__version__} ({label}) nDCG@10 {sum(scores) / len(scores):.4f} over {len(queries)} judged queries")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/bm25-export")
