import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  CONFIG_DEFAULTS,
  configSummary,
  formatConfigErrors,
  hostVipRange,
  indexConfig,
  inVipRange,
  parseConfig,
  parseVipRange,
  serializeConfig,
  validateConfig,
  type ConfigError,
  type ConfigResult,
  type SlbxConfig,
} from '../shared/config.js';
import { formatMac, parseIpAddr } from '../shared/addr.js';

const LAB_TEXT = readFileSync(new URL('../examples/lab.yaml', import.meta.url), 'utf8');

// Raw configs are untyped on purpose: the tests break them in every way.
type Raw = any;

function lab(): Raw {
  return structuredClone(parseYaml(LAB_TEXT) as Raw);
}

function mutated(fn: (c: Raw) => void): Raw {
  const c = lab();
  fn(c);
  return c;
}

function okConfig(r: ConfigResult): SlbxConfig {
  if (!r.ok) throw new Error(`expected a valid config:\n${formatConfigErrors(r.errors, 'test')}`);
  return r.config;
}

function errorsOf(r: ConfigResult): ConfigError[] {
  if (r.ok) throw new Error('expected errors, the config was accepted');
  return r.errors;
}

/** Asserts exactly one error, at `path`, whose message contains `fragment`. */
function expectOneError(raw: Raw, path: string, fragment: string): ConfigError {
  const errors = errorsOf(validateConfig(raw));
  expect(
    errors.map((e) => `${e.path}: ${e.message}`),
    formatConfigErrors(errors, 'test'),
  ).toHaveLength(1);
  expect(errors[0]!.path).toBe(path);
  expect(errors[0]!.message).toContain(fragment);
  return errors[0]!;
}

/** A small valid config with only what is required. */
function minimal(): Raw {
  return {
    networks: [{ name: 'net', vni: 7 }],
    muxes: [{ name: 'm', address: '198.18.0.11' }],
    hosts: [{ name: 'h', address: '198.18.0.21' }],
    nics: [{ name: 'n1', host: 'h', network: 'net', mac: '02:00:00:00:00:01', addresses: ['192.0.2.10'] }],
    pools: [{ name: 'p', backends: [{ nic: 'n1' }] }],
    vips: [{ address: '203.0.113.10', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'p' }] }],
  };
}

describe('examples/lab.yaml', () => {
  const config = okConfig(parseConfig(LAB_TEXT, 'lab.yaml'));

  it('has the lab of the design', () => {
    expect(config.networks).toHaveLength(1);
    expect(config.muxes.map((m) => `${m.name} ${m.address.text} ${m.address6?.text}`)).toEqual([
      'mux1 198.18.0.11 2001:db8:f::11',
      'mux2 198.18.0.12 2001:db8:f::12',
    ]);
    expect(config.hosts.map((h) => `${h.name} ${h.address.text} ${h.address6?.text}`)).toEqual([
      'host1 198.18.0.21 2001:db8:f::21',
      'host2 198.18.0.22 2001:db8:f::22',
    ]);
    expect(config.nics.map((n) => `${n.name}@${n.host} ${n.port} ${formatMac(n.mac)} ${n.address4?.text} ${n.address6?.text}`)).toEqual([
      'h1vm1@host1 h1vm1 02:00:c0:00:02:0a 192.0.2.10 2001:db8:d::10',
      'h1vm2@host1 h1vm2 02:00:c0:00:02:0b 192.0.2.11 2001:db8:d::11',
      'h2vm1@host2 h2vm1 02:00:c0:00:02:0c 192.0.2.12 2001:db8:d::12',
      'h2vm2@host2 h2vm2 02:00:c0:00:02:0d 192.0.2.13 2001:db8:d::13',
    ]);
    expect(config.probes).toHaveLength(2);
    expect(config.pools).toHaveLength(1);
    expect(config.pools[0]!.backends).toHaveLength(4);
    expect(config.pools[0]!.network).toBe('tenant-a');
    expect(config.vips.map((v) => v.address.text)).toEqual(['203.0.113.10', '2001:db8:ff::10']);
    expect(config.vips.map((v) => v.rules.map((r) => `${r.protocol} ${r.frontendPort}->${r.backendPort} ${r.probe ?? '-'}`))).toEqual([
      ['tcp 80->80 http80', 'udp 7->7 -', 'tcp 8080->8000 -', 'udp 7003->7003 -', 'udp 7002->7002 -'],
      ['tcp 80->80 http80', 'udp 7->7 -'],
    ]);
    expect(config.fabric).toEqual({ mtu: 1600, vxlanPort: 4789, underlay: 'ipv4' });
    expect(config.flowTable).toEqual(CONFIG_DEFAULTS.flowTable);
    expect(config.hashSeed).toBe(0x736c6278);
  });

  it('network, gateways and probe defaults', () => {
    const n = config.networks[0]!;
    expect([n.name, n.vni, n.gateway?.text, n.gateway6?.text]).toEqual(['tenant-a', 5001, '192.0.2.1', '2001:db8:d::1']);
    expect(config.probes[0]).toEqual({
      name: 'http80',
      protocol: 'http',
      port: 80,
      path: '/health',
      intervalMs: 1000,
      timeoutMs: 1000,
      upThreshold: 2,
      downThreshold: 2,
    });
    expect(config.probes[1]).toMatchObject({ name: 'tcp80', protocol: 'tcp', path: null, intervalMs: 5000, timeoutMs: 2000 });
  });

  it('summary and index', () => {
    const s = configSummary(config);
    expect(s).toContain('vips: 2 (1 IPv4, 1 IPv6), rules: 7, pools: 1, backends: 4');
    expect(s).toContain('muxes: 2, hosts: 2, nics: 4');
    expect(s.split('\n').length).toBeLessThanOrEqual(4);
    const idx = indexConfig(config);
    expect(indexConfig(config)).toBe(idx);
    expect(idx.nics.get('h2vm1')?.host).toBe('host2');
    expect(idx.nicsByHost.get('host1')?.map((n) => n.name)).toEqual(['h1vm1', 'h1vm2']);
    expect(idx.networksByVni.get(5001)?.name).toBe('tenant-a');
    expect(idx.vips.get('2001:db8:ff::10')?.rules).toHaveLength(2);
    expect(idx.rules).toHaveLength(7);
    expect(idx.rulesByPool.get('web')).toHaveLength(7);
    expect(idx.probes.get('http80')?.path).toBe('/health');
    expect(idx.pools.get('web')?.backends).toHaveLength(4);
    expect(idx.muxes.size + idx.hosts.size).toBe(4);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.pools[0]!.backends)).toBe(true);
    expect(Object.isFrozen(config.pools[0]!.backends[0])).toBe(true);
    expect(Object.isFrozen(config.vips[0]!.rules[0]!.protocols)).toBe(true);
    expect(Object.isFrozen(config.nics[0]!.address4)).toBe(true);
  });

  it('reads the same as JSON', () => {
    const fromJson = okConfig(parseConfig(JSON.stringify(parseYaml(LAB_TEXT)), 'lab.json'));
    expect(fromJson).toEqual(config);
    expect(okConfig(validateConfig(lab()))).toEqual(config);
  });
});

describe('defaults', () => {
  it('applies every default', () => {
    const c = okConfig(validateConfig(minimal()));
    expect(c.version).toBe(1);
    expect(c.hashSeed).toBe(CONFIG_DEFAULTS.hashSeed);
    expect(c.maglevTableSize).toBe(65537);
    expect(c.fabric).toEqual({ mtu: 1500, vxlanPort: 4789, underlay: 'ipv4' });
    expect(c.flowTable).toEqual({
      maxFlows: 1_000_000,
      tcpIdleTimeoutS: 240,
      udpIdleTimeoutS: 30,
      otherIdleTimeoutS: 30,
      untrustedMaxFlows: 100_000,
      untrustedTimeoutS: 5,
      maxFastpathFlows: 100_000,
      fastpathUdpDatagrams: 2,
      hostMaxFlows: 1_000_000,
      snatMaxFlows: 250_000,
    });
    expect(c.networks[0]).toEqual({ name: 'net', type: 'vxlan', vni: 7, vlan: null, gateway: null, gateway6: null });
    expect(c.muxes[0]!.address6).toBeNull();
    expect(c.nics[0]!.port).toBe('n1');
    expect(c.nics[0]!.address6).toBeNull();
    expect(c.probes).toEqual([]);
    expect(c.pools[0]).toEqual({
      name: 'p',
      network: 'net',
      latencySensitivityMs: 0,
      latency: null,
      backends: [{ nic: 'n1', priority: 1, weight: 50, enabled: true, drain: false }],
    });
    expect(c.vips[0]!.rules[0]).toEqual({
      name: 'tcp-80',
      protocols: [6],
      protocol: 'tcp',
      frontendPort: 80,
      backendPort: 80,
      pool: 'p',
      distribution: 5,
      probe: null,
      allDown: 'drop',
    });
  });

  it('probe timeout defaults to min(2000, intervalMs), http path to /', () => {
    const raw = minimal();
    raw.probes = [
      { name: 'a', protocol: 'http', port: 80, intervalMs: 500 },
      { name: 'b', protocol: 'http', port: 80, intervalMs: 10000 },
    ];
    const c = okConfig(validateConfig(raw));
    expect(c.probes.map((p) => [p.timeoutMs, p.path])).toEqual([
      [500, '/'],
      [2000, '/'],
    ]);
  });

  it('null sections and null optional fields mean "not set"', () => {
    const raw = minimal();
    Object.assign(raw, { fabric: null, flowTable: null, probes: null });
    raw.networks[0].gateway = null;
    raw.muxes[0].address6 = null;
    raw.vips[0].rules[0].probe = null;
    const c = okConfig(validateConfig(raw));
    expect(c.fabric.mtu).toBe(1500);
    expect(c.networks[0]!.gateway).toBeNull();
    const y = okConfig(
      parseConfig(
        'fabric:\nflowTable:\nprobes:\n' +
          serializeConfig(okConfig(validateConfig(minimal()))).replace(/^(fabric|flowTable|probes):.*\n(  .*\n)*/gm, ''),
      ),
    );
    expect(y.fabric.mtu).toBe(1500);
  });

  it('CONFIG_DEFAULTS is frozen', () => {
    expect(Object.isFrozen(CONFIG_DEFAULTS.backend)).toBe(true);
  });
});

