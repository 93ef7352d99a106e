// examples/lab-outbound.yaml: valid, the default lab plus one outbound rule with a dedicated IPv4 and an
// IPv6 frontend inside vipRanges, enough preallocated ports for scenario 38 (500 TCP connections and 500
// UDP flows per backend toward one server); examples/lab.yaml keeps no outbound rule (scenario 34).
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../shared/config.js';

const read = (f: string) => {
  const r = parseConfig(readFileSync(new URL(`../examples/${f}`, import.meta.url), 'utf8'), f);
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.config;
};

describe('examples/lab-outbound.yaml', () => {
  it('is valid: one rule, both frontends, every web backend, 1,024 ports preallocated per nic', () => {
    const c = read('lab-outbound.yaml');
    expect(c.outbound).toHaveLength(1);
    const o = c.outbound[0]!;
    expect(o.frontendIps.map((a) => a.text)).toEqual(['203.0.113.200', '2001:db8:ff::200']);
    expect([...o.nics].sort()).toEqual(['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2']);
    expect([o.portsPerNic, o.preallocatedPorts, o.protocols]).toEqual([1024, 1024, [6, 17]]);
    // the frontends are no VIP of the lab: their replies are outbound NAT's alone
    expect(c.vips.map((v) => v.address.text)).not.toContain('203.0.113.200');
  });
  it('keeps the default lab as it is, and examples/lab.yaml without an outbound rule', () => {
    const a = read('lab-outbound.yaml');
    const b = read('lab.yaml');
    expect(b.outbound).toEqual([]);
    expect(JSON.stringify({ ...a, outbound: [] })).toBe(JSON.stringify(b));
  });
});
