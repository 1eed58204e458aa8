import { s3Keys, type Collection } from '@lateral/shared';
import type { ObjectStore } from './object-store';

/**
 * Collection records, in S3 alone (`collection.json` under the collection's prefix): the list of
 * collections is the list of those prefixes, so a Redis that lost its data loses no collection.
 */
export class CollectionRepository {
  constructor(
    private readonly store: ObjectStore,
    /** Called after every change of a record, before the change is acknowledged (ServingCache's version bump). */
    private readonly onChange: (tenantId: string, id: string) => Promise<void> = async () => undefined,
  ) {}

  async create(c: Collection): Promise<boolean> {
    // Conditional: two concurrent creates of one id cannot both succeed.
    const created = await this.store.putJsonIfAbsent(s3Keys.collection(c.tenantId, c.id), c);
    await this.onChange(c.tenantId, c.id);
    return created;
  }

  async get(tenantId: string, id: string): Promise<Collection | null> {
    return this.store.getJson<Collection>(s3Keys.collection(tenantId, id));
  }

  async update(c: Collection): Promise<void> {
    await this.store.putJson(s3Keys.collection(c.tenantId, c.id), c);
    await this.onChange(c.tenantId, c.id);
  }

  /**
   * Every tenant with data in S3, sorted: the common prefixes under `tenants/` (S3 and MinIO list
   * them; the embedded s3rver lists no common prefixes at that depth) and `defaultTenant` always.
   */
  async tenants(defaultTenant: string): Promise<string[]> {
    const prefix = 'tenants/';
    const listed = (await this.store.listPrefixes(prefix)).map((p) => p.slice(prefix.length).replace(/\/$/, ''));
    return [...new Set([defaultTenant, ...listed])].sort();
  }

  /** Ids of the tenant's collections that have a record, sorted. */
  async list(tenantId: string): Promise<string[]> {
    const prefix = s3Keys.collectionsPrefix(tenantId);
    const ids = (await this.store.listPrefixes(prefix)).map((p) => p.slice(prefix.length).replace(/\/$/, ''));
    const present = await Promise.all(ids.map((id) => this.store.exists(s3Keys.collection(tenantId, id))));
    return ids.filter((_, i) => present[i]).sort();
  }

  /**
   * Deletes the record first (the collection is gone for readers at once), then every object
   * under its prefix. Returns the number of objects deleted.
   */
  async delete(tenantId: string, id: string): Promise<number> {
    await this.store.delete(s3Keys.collection(tenantId, id));
    await this.onChange(tenantId, id);
    const n = 1 + (await this.store.deletePrefix(s3Keys.collectionPrefix(tenantId, id)));
    await this.onChange(tenantId, id);
    return n;
  }
}
