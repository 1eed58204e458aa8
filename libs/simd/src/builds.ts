/**
 * A counter of WARP table builds by any implementation: the WebAssembly lookup kernel keeps one
 * query token's tables resident in its memory and re-reads them when this count moved, so a
 * table array reused for the next query is never looked up stale.
 */
let builds = 0;

export function noteTableBuild(): void {
  builds++;
}

export function tableBuilds(): number {
  return builds;
}