// One test per validation rule: each broken config must give exactly one error, at that path.
const RULES: [string, (c: Raw) => void, string, string][] = [
  // top level
  ['unknown top-level field', (c) => (c.hashseed = 1), 'hashseed', "did you mean 'hashSeed'?"],
  ['version other than 1', (c) => (c.version = 2), 'version', 'only version 1'],
  ['fabric.underlay not a family', (c) => (c.fabric.underlay = 'ipv5'), 'fabric.underlay', 'ipv4'],
  [
    'ipv6 underlay with a host without address6',
    (c) => {
      c.fabric.underlay = 'ipv6';
      delete c.hosts[1].address6;
    },
    'hosts[1].address6',
    'needs an IPv6 provider address',
  ],
  ['hashSeed negative', (c) => (c.hashSeed = -1), 'hashSeed', 'integer 0..4294967295'],
  ['hashSeed above uint32', (c) => (c.hashSeed = 2 ** 32), 'hashSeed', 'integer 0..4294967295'],
  ['hashSeed as a string', (c) => (c.hashSeed = '0x736c6278'), 'hashSeed', 'without quotes'],
  ['maglevTableSize not prime', (c) => (c.maglevTableSize = 65536), 'maglevTableSize', 'nearest primes are 65521 or 65537'],
  ['maglevTableSize too small', (c) => (c.maglevTableSize = 5), 'maglevTableSize', 'integer 7..16777213'],
  ['maglevTableSize too large', (c) => (c.maglevTableSize = 16777259), 'maglevTableSize', 'integer 7..16777213'],
  [
    'maglevTableSize below pool size',
    (c) =>
      (c.maglevTableSize = 7) &&
      c.pools[0].backends.push(...[1, 2, 3, 4].map((i) => ({ nic: `x${i}` }))) &&
      c.nics.push(
        ...[1, 2, 3, 4].map((i) => ({
          name: `x${i}`,
          host: 'host2',
          network: 'tenant-a',
          mac: `02:00:00:00:01:0${i}`,
          addresses: [`192.0.2.${100 + i}`, `2001:db8:d::${100 + i}`],
        })),
      ),
    'pools[0].backends',
    'raise maglevTableSize to a prime >= 8',
  ],
  ['fabric not a mapping', (c) => (c.fabric = [1600]), 'fabric', 'must be a mapping'],
  ['fabric.mtu too small', (c) => (c.fabric.mtu = 1279), 'fabric.mtu', 'integer 1280..9216'],
  ['fabric.mtu too large', (c) => (c.fabric.mtu = 9217), 'fabric.mtu', 'integer 1280..9216'],
  ['fabric.vxlanPort zero', (c) => (c.fabric.vxlanPort = 0), 'fabric.vxlanPort', 'integer 1..65535'],
  ['fabric unknown field', (c) => (c.fabric.vxlanport = 4789), 'fabric.vxlanport', "did you mean 'vxlanPort'?"],
  ['flowTable.maxFlows zero', (c) => (c.flowTable = { maxFlows: 0 }), 'flowTable.maxFlows', 'integer 1..100000000'],
  ['flowTable.maxFlows too large', (c) => (c.flowTable = { maxFlows: 100_000_001 }), 'flowTable.maxFlows', 'integer 1..100000000'],
  ['flowTable.tcpIdleTimeoutS zero', (c) => (c.flowTable = { tcpIdleTimeoutS: 0 }), 'flowTable.tcpIdleTimeoutS', 'integer 1..86400'],
  [
    'flowTable.udpIdleTimeoutS too large',
    (c) => (c.flowTable = { udpIdleTimeoutS: 86401 }),
    'flowTable.udpIdleTimeoutS',
    'integer 1..86400',
  ],
  [
    'flowTable.otherIdleTimeoutS fractional',
    (c) => (c.flowTable = { otherIdleTimeoutS: 1.5 }),
    'flowTable.otherIdleTimeoutS',
    'integer 1..86400',
  ],
  // networks
  ['networks missing', (c) => delete c.networks, 'networks', 'required'],
  ['nothing in networks', (c) => (c.networks = []), 'networks', 'at least one network'],
  ['networks not a list', (c) => (c.networks = { name: 'x' }), 'networks', 'must be a list'],
  ['network item not a mapping', (c) => c.networks.push('tenant-b'), 'networks[1]', 'must be a mapping'],
  ['network name with capitals', (c) => c.networks.push({ name: 'Tenant-B', vni: 2 }), 'networks[1].name', 'a-z, 0-9'],
  ['network name too long', (c) => c.networks.push({ name: 'n'.repeat(33), vni: 2 }), 'networks[1].name', '1..32 characters'],
  ['network name starting with -', (c) => c.networks.push({ name: '-b', vni: 2 }), 'networks[1].name', 'starting with a letter or digit'],
  ['network name is a number', (c) => c.networks.push({ name: 5, vni: 2 }), 'networks[1].name', 'put it in quotes'],
  ['network name missing', (c) => c.networks.push({ vni: 2 }), 'networks[1].name', 'required'],
  [
    'duplicate network name',
    (c) => c.networks.push({ name: 'tenant-a', vni: 2 }),
    'networks[1].name',
    "duplicate network name 'tenant-a', also networks[0]",
  ],
  ['vni zero', (c) => (c.networks[0].vni = 0), 'networks[0].vni', 'integer 1..16777215'],
  ['vni above 24 bits', (c) => (c.networks[0].vni = 16777216), 'networks[0].vni', 'integer 1..16777215'],
  ['vni missing', (c) => delete c.networks[0].vni, 'networks[0].vni', 'required'],
  ['duplicate vni', (c) => c.networks.push({ name: 'b', vni: 5001 }), 'networks[1].vni', 'VNI 5001 is already used by networks[0]'],
  ['IPv6 gateway in gateway', (c) => (c.networks[0].gateway = '2001:db8:d::1'), 'networks[0].gateway', "put it in 'gateway6'"],
  ['IPv4 gateway in gateway6', (c) => (c.networks[0].gateway6 = '192.0.2.1'), 'networks[0].gateway6', "put it in 'gateway'"],
  ['gateway with prefix length', (c) => (c.networks[0].gateway = '192.0.2.1/24'), 'networks[0].gateway', 'without a prefix length'],
  [
    'gateway that is a nic address',
    (c) => (c.networks[0].gateway = '192.0.2.12'),
    'networks[0].gateway',
    'also the address of nic h2vm1 (nics[2].addresses[0])',
  ],
  // muxes and hosts
  ['muxes missing', (c) => delete c.muxes, 'muxes', 'required'],
  ['mux address missing', (c) => delete c.muxes[0].address, 'muxes[0].address', 'required: an IPv4 address'],
  ['mux address IPv6', (c) => (c.muxes[0].address = '2001:db8:f::99'), 'muxes[0].address', "not IPv6; put it in 'address6'"],
  ['mux address6 IPv4', (c) => (c.muxes[0].address6 = '198.18.0.99'), 'muxes[0].address6', 'must be an IPv6 address'],
  ['mux address not an address', (c) => (c.muxes[0].address = 'mux1.lab'), 'muxes[0].address', 'must be an IPv4 address'],
  ['mux address with leading zeros', (c) => (c.muxes[0].address = '198.18.0.011'), 'muxes[0].address', 'leading zeros'],
  ['mux address loopback', (c) => (c.muxes[0].address = '127.0.0.1'), 'muxes[0].address', 'loopback'],
  ['mux address multicast', (c) => (c.muxes[0].address = '224.0.0.5'), 'muxes[0].address', 'multicast'],
  ['mux address6 unspecified', (c) => (c.muxes[0].address6 = '::'), 'muxes[0].address6', 'unspecified'],
  ['duplicate mux name', (c) => (c.muxes[1].name = 'mux1'), 'muxes[1].name', "duplicate mux name 'mux1'"],
  ['mux unknown field', (c) => (c.muxes[0].adress6 = '2001:db8:f::99'), 'muxes[0].adress6', "did you mean 'address6'?"],
  ['hosts empty', (c) => (c.hosts = []), 'hosts', 'at least one host'],
  [
    'duplicate host name',
    (c) => c.hosts.push({ name: 'host1', address: '198.18.0.23' }),
    'hosts[2].name',
    "duplicate host name 'host1', also hosts[0]",
  ],
  [
    'host and mux share a provider address',
    (c) => (c.hosts[0].address = '198.18.0.12'),
    'hosts[0].address',
    'already used by mux mux2 (muxes[1].address)',
  ],
  [
    'two muxes share address6',
    (c) => (c.muxes[1].address6 = '2001:db8:f::11'),
    'muxes[1].address6',
    'already used by mux mux1 (muxes[0].address6)',
  ],
  // nics
  ['nics missing', (c) => delete c.nics, 'nics', 'required'],
  [
    'duplicate nic name',
    (c) => c.nics.push({ ...c.nics[0], port: 'x', mac: '02:00:00:00:00:99', addresses: ['192.0.2.99'] }),
    'nics[4].name',
    "duplicate nic name 'h1vm1', also nics[0]",
  ],
  [
    'nic on an unknown host',
    (c) => (c.nics[0].host = 'hots1'),
    'nics[0].host',
    "unknown host 'hots1' (did you mean 'host1'?); defined hosts: host1, host2",
  ],
  ['nic in an unknown network', (c) => (c.nics[0].network = 'tenant-b'), 'nics[0].network', "unknown network 'tenant-b'"],
  ['nic host missing', (c) => delete c.nics[0].host, 'nics[0].host', 'required'],
  ['port too long', (c) => (c.nics[0].port = 'abcdefghijklmnop'), 'nics[0].port', 'at most 15'],
  ['port with a slash', (c) => (c.nics[0].port = 'a/b'), 'nics[0].port', "'/'"],
  ['port with a space', (c) => (c.nics[0].port = 'a b'), 'nics[0].port', 'whitespace'],
  ['port .', (c) => (c.nics[0].port = '..'), 'nics[0].port', "'.' or '..'"],
  ['port empty', (c) => (c.nics[0].port = ''), 'nics[0].port', 'empty'],
  ['port not a string', (c) => (c.nics[0].port = 7), 'nics[0].port', 'as a string'],
  [
    'default port from a long name',
    (c) => (c.nics[0].name = 'a-very-long-nic-name') && delete c.nics[0].port && (c.pools[0].backends[0].nic = 'a-very-long-nic-name'),
    'nics[0].port',
    "set 'port'",
  ],
  ['two nics on one port', (c) => (c.nics[1].port = 'h1vm1'), 'nics[1].port', 'port h1vm1 on host host1 is already the port of nic h1vm1'],
  ['mac not a MAC', (c) => (c.nics[0].mac = '02:00:c0:00:02'), 'nics[0].mac', 'must be a MAC address'],
  ['mac multicast', (c) => (c.nics[0].mac = '01:00:5e:00:00:01'), 'nics[0].mac', 'unicast'],
  ['mac broadcast', (c) => (c.nics[0].mac = 'ff:ff:ff:ff:ff:ff'), 'nics[0].mac', 'unicast'],
  ['mac all zero', (c) => (c.nics[0].mac = '00:00:00:00:00:00'), 'nics[0].mac', 'all zero'],
  ['mac missing', (c) => delete c.nics[0].mac, 'nics[0].mac', 'required'],
  [
    'duplicate mac in a network',
    (c) => (c.nics[3].mac = '02:00:C0:00:02:0A'),
    'nics[3].mac',
    'MAC 02:00:c0:00:02:0a in network tenant-a already belongs to nic h1vm1 (nics[0].mac)',
  ],
  ['addresses empty', (c) => (c.nics[0].addresses = []), 'nics[0].addresses', '1 or 2 addresses'],
  ['three addresses', (c) => c.nics[0].addresses.push('2001:db8:d::99'), 'nics[0].addresses', '1 or 2 addresses'],
  ['addresses a string', (c) => (c.nics[0].addresses = '192.0.2.10'), 'nics[0].addresses', 'must be a list'],
  ['two IPv4 addresses', (c) => (c.nics[0].addresses = ['192.0.2.10', '192.0.2.99']), 'nics[0].addresses[1]', 'at most one IPv4 address'],
  ['address not an address', (c) => (c.nics[0].addresses[1] = '2001:db8:d::10::1'), 'nics[0].addresses[1]', 'IPv4 or IPv6 address'],
  ['address IPv4-mapped', (c) => (c.nics[0].addresses[1] = '::ffff:192.0.2.77'), 'nics[0].addresses[1]', 'IPv4-mapped'],
  [
    'duplicate address in a network',
    (c) => (c.nics[2].addresses[1] = '2001:db8:d::10'),
    'nics[2].addresses[1]',
    'address 2001:db8:d::10 in network tenant-a already belongs to nic h1vm1 (nics[0].addresses[1])',
  ],
  // probes
  ['probes not a list', (c) => (c.probes = 'http80'), 'probes', 'must be a list'],
  ['duplicate probe name', (c) => (c.probes[1].name = 'http80'), 'probes[1].name', "duplicate probe name 'http80'"],
  ['probe protocol unknown', (c) => (c.probes[0].protocol = 'https'), 'probes[0].protocol', "one of http, tcp (did you mean 'http'?)"],
  ['probe port as a string', (c) => (c.probes[0].port = '80'), 'probes[0].port', 'write the number without quotes'],
  ['probe port missing', (c) => delete c.probes[0].port, 'probes[0].port', 'required'],
  ['path on a tcp probe', (c) => (c.probes[1].path = '/'), 'probes[1].path', 'only http probes have a path'],
  ['path without /', (c) => (c.probes[0].path = 'health'), 'probes[0].path', "must start with '/'"],
  ['path with a space', (c) => (c.probes[0].path = '/a b'), 'probes[0].path', 'visible ASCII'],
  ['path with CR LF', (c) => (c.probes[0].path = '/a\r\nHost: x'), 'probes[0].path', 'visible ASCII'],
  ['intervalMs too small', (c) => (c.probes[0].intervalMs = 99), 'probes[0].intervalMs', 'integer 100..3600000'],
  ['timeoutMs above intervalMs', (c) => (c.probes[0].timeoutMs = 1001), 'probes[0].timeoutMs', 'at most intervalMs (1000)'],
  ['timeoutMs too small', (c) => (c.probes[0].timeoutMs = 9), 'probes[0].timeoutMs', 'integer 10..'],
  ['upThreshold zero', (c) => (c.probes[0].upThreshold = 0), 'probes[0].upThreshold', 'integer 1..100'],
  ['downThreshold too large', (c) => (c.probes[0].downThreshold = 101), 'probes[0].downThreshold', 'integer 1..100'],
  // pools
  ['pools missing', (c) => delete c.pools, 'pools', 'required'],
  ['duplicate pool name', (c) => c.pools.push({ name: 'web', backends: [{ nic: 'h1vm1' }] }), 'pools[1].name', "duplicate pool name 'web'"],
  ['pool without backends', (c) => (c.pools[0].backends = []), 'pools[0].backends', 'at least one backend'],
  ['pool backends missing', (c) => delete c.pools[0].backends, 'pools[0].backends', 'required'],
  ['latencySensitivityMs too large', (c) => (c.pools[0].latencySensitivityMs = 10001), 'pools[0].latencySensitivityMs', 'integer 0..10000'],
  ['backend on an unknown nic', (c) => (c.pools[0].backends[1].nic = 'h1vm3'), 'pools[0].backends[1].nic', "unknown nic 'h1vm3'"],
  ['backend nic missing', (c) => delete c.pools[0].backends[1].nic, 'pools[0].backends[1].nic', 'required'],
  ['nic twice in a pool', (c) => (c.pools[0].backends[3].nic = 'h1vm1'), 'pools[0].backends[3].nic', 'already backends[0] of this pool'],
  ['priority zero', (c) => (c.pools[0].backends[0].priority = 0), 'pools[0].backends[0].priority', 'integer 1..5'],
  ['priority six', (c) => (c.pools[0].backends[0].priority = 6), 'pools[0].backends[0].priority', 'integer 1..5'],
  ['weight zero', (c) => (c.pools[0].backends[0].weight = 0), 'pools[0].backends[0].weight', 'use drain: true to stop new flows'],
  ['weight too large', (c) => (c.pools[0].backends[0].weight = 1001), 'pools[0].backends[0].weight', 'integer 1..1000'],
  ['weight fractional', (c) => (c.pools[0].backends[0].weight = 2.5), 'pools[0].backends[0].weight', 'integer 1..1000'],
  ['enabled as yes', (c) => (c.pools[0].backends[0].enabled = 'yes'), 'pools[0].backends[0].enabled', 'write true or false'],
  ['drain as 1', (c) => (c.pools[0].backends[0].drain = 1), 'pools[0].backends[0].drain', 'must be true or false'],
  [
    'backend unknown field',
    (c) => (c.pools[0].backends[2].weigth = 5),
    'pools[0].backends[2].weigth',
    "unknown field 'weigth' (did you mean 'weight'?); allowed: nic, priority, weight, enabled, drain",
  ],
  [
    'pool over two networks',
    (c) => {
      c.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1', gateway6: '2001:db8:d::1' });
      c.nics.push({
        name: 'b1',
        host: 'host2',
        network: 'tenant-b',
        mac: '02:00:00:00:0b:01',
        addresses: ['192.0.2.10', '2001:db8:d::10'],
      });
      c.pools[0].backends.push({ nic: 'b1' });
    },
    'pools[0].backends[4].nic',
    'nic b1 is in network tenant-b, but backends[0] is in network tenant-a; every backend of a pool must be in the same network',
  ],
  [
    'probed IPv6 VIP over a network without gateway6',
    (c) => {
      delete c.networks[0].gateway6;
    },
    'vips[1].rules[0].probe',
    'probe http80 of an IPv6 VIP cannot reach nic h1vm1: network tenant-a has no gateway6, the address probes are sent from (add gateway6 to network tenant-a',
  ],
  [
    'probed IPv4 VIP over a network without gateway',
    (c) => {
      delete c.networks[0].gateway;
    },
    'vips[0].rules[0].probe',
    'probe http80 of an IPv4 VIP cannot reach nic h1vm1: network tenant-a has no gateway, the address probes are sent from',
  ],
  // vips and rules
  ['vips missing', (c) => delete c.vips, 'vips', 'required'],
  ['vip address missing', (c) => delete c.vips[0].address, 'vips[0].address', 'required'],
  ['vip address not an address', (c) => (c.vips[0].address = '203.0.113.300'), 'vips[0].address', 'IPv4 or IPv6 address'],
  ['duplicate vip', (c) => (c.vips[1].address = '203.0.113.10'), 'vips[1].address', 'already vips[0]'],
  [
    'duplicate vip in another form',
    (c) => (c.vips[0].address = '2001:DB8:FF:0::10'),
    'vips[1].address',
    'VIP 2001:db8:ff::10 is already vips[0]',
  ],
  [
    'vip is a mux address',
    (c) => (c.vips[0].address = '198.18.0.11'),
    'vips[0].address',
    'VIP 198.18.0.11 is the provider address of mux mux1 (muxes[0].address)',
  ],
  [
    'vip is a host address6',
    (c) => (c.vips[1].address = '2001:db8:f::22'),
    'vips[1].address',
    'the provider address of host host2 (hosts[1].address6)',
  ],
  [
    'vip is a nic address',
    (c) => (c.vips[0].address = '192.0.2.13'),
    'vips[0].address',
    'the address of nic h2vm2 in network tenant-a (nics[3].addresses[0])',
  ],
  [
    'vip is a gateway',
    (c) => (c.vips[1].address = '2001:db8:d::1'),
    'vips[1].address',
    'the gateway of network tenant-a (networks[0].gateway6)',
  ],
  ['vip without rules', (c) => (c.vips[0].rules = []), 'vips[0].rules', 'at least one rule'],
  [
    'rule protocol in capitals',
    (c) => (c.vips[0].rules[0].protocol = 'TCP'),
    'vips[0].rules[0].protocol',
    "one of tcp, udp, all (did you mean 'tcp'?)",
  ],
  ['rule protocol missing', (c) => delete c.vips[0].rules[1].protocol, 'vips[0].rules[1].protocol', 'required'],
  ['frontendPort zero', (c) => (c.vips[0].rules[2].frontendPort = 0), 'vips[0].rules[2].frontendPort', 'integer 1..65535'],
  ['frontendPort missing', (c) => delete c.vips[0].rules[2].frontendPort, 'vips[0].rules[2].frontendPort', 'required'],
  ['backendPort too large', (c) => (c.vips[0].rules[2].backendPort = 65536), 'vips[0].rules[2].backendPort', 'integer 1..65535'],
  [
    'rule on an unknown pool',
    (c) => (c.vips[0].rules[0].pool = 'wbe'),
    'vips[0].rules[0].pool',
    "unknown pool 'wbe' (did you mean 'web'?)",
  ],
  ['rule with an unknown probe', (c) => (c.vips[0].rules[0].probe = 'http8080'), 'vips[0].rules[0].probe', "unknown probe 'http8080'"],
  [
    'distribution unknown',
    (c) => (c.vips[0].rules[0].distribution = '4-tuple'),
    'vips[0].rules[0].distribution',
    'one of 5-tuple, 3-tuple, 2-tuple',
  ],
  ['distribution as a number', (c) => (c.vips[0].rules[0].distribution = 3), 'vips[0].rules[0].distribution', "write '3-tuple'"],
  ['rule name invalid', (c) => (c.vips[0].rules[0].name = 'web http'), 'vips[0].rules[0].name', 'must be a name'],
  [
    'duplicate rule name',
    (c) => (c.vips[0].rules[1].name = 'web-http'),
    'vips[0].rules[1].name',
    "rule name 'web-http' is already rules[0] of this VIP",
  ],
  [
    'rule name equal to a default name',
    (c) => (c.vips[0].rules[0].name = 'udp-7') && delete c.vips[0].rules[1].name,
    'vips[0].rules[1].name',
    'the default protocol-frontendPort',
  ],
  [
    'duplicate frontend',
    (c) => (c.vips[0].rules[2].frontendPort = 80),
    'vips[0].rules[2].frontendPort',
    'tcp port 80 of this VIP is already taken by rules[0]',
  ],
  [
    'all overlaps udp',
    (c) => c.vips[0].rules.push({ protocol: 'all', frontendPort: 7, backendPort: 9, pool: 'web' }),
    'vips[0].rules[5].frontendPort',
    "udp port 7 of this VIP is already taken by rules[1] ('all' is both tcp and udp)",
  ],
  ['rule unknown field', (c) => (c.vips[0].rules[0].frontend_port = 80), 'vips[0].rules[0].frontend_port', "did you mean 'frontendPort'?"],
  [
    'mixed families',
    (c) => (c.nics[2].addresses = ['2001:db8:d::12']),
    'vips[0].rules[0].pool',
    'mixed families: IPv4 VIP 203.0.113.10 over nic h2vm1 that has no IPv4 address; slbx does not translate between IPv4 and IPv6 (add an IPv4 address to the nic or use an IPv6 VIP)',
  ],
  [
    'stateless DSR: two frontend ports onto one backend port',
    (c) => (c.vips[0].rules[2].backendPort = 80),
    'vips[0].rules[2].backendPort',
    'direct server return is stateless: tcp port 80 on h1vm1 192.0.2.10, h1vm2 192.0.2.11, h2vm1 192.0.2.12, h2vm2 192.0.2.13 already serves 203.0.113.10:80 (vips[0].rules[0])',
  ],
  [
    'stateless DSR: two VIPs onto one backend port',
    (c) => c.vips.push({ address: '203.0.113.11', rules: [{ protocol: 'udp', frontendPort: 7, pool: 'web' }] }),
    'vips[2].rules[0].backendPort',
    'udp port 7 on h1vm1 192.0.2.10',
  ],
];

