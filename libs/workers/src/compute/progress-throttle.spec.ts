import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ProgressThrottle } from './progress-throttle';

describe('ProgressThrottle', () => {
  let clock = 0;
  let sent: unknown[];
  const send = (p: unknown) => {
    sent.push(p);
    return Promise.resolve();
  };
  beforeEach(() => {
    vi.useFakeTimers();
    clock = 0;
    sent = [];
  });
  afterEach(() => vi.useRealTimers());
  const advance = async (ms: number) => {
    clock += ms;
    await vi.advanceTimersByTimeAsync(ms);
  };

  it('sends nothing for a job that ends within the first interval', async () => {
    const t = new ProgressThrottle(send, 250, () => clock);
    await t.update(90);
    await advance(3);
    await t.update(100);
    t.close();
    await advance(1000);
    expect(sent).toEqual([]);
    expect([t.reported, t.sent]).toEqual([2, 0]);
  });

  it('sends the latest percentage when an interval ends, then at most one per interval', async () => {
    const t = new ProgressThrottle(send, 250, () => clock);
    await t.update(10);
    await advance(100);
    await t.update(20);
    expect(sent).toEqual([]);
    await advance(150); // the first interval ends: the latest value goes out
    expect(sent).toEqual([20]);
    await t.update(30);
    await advance(10);
    await t.update(40);
    await advance(239);
    expect(sent).toEqual([20]);
    await advance(1);
    expect(sent).toEqual([20, 40]);
    await advance(400); // quiet since: the next one is sent at once
    await t.update(50);
    expect(sent).toEqual([20, 40, 50]);
    t.close();
  });

  it('drops a held value when the job ends, and sends anything but a number at once', async () => {
    const t = new ProgressThrottle(send, 250, () => clock);
    await t.update(60);
    await t.update({ epoch: 1 });
    expect(sent).toEqual([{ epoch: 1 }]);
    t.close();
    await advance(1000);
    expect(sent).toEqual([{ epoch: 1 }]);
  });

  it('passes a failure of a value sent at once to the processor', async () => {
    const t = new ProgressThrottle(() => Promise.reject(new Error('job lost')), 250, () => clock);
    await advance(300);
    await expect(t.update(5)).rejects.toThrow('job lost');
    t.close();
  });
});
