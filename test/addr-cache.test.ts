// parseIpAddr keeps what it parsed (shared/addr.ts): a second parse of the same text answers the same,
// a caller that changes its copy does not change the next answer, and texts that are no address stay
// refused. Expected values from Node's own parser (the WHATWG URL host serializer), not from ip-address.
import { describe, expect, it } from 'vitest';
import { isIP } from 'node:net';
import { parseIpAddr } from '../shared/addr.js';

const canonical = (t: string) => (isIP(t) === 6 ? new URL(`http://[${t}]/`).hostname.slice(1, -1) : new URL(`http://${t}/`).hostname);
const v4words = (t: string) => [t.split('.').reduce((a, b) => a * 256 + Number(b), 0)];

describe('parseIpAddr, parsed once', () => {
  it('answers the same text the same, every time, with words of its own', () => {
    for (const t of ['198.18.0.5', '2001:db8:0:0:0:0:0:10', '2001:DB8::ff:10', '203.0.113.10']) {
      const a = parseIpAddr(t)!;
      const b = parseIpAddr(t)!;
      expect(b.text).toBe(canonical(t));
      expect(a).toEqual(b);
      if (isIP(t) === 4) expect([...b.words]).toEqual(v4words(t));
      a.words[0] = 12345; // the first answer (parsed) and a later one (kept) changed by their callers
      b.words[0] = 12345;
      expect(parseIpAddr(t)!.words[0]).not.toBe(12345);
      expect(parseIpAddr(t)!.text).toBe(canonical(t));
    }
  });

  it('refuses what is no address, again', () => {
    for (const t of ['01.2.3.4', '198.18.0.5/32', 'fe80::1%eth0', 'x', '1.2.3.4.5', '']) {
      expect(parseIpAddr(t)).toBeNull();
      expect(parseIpAddr(t)).toBeNull();
    }
  });

  it('still parses right after more distinct texts than it keeps', () => {
    for (let i = 0; i < 5000; i++) {
      const t = `10.${(i >> 8) & 255}.${i & 255}.1`;
      expect(parseIpAddr(t)!.words[0]).toBe(v4words(t)[0]);
    }
    expect(parseIpAddr('10.0.0.1')!.text).toBe('10.0.0.1');
  });
});
