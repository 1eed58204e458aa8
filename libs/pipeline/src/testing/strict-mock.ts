/**
 * Strict mocks for the processor specs: an object on which only the explicitly stubbed members
 * exist. Calling, or reading a property of, any other member throws an UnstubbedMemberError that
 * names it (`store.delete`), so a processor that starts touching something new fails its spec.
 *
 * Every such access is also recorded, so a processor that catches the error cannot hide it:
 * specs assert `takeStrictMockViolations()` is empty after each test.
 */

export class UnstubbedMemberError extends Error {
  constructor(readonly member: string, what: string) {
    super(`strict mock: ${member} is not stubbed (${what})`);
    this.name = 'UnstubbedMemberError';
  }
}

/** The members a strict mock of T may be given; anything else does not exist on it. */
export type Stubs<T> = { [K in keyof T]?: T[K] };

const violations: string[] = [];

/** Accesses of unstubbed members since the last call (and clears the list). */
export function takeStrictMockViolations(): string[] {
  return violations.splice(0, violations.length);
}

/**
 * Properties that runtimes and test tooling probe on any value (promise resolution, JSON,
 * vitest's equality and pretty-printing): they read as undefined instead of throwing, so a strict
 * mock can be awaited, compared and printed. The code under test calling one still fails.
 */
function isIntrospection(prop: string | symbol): boolean {
  if (typeof prop === 'symbol') return true;
  return ['then', 'toJSON', 'asymmetricMatch', '$$typeof', 'nodeType', 'tagName', 'constructor'].includes(prop) || prop.startsWith('@@');
}

function violation(member: string, what: string): never {
  violations.push(`${member} (${what})`);
  throw new UnstubbedMemberError(member, what);
}

/** What an unknown member reads as: throws when called, and when anything is read from it. */
function unstubbed(member: string): unknown {
  return new Proxy(function unstubbedMember() {}, {
    apply: () => violation(member, 'called'),
    construct: () => violation(member, 'constructed'),
    get: (_t, prop) => (isIntrospection(prop) ? undefined : violation(`${member}.${String(prop)}`, 'read')),
  });
}

/**
 * A T that has exactly `stubs` (own properties: methods, usually `vi.fn`, and plain values).
 * `name` prefixes the member in errors: strictMock<ObjectStore>('store', { get }) then
 * `store.put(...)` throws "strict mock: store.put is not stubbed (called)".
 */
export function strictMock<T extends object>(name: string, stubs: Stubs<T> = {}): T {
  const target: Record<string | symbol, unknown> = Object.assign(Object.create(null) as Record<string | symbol, unknown>, stubs);
  return new Proxy(target, {
    get: (t, prop) => {
      if (Object.prototype.hasOwnProperty.call(t, prop)) return t[prop];
      if (isIntrospection(prop)) return undefined;
      return unstubbed(`${name}.${String(prop)}`);
    },
    set: (_t, prop) => violation(`${name}.${String(prop)}`, 'assigned'),
    deleteProperty: (_t, prop) => violation(`${name}.${String(prop)}`, 'deleted'),
  }) as unknown as T;
}
