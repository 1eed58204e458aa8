import { parse as parseLenient, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { MAX_DOC_ID_LENGTH, PASSAGE_SEPARATOR, ConflictError, ValidationError, type FieldIssue, type IngestDocument } from '@lateral/shared';


/** Parses a request body that is either a JSON array (or `{ documents: [...] }`) or NDJSON. */
export function parseDocumentsBody(body: string, contentType: string | undefined): unknown[] {
  const ct = (contentType ?? '').split(';')[0].trim().toLowerCase();
  const trimmed = body.trimStart();
  const ndjson = ct === 'application/x-ndjson' || ct === 'application/ndjson' || ct === 'application/jsonl' || (ct !== 'application/json' && !trimmed.startsWith('[') && !trimmed.startsWith('{"documents"'));
  if (!ndjson) {
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch (err) {
      throw new ValidationError(`malformed JSON: ${describeJsonError(body, err)}`, [{ field: 'body', message: (err as Error).message }]);
    }
    if (Array.isArray(value)) return value;
    if (value && typeof value === 'object' && Array.isArray((value as { documents?: unknown }).documents)) return (value as { documents: unknown[] }).documents;
    throw new ValidationError('body must be a JSON array of documents, an object { "documents": [...] }, or NDJSON (one document per line)', [
      { field: 'body', message: 'expected an array' },
    ]);
  }
  const out: unknown[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line) continue;
    try {
      out.push(JSON.parse(line));
    } catch (err) {
      throw new ValidationError(`malformed NDJSON at line ${i + 1}: ${(err as Error).message}`, [{ field: `line ${i + 1}`, message: (err as Error).message }]);
    }
  }
  return out;
}

/** Node 20's JSON.parse does not always say where it failed: locate the first error by offset. */
export function describeJsonError(body: string, err: unknown): string {
  // V8 names the offset in most messages; locating it costs one pass over the text before it.
  // Re-parsing with jsonc-parser builds a whole tree: seconds and hundreds of MB for a 60 MB body,
  // so it is kept for small bodies whose message has no offset.
  const message = (err as Error).message;
  const at = /at position (\d+)/.exec(message);
  const offset = at ? Number(at[1]) : /Unexpected end of JSON input/.test(message) ? body.length : -1;
  if (offset >= 0) {
    let line = 1;
    let lineStart = 0;
    for (let i = body.indexOf('\n'); i !== -1 && i < offset; i = body.indexOf('\n', i + 1)) {
      line++;
      lineStart = i + 1;
    }
    return `${message.replace(/ in JSON at position \d+.*$/, '').replace(/, ".*" is not valid JSON$/, '')} at line ${line}, column ${offset - lineStart + 1}`;
  }
  if (body.length > 1 << 20) return message;
  const errors: ParseError[] = [];
  parseLenient(body, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const first = errors[0];
  if (!first) return (err as Error).message;
  const before = body.slice(0, first.offset);
  const line = before.split('\n').length;
  const column = first.offset - before.lastIndexOf('\n');
  return `${printParseErrorCode(first.error)} at line ${line}, column ${column}`;
}

/**
 * Validates a batch: every problem is collected and reported together, naming the documents.
 * Nothing of a batch is accepted unless all of it is valid, so nothing is silently dropped.
 */
const reserved = `'${PASSAGE_SEPARATOR}' is reserved for passage ids (id#n) in a collection with passages`;

export function validateDocuments(raw: unknown[], limits: { maxDocumentBytes: number; maxBatchDocuments: number; passages?: boolean }): IngestDocument[] {
  if (raw.length === 0) throw new ValidationError('no documents in the request', [{ field: 'documents', message: 'at least 1 document is required' }]);
  if (raw.length > limits.maxBatchDocuments) {
    throw new ValidationError(`too many documents in one request: ${raw.length} > MAX_BATCH_DOCUMENTS (${limits.maxBatchDocuments})`, [
      { field: 'documents', message: `at most ${limits.maxBatchDocuments} documents per request` },
    ]);
  }
  const issues: FieldIssue[] = [];
  const seen = new Map<string, number>();
  const docs: IngestDocument[] = [];
  raw.forEach((d, i) => {
    const where = `documents[${i}]`;
    if (!d || typeof d !== 'object' || Array.isArray(d)) {
      issues.push({ field: where, message: 'must be an object { id, text, metadata? }' });
      return;
    }
    const { id, text, metadata, ...rest } = d as Record<string, unknown>;
    const label = typeof id === 'string' && id ? `${where} (id "${id.slice(0, 80)}")` : where;
    for (const k of Object.keys(rest)) issues.push({ field: `${label}.${k}`, message: `unknown field '${k}' (allowed: id, text, metadata)` });
    if (typeof id !== 'string' || id.length === 0) issues.push({ field: `${where}.id`, message: 'id must be a non-empty string' });
    else if (Buffer.byteLength(id) > MAX_DOC_ID_LENGTH) issues.push({ field: `${label}.id`, message: `id is longer than ${MAX_DOC_ID_LENGTH} bytes` });
    // the same rule as a document id in a URL path (documentId in @lateral/shared)
    else if (/[\u0000-\u001f\u007f]/.test(id)) issues.push({ field: `${where}.id`, message: 'id must not contain control characters' });
    else if (limits.passages && id.includes(PASSAGE_SEPARATOR)) issues.push({ field: `${label}.id`, message: reserved });
    else if (seen.has(id)) issues.push({ field: `${label}.id`, message: `duplicate id in this batch (also documents[${seen.get(id)}])` });
    else seen.set(id, i);
    if (typeof text !== 'string') issues.push({ field: `${label}.text`, message: 'text must be a string' });
    else if (text.trim().length === 0) issues.push({ field: `${label}.text`, message: 'text is empty' });
    else {
      const bytes = Buffer.byteLength(text);
      if (bytes > limits.maxDocumentBytes) issues.push({ field: `${label}.text`, message: `text is ${bytes} bytes, over MAX_DOCUMENT_BYTES (${limits.maxDocumentBytes})` });
    }
    if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
      issues.push({ field: `${label}.metadata`, message: 'metadata must be a JSON object' });
    }
    if (typeof id === 'string' && typeof text === 'string') docs.push({ id, text, ...(metadata ? { metadata: metadata as Record<string, unknown> } : {}) });
  });
  // Ids that are well formed but hold '#' in a collection with passages: a conflict with the
  // collection's setting (409), not malformed input, when nothing else is wrong.
  if (issues.length > 0 && issues.every((x) => x.message === reserved)) {
    throw new ConflictError(`${issues.length} document id(s) hold '${PASSAGE_SEPARATOR}', which this collection (passages) reserves for passage ids (id#n), nothing was accepted: ${issues.slice(0, 20).map((x) => x.field).join('; ')}`);
  }
  if (issues.length > 0) {
    const shown = issues.slice(0, 20).map((x) => `${x.field}: ${x.message}`).join('; ');
    throw new ValidationError(`${issues.length} problem(s) in the documents, nothing was accepted: ${shown}${issues.length > 20 ? '; ...' : ''}`, issues);
  }
  return docs;
}