describe('every validation rule', () => {
  it('the lab config is valid before each mutation', () => {
    expect(validateConfig(lab()).ok).toBe(true);
  });
  test.each(RULES)('%s', (_title, fn, path, fragment) => {
    expectOneError(mutated(fn), path, fragment);
  });

  it('the whole config must be a mapping', () => {
    expectOneError([1, 2], '', 'must be a mapping');
    expectOneError('networks: []', '', 'must be a mapping');
    expectOneError(null, '', 'the config is empty');
    expect(errorsOf(parseConfig('', 'x'))[0]!.message).toContain('the config is empty');
    expect(errorsOf(parseConfig('# nothing\n', 'x'))[0]!.message).toContain('the config is empty');
  });

  it('rejects several YAML documents', () => {
    const e = errorsOf(parseConfig(`${LAB_TEXT}\n---\nversion: 1\n`, 'x'));
    expect(e).toHaveLength(1);
    expect(e[0]!.message).toContain('2 YAML documents');
  });

  it('rejects duplicate keys with their line', () => {
    const e = errorsOf(parseConfig('version: 1\nversion: 1\n', 'x'));
    expect(e).toHaveLength(1);
    expect(e[0]).toMatchObject({ line: 2, column: 1 });
    expect(e[0]!.message).toContain('unique');
  });

  it('an own __proto__ key is an unknown field, not a prototype', () => {
    const raw = JSON.parse(JSON.stringify(lab()).replace('"version":1', '"version":1,"__proto__":{"version":2}')) as Raw;
    expectOneError(raw, '__proto__', "unknown field '__proto__'");
    const e = errorsOf(parseConfig(`__proto__: {hashSeed: 1}\n${LAB_TEXT}`, 'x'));
    expect(e.map((x) => x.path)).toEqual(['__proto__']);
  });

  it('a wrong-typed section does not cascade', () => {
    expectOneError(
      mutated((c) => (c.nics = 'h1vm1')),
      'nics',
      'must be a list',
    );
  });

  it('an invalid name is reported once, not again where it is used', () => {
    expectOneError(
      mutated((c) => (c.networks[0].name = 'Tenant-A') && c.nics.forEach((n: Raw) => (n.network = 'Tenant-A'))),
      'networks[0].name',
      'must be a name',
    );
  });
});

