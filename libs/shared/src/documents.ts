/** A document as accepted by the API and read by the encoder (one NDJSON line per document in S3). */
export interface IngestDocument {
  id: string;
  text: string;
  metadata?: Record<string, unknown>;
}

export function toNdjson(docs: IngestDocument[]): string {
  return docs.map((d) => JSON.stringify(d)).join('\n') + '\n';
}

export function fromNdjson(body: Uint8Array): IngestDocument[] {
  return new TextDecoder()
    .decode(body)
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as IngestDocument);
}
