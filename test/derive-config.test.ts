// Config variants of the lab (scripts/lab/derive-config.ts): each option changes exactly its field, the
// output parses with shared/config, comments stay, and a bad value is refused naming the option or field.
// The expected config is the lab's own, edited as a plain object (test/helpers/lab-config.ts), not the
// deriver's output.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { parseConfig } from '../shared/config.js';
import { parseArgs, UsageError } from '../shared/args.js';
import { commandHelp } from '../runtime/command.js';
import { COMMAND, deriveConfig, variantOf, type ConfigVariant } from '../scripts/lab/derive-config.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';

const base = readFileSync(LAB_YAML_PATH, 'utf8');

function derived(v: ConfigVariant) {
  const r = deriveConfig(base, v, 'lab.yaml');
  if ('error' in r) throw new Error(r.error);
  const c = parseConfig(r.text, 'derived');
  if (!c.ok) throw new Error(JSON.stringify(c.errors));
  return { text: r.text, config: c.config };
}

describe('derive-config variants', () => {
  it('--underlay ipv6: fabric.underlay only (scenarios 14 and 24)', () => {
    const d = derived({ underlay: 'ipv6' });
    expect(labConfig().fabric.underlay).toBe('ipv4');
    expect(d.config.fabric.underlay).toBe('ipv6');
    expect(d.config).toEqual(labConfig((raw) => (raw.fabric.underlay = 'ipv6')));
    expect(d.text).toContain('# IANA');
    expect(d.text.split('\n')[0]).toBe('# derived by scripts/lab/derive-config.ts from lab.yaml: fabric.underlay ipv6');
  });

  it('--east-west: a client nic in no pool and the two internal VIPs, nothing else (scenarios 25 and 27)', () => {
    const d = derived({ eastWest: true });
    const want = labConfig((raw) => {
      raw.nics.push({
        name: 'h1cl1',
        host: 'host1',
        network: 'tenant-a',
        port: 'h1cl1',
        mac: '02:00:c0:00:02:14',
        addresses: ['198.19.1.20', '2001:db8:e:1::20'],
      });
      const rules = [
        { name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, backendPort: 7000, pool: 'web' },
        { name: 'ew-udp', protocol: 'udp', frontendPort: 7001, backendPort: 7001, pool: 'web' },
      ];
      raw.vips.push({ address: '198.19.0.100', scope: 'internal', network: 'tenant-a', rules });
      raw.vips.push({
        address: '2001:db8:e::100',
        scope: 'internal',
        network: 'tenant-a',
        rules: rules.map((r) => ({ ...r, name: `${r.name}6` })),
      });
    });
    expect(d.config).toEqual(want);
    expect(d.config.pools.some((p) => p.backends.some((b) => b.nic === 'h1cl1'))).toBe(false);
  });

  it('--east-west-other-tenant and the idle timeouts (scenario 26): another network, a VM in it with the client addresses', () => {
    const d = derived({ eastWest: true, eastWestOtherTenant: true, tcpIdleTimeoutS: 30, udpIdleTimeoutS: 5 });
    const plain = derived({ eastWest: true }).config;
    const nic = d.config.nics.find((n) => n.name === 'h1ot1')!;
    const client = d.config.nics.find((n) => n.name === 'h1cl1')!;
    expect(nic.host).toBe('host1');
    expect(nic.network).toBe('ew-other');
    expect(nic.address4?.text).toBe('198.19.1.20');
    expect(nic.address6?.text).toBe('2001:db8:e:1::20');
    expect(nic.address4?.text).toBe(client.address4?.text);
    const net = d.config.networks.find((n) => n.name === 'ew-other')!;
    expect(net.vni).toBe(5902);
    expect(net.vni).not.toBe(d.config.networks.find((n) => n.name === 'tenant-a')!.vni);
    expect(d.config.flowTable).toMatchObject({ tcpIdleTimeoutS: 30, udpIdleTimeoutS: 5 });
    expect(d.config.vips).toEqual(plain.vips);
    expect(d.config.pools).toEqual(plain.pools);
    expect(d.config.nics.length).toBe(plain.nics.length + 1);
    expect(deriveConfig(base, { eastWestOtherTenant: true }, 'lab.yaml')).toEqual({
      error: 'lab.yaml: --east-west-other-tenant needs --east-west',
    });
  });

  it("scenario 17's variant: every probe at 5000 ms, small flow tables", () => {
    const d = derived({ probeIntervalMs: 5000, maxFlows: 20000, untrustedMaxFlows: 10000, untrustedTimeoutS: 5 });
    expect(labConfig().probes.map((p) => p.intervalMs)).not.toEqual([5000, 5000]);
    expect(d.config.probes.map((p) => [p.name, p.intervalMs])).toEqual([
      ['http80', 5000],
      ['tcp80', 5000],
    ]);
    expect(d.config.flowTable).toMatchObject({ maxFlows: 20000, untrustedMaxFlows: 10000, untrustedTimeoutS: 5 });
    const want = labConfig((raw) => {
      for (const p of raw.probes) p.intervalMs = 5000;
      raw.flowTable = { maxFlows: 20000, untrustedMaxFlows: 10000, untrustedTimeoutS: 5 };
    });
    expect(d.config).toEqual(want);
    // tcp80 has no intervalMs (its default is 5000): another interval shows that every probe gets it
    expect(derived({ probeIntervalMs: 3000 }).config.probes.map((p) => p.intervalMs)).toEqual([3000, 3000]);
    // the lab's comment on the old interval goes with it
    expect(d.text).not.toContain('faster than the default 5000');
  });

  it('variants combine with --muxes', () => {
    const d = derived({ muxes: 3, underlay: 'ipv6' });
    expect(d.config.muxes.map((m) => m.name)).toEqual(['mux1', 'mux2', 'mux3']);
    expect(d.config.fabric.underlay).toBe('ipv6');
  });

  it('a result the config checker refuses is an error naming the field', () => {
    const r = deriveConfig(base, { maxFlows: 200_000_000 }, 'lab.yaml');
    expect('error' in r && r.error).toMatch(/flowTable\.maxFlows/);
  });
});

