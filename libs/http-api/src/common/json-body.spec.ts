import { describe, expect, it } from 'vitest';
import { ValidationError } from '@lateral/shared';
import { parseWaitSeconds, requestedWait } from './json-body';

describe('requestedWait', () => {
  it('takes ?wait= when it has a value, else the body field', () => {
    expect(requestedWait('5', 'x')).toBe('5');
    expect(requestedWait(undefined, 3)).toBe(3);
    expect(requestedWait(undefined, undefined)).toBeUndefined();
  });

  it('an empty ?wait= does not hide a body wait, so an invalid body wait is still refused', () => {
    expect(requestedWait('', 'soon')).toBe('soon');
    expect(() => parseWaitSeconds(requestedWait('', 'soon'), 60)).toThrow(ValidationError);
    expect(parseWaitSeconds(requestedWait('', 2), 60)).toBe(2);
    expect(parseWaitSeconds(requestedWait('', undefined), 60)).toBe(0);
  });
});

describe('parseWaitSeconds', () => {
  it('accepts JSON numbers as text and refuses hex, signs, blanks and out-of-range values naming wait', () => {
    expect(parseWaitSeconds('0.25', 60)).toBe(0.25);
    expect(parseWaitSeconds('1e1', 60)).toBe(10);
    for (const bad of ['0x10', ' 5', '-1', '61', true, null, [1]]) {
      try {
        parseWaitSeconds(bad, 60);
        expect.unreachable(`accepted ${JSON.stringify(bad)}`);
      } catch (e) {
        expect(e).toBeInstanceOf(ValidationError);
        expect((e as ValidationError).message).toMatch(/^wait must be a number of seconds between 0 and 60/);
      }
    }
  });
});
