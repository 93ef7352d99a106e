// The lab router's edge filter (scripts/lab/router-filter.ts): the sets come from the config (written out
// here from examples/lab.yaml, not from the generator), the rules drop what docs/security.md says, and
// nft itself accepts the ruleset (as root: `nft -c` parses and checks it against the kernel, in a
// throwaway namespace). What the filter does to packets is scenario 24's part.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildLabPlan } from '../scripts/lab/plan.js';
import { edgeRuleset, edgeSets, EDGE_TABLE } from '../scripts/lab/router-filter.js';
import { labConfig } from './helpers/lab-config.js';
import { unmet } from './helpers/prerequisite.js';

function plan(edit?: (raw: any) => void) {
  const p = buildLabPlan(labConfig(edit), 1);
  if (!p.ok) throw new Error(p.errors.join('; '));
  return p.plan;
}

describe('router edge filter: the sets', () => {
  it("the default lab: our ranges are the fabric, the backends' networks, the VIPs and the router's client side", () => {
    const s = edgeSets(plan());
    expect(new Set(s.own4)).toEqual(new Set(['198.18.0.0/24', '192.0.2.0/24', '203.0.113.0/24', '198.51.100.1/32']));
    expect(new Set(s.own6)).toEqual(new Set(['2001:db8:f::/64', '2001:db8:d::/64', '2001:db8:ff::/48', '2001:db8:c::1/128']));
    // the prefixes delegated to the load balancer (examples/lab.yaml's vipRanges), so a VIP created through the API is reachable
    expect(s.vips4).toEqual(['203.0.113.0/24']);
    expect(s.vips6).toEqual(['2001:db8:ff::/48']);
  });

  it('follows the config: other vipRanges are what is forwarded inward, and are ours', () => {
    const s = edgeSets(
      plan((raw) => {
        raw.vipRanges[0] = '203.0.113.16/28';
        raw.vips[0].address = '203.0.113.20';
      }),
    );
    expect(s.vips4).toEqual(['203.0.113.16/28']);
    expect(s.own4).toContain('203.0.113.16/28');
    expect(s.own4).not.toContain('203.0.113.0/24');
  });

  it("never lists the client segment itself as ours (the outside's own sources pass)", () => {
    const s = edgeSets(plan());
    expect(s.own4.some((p) => p.startsWith('198.51.100.0/'))).toBe(false);
    expect(s.own6.some((p) => p.startsWith('2001:db8:c::/'))).toBe(false);
  });
});

describe('router edge filter: the rules', () => {
  const text = edgeRuleset(plan(), 'examples/lab.yaml');
  const rule = (re: RegExp) => text.split('\n').filter((l) => re.test(l));

  it('forwards from the outside to the VIPs only; everything else from the outside is dropped and counted', () => {
    const fwd = text.slice(text.indexOf('chain forward'));
    const lines = fwd.split('\n').filter((l) => l.includes('iifname "br0"'));
    expect(lines.map((l) => l.trim())).toEqual([
      'iifname "br0" ip daddr @vips4 counter name "edge_to_vip4" accept',
      'iifname "br0" ip6 daddr @vips6 counter name "edge_to_vip6" accept',
      'iifname "br0" meta nfproto ipv4 counter name "edge_not_vip4" drop',
      'iifname "br0" meta nfproto ipv6 counter name "edge_not_vip6" drop',
    ]);
  });

  it('drops our own sources from the outside before routing, for both families', () => {
    expect(rule(/iifname "br0" ip saddr @own4 counter name "edge_spoofed_source4" drop/)).toHaveLength(1);
    expect(rule(/iifname "br0" ip6 saddr @own6 counter name "edge_spoofed_source6" drop/)).toHaveLength(1);
    expect(text.indexOf('edge_spoofed_source4" drop')).toBeLessThan(text.indexOf('chain input'));
  });

  it('closes the router to the outside except ICMP to its client-side address (BGP, BFD and the rest dropped)', () => {
    const input = text.slice(text.indexOf('chain input'), text.indexOf('chain forward'));
    expect(input).toContain('ip daddr 198.51.100.1 ip protocol icmp accept');
    expect(input).toContain('ip6 daddr 2001:db8:c::1 meta l4proto ipv6-icmp accept');
    expect(input).toMatch(/iifname "br0" meta nfproto ipv4 counter name "edge_to_router4" drop/);
    expect(input).not.toMatch(/dport/);
  });

  it("checks the fabric side's sources by strict reverse path (fib saddr . iif), after letting neighbour discovery by", () => {
    const pre = text.slice(text.indexOf('chain prerouting'), text.indexOf('chain input'));
    expect(pre).toContain('iifname "fab0" meta nfproto ipv4 fib saddr . iif oif missing counter name "fabric_rpf4" drop');
    expect(pre.indexOf('nd-neighbor-solicit')).toBeLessThan(pre.indexOf('fabric_rpf6'));
  });

  it('replaces its own table only', () => {
    expect(text).toContain(`delete table inet ${EDGE_TABLE}`);
    expect(text.match(/^table /gm)).toHaveLength(2); // the create-if-missing and the definition
  });
});

function whyCannotCheck(): string | null {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('nft', ['--version'], { stdio: 'ignore' }).error !== undefined) return 'nftables (nft) is not installed';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  return null;
}
describe.skipIf(unmet(whyCannotCheck(), 'router edge filter: nft -c'))('router edge filter: nft accepts it', () => {
  it('nft -c parses and checks the ruleset in a throwaway namespace', () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-edge-'));
    const ns = `slbx-edgetest-${process.pid}`;
    try {
      const file = join(dir, 'edge.nft');
      writeFileSync(file, edgeRuleset(plan()));
      expect(spawnSync('ip', ['netns', 'add', ns]).status).toBe(0);
      const r = spawnSync('ip', ['netns', 'exec', ns, 'nft', '-c', '-f', file], { encoding: 'utf8' });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
    } finally {
      spawnSync('ip', ['netns', 'del', ns]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