describe('all at once', () => {
  it('reports every mistake of a broken config, each with its line', () => {
    const text = `
version: 2
hashSeed: "0x10"
maglevTableSize: 65536
fabric:
  mtu: 1000
  vxlanport: 4789
networks:
  - name: Tenant_A
    vni: 0
    gateway: 2001:db8::1
  - name: tenant-b
    vni: 5001
    gateway: 192.0.2.10
muxes:
  - name: mux1
    address: 198.18.0.11
hosts:
  - name: host1
    address: 198.18.0.11
nics:
  - name: h1vm1
    host: host1
    network: tenant-b
    mac: 01:00:5e:00:00:01
    addresses: [192.0.2.10]
  - name: h1vm2
    host: hots1
    network: tenant-b
    mac: 02:00:00:00:00:02
    addresses: [192.0.2.10, 192.0.2.11]
  - name: h1vm3
    host: host1
    network: tenant-b
    port: h1vm1
    mac: 02:00:00:00:00:03
    addresses: [2001:db8:d::13]
probes:
  - name: p1
    protocol: tcp
    port: "80"
    path: /x
    intervalMs: 1000
    timeoutMs: 3000
pools:
  - name: web
    backends:
      - nic: h1vm1
        weigth: 5
      - nic: h1vm3
        weight: 0
        enabled: yes
vips:
  - address: 203.0.113.10
    rules:
      - protocol: tcp
        frontendPort: 80
        pool: web
      - protocol: all
        frontendPort: 80
        pool: web
        distribution: 5
      - protocol: tcp
        frontendPort: 8080
        backendPort: 80
        pool: webb
        probe: p2
  - address: 198.18.0.11
    rules: []
`;
    const errors = errorsOf(parseConfig(text, 'bad.yaml'));
    const expected: [number, string][] = [
      [2, 'version'],
      [3, 'hashSeed'],
      [4, 'maglevTableSize'],
      [6, 'fabric.mtu'],
      [7, 'fabric.vxlanport'],
      [9, 'networks[0].name'],
      [10, 'networks[0].vni'],
      [11, 'networks[0].gateway'],
      [14, 'networks[1].gateway'],
      [20, 'hosts[0].address'],
      [25, 'nics[0].mac'],
      [28, 'nics[1].host'],
      [31, 'nics[1].addresses[1]'],
      [35, 'nics[2].port'],
      [41, 'probes[0].port'],
      [42, 'probes[0].path'],
      [44, 'probes[0].timeoutMs'],
      [49, 'pools[0].backends[0].weigth'],
      [51, 'pools[0].backends[1].weight'],
      [52, 'pools[0].backends[1].enabled'],
      [58, 'vips[0].rules[0].pool'],
      [60, 'vips[0].rules[1].frontendPort'],
      [62, 'vips[0].rules[1].distribution'],
      [66, 'vips[0].rules[2].pool'],
      [67, 'vips[0].rules[2].probe'],
      [68, 'vips[1].address'],
      [69, 'vips[1].rules'],
    ];
    expect(
      errors.map((e) => [e.line, e.path]),
      formatConfigErrors(errors, 'bad.yaml'),
    ).toEqual(expected);
    expect(errors).toHaveLength(27);
    // the same object through validateConfig gives the same errors, without positions
    const again = errorsOf(validateConfig(parseYaml(text)));
    expect(again.map((e) => e.path).sort()).toEqual(expected.map(([, p]) => p).sort());
    expect(again.every((e) => e.line === undefined)).toBe(true);
  });
});

