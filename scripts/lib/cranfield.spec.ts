import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadCranfield, withPlaceholders } from './cranfield';
import { DEFAULT_CRANFIELD_DIR } from './cranfield-eval';

describe('scripts/lib/cranfield.ts', () => {
  it.skipIf(!existsSync(DEFAULT_CRANFIELD_DIR))('loads the Cranfield collection', () => {
    const c = loadCranfield(DEFAULT_CRANFIELD_DIR);
    expect(c.docs).toHaveLength(1400);
    expect(c.queries).toHaveLength(225);
    expect(c.queries[0]).toEqual({ id: '1', text: expect.stringMatching(/^what similarity laws must be obeyed/) });
    expect(c.docs[0]!.text).toMatch(/^experimental investigation of the aerodynamics of a wing in a slipstream \. experimental/);
    expect(c.qrels.get('1')!.get('184')).toBe(3); // grade 2 -> gain 3
    const gains = new Set([...c.qrels.values()].flatMap((m) => [...m.values()]));
    expect([...gains].sort()).toEqual([1, 2, 3, 4]);
  });

  it('gives the empty records a placeholder text that names them and leaves the others alone', () => {
    const docs = [
      { id: '470', text: 'a swept wing' },
      { id: '471', text: '' },
    ];
    expect(withPlaceholders(docs)).toEqual([
      { id: '470', text: 'a swept wing' },
      { id: '471', text: 'cranfield record 471 has no title or abstract' },
    ]);
  });

  it.skipIf(!existsSync(DEFAULT_CRANFIELD_DIR))('finds exactly the two empty Cranfield records, 471 and 995', () => {
    const c = loadCranfield(DEFAULT_CRANFIELD_DIR);
    expect(c.docs.filter((d) => d.text === '').map((d) => d.id)).toEqual(['471', '995']);
  });
});
