import { describe, expect, it } from 'vitest';
import { extendGenerationTable, findId, generationTable, segmentIdTable } from './id-table';

describe('id tables', () => {
  it('a segment table is sorted and finds every id by binary search (a repeated id keeps its last copy)', () => {
    const t = segmentIdTable(['d3', 'd1', 'd2', 'd1']);
    expect(t.ids).toEqual(['d1', 'd2', 'd3']);
    expect(Array.from(t.doc)).toEqual([3, 2, 0]);
    expect(findId(t.ids, 'd2')).toBe(1);
    expect(findId(t.ids, 'd0')).toBe(-1);
    expect(findId(t.ids, 'd9')).toBe(-1);
  });

  it('the generation table keeps the last segment copy of an id and drops tombstoned owners', () => {
    const a = segmentIdTable(['a', 'b', 'c']);
    const b = segmentIdTable(['b', 'd']);
    const c = segmentIdTable(['c', 'e']);
    // b superseded by segment 1; c superseded by segment 2, whose copy is tombstoned: c is gone.
    const g = generationTable([{ documents: 3 }, { documents: 2 }, { documents: 2, tombstones: [0] }], [a, b, c]);
    expect(g.ids).toEqual(['a', 'b', 'd', 'e']);
    expect(Array.from(g.seg)).toEqual([0, 1, 1, 2]);
    expect(Array.from(g.doc)).toEqual([0, 0, 1, 1]);
    expect(g.documents).toBe(4);
    expect(g.live.map((m) => (m ? Array.from(m) : undefined))).toEqual([[1, 0, 0], undefined, [0, 1]]);
  });
});

describe('extendGenerationTable', () => {
  it('equals the table built from every segment, across appends that supersede ids, deletes and in-segment repeats', () => {
    let x = 12345;
    const rnd = (n: number) => {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      return Math.floor((x / 2 ** 31) * n);
    };
    const segs: { key: string; documents: number; tombstones?: number[]; ids: string[] }[] = [];
    const full = () => generationTable(segs, segs.map((s) => segmentIdTable(s.ids)));
    let prev = full();
    let prevSegs = segs.map((s) => ({ ...s }));
    for (let step = 0; step < 40; step++) {
      if (step % 3 === 2 && segs.length > 0) {
        // a delete: tombstones grow on some segment
        const s = rnd(segs.length);
        const d = rnd(segs[s].documents);
        segs[s] = { ...segs[s], tombstones: [...new Set([...(segs[s].tombstones ?? []), d])].sort((a, b) => a - b) };
      } else {
        const n = 1 + rnd(12);
        segs.push({ key: `k${step}`, documents: n, ids: Array.from({ length: n }, () => `id${rnd(40)}`) });
      }
      const extended = extendGenerationTable(prev, prevSegs, segs, segs.slice(prevSegs.length).map((s) => segmentIdTable(s.ids)));
      const expected = full();
      expect(extended).toEqual(expected);
      // and both follow the rule: an id is live when its last copy is not tombstoned
      const owner = new Map<string, [number, number]>();
      segs.forEach((sg, si) => sg.ids.forEach((id, di) => owner.set(id, [si, di])));
      const liveIds = [...owner].filter(([, [si, di]]) => !(segs[si].tombstones ?? []).includes(di)).map(([id]) => id);
      expect(expected.ids).toEqual(liveIds.sort());
      prev = extended!;
      prevSegs = segs.map((s) => ({ ...s }));
    }
    expect(prev.documents).toBeGreaterThan(10);
  });

  it('is null when the new generation does not extend the previous one (a replaced segment, a tombstone gone)', () => {
    const a = { key: 'a', documents: 2, ids: ['x', 'y'] };
    const b = { key: 'b', documents: 1, ids: ['z'] };
    const prev = generationTable([a, b], [segmentIdTable(a.ids), segmentIdTable(b.ids)]);
    expect(extendGenerationTable(prev, [a, b], [{ ...a, key: 'a2' }, b], [])).toBeNull();
    const withDead = { ...a, tombstones: [0] };
    const prevDead = generationTable([withDead, b], [segmentIdTable(a.ids), segmentIdTable(b.ids)]);
    expect(extendGenerationTable(prevDead, [withDead, b], [a, b], [])).toBeNull();
    expect(extendGenerationTable(prev, [a, b], [a], [])).toBeNull();
  });
});