describe('error reporting', () => {
  it('formats one line per error: source:line:column: path: message (got VALUE)', () => {
    const text = LAB_TEXT.replace('mtu: 1600', 'mtu: "1600"');
    const errors = errorsOf(parseConfig(text, 'lab.yaml'));
    const line = LAB_TEXT.split('\n').findIndex((l) => l.includes('mtu: 1600')) + 1;
    expect(formatConfigErrors(errors, 'lab.yaml')).toBe(
      `lab.yaml:${line}:8: fabric.mtu: must be an integer 1280..9216; this is a string: write the number without quotes (got "1600")`,
    );
    // without positions (validateConfig), and a missing value prints no "(got ...)"
    const e2 = errorsOf(validateConfig(mutated((c) => delete c.vips[0].rules[0].pool)));
    expect(formatConfigErrors(e2, 'api')).toMatch(
      /^api: vips\[0\]\.rules\[0\]\.pool: required: the name of a pool \(defined pools: web\)$/,
    );
  });

  it('reports YAML syntax errors with line and column', () => {
    const text = 'version: 1\nnetworks:\n  - name: a\n    vni: 5001: 2\n';
    const errors = errorsOf(parseConfig(text, 'x.yaml'));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]!.line).toBe(4);
    expect(errors[0]!.message).toMatch(/^YAML syntax error at line 4, column \d+: /);
    expect(formatConfigErrors(errors, 'x.yaml')).toMatch(/^x\.yaml:4:\d+: YAML syntax error at line 4/);
    const tab = errorsOf(parseConfig('networks:\n\t- name: a\n', 'x.yaml'));
    expect(tab[0]).toMatchObject({ line: 2, column: 1 });
  });

  it('unknown keys: did you mean, and the allowed list', () => {
    const e = expectOneError(
      mutated((c) => (c.nics[0].adresses = c.nics[0].addresses)),
      'nics[0].adresses',
      "unknown field 'adresses' (did you mean 'addresses'?); allowed: name, host, network, port, mac, addresses",
    );
    expect(e.value).toEqual(['192.0.2.10', '2001:db8:d::10']);
    // no suggestion when nothing is close
    expect(
      expectOneError(
        mutated((c) => (c.fabric.colour = 'blue')),
        'fabric.colour',
        'allowed: mtu, vxlanPort',
      ).message,
    ).not.toContain('did you mean');
  });

  it('points unknown keys at the key and missing keys at their mapping', () => {
    const text = LAB_TEXT.replace('    vni: 5001', '    vnid: 5001');
    const line = LAB_TEXT.split('\n').findIndex((l) => l.startsWith('    vni: 5001')) + 1;
    const errors = errorsOf(parseConfig(text, 'x'));
    expect(errors.map((e) => [e.path, e.line, e.column])).toEqual([
      ['networks[0].vni', line - 1, 5], // where the mapping without vni starts
      ['networks[0].vnid', line, 5],
    ]);
    expect(errors[0]!.message).toContain('required');
  });

  it('quoted numbers and YAML 1.1 booleans get a hint', () => {
    expect(
      expectOneError(
        mutated((c) => (c.vips[0].rules[0].frontendPort = '80')),
        'vips[0].rules[0].frontendPort',
        'without quotes',
      ).value,
    ).toBe('80');
    expectOneError(
      mutated((c) => (c.pools[0].backends[0].drain = 'no')),
      'pools[0].backends[0].drain',
      'YAML 1.2 reads yes/no/on/off as strings',
    );
  });

  it('values in messages are short and one line', () => {
    const e = expectOneError(
      mutated((c) => (c.fabric = { mtu: 'x'.repeat(500) + '\n' })),
      'fabric.mtu',
      'integer',
    );
    const line = formatConfigErrors([e], 's');
    expect(line).not.toContain('\n');
    expect(line.length).toBeLessThan(200);
  });
});

describe('normalization', () => {
  it("'all' expands to TCP and UDP", () => {
    const raw = minimal();
    raw.vips[0].rules = [{ protocol: 'all', frontendPort: 53, pool: 'p', distribution: '2-tuple' }];
    const r = okConfig(validateConfig(raw)).vips[0]!.rules[0]!;
    expect(r).toMatchObject({ name: 'all-53', protocol: 'all', protocols: [6, 17], backendPort: 53, distribution: 2 });
    raw.vips[0].rules = [
      { protocol: 'tcp', frontendPort: 53, pool: 'p', distribution: '3-tuple' },
      { protocol: 'udp', frontendPort: 53, pool: 'p' },
    ];
    const c = okConfig(validateConfig(raw));
    expect(c.vips[0]!.rules.map((x) => [x.name, x.protocols, x.distribution])).toEqual([
      ['tcp-53', [6], 3],
      ['udp-53', [17], 5],
    ]);
  });

  it('canonicalizes IPv6 and MAC forms', () => {
    const raw = minimal();
    raw.nics[0].addresses = ['2001:DB8:0:0::10', '192.0.2.10'];
    raw.nics[0].mac = '02-00-C0-00-02-0A';
    raw.vips[0].address = '2001:DB8:00FF:0000:0000:0000:0000:0010';
    raw.muxes[0].address6 = '2001:db8:f:0:0:0:0:11';
    const c = okConfig(validateConfig(raw));
    expect(c.nics[0]!.addresses.map((a) => a.text)).toEqual(['192.0.2.10', '2001:db8::10']); // IPv4 first
    expect(c.nics[0]!.address6?.text).toBe('2001:db8::10');
    expect(c.nics[0]!.address6?.words).toEqual(Uint32Array.of(0x20010db8, 0, 0, 0x10));
    expect(formatMac(c.nics[0]!.mac)).toBe('02:00:c0:00:02:0a');
    expect(c.vips[0]!.address.text).toBe('2001:db8:ff::10');
    expect(c.muxes[0]!.address6?.text).toBe('2001:db8:f::11');
  });

  it('accepts YAML hex and octal integers', () => {
    const c = okConfig(
      parseConfig(LAB_TEXT.replace('hashSeed: 0x736c6278', 'hashSeed: 0xffffffff').replace('vxlanPort: 4789', 'vxlanPort: 0o11265')),
    );
    expect(c.hashSeed).toBe(0xffffffff);
    expect(c.fabric.vxlanPort).toBe(4789);
  });

  it('a tenant address space may overlap another tenant and the fabric', () => {
    const raw = lab();
    raw.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
    raw.nics.push({ name: 'b1', host: 'host1', network: 'tenant-b', mac: '02:00:c0:00:02:0a', addresses: ['192.0.2.10'] });
    raw.pools.push({ name: 'b', backends: [{ nic: 'b1' }] });
    raw.vips.push({ address: '203.0.113.20', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'b' }] });
    const c = okConfig(validateConfig(raw));
    expect(c.pools[1]!.network).toBe('tenant-b');
  });
});

