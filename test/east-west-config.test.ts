// Internal VIPs in the config (docs/east-west.md): accepted with scope and network, written back by
// serializeConfig, and every misuse refused naming the field and the fix.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { formatConfigErrors, parseConfig, serializeConfig, validateConfig, type ConfigError } from '../shared/config.js';
import { LAB_YAML_PATH } from './helpers/lab-config.js';

type Raw = any;
function lab(edit: (raw: Raw) => void): Raw {
  const raw = parseYaml(readFileSync(LAB_YAML_PATH, 'utf8'));
  edit(raw);
  return raw;
}
const INTERNAL = {
  address: '192.0.2.100',
  scope: 'internal',
  network: 'tenant-a',
  rules: [{ protocol: 'tcp', frontendPort: 7000, pool: 'web' }],
};
const INTERNAL6 = { ...INTERNAL, address: '2001:db8:d::100' };
/** The index a VIP pushed onto the lab's list gets. */
const N = lab(() => {}).vips.length;

function errors(raw: Raw): ConfigError[] {
  const r = validateConfig(raw);
  if (r.ok) throw new Error('expected errors, the config was accepted');
  return r.errors;
}
function oneError(raw: Raw, path: string, fragment: string): void {
  const e = errors(raw);
  expect(
    e.map((x) => `${x.path}: ${x.message}`),
    formatConfigErrors(e, 'test'),
  ).toHaveLength(1);
  expect(e[0]!.path).toBe(path);
  expect(e[0]!.message).toContain(fragment);
}

describe('internal VIPs in the config', () => {
  it('accepts an IPv4 and an IPv6 internal VIP outside vipRanges, and a public VIP defaults to scope public', () => {
    const r = validateConfig(lab((c) => c.vips.push(INTERNAL, INTERNAL6)));
    if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'test'));
    const v = r.config.vips.find((x) => x.address.text === '192.0.2.100')!;
    expect([v.scope, v.network]).toEqual(['internal', 'tenant-a']);
    expect(r.config.vips.find((x) => x.address.text === '2001:db8:d::100')!.scope).toBe('internal');
    expect(r.config.vips[0]!.scope).toBe('public');
    expect(r.config.vips[0]!.network).toBe(null);
    // written back and read again equal
    const again = parseConfig(serializeConfig(r.config), 'again');
    if (!again.ok) throw new Error(formatConfigErrors(again.errors, 'again'));
    expect(again.config.vips.map((x) => [x.address.text, x.scope, x.network])).toEqual(
      r.config.vips.map((x) => [x.address.text, x.scope, x.network]),
    );
  });

  it('leaves internal VIPs out of the derived vipRanges (never announced)', () => {
    const r = validateConfig(
      lab((c) => {
        delete c.vipRanges;
        c.vips.push(INTERNAL);
      }),
    );
    if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'test'));
    expect(r.config.vipRanges.map((x) => x.text)).not.toContain('192.0.2.100/32');
    expect(r.config.vipRanges.map((x) => x.text)).toContain('203.0.113.10/32');
  });

  it('refuses an internal VIP inside vipRanges', () => {
    oneError(
      lab((c) => c.vips.push({ ...INTERNAL, address: '203.0.113.77' })),
      `vips[${N}].address`,
      'never announced',
    );
  });
  it('refuses scope internal without a network', () => {
    const { network: _n, ...noNet } = INTERNAL;
    oneError(
      lab((c) => c.vips.push(noNet)),
      `vips[${N}].network`,
      "required for 'scope: internal'",
    );
  });
  it('refuses an unknown network', () => {
    oneError(
      lab((c) => c.vips.push({ ...INTERNAL, network: 'tenant-z' })),
      `vips[${N}].network`,
      "unknown network 'tenant-z'",
    );
  });
  it('refuses a network on a public VIP', () => {
    oneError(
      lab((c) => (c.vips[0].network = 'tenant-a')),
      'vips[0].network',
      "add 'scope: internal'",
    );
  });
  it('refuses an unknown scope, with a hint', () => {
    oneError(
      lab((c) => c.vips.push({ ...INTERNAL, scope: 'internl' })),
      `vips[${N}].scope`,
      "did you mean 'internal'",
    );
  });
  it('refuses a pool with a backend in another network (tenant isolation)', () => {
    const raw = lab((c) => {
      c.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
      c.nics.push({ name: 'h1vm9', host: 'host1', network: 'tenant-b', mac: '02:00:c0:00:02:99', addresses: ['192.0.2.99'] });
      c.pools.push({ name: 'mixed', backends: [{ nic: 'h1vm1' }, { nic: 'h1vm9' }] });
      c.vips.push({ ...INTERNAL, rules: [{ protocol: 'tcp', frontendPort: 7000, pool: 'mixed' }] });
    });
    const e = errors(raw);
    const mine = e.filter((x) => x.message.includes('another network'));
    expect(mine.map((x) => x.path)).toEqual([`vips[${N}].rules[0].pool`]);
    expect(mine[0]!.message).toContain('h1vm9 (tenant-b)');
  });
  it('refuses an IPv6 internal VIP in a network without gateway6', () => {
    oneError(
      lab((c) => {
        delete c.networks[0].gateway6;
        c.probes = [];
        for (const v of c.vips) for (const r of v.rules) delete r.probe;
        c.vips.push(INTERNAL6);
      }),
      `vips[${N}].network`,
      'has no gateway6',
    );
  });

  it('flowTable.maxFastpathFlows: 100000 by default, any count 1..100000000, 0 refused naming the field', () => {
    const d = validateConfig(lab(() => {}));
    if (!d.ok) throw new Error(formatConfigErrors(d.errors, 'test'));
    expect(d.config.flowTable.maxFastpathFlows).toBe(100_000);
    const set = validateConfig(lab((c) => (c.flowTable = { maxFastpathFlows: 64 })));
    if (!set.ok) throw new Error(formatConfigErrors(set.errors, 'test'));
    expect(set.config.flowTable.maxFastpathFlows).toBe(64);
    expect(set.config.flowTable.maxFlows).toBe(1_000_000);
    const again = parseConfig(serializeConfig(set.config), 'again');
    if (!again.ok) throw new Error(formatConfigErrors(again.errors, 'again'));
    expect(again.config.flowTable.maxFastpathFlows).toBe(64);
    oneError(
      lab((c) => (c.flowTable = { maxFastpathFlows: 0 })),
      'flowTable.maxFastpathFlows',
      '1',
    );
  });

  it('flowTable.fastpathUdpDatagrams: 2 by default, 2..1000, 1 refused naming the field; kept through serialization', () => {
    const d = validateConfig(lab(() => {}));
    if (!d.ok) throw new Error(formatConfigErrors(d.errors, 'test'));
    expect(d.config.flowTable.fastpathUdpDatagrams).toBe(2);
    const set = validateConfig(lab((c) => (c.flowTable = { fastpathUdpDatagrams: 10 })));
    if (!set.ok) throw new Error(formatConfigErrors(set.errors, 'test'));
    const again = parseConfig(serializeConfig(set.config), 'again');
    if (!again.ok) throw new Error(formatConfigErrors(again.errors, 'again'));
    expect(again.config.flowTable.fastpathUdpDatagrams).toBe(10);
    oneError(
      lab((c) => (c.flowTable = { fastpathUdpDatagrams: 1 })),
      'flowTable.fastpathUdpDatagrams',
      '2',
    );
  });
});
