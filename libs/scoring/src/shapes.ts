/**
 * Shape checks shared by every scorer. Errors name the function, the argument and both the
 * expected shape and what was received, so a caller can tell a transposed matrix from a
 * truncated one without a debugger.
 */
export class ShapeError extends RangeError {
  override readonly name = 'ShapeError';
}

export function assertDim(fn: string, name: string, value: number, min = 0): void {
  if (!Number.isInteger(value) || value < min) {
    throw new ShapeError(`${fn}: ${name} must be an integer >= ${min}, got ${value}`);
  }
}

/** Checks `arr.length === rows * cols` for a flat row-major `rows x cols` matrix. */
export function assertMatrix(fn: string, name: string, arr: ArrayLike<number>, rows: number, cols: number, rowName = 'rows', colName = 'cols'): void {
  if (arr.length !== rows * cols) {
    throw new ShapeError(`${fn}: ${name} has length ${arr.length}, expected ${rowName} x ${colName} = ${rows} x ${cols} = ${rows * cols}`);
  }
}

/** Checks `offsets` is a CSR row pointer over `total` rows: starts at 0, non-decreasing, ends at total. */
export function assertOffsets(fn: string, offsets: Uint32Array, total: number): void {
  if (offsets.length < 1) throw new ShapeError(`${fn}: offsets must have candidates + 1 >= 1 entries, got 0`);
  if (offsets[0] !== 0) throw new ShapeError(`${fn}: offsets[0] must be 0, got ${offsets[0]}`);
  for (let c = 1; c < offsets.length; c++) {
    if (offsets[c]! < offsets[c - 1]!) {
      throw new ShapeError(`${fn}: offsets must be non-decreasing, offsets[${c - 1}] = ${offsets[c - 1]} > offsets[${c}] = ${offsets[c]}`);
    }
  }
  const last = offsets[offsets.length - 1]!;
  if (last !== total) {
    throw new ShapeError(`${fn}: offsets[${offsets.length - 1}] = ${last} must equal the number of document token rows T = ${total}`);
  }
}
