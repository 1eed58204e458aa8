import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_KEYS, ConfigSchema } from '@lateral/shared';

/**
 * The configuration table (docs/configuration.md, linked from the README's "Configuration") must
 * list every variable the schema knows, with its default.
 */
describe('configuration table (docs/configuration.md)', () => {
  const readme = readFileSync('docs/configuration.md', 'utf8');
  const rows = new Map(
    [...readme.matchAll(/^\| `([A-Z0-9_]+)` \| ([^|]+) \|/gm)].map((m) => [m[1], m[2].trim()] as const),
  );
  const defaults = ConfigSchema.parse({}) as Record<string, unknown>;

  it('has one row per configuration key and no unknown rows', () => {
    expect([...rows.keys()].sort()).toEqual([...CONFIG_KEYS].sort());
  });

  it('shows the schema default of each key', () => {
    for (const key of CONFIG_KEYS) {
      const d = defaults[key];
      const shown = rows.get(key)!;
      if (d === undefined) expect(shown, key).toBe('(unset)');
      else if (Array.isArray(d) && d.length === 0) expect(shown, key).toBe('(empty)');
      else expect(shown, key).toBe(`\`${String(d)}\``);
    }
  });
});
