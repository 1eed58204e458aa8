"""Schemathesis hooks of `npm run contract` (scripts/contract.ts): the rules between two fields of
one body that JSON Schema cannot state, and only those. Each is stated in the operation's
description in the OpenAPI document and refused by the service with a 400 naming the field; here
a generated body is given what the rule needs (map) or left out (filter), so the contract checks
everything else. A rule added here needs a reason JSON Schema cannot carry it.
"""
import schemathesis


def _path(ctx):
    op = ctx.operation
    return f"{op.method.upper()} {op.path}" if op is not None else ""


@schemathesis.hook
def filter_body(ctx, body):
    path = _path(ctx)
    # POST /v1/collections: passages.overlap is at most half of maxDocTokens (a relation between two numbers).
    if path == "POST /v1/collections" and isinstance(body, dict):
        passages, max_doc = body.get("passages"), body.get("maxDocTokens")
        if isinstance(passages, dict) and isinstance(passages.get("overlap"), (int, float)) and isinstance(max_doc, (int, float)) and not isinstance(max_doc, bool):
            if passages["overlap"] > max_doc // 2:
                return False
    # POST /v1/collections/{id}/documents: document ids are unique within one request (uniqueItems compares whole items).
    if path == "POST /v1/collections/{id}/documents":
        docs = body.get("documents") if isinstance(body, dict) else body
        if isinstance(docs, list):
            ids = [d.get("id") for d in docs if isinstance(d, dict) and isinstance(d.get("id"), str)]
            if len(ids) != len(set(ids)):
                return False
    # POST /v1/collections/{id}/judgments, JSON forms: query ids are unique within one set (uniqueItems compares whole items).
    if path == "POST /v1/collections/{id}/judgments":
        queries = body.get("queries") if isinstance(body, dict) else body
        if isinstance(queries, list):
            ids = [q.get("id") for q in queries if isinstance(q, dict) and isinstance(q.get("id"), str)]
            if len(ids) != len(set(ids)):
                return False
    return True


@schemathesis.hook
def map_body(ctx, body):
    # POST /v1/collections/{id}/judgments, TREC form: every query the qrels judge needs a topic line.
    if _path(ctx) == "POST /v1/collections/{id}/judgments" and isinstance(body, dict):
        qrels, topics = body.get("qrels"), body.get("topics")
        if isinstance(qrels, str) and isinstance(topics, str) and topics != "" and "<" not in topics:
            have = {line.split("\t", 1)[0].strip() for line in topics.split("\n") if "\t" in line}
            judged = []
            for line in qrels.split("\n"):
                cols = line.strip().split()
                if len(cols) == 4 and not cols[0].startswith("#") and cols[0] not in have and cols[0] not in judged:
                    judged.append(cols[0])
            if judged:
                body = {**body, "topics": topics.rstrip("\n") + "\n" + "\n".join(f"{q}\ttopic {q}" for q in judged) + "\n"}
    return body
