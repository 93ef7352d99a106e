// The order of validateConfig's errors (an object, as the controller's API receives it): the order the
// document is checked, as docs/config.md states it. parseConfig sorts by line and column instead, so
// the order of the section checks is only visible here; moving a section's check (shared/config/
// validate.ts) must not reorder what the API answers.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseConfig, validateConfig } from '../shared/config.js';

const LAB_TEXT = readFileSync(new URL('../examples/lab.yaml', import.meta.url), 'utf8');

// Raw configs are untyped on purpose: the test breaks them.
type Raw = any;

/** examples/lab.yaml with one independent error planted in each part of the document. */
function brokenEverywhere(): Raw {
  const c = structuredClone(parseYaml(LAB_TEXT) as Raw);
  c.hashSeed = -1; // top-level fields
  c.fabric.mtu = 1; // fabric
  c.flowTable = { maxFlows: 0 }; // flowTable
  c.pools.push({ ...structuredClone(c.pools[0]), name: 'web' }); // duplicate names
  c.networks[0].vni = 0; // networks
  c.networks[0].gateway = c.nics[0].addresses[0]; // the gateways, checked after the nics
  c.muxes[1].address = '010.0.0.1'; // muxes
  c.hosts[1].address6 = 'not-an-address'; // hosts
  c.nics[0].mac = '01:00:5e:00:00:01'; // nics
  c.probes[0].intervalMs = 5; // probes
  c.pools[0].backends[0].weight = 0; // pools
  c.vips[0].rules[0].frontendPort = 0; // vips and their rules
  c.bgp.holdTimeS = 2; // bgp
  c.vipRanges = ['198.51.100.0/24', '2001:db8:ff::/48']; // last: the IPv4 VIP is outside vipRanges
  return c;
}

describe('validateConfig: errors in the order the document is checked (docs/config.md)', () => {
  it('top-level fields, fabric, flowTable, names, networks, muxes, hosts, nics, gateways, probes, pools, vips, bgp, VIPs outside vipRanges', () => {
    const r = validateConfig(brokenEverywhere());
    expect(r.ok).toBe(false);
    const paths = r.ok ? [] : r.errors.map((e) => e.path);
    expect(paths).toEqual([
      'hashSeed',
      'fabric.mtu',
      'flowTable.maxFlows',
      'pools[1].name',
      'networks[0].vni',
      'muxes[1].address',
      'hosts[1].address6',
      'nics[0].mac',
      'networks[0].gateway',
      'probes[0].intervalMs',
      'pools[0].backends[0].weight',
      'vips[0].rules[0].frontendPort',
      'bgp.holdTimeS',
      'vips[0].address',
    ]);
  });

  it('parseConfig lists the same errors by line instead', () => {
    const raw = brokenEverywhere();
    const fromObject = validateConfig(raw);
    const fromText = parseConfig(JSON.stringify(raw, null, 1), 'broken.json');
    expect(fromObject.ok || fromText.ok).toBe(false);
    if (fromObject.ok || fromText.ok) return;
    const lines = fromText.errors.map((e) => e.line ?? 0);
    expect(lines).toEqual([...lines].sort((a, b) => a - b));
    const key = (e: { path: string; message: string }): string => `${e.path}: ${e.message}`;
    expect(fromText.errors.map(key).sort()).toEqual(fromObject.errors.map(key).sort());
  });
});
