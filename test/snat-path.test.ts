// Outbound NAT's parts end to end, without namespaces (issue 15, points 2-5): the controller's
// allocation -> the policy's ranges -> a host agent's engine (snatPoliciesFor) and a MUX's table
// (snatTableFromPolicy). A backend's SYN leaves from the frontend IP; the MUX's table sends the reply's
// port to the host that translated it; that host gives it back to the DIP and nic that opened the flow.
// Site-to-site: two tenants with the same addresses through one public IP (examples/two-tenants.yaml).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { formatConfigErrors, validateConfig, type SlbxConfig } from '../shared/config.js';
import { ip } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { SnatAllocator } from '../controller/snat-alloc.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import { SNAT_ERR_EXHAUSTED, SnatEngine, snatPoliciesFor } from '../host-agent/snat.js';
import { lookupSnat4, snatTableFromPolicy } from '../mux/snat-ranges.js';

const L3 = 14;
const FIP = '203.0.113.200';
const REMOTE = '198.51.100.5';

function twoTenants(): SlbxConfig {
  const raw = parseYaml(readFileSync(new URL('../examples/two-tenants.yaml', import.meta.url), 'utf8'));
  raw.outbound = [
    { name: 's2s', frontendIps: [FIP], nics: ['a-h1vm1', 'a-h2vm1', 'b-h1vm1', 'b-h2vm1'], portsPerNic: 256, preallocatedPorts: 64 },
  ];
  const r = validateConfig(raw, 'two-tenants');
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'two-tenants'));
  return r.config;
}

function hostEngine(cfg: SlbxConfig, ranges: ReturnType<SnatAllocator['ranges']>, host: string): { e: SnatEngine; nics: string[] } {
  const e = new SnatEngine(new HostFlowTable(10_000), 10_000);
  const nics: string[] = [];
  for (const [name, p] of snatPoliciesFor(cfg, ranges, host)) {
    e.setNic(nics.length, p);
    nics.push(name);
  }
  return { e, nics };
}

const syn = (src: string, sport: number) => pkt().eth().ipv4({ src, dst: REMOTE }).tcp({ sport, dport: 9000, flags: TCP_SYN }).build();

describe('outbound NAT path (controller -> policy -> host agent and MUX)', () => {
  it('two tenants, same DIP and port, one public IP: distinct frontend ports, each reply to its own tenant', () => {
    const cfg = twoTenants();
    const ranges = new SnatAllocator(cfg).ranges();
    const host1 = hostEngine(cfg, ranges, 'host1');
    expect(host1.nics.sort()).toEqual(['a-h1vm1', 'b-h1vm1']);
    const mux = snatTableFromPolicy(
      ranges,
      cfg.hosts.map((h) => h.name),
    );
    if (typeof mux === 'string') throw new Error(mux);
    const seen = new Map<number, string>();
    for (let c = 0; c < 64; c++) {
      for (const [i, nic] of host1.nics.entries()) {
        const f = syn('192.0.2.10', 40000 + c); // the same DIP:port in both tenants
        expect(host1.e.out4(f, L3, f.length, i, 100)).toBeGreaterThanOrEqual(0);
        expect(ip(`${f[L3 + 12]}.${f[L3 + 13]}.${f[L3 + 14]}.${f[L3 + 15]}`).text).toBe(FIP); // one source address
        const fport = (f[L3 + 20]! << 8) | f[L3 + 21]!;
        expect(seen.has(fport), `frontend port ${fport} twice`).toBe(false); // no (frontend, port, remote) shared
        seen.set(fport, `${nic}|${40000 + c}`);
        // the port lies in a range the controller gave this very nic
        expect(ranges.find((r) => r.ip === FIP && r.first <= fport && fport <= r.last)?.nic).toBe(nic);
        // the MUX: the port's owner is host1
        expect(cfg.hosts[lookupSnat4(mux, ip(FIP).words[0]!, fport)]?.name).toBe('host1');
      }
    }
    // the 65th toward the same remote endpoint: the preallocated 64 ports are all taken
    expect(host1.e.out4(syn('192.0.2.10', 41000), L3, 54, 0, 100)).toBe(SNAT_ERR_EXHAUSTED);
    // every reply back at the DIP:port and nic (tenant) that opened it
    for (const [fport, who] of seen) {
      const r = pkt()
        .eth()
        .ipv4({ src: REMOTE, dst: FIP })
        .tcp({ sport: 9000, dport: fport, flags: TCP_SYN | TCP_ACK })
        .build();
      const slot = host1.e.in4(r, L3, r.length, 101);
      expect(slot).toBeGreaterThanOrEqual(0);
      const dport = (r[L3 + 22]! << 8) | r[L3 + 23]!;
      expect(`${host1.nics[host1.e.slotNic(slot)]}|${dport}`).toBe(who);
      expect(r.subarray(L3 + 16, L3 + 20).join('.')).toBe('192.0.2.10');
      expect(host1.e.slotVni(slot)).toBe(who.startsWith('a-') ? 5001 : 5002);
    }
    // a reply to a port of host2's range is not host1's flow
    const other = ranges.find((r) => r.host === 'host2')!;
    const r2 = pkt().eth().ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: other.first, flags: TCP_ACK }).build();
    expect(host1.e.in4(r2, L3, r2.length, 101)).toBeLessThan(0);
    expect(cfg.hosts[lookupSnat4(mux, ip(FIP).words[0]!, other.first)]?.name).toBe('host2');
  });
});
