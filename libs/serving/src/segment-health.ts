import { degradedRecordKey, type DegradedRecord } from '@lateral/shared';
import { recordUnavailableSegment, type Logger, type ObjectStore } from '@lateral/infra';
import type { SegmentHealthListener, UnavailableEvent } from './search-plan';

/**
 * What a scorer does when a segment or index object cannot be read (SegmentCache's health
 * listener): logs it once, with the object's key, counts it (lateral_segment_unavailable_total,
 * lateral_segments_unavailable), and records it in the collection's `degraded.json` in S3, which
 * GET /v1/collections/{id} and the operations overview read. An object that reads again (its
 * recheck found it whole) is taken out of the record. Updates of one collection's record are
 * serialised in this process; two scorers detecting at once may each write the record (the last
 * write wins and the other scorer's entry returns at its next detection, after a restart or a
 * recheck).
 */
export class DegradedSegmentsRecorder implements SegmentHealthListener {
  private readonly chains = new Map<string, Promise<void>>();

  constructor(
    private readonly store: Pick<ObjectStore, 'getJson' | 'putJson' | 'delete'>,
    private readonly logger: Pick<Logger, 'error' | 'warn'>,
  ) {}

  unavailable(e: UnavailableEvent): void {
    recordUnavailableSegment(e.object, 1);
    this.logger.error(`${e.object} object unavailable, collection served without it (degraded): ${e.reason}`, {
      tenant: e.tenantId,
      collection: e.collectionId,
      generation: e.generation,
      key: e.key,
      segment: e.segment,
      documents: e.documents,
    });
    const entry = { key: e.key, object: e.object, segment: e.segment, reason: e.reason, documents: e.documents, generation: e.generation, detectedAt: new Date().toISOString() };
    this.update(e.tenantId, e.collectionId, (segments) => [...segments.filter((s) => s.key !== e.key), entry]);
  }

  recovered(e: { tenantId: string; collectionId: string; key: string; object: 'segment' | 'index' }): void {
    recordUnavailableSegment(e.object, -1);
    this.logger.warn(`${e.object} object ${e.key} reads again; no longer degraded by it`, { tenant: e.tenantId, collection: e.collectionId, key: e.key });
    this.update(e.tenantId, e.collectionId, (segments) => segments.filter((s) => s.key !== e.key));
  }

  /** Completes when every record update asked for so far is written (tests). */
  async flush(): Promise<void> {
    await Promise.all(this.chains.values());
  }

  private update(tenantId: string, collectionId: string, change: (segments: DegradedRecord['segments']) => DegradedRecord['segments']): void {
    const key = degradedRecordKey(tenantId, collectionId);
    const next = (this.chains.get(key) ?? Promise.resolve()).then(async () => {
      const rec = await this.store.getJson<DegradedRecord>(key);
      const segments = change(rec?.segments ?? []);
      if (segments.length === 0) {
        if (rec) await this.store.delete(key);
        return;
      }
      await this.store.putJson(key, { tenantId, collectionId, updatedAt: new Date().toISOString(), segments } satisfies DegradedRecord);
    });
    const settled = next.catch((err: Error) => this.logger.warn(`degraded record ${key} not updated: ${err.message}`));
    this.chains.set(key, settled);
    void settled.finally(() => {
      if (this.chains.get(key) === settled) this.chains.delete(key);
    });
  }
}
