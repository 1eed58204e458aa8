import { z } from 'zod';

/** Tenants, collections and documents share one id alphabet so they are safe in S3 keys, Redis keys and job ids. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
export const DEFAULT_TENANT = 'default';

export const resourceId = (what: string) =>
  z
    .string({ error: `${what} must be a string` })
    .regex(ID_PATTERN, `${what} must match ${ID_PATTERN.source} (letters, digits, '_', '.', '-'; at most 128 characters)`);

/** Document ids are free-form text (up to 512 bytes); they are never used raw inside keys. */
export const MAX_DOC_ID_LENGTH = 512;