describe('serializeConfig', () => {
  it('round trips the lab', () => {
    const c = okConfig(parseConfig(LAB_TEXT));
    const text = serializeConfig(c);
    const again = okConfig(parseConfig(text, 'serialized'));
    expect(again).toEqual(c);
    expect(serializeConfig(again)).toBe(text);
    expect(text).toContain('hashSeed: 0x736c6278');
    expect(text).toContain('mac: 02:00:c0:00:02:0a');
    expect(text).toContain('addresses: [192.0.2.10, 2001:db8:d::10]');
  });

  it('round trips an IPv6 underlay', () => {
    const raw = lab();
    raw.fabric.underlay = 'ipv6';
    const c = okConfig(validateConfig(raw));
    expect(c.fabric.underlay).toBe('ipv6');
    expect(okConfig(parseConfig(serializeConfig(c)))).toEqual(c);
  });

  it('round trips nulls, odd names and every non-default value', () => {
    const raw = minimal();
    Object.assign(raw, {
      hashSeed: 0,
      maglevTableSize: 7,
      fabric: { mtu: 9216, vxlanPort: 8472 },
      flowTable: { maxFlows: 1, tcpIdleTimeoutS: 86400, udpIdleTimeoutS: 1, otherIdleTimeoutS: 2 },
      probes: [
        { name: 'true', protocol: 'tcp', port: 1, intervalMs: 3600000, timeoutMs: 10, upThreshold: 100, downThreshold: 1 },
        { name: '123', protocol: 'http', port: 65535, path: '/a?b=c&d=%20#x', intervalMs: 100 },
      ],
    });
    raw.networks[0].name = 'null';
    raw.networks[0].gateway6 = '2001:db8::1';
    raw.nics[0].network = 'null';
    raw.nics[0].port = 'eth0:1'.replace(':', '.');
    raw.nics[0].addresses = ['2001:db8::10'];
    raw.pools[0].latencySensitivityMs = 10000;
    raw.pools[0].backends[0] = { nic: 'n1', priority: 5, weight: 1000, enabled: false, drain: true };
    raw.vips = [
      {
        address: '2001:db8:ff::1',
        rules: [{ name: '0', protocol: 'all', frontendPort: 65535, backendPort: 1, pool: 'p', distribution: '2-tuple', probe: '123' }],
      },
    ];
    const c = okConfig(validateConfig(raw));
    const again = okConfig(parseConfig(serializeConfig(c)));
    expect(again).toEqual(c);
    expect(again.nics[0]!.address4).toBeNull();
    expect(again.networks[0]!.gateway).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------
// Random inputs: validation never throws, and says either ok or why not.

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0; // mulberry32
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KEYS = [
  'name',
  'vni',
  'address',
  'address6',
  'nic',
  'pool',
  'rules',
  'backends',
  'weight',
  'port',
  'mac',
  'addresses',
  'protocol',
  'x',
  '__proto__',
  'constructor',
  'toString',
  '',
];
const STRINGS = [
  '',
  'web',
  'tenant-a',
  'h1vm1',
  'tcp',
  'all',
  '5-tuple',
  '192.0.2.10',
  '2001:db8:d::10',
  '::',
  '02:00:c0:00:02:0a',
  '80',
  '\u0000',
  'é'.repeat(20),
  '/health',
];

function randomValue(r: () => number, depth: number): unknown {
  const k = Math.floor(r() * (depth > 3 ? 7 : 10));
  switch (k) {
    case 0:
      return null;
    case 1:
      return r() < 0.5;
    case 2:
      return [0, 1, -1, 80, 65536, 2 ** 32, 1.5, NaN, Infinity, -0, 5001, 7][Math.floor(r() * 12)];
    case 3:
      return STRINGS[Math.floor(r() * STRINGS.length)];
    case 4:
      return undefined;
    case 5:
      return Math.floor(r() * 100000);
    case 6:
      return String(Math.floor(r() * 1000));
    case 7: {
      const n = Math.floor(r() * 4);
      return Array.from({ length: n }, () => randomValue(r, depth + 1));
    }
    default: {
      const o: Record<string, unknown> = {};
      const n = Math.floor(r() * 5);
      for (let i = 0; i < n; i++) o[KEYS[Math.floor(r() * KEYS.length)]!] = randomValue(r, depth + 1);
      return o;
    }
  }
}

/** Replaces, deletes or adds one thing somewhere in the tree. */
function mutate(root: Raw, r: () => number): Raw {
  let node = root;
  for (let d = 0; d < 6; d++) {
    const keys = node !== null && typeof node === 'object' ? Object.keys(node) : [];
    if (keys.length === 0) break;
    const key = keys[Math.floor(r() * keys.length)]!;
    const child = node[key];
    const stop = r() < 0.3 || child === null || typeof child !== 'object';
    if (!stop) {
      node = child;
      continue;
    }
    const op = r();
    if (op < 0.5) node[key] = randomValue(r, 2);
    else if (op < 0.7) {
      // (copyWithin, not splice: splice builds its result from node.constructor, which a mutation may have replaced)
      if (Array.isArray(node) && /^\d+$/.test(key)) {
        node.copyWithin(Number(key), Number(key) + 1);
        node.length -= 1;
      } else delete node[key];
    } else if (op < 0.85 && Array.isArray(node)) node.push(structuredClone(node[Number(key)]));
    else node[KEYS[Math.floor(r() * KEYS.length)]!] = randomValue(r, 2);
    break;
  }
  return root;
}

describe('random input', () => {
  // The 10,000 inputs come from one seed in one order (the same inputs as when one test judged them all),
  // judged 500 to a test: validateConfig on each, and for the first 200 accepted a YAML round trip (~3 ms
  // of the yaml library each). In one test that was 3 s idle and 33 s at load 20, past the 60 s limit at 30;
  // 1,000 to a test still took 8-34 s each at load 33 (the round trips fall in the first 4,000).
  // A test that starts later in the order (a -t filter, an earlier chunk that failed) makes the inputs
  // before its own first, so input i is always the same.
  const gen = { r: rng(0x736c6278), base: lab(), next: 0 };
  const inputAt = (i: number): Raw => {
    if (i < gen.next) throw new Error(`input ${i} asked for after input ${gen.next - 1}: the chunks run in order`);
    let raw: Raw;
    do {
      if (gen.next++ % 4 === 0) raw = randomValue(gen.r, 0);
      else {
        raw = structuredClone(gen.base);
        const n = 1 + Math.floor(gen.r() * 4);
        for (let j = 0; j < n; j++) raw = mutate(raw, gen.r);
      }
    } while (gen.next <= i);
    return raw;
  };
  let judged = 0;
  let accepted = 0;
  it.each(Array.from({ length: 20 }, (_, k) => k * 500))(
    '10,000 random objects and mutated lab configs never throw: inputs %i.. (500 of 10,000)',
    (from) => {
      for (let i = from; i < from + 500; i++) {
        const raw = inputAt(i);
        let res: ConfigResult;
        try {
          res = validateConfig(raw);
        } catch (e) {
          throw new Error(`validateConfig threw on input ${i}: ${String(e)}\n${JSON.stringify(raw)}`);
        }
        // plain checks in the loop (expect() per iteration would dominate the run time)
        const fail = (why: string): never => {
          throw new Error(`input ${i}: ${why}\n${JSON.stringify(raw)}`);
        };
        if (res.ok) {
          accepted++;
          // whatever it accepts it can write and read back (toEqual only to report a difference: it took
          // most of the round trip's time, isDeepStrictEqual implies it)
          if (accepted <= 200) {
            const back = okConfig(parseConfig(serializeConfig(res.config)));
            if (!isDeepStrictEqual(back, res.config)) expect(back, `input ${i}, read back`).toEqual(res.config);
          }
        } else {
          if (res.errors.length === 0) fail('not ok, but no errors');
          for (const e of res.errors) {
            if (typeof e.path !== 'string' || typeof e.message !== 'string' || e.message.length === 0)
              fail(`malformed error ${JSON.stringify(e)}`);
            if (e.message.includes('internal error')) fail(e.message);
          }
          if (formatConfigErrors(res.errors, 'fuzz').split('\n').length !== res.errors.length) fail('an error message spans lines');
        }
        judged++;
      }
    },
  );
  it('of the 10,000, some are accepted and some refused', () => {
    expect(judged, 'inputs judged by the tests above (all of them must have run)').toBe(10_000);
    // some mutations are harmless (a default written out, a backend list duplicated onto itself is not)
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(10_000);
  });

  // The 1,000 texts (1..5 characters replaced, deleted or inserted), made up front from one seed (the same
  // texts as when one test checked them all), checked 100 to a test: each costs one YAML parse (about 3 ms
  // of the yaml library on this 6 KB file, 80 % of parseConfig's time), 3-4 s for all when the machine is
  // idle, past the 60 s limit of one test at load averages of 15-30 (and 6 s for 250 at load 10).
  const corrupted = (() => {
    const r = rng(42);
    const chars = [' ', '\n', ':', '-', '[', ']', '{', '}', '"', "'", '#', '&', '*', '!', '|', '>', '\t', 'x', '0', '%'];
    return Array.from({ length: 1_000 }, () => {
      const t = LAB_TEXT.split('');
      const n = 1 + Math.floor(r() * 5);
      for (let j = 0; j < n; j++) {
        const at = Math.floor(r() * t.length);
        const op = r();
        if (op < 0.4) t[at] = chars[Math.floor(r() * chars.length)]!;
        else if (op < 0.7) t.splice(at, 1);
        else t.splice(at, 0, chars[Math.floor(r() * chars.length)]!);
      }
      return t.join('');
    });
  })();
  it.each(Array.from({ length: 10 }, (_, k) => k * 100))('1,000 corrupted YAML texts never throw: texts %i.. (100 of 1,000)', (from) => {
    for (let i = from; i < from + 100; i++) {
      const text = corrupted[i]!;
      let res: ConfigResult;
      try {
        res = parseConfig(text, 'fuzz.yaml');
      } catch (e) {
        throw new Error(`parseConfig threw on text ${i}: ${String(e)}\n${text}`);
      }
      if (!res.ok && (res.errors.length === 0 || res.errors.some((e) => e.message.includes('internal error')))) {
        throw new Error(`text ${i}: ${formatConfigErrors(res.errors, 'fuzz')}\n${text}`);
      }
    }
  });
});

describe('docs/config.md', () => {
  const doc = readFileSync(new URL('../docs/config.md', import.meta.url), 'utf8');
  const blocks = [...doc.matchAll(/```(\w*)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, body: m[2]! }));

  it('the error output pasted in the docs is the real output', () => {
    const at = blocks.findIndex((b) => b.lang === 'yaml' && b.body.startsWith('hashSeed: "0x736c6278"'));
    expect(at).toBeGreaterThanOrEqual(0);
    const errors = errorsOf(parseConfig(blocks[at]!.body, 'broken.yaml'));
    expect(`${formatConfigErrors(errors, 'broken.yaml')}\n`).toBe(blocks[at + 1]!.body);
    const syntax = blocks.findIndex((b) => b.lang === 'yaml' && b.body.includes('   gateway: 192.0.2.1'));
    expect(`${formatConfigErrors(errorsOf(parseConfig(blocks[syntax]!.body, 'syntax.yaml')), 'syntax.yaml')}\n`).toBe(
      blocks[syntax + 1]!.body,
    );
  });

  it('the short example is the lab', () => {
    const example = blocks.find((b) => b.lang === 'yaml' && b.body.startsWith('version: 1'));
    expect(okConfig(parseConfig(example!.body))).toEqual(okConfig(parseConfig(LAB_TEXT)));
  });

  it('the summary shown is the real one', () => {
    expect(doc).toContain(
      configSummary(okConfig(parseConfig(LAB_TEXT)))
        .split('\n')
        .map((l) => `  ${l}`)
        .join('\n'),
    );
  });

  it('merge keys are unknown fields, as documented', () => {
    const text = LAB_TEXT.replace('fabric:\n', 'x: &f {mtu: 1600}\nfabric:\n  <<: *f\n');
    expect(errorsOf(parseConfig(text)).map((e) => e.path)).toEqual(['x', 'fabric["<<"]']);
  });
});

describe('bgp (docs/config.md, docs/bgp.md)', () => {
  it('the lab has it; absent or null means no BGP; defaults fill the rest', () => {
    const c = okConfig(parseConfig(LAB_TEXT));
    expect(c.bgp).toMatchObject({
      asn: 65001,
      holdTimeS: 3,
      keepaliveS: 1,
      reconnectMinMs: 500,
      reconnectMaxMs: 8000,
      shutdownGraceMs: 300,
      bfd: { enabled: false, intervalMs: 100, multiplier: 3 },
    });
    expect(c.bgp!.peers.map((p) => [p.address.text, p.asn, p.port])).toEqual([['198.18.0.1', 65000, 179]]);
    expect(okConfig(validateConfig(minimal())).bgp).toBeNull();
    expect(okConfig(validateConfig({ ...minimal(), bgp: null })).bgp).toBeNull();
    const d = okConfig(validateConfig({ ...minimal(), bgp: { asn: 64512, peers: [{ address: '198.18.0.1', asn: 64513 }], bfd: null } }));
    expect(d.bgp).toMatchObject({ holdTimeS: CONFIG_DEFAULTS.bgp.holdTimeS, keepaliveS: 3, bfd: CONFIG_DEFAULTS.bgp.bfd });
    expect(
      okConfig(validateConfig({ ...minimal(), bgp: { asn: 64512, holdTimeS: 0, peers: [{ address: '198.18.0.1', asn: 64513 }] } })).bgp!
        .holdTimeS,
    ).toBe(0);
  });

  it('round trips through serializeConfig', () => {
    const c = okConfig(
      validateConfig({
        ...minimal(),
        bgp: {
          asn: 4200000001,
          holdTimeS: 30,
          keepaliveS: 10,
          shutdownGraceMs: 0,
          peers: [{ address: '198.18.0.1', asn: 64513, port: 1179 }],
          bfd: { enabled: true, intervalMs: 50, multiplier: 5 },
        },
      }),
    );
    expect(okConfig(parseConfig(serializeConfig(c)))).toEqual(c);
  });

  const bgp = (b: Raw) => ({ ...minimal(), bgp: { asn: 65001, peers: [{ address: '198.18.0.1', asn: 65000 }], ...b } });
  test.each([
    ['asn missing', { asn: undefined }, 'bgp.asn', 'required: an integer 1..4294967294'],
    ['asn AS_TRANS', { asn: 23456 }, 'bgp.asn', 'AS_TRANS'],
    ['asn 65535', { asn: 65535 }, 'bgp.asn', 'RFC 7300'],
    ['asn as a string', { asn: '65001' }, 'bgp.asn', 'write the number without quotes'],
    ['hold time 2', { holdTimeS: 2 }, 'bgp.holdTimeS', 'must be 0 or at least 3 seconds'],
    ['keepalive beyond a third of the hold time', { holdTimeS: 3, keepaliveS: 2 }, 'bgp.keepaliveS', 'at most a third of holdTimeS'],
    ['reconnect max below min', { reconnectMinMs: 5000, reconnectMaxMs: 1000 }, 'bgp.reconnectMaxMs', 'at least reconnectMinMs'],
    ['grace too long', { shutdownGraceMs: 70000 }, 'bgp.shutdownGraceMs', 'must be an integer 0..60000'],
    ['no peers', { peers: [] }, 'bgp.peers', 'at least one'],
    ['a peer without an address', { peers: [{ asn: 65000 }] }, 'bgp.peers[0].address', 'required'],
    ['a peer that is a mux', { peers: [{ address: '198.18.0.11', asn: 65000 }] }, 'bgp.peers[0].address', 'the provider address of mux m'],
    ['a peer that is the VIP', { peers: [{ address: '203.0.113.10', asn: 65000 }] }, 'bgp.peers[0].address', 'is a VIP'],
    [
      'an IPv6 peer while a mux has no address6',
      { peers: [{ address: '2001:db8:f::1', asn: 65000 }] },
      'bgp.peers[0].address',
      'needs every mux to have an IPv6 provider address',
    ],
    ['a typo', { holdTime: 3 }, 'bgp.holdTime', "did you mean 'holdTimeS'?"],
    ['bfd enabled: yes', { bfd: { enabled: 'yes' } }, 'bgp.bfd.enabled', 'write true or false'],
    ['bfd interval 5 ms', { bfd: { intervalMs: 5 } }, 'bgp.bfd.intervalMs', 'must be an integer 10..10000'],
  ] as [string, Raw, string, string][])('%s', (_what, edit, path, fragment) => {
    const raw = bgp(edit);
    for (const [k, v] of Object.entries(edit)) if (v === undefined) delete raw.bgp[k];
    expectOneError(raw, path, fragment);
  });

  it('lists every bgp problem at once, with positions', () => {
    const text = `${LAB_TEXT.split('\nbgp:')[0]}\nbgp:\n  asn: 23456\n  holdTimeS: 2\n  peers:\n    - { address: 198.18.0.1, asn: 0, prot: 1 }\n`;
    const errors = errorsOf(parseConfig(text, 'b.yaml'));
    expect(errors.map((e) => e.path)).toEqual(['bgp.asn', 'bgp.holdTimeS', 'bgp.peers[0].asn', 'bgp.peers[0].prot']);
    expect(errors.every((e) => e.line !== undefined)).toBe(true);
  });
});

describe('vipRanges (docs/config.md)', () => {
  const withRanges = (ranges: unknown, edit?: (c: Raw) => void): Raw => {
    const raw = minimal();
    raw.vipRanges = ranges;
    edit?.(raw);
    return raw;
  };

  it("the lab declares 203.0.113.0/24 and 2001:db8:ff::/48; absent, the VIPs' own host routes, written out", () => {
    expect(okConfig(parseConfig(LAB_TEXT)).vipRanges.map((r) => r.text)).toEqual(['203.0.113.0/24', '2001:db8:ff::/48']);
    const raw = minimal();
    raw.vips.push({ address: '2001:DB8:FF:0::10', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'p6' }] });
    raw.nics[0].addresses.push('2001:db8:d::10');
    raw.pools.push({ name: 'p6', backends: [{ nic: 'n1' }] });
    const c = okConfig(validateConfig(raw));
    expect(c.vipRanges.map((r) => [r.text, r.prefixLen])).toEqual([
      ['203.0.113.10/32', 32],
      ['2001:db8:ff::10/128', 128],
    ]);
    expect(okConfig(validateConfig({ ...minimal(), vipRanges: null })).vipRanges.map((r) => r.text)).toEqual(['203.0.113.10/32']);
    // written out, so a controller seeded from it keeps them (a VIP added later needs a declared range)
    const y = serializeConfig(c);
    expect(y).toMatch(/\nvipRanges:\n {2}- 203\.0\.113\.10\/32\n {2}- 2001:db8:ff::10\/128\n/);
    expect(okConfig(parseConfig(y))).toEqual(c);
    const grown = parseYaml(y) as Raw;
    grown.vips.push({ address: '203.0.113.11', rules: [{ protocol: 'udp', frontendPort: 53, pool: 'p' }] });
    expectOneError(grown, 'vips[2].address', 'VIP 203.0.113.11 is outside vipRanges (203.0.113.10/32, 2001:db8:ff::10/128)');
  });

  it('a VIP inside a range is accepted at both edges, one outside is refused with the ranges and the fix', () => {
    // boundaries worked out by hand: 203.0.113.128/25 is .128-.255; 2001:db8:8000::/33 starts where bit 32 is set
    for (const vip of ['203.0.113.128', '203.0.113.255'])
      expect(validateConfig(withRanges(['203.0.113.128/25'], (c) => (c.vips[0].address = vip))).ok).toBe(true);
    const e = expectOneError(
      withRanges(['203.0.113.128/25'], (c) => (c.vips[0].address = '203.0.113.127')),
      'vips[0].address',
      'VIP 203.0.113.127 is outside vipRanges (203.0.113.128/25)',
    );
    expect(e.message).toContain('take an address inside one, or add a prefix that holds it to vipRanges');
    const six = (vip: string) =>
      withRanges(['203.0.113.0/24', '2001:db8:8000::/33'], (c) => {
        c.nics[0].addresses.push('2001:db8:d::10');
        c.pools.push({ name: 'p6', backends: [{ nic: 'n1' }] });
        c.vips.push({ address: vip, rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'p6' }] });
      });
    expect(validateConfig(six('2001:db8:8000::1')).ok).toBe(true);
    expect(validateConfig(six('2001:db8:ffff:ffff::1')).ok).toBe(true);
    expectOneError(six('2001:db8:7fff:ffff::1'), 'vips[1].address', 'is outside vipRanges (203.0.113.0/24, 2001:db8:8000::/33)');
    // a range of the other family does not hold it
    expectOneError(withRanges(['2001:db8:ff::/48']), 'vips[0].address', 'outside vipRanges');
  });

  test.each([
    ['not a list', '203.0.113.0/24', 'vipRanges', 'must be a list of prefixes'],
    ['empty', [], 'vipRanges', 'at least one'],
    ['no length', ['203.0.113.0'], 'vipRanges[0]', 'must be a prefix ADDRESS/LENGTH'],
    ['host bits set', ['203.0.113.1/24'], 'vipRanges[0]', 'has host bits set: write 203.0.113.0/24'],
    ['IPv6 host bits set', ['203.0.113.0/24', '2001:db8:ff::1/48'], 'vipRanges[1]', 'write 2001:db8:ff::/48'],
    ['length 0', ['0.0.0.0/0'], 'vipRanges[0]', 'the length must be 1..32'],
    ['length 33', ['203.0.113.0/33'], 'vipRanges[0]', 'the length must be 1..32'],
    ['a number', [24], 'vipRanges[0]', 'must be a prefix written as a string'],
    ['multicast', ['203.0.113.0/24', '224.0.0.0/4'], 'vipRanges[1]', 'is a multicast address'],
    ['twice', ['203.0.113.0/24', '203.0.113.0/24'], 'vipRanges[1]', 'is already vipRanges[0]'],
    [
      'holds the fabric',
      ['203.0.113.0/24', '198.18.0.0/24'],
      'vipRanges[1]',
      'holds the provider addresses 198.18.0.11 (m), 198.18.0.21 (h)',
    ],
  ] as [string, unknown, string, string][])('refused: %s', (_what, ranges, path, fragment) => {
    expectOneError(withRanges(ranges), path, fragment);
  });

  it('a BGP peer inside a range is refused; overlapping ranges and canonical forms are fine', () => {
    expectOneError(
      withRanges(['203.0.113.0/24'], (c) => (c.bgp = { asn: 65001, peers: [{ address: '203.0.113.1', asn: 65000 }] })),
      'bgp.peers[0].address',
      'is inside vipRanges (203.0.113.0/24)',
    );
    const c = okConfig(validateConfig(withRanges(['203.0.113.0/24', '203.0.113.10/32', '2001:DB8:FF:0::/48'])));
    expect(c.vipRanges.map((r) => r.text)).toEqual(['203.0.113.0/24', '203.0.113.10/32', '2001:db8:ff::/48']);
  });

  it('parseVipRange and inVipRange', () => {
    const r = parseVipRange('198.51.100.64/26');
    if (typeof r === 'string') throw new Error(r);
    expect([r.text, r.prefixLen, r.network.text]).toEqual(['198.51.100.64/26', 26, '198.51.100.64']);
    const inside = (a: string) => inVipRange(parseIpAddr(a)!, r);
    expect(['198.51.100.64', '198.51.100.127'].map(inside)).toEqual([true, true]);
    expect(['198.51.100.63', '198.51.100.128', '2001:db8::1'].map(inside)).toEqual([false, false, false]);
    expect(inVipRange(parseIpAddr('203.0.113.10')!, hostVipRange(parseIpAddr('203.0.113.10')!))).toBe(true);
    expect(inVipRange(parseIpAddr('203.0.113.11')!, hostVipRange(parseIpAddr('203.0.113.10')!))).toBe(false);
  });
});

// The seed: "one active SLB manager supports eight MUX instances". 8 is written here from that text,
// not read from the code's constant.
describe('at most eight MUXes per controller', () => {
  const withMuxes = (n: number): Raw => {
    const c = minimal();
    c.muxes = Array.from({ length: n }, (_, i) => ({ name: `mux${i + 1}`, address: `198.18.0.${101 + i}` }));
    return c;
  };
  it('eight are accepted', () => {
    expect(okConfig(validateConfig(withMuxes(8))).muxes.map((m) => m.name)).toEqual([
      'mux1',
      'mux2',
      'mux3',
      'mux4',
      'mux5',
      'mux6',
      'mux7',
      'mux8',
    ]);
  });
  it('a ninth is refused, at the ninth, naming the limit and the fix', () => {
    const e = expectOneError(withMuxes(9), 'muxes[8]', 'one controller supports at most 8 MUXes');
    expect(e.message).toContain('this config lists 9');
    expect(e.message).toContain('remove mux9 from muxes, or run it under a second controller');
  });
  it('every MUX beyond eight is named, in one error', () => {
    expectOneError(withMuxes(10), 'muxes[8]', 'remove mux9, mux10 from muxes, or run them under');
  });
  it('with its line in a YAML file', () => {
    const text = LAB_TEXT.replace(
      /^muxes:\n/m,
      `muxes:\n${Array.from({ length: 7 }, (_, i) => `  - { name: extra${i}, address: 198.18.0.${121 + i} }\n`).join('')}`,
    );
    const errors = errorsOf(parseConfig(text, 'nine.yaml'));
    expect(errors.map((e) => e.path)).toEqual(['muxes[8]']);
    expect(formatConfigErrors(errors, 'nine.yaml')).toMatch(/^nine\.yaml:\d+:\d+: muxes\[8\]: one controller supports at most 8 MUXes/);
  });
});
