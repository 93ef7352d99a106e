// Networks of type vlan (issue 18, point 1): the VLAN id's range, one network per VLAN id, a vlan
// network's gateway, 'vlan' only with 'type: vlan', one nic (one VLAN) per host port, one network per
// pool. Each refusal names the field and the fix. The valid example is examples/lab-vlan.yaml.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { formatConfigErrors, parseConfig, serializeConfig, validateConfig, type ConfigError } from '../shared/config.js';
import { buildLabPlan, formatLabPlan } from '../scripts/lab/plan.js';

const VLAN_TEXT = readFileSync(new URL('../examples/lab-vlan.yaml', import.meta.url), 'utf8');

type Raw = any; // broken on purpose

function vlanLab(edit?: (c: Raw) => void): Raw {
  const c = structuredClone(parseYaml(VLAN_TEXT) as Raw);
  edit?.(c);
  return c;
}

function errorsOf(raw: Raw): ConfigError[] {
  const r = validateConfig(raw);
  if (r.ok) throw new Error('expected errors, the config was accepted');
  return r.errors;
}

function expectOneError(raw: Raw, path: string, fragment: string): void {
  const errors = errorsOf(raw);
  expect(
    errors.map((e) => `${e.path}: ${e.message}`),
    formatConfigErrors(errors, 'test'),
  ).toHaveLength(1);
  expect(errors[0]!.path).toBe(path);
  expect(errors[0]!.message).toContain(fragment);
}

describe('networks of type vlan', () => {
  it('examples/lab-vlan.yaml is valid: type, VLAN id and VNI as written, vxlan the default type', () => {
    const r = parseConfig(VLAN_TEXT, 'lab-vlan.yaml');
    if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'lab-vlan.yaml'));
    const nets = r.config.networks.map((n) => [n.name, n.type, n.vni, n.vlan]);
    expect(nets).toEqual([
      ['tenant-a', 'vxlan', 5001, null],
      ['tenant-v', 'vlan', 5100, 100],
    ]);
  });

  it('survives serialization (the controller hands the daemons the serialized config)', () => {
    const r = parseConfig(VLAN_TEXT, 'lab-vlan.yaml');
    if (!r.ok) throw new Error('invalid');
    const again = parseConfig(serializeConfig(r.config), 'again');
    if (!again.ok) throw new Error(formatConfigErrors(again.errors, 'again'));
    expect(again.config.networks).toEqual(r.config.networks);
  });

  it.each([
    [0, 'must be an integer 1..4094'],
    [4095, 'must be an integer 1..4094'],
    [-1, 'must be an integer 1..4094'],
    [100.5, 'must be an integer 1..4094'],
    ['100', 'write the number without quotes'],
  ])('VLAN id %s is refused', (vlan, fragment) => {
    expectOneError(
      vlanLab((c) => (c.networks[1].vlan = vlan)),
      'networks[1].vlan',
      fragment,
    );
  });

  it('the edges 1 and 4094 are accepted', () => {
    for (const v of [1, 4094]) expect(validateConfig(vlanLab((c) => (c.networks[1].vlan = v))).ok).toBe(true);
  });

  it('a vlan network without a VLAN id is refused', () => {
    expectOneError(
      vlanLab((c) => delete c.networks[1].vlan),
      'networks[1].vlan',
      'required: an integer 1..4094',
    );
  });

  it('an unknown type is refused with the types and a suggestion', () => {
    expectOneError(
      vlanLab((c) => (c.networks[1].type = 'vlna')),
      'networks[1].type',
      "must be one of vxlan, vlan (did you mean 'vlan'?)",
    );
  });

  it("'vlan' on a vxlan network is refused, naming the fix", () => {
    expectOneError(
      vlanLab((c) => (c.networks[0].vlan = 200)),
      'networks[0].vlan',
      "add 'type: vlan' or remove 'vlan'",
    );
  });

  it('two networks with one VLAN id are refused at the second', () => {
    expectOneError(
      vlanLab((c) => c.networks.push({ name: 'tenant-w', type: 'vlan', vlan: 100, vni: 5200, gateway: '198.19.101.1' })),
      'networks[2].vlan',
      "VLAN 100 is already networks[1]'s",
    );
  });

  it('a vlan network without gateway and gateway6 is refused (its VIPs without probes)', () => {
    expectOneError(
      vlanLab((c) => {
        delete c.networks[1].gateway;
        delete c.networks[1].gateway6;
        for (const v of c.vips) for (const r of v.rules) delete r.probe;
      }),
      'networks[1].gateway',
      'a vlan network needs a gateway (or gateway6)',
    );
  });

  it('a vlan network with gateway6 only is accepted', () => {
    const r = validateConfig(
      vlanLab((c) => {
        delete c.networks[1].gateway;
        for (const v of c.vips) for (const r of v.rules) delete r.probe;
      }),
    );
    expect(r.ok ? 'ok' : formatConfigErrors(r.errors, 'test')).toBe('ok');
  });

  it('a vlan network still needs its VNI (the MUX-to-host VXLAN)', () => {
    expectOneError(
      vlanLab((c) => delete c.networks[1].vni),
      'networks[1].vni',
      'the VMs see the VLAN tag, never the VNI',
    );
  });

  it('one VLAN per host port: a second nic on a port is refused', () => {
    expectOneError(
      vlanLab((c) =>
        c.nics.push({
          name: 'h1vl2',
          host: 'host1',
          network: 'tenant-v',
          port: 'h1vl1',
          mac: '02:00:c6:13:64:0b',
          addresses: ['198.19.100.11'],
        }),
      ),
      'nics[4].port',
      'port h1vl1 on host host1 is already the port of nic h1vl1',
    );
  });

  it('a pool may not mix network types (every backend of a pool is in one network)', () => {
    expectOneError(
      vlanLab((c) => c.pools.push({ name: 'mixed', backends: [{ nic: 'h1vl1' }, { nic: 'h1vm1' }] })),
      'pools[2].backends[1].nic',
      'every backend of a pool must be in the same network',
    );
  });
});

describe('the lab plan of a vlan network (scripts/lab/plan.ts, scripts/lab/vlan.sh)', () => {
  it("has a 'vlan NIC ID' line for each nic of a vlan network, none for the VXLAN nics", () => {
    const r = parseConfig(VLAN_TEXT, 'lab-vlan.yaml');
    if (!r.ok) throw new Error('invalid');
    const p = buildLabPlan(r.config, 1);
    if (!p.ok) throw new Error(p.errors.join('\n'));
    const lines = formatLabPlan(p.plan)
      .split('\n')
      .filter((l) => l.startsWith('vlan '));
    expect(lines).toEqual(['vlan h1vl1 100', 'vlan h2vl1 100']);
  });
});
