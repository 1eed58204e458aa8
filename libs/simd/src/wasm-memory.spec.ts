import { describe, expect, it } from 'vitest';
import { Arena, GROW_STEP_BYTES, type Exports, type WasmMemory } from './wasm-memory';

/** The runtime's WebAssembly.Memory (the project's TypeScript lib has no DOM types). */
const Memory = (globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number; maximum?: number }) => WasmMemory } }).WebAssembly.Memory;

const PAGE = 65536;
/** An Arena over a bare WebAssembly memory (the kernels are not called here). */
const arena = (initial: number, maximum?: number) => {
  const memory = new Memory(maximum === undefined ? { initial } : { initial, maximum });
  return { memory, a: new Arena({ memory } as unknown as Exports) };
};

describe('Arena.grow', () => {
  it('grows in GROW_STEP_BYTES steps (few moves of the memory), its views following; never shrinks', () => {
    const { memory, a } = arena(1);
    a.grow(PAGE + 1);
    expect(memory.buffer.byteLength).toBe(PAGE + GROW_STEP_BYTES);
    expect(a.u8.length).toBe(memory.buffer.byteLength);
    a.u8[PAGE + 10] = 7;
    a.grow(PAGE + GROW_STEP_BYTES); // already there
    expect(memory.buffer.byteLength).toBe(PAGE + GROW_STEP_BYTES);
    a.grow(PAGE + GROW_STEP_BYTES + 1);
    expect(memory.buffer.byteLength).toBe(PAGE + 2 * GROW_STEP_BYTES);
    expect(a.u8[PAGE + 10]).toBe(7);
    expect(a.f64.length * 8).toBe(memory.buffer.byteLength);
    a.grow(10);
    expect(memory.buffer.byteLength).toBe(PAGE + 2 * GROW_STEP_BYTES);
  });

  it('where a whole step is refused (the memory\'s maximum), grows to exactly what was asked', () => {
    const { memory, a } = arena(1, 4);
    a.grow(3 * PAGE - 5);
    expect(memory.buffer.byteLength).toBe(3 * PAGE);
    expect(a.u32.length * 4).toBe(3 * PAGE);
    expect(() => a.grow(5 * PAGE)).toThrow(RangeError);
  });
});
