// The data planes' hot-path helpers (docs/performance.md, "Where the data plane's time goes"): each fast
// form is checked against the plain one it replaces, on every length and offset that matters.
import { describe, expect, it } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { Counters } from '../shared/counters.js';
import { MUX_COUNTER_NAMES } from '../mux/data-plane.js';
import { HOST_COUNTER_NAMES } from '../host-agent/data-plane.js';

setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;

describe('counters', () => {
  it('keep their index in fast mode (a field load per counter, not a dictionary probe)', () => {
    expect(hasFastProperties(new Counters(MUX_COUNTER_NAMES).index)).toBe(true);
    expect(hasFastProperties(new Counters(HOST_COUNTER_NAMES).index)).toBe(true);
  });

  it('index every name at its position', () => {
    const c = new Counters(HOST_COUNTER_NAMES);
    HOST_COUNTER_NAMES.forEach((n, i) => expect(c.index[n]).toBe(i));
    expect(Object.isFrozen(c.index)).toBe(true);
  });
});
