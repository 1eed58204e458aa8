import { describe, expect, it } from 'vitest';
import { BatchSlots } from './batch-slots';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('BatchSlots', () => {
  it('lets one call keep `depth` batches out, then one more per release', async () => {
    const s = new BatchSlots(2);
    const a = s.enter();
    await s.acquire(a);
    await s.acquire(a);
    expect(s.available).toBe(0);
    let third = false;
    void s.acquire(a).then(() => (third = true));
    await tick();
    expect(third).toBe(false);
    s.release();
    await tick();
    expect(third).toBe(true);
  });

  it('gives a freed slot to the oldest open call, even when a younger one asked first, and to the younger once the older has closed', async () => {
    const s = new BatchSlots(2);
    const older = s.enter();
    const younger = s.enter();
    const order: string[] = [];
    await s.acquire(older);
    await s.acquire(older);
    void s.acquire(younger).then(() => order.push('younger'));
    s.release(); // the older call is copying out, not asking yet: the slot waits for it
    await tick();
    expect(order).toEqual([]);
    void s.acquire(older).then(() => order.push('older'));
    await tick();
    expect(order).toEqual(['older']);
    s.close(older); // its last batch is out: the younger one is next in line
    await tick();
    expect(order).toEqual(['older']); // no slot free yet
    s.release();
    await tick();
    expect(order).toEqual(['older', 'younger']);
  });

  it('a slot freed after the older call closed goes to the younger at once; a call that is not open is refused', async () => {
    const s = new BatchSlots(1);
    const a = s.enter();
    const b = s.enter();
    await s.acquire(a);
    s.close(a);
    let got = false;
    void s.acquire(b).then(() => (got = true));
    await tick();
    expect(got).toBe(false);
    s.release();
    await tick();
    expect(got).toBe(true);
    await expect(s.acquire(a)).rejects.toThrow('not open');
    expect(() => new BatchSlots(0)).toThrow(RangeError);
  });
});
