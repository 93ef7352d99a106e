// The MUX's stateless SNAT range table (issue 15, point 4): the same ranges give the same answers on
// every MUX; a port no host owns is -1; damaged ranges are refused.
import { describe, expect, it } from 'vitest';
import { ip } from '../shared/addr.js';
import { buildSnatRangeTable, lookupSnat4, lookupSnat6, type SnatRangeTable } from '../mux/snat-ranges.js';
import { SnatAllocator } from '../controller/snat-alloc.js';
import { labConfig } from './helpers/lab-config.js';

function table(r: Parameters<typeof buildSnatRangeTable>[0]): SnatRangeTable {
  const t = buildSnatRangeTable(r);
  if (typeof t === 'string') throw new Error(t);
  return t;
}

describe('MUX SNAT range table', () => {
  it('maps each port of a range to its host, and nothing else', () => {
    const t = table([
      { ip: ip('203.0.113.200'), first: 1024, last: 1039, host: 0 },
      { ip: ip('203.0.113.200'), first: 1040, last: 1047, host: 1 },
      { ip: ip('2001:db8:ff::200'), first: 65528, last: 65535, host: 1 },
    ]);
    const a = ip('203.0.113.200').words[0]!;
    expect([1023, 1024, 1039, 1040, 1047, 1048, 65535].map((p) => lookupSnat4(t, a, p))).toEqual([-1, 0, 0, 1, 1, -1, -1]);
    expect(lookupSnat4(t, ip('203.0.113.201').words[0]!, 1024)).toBe(-1);
    const b = Buffer.from('20010db800ff00000000000000000200', 'hex');
    expect([65527, 65528, 65535].map((p) => lookupSnat6(t, b, 0, p))).toEqual([-1, 1, 1]);
  });

  it('refuses a chunk with two owners, off-grid ranges, and ports below 1024', () => {
    expect(
      buildSnatRangeTable([
        { ip: ip('203.0.113.200'), first: 1024, last: 1031, host: 0 },
        { ip: ip('203.0.113.200'), first: 1024, last: 1031, host: 1 },
      ]),
    ).toMatch(/two owners/);
    expect(buildSnatRangeTable([{ ip: ip('203.0.113.200'), first: 1025, last: 1032, host: 0 }])).toMatch(/whole chunks/);
    expect(buildSnatRangeTable([{ ip: ip('203.0.113.200'), first: 1016, last: 1023, host: 0 }])).toMatch(/outside/);
  });

  it("the controller's ranges: each port answers the host the allocator gave it", () => {
    const cfg = labConfig((raw) => {
      raw.outbound = [
        { name: 'out', frontendIps: ['203.0.113.200', '2001:db8:ff::200'], pool: 'web', portsPerNic: 1024, preallocatedPorts: 64 },
      ];
    });
    const alloc = new SnatAllocator(cfg);
    alloc.demand('h2vm2', 4, 100);
    const hosts = cfg.hosts.map((h) => h.name);
    const ranges = alloc.ranges();
    const t = table(ranges.map((r) => ({ ip: ip(r.ip), first: r.first, last: r.last, host: hosts.indexOf(r.host) })));
    const owner = new Map<number, string>();
    for (const c of alloc.toState().chunks) if (c.ip === '203.0.113.200') for (let p = c.first; p < c.first + 8; p++) owner.set(p, c.host);
    const a = ip('203.0.113.200').words[0]!;
    for (let p = 1024; p <= 65535; p++) {
      const h = lookupSnat4(t, a, p);
      expect(h === -1 ? undefined : hosts[h]).toBe(owner.get(p));
    }
  });
});
