import { describe, expect, it } from 'vitest';
import { Limiter } from './limiter';

describe('Limiter', () => {
  it('runs at most n tasks at once', async () => {
    const lim = new Limiter(2);
    let now = 0;
    let most = 0;
    await Promise.all(
      Array.from({ length: 7 }, () =>
        lim.run(async () => {
          most = Math.max(most, ++now);
          await new Promise((r) => setTimeout(r, 3));
          now--;
        }),
      ),
    );
    expect(most).toBe(2);
    expect(lim.peak).toBe(2);
  });
});
