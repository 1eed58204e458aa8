import { describe, expect, it } from 'vitest';
import { ValidationError } from '@lateral/shared';
import { MAX_OBJECT_KEY_BYTES, callerUploadKey, checkObjectKey, objectKeyProblem } from './object-keys';

describe('object keys (one check for every store)', () => {
  it('accepts the keys lateral builds', () => {
    for (const k of ['tenants/alpha/collections/c/manifests/000001.json', 'text-cache/default/m/v/t180/fp16/ab/' + 'a'.repeat(64) + '.seg', 'auth/keys/k1.json', 'a..b/c.d', 'x'.repeat(MAX_OBJECT_KEY_BYTES)]) {
      expect(objectKeyProblem(k), k).toBeNull();
      expect(checkObjectKey(k)).toBe(k);
    }
    expect(objectKeyProblem('', { prefix: true })).toBeNull();
    expect(objectKeyProblem('tenants/alpha/', { prefix: true })).toBeNull();
  });

  it('refuses every spelling that could escape a prefix or alias another key, naming the rule', () => {
    const cases: [string, RegExp][] = [
      ['tenants/alpha/../beta/batches/b/input.jsonl', /'\.\.' segment/],
      ['./tenants/beta/x', /'\.' segment/],
      ['tenants/alpha/./x', /'\.' segment/],
      ['tenants/alpha/../../../../../etc/passwd', /'\.\.' segment/],
      ['..', /'\.\.' segment/],
      ['/etc/passwd', /start with '\/'/],
      ['tenants//alpha/x', /empty segment/],
      ['tenants/alpha/x/', /empty segment/],
      ['tenants/alpha/x\u0000.jsonl', /control characters/],
      ['tenants/alpha/x\n', /control characters/],
      ['tenants\\alpha\\..\\beta', /backslash/],
      ['a\ud800b', /surrogate/],
      ['', /empty/],
      ['é'.repeat(MAX_OBJECT_KEY_BYTES / 2 + 1), /at most 1024 bytes/],
    ];
    for (const [key, rule] of cases) {
      expect(objectKeyProblem(key), JSON.stringify(key)).toMatch(rule);
      let thrown: unknown;
      try {
        checkObjectKey(key, { field: 'input' });
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ValidationError);
      expect((thrown as ValidationError).issues[0].field).toBe('input');
      expect((thrown as Error).message).not.toContain('tenants'); // the value is not echoed
    }
    expect(objectKeyProblem('tenants/../x/', { prefix: true })).toMatch(/'\.\.' segment/);
    expect(objectKeyProblem(42)).toMatch(/string/);
  });

  it('a batch input is the name of an upload of the caller, and every other value gets one and the same answer', () => {
    expect(callerUploadKey('alpha', 'rows.jsonl')).toBe('tenants/alpha/uploads/rows.jsonl');
    const answers = new Set<string>();
    for (const v of ['tenants/beta/batches/b/input.jsonl', 'tenants/alpha/../beta/x', './tenants/beta/x', 'auth/keys/k.json', '../x', '.', '..', 'a/b', 'x\u0000', '', 7, null, 'tenants/alpha/uploads/rows.jsonl']) {
      try {
        callerUploadKey('alpha', v);
        answers.add('accepted');
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        answers.add((err as Error).message);
      }
    }
    expect([...answers]).toHaveLength(1);
    expect([...answers][0]).toMatch(/^input must be the name of one of your uploads/);
  });
});