describe('derive-config options', () => {
  const variant = (argv: string[]) => variantOf(parseArgs(argv, COMMAND.options));
  it('--help documents each option', () => {
    const help = commandHelp(COMMAND);
    for (const o of [
      'config',
      'muxes',
      'underlay',
      'probe-interval-ms',
      'max-flows',
      'untrusted-max-flows',
      'untrusted-timeout-s',
      'out',
    ]) {
      expect(help).toMatch(new RegExp(`\\n  --${o} `));
    }
  });
  it('reads each option into the variant', () => {
    expect(
      variant([
        '--underlay=ipv6',
        '--probe-interval-ms',
        '5000',
        '--max-flows',
        '20000',
        '--untrusted-max-flows',
        '10000',
        '--untrusted-timeout-s',
        '5',
        '--muxes',
        '2',
      ]),
    ).toEqual({ muxes: 2, underlay: 'ipv6', probeIntervalMs: 5000, maxFlows: 20000, untrustedMaxFlows: 10000, untrustedTimeoutS: 5 });
  });
  it('refuses bad values naming the option', () => {
    expect(() => variant(['--underlay', 'ipv5'])).toThrow(new UsageError('--underlay must be ipv4 or ipv6, got ipv5'));
    expect(() => variant(['--muxes', '9'])).toThrow(/--muxes must be an integer 1\.\.8, got 9/);
    expect(() => variant(['--max-flows', '-3'])).toThrow(/--max-flows/);
    expect(() => variant(['--untrusted-timeout-s', '1.5'])).toThrow(/--untrusted-timeout-s must be an integer/);
  });
});
