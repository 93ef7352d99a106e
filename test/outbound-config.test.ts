// Outbound rules (issue 15, point 1): defaults, Azure's pool-size table, the port-space fit (with the
// shortfall named), references, and the round trip through serializeConfig.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { formatConfigErrors, parseConfig, serializeConfig, validateConfig, type ConfigError, type SlbxConfig } from '../shared/config.js';
import { autoPortsPerNic, usableChunks } from '../shared/config/outbound.js';

const LAB_TEXT = readFileSync(new URL('../examples/lab.yaml', import.meta.url), 'utf8');

function withOutbound(
  outbound: unknown,
  edit?: (raw: any) => void,
): { ok: true; config: SlbxConfig } | { ok: false; errors: ConfigError[] } {
  const raw = parseYaml(LAB_TEXT);
  raw.outbound = outbound;
  edit?.(raw);
  return validateConfig(raw, 'test');
}

function ok(outbound: unknown, edit?: (raw: any) => void): SlbxConfig {
  const r = withOutbound(outbound, edit);
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'test'));
  return r.config;
}

function errs(outbound: unknown, edit?: (raw: any) => void): ConfigError[] {
  const r = withOutbound(outbound, edit);
  if (r.ok) throw new Error('expected errors');
  return r.errors;
}

describe('outbound rules', () => {
  it('a VIP as frontend, the pool served, every default written out', () => {
    const c = ok([{ name: 'web-out', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web' }]);
    expect(c.outbound).toHaveLength(1);
    const r = c.outbound[0]!;
    expect(r.frontendIps.map((a) => a.text)).toEqual(['203.0.113.10', '2001:db8:ff::10']);
    expect(r.nics).toEqual(['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2']);
    // 4 nics: Azure's first row (up to 50 instances: 1,024 each)
    expect([r.portsPerNic, r.portsAuto, r.preallocatedPorts, r.idleTimeoutMin, r.tcpResetOnIdle, r.protocols]).toEqual([
      1024,
      true,
      64,
      4,
      false,
      [6, 17],
    ]);
  });

  it("auto follows Azure's table at each edge (numbers from the issue, not from the code)", () => {
    const rows: [number, number | null][] = [
      [1, 1024],
      [50, 1024],
      [51, 512],
      [100, 512],
      [101, 256],
      [200, 256],
      [201, 128],
      [400, 128],
      [401, 64],
      [800, 64],
      [801, 32],
      [1000, 32],
      [1001, null],
    ];
    for (const [n, ports] of rows) expect([n, autoPortsPerNic(n)]).toEqual([n, ports]);
  });

  it('a dedicated public IP inside vipRanges, listed nics, round trip through YAML', () => {
    const c = ok(
      [
        {
          name: 'out2',
          frontendIps: ['203.0.113.200'],
          nics: ['h1vm1', 'h2vm1'],
          protocol: 'tcp',
          portsPerNic: 4096,
          preallocatedPorts: 128,
          idleTimeoutMin: 30,
          tcpResetOnIdle: true,
        },
      ],
      (raw) => {
        // the nics have IPv6 addresses too: give them a v6 frontend as well
        raw.outbound[0].frontendIps.push('2001:db8:ff::200');
      },
    );
    const again = parseConfig(serializeConfig(c), 'again');
    if (!again.ok) throw new Error(formatConfigErrors(again.errors, 'again'));
    expect(serializeConfig(again.config)).toBe(serializeConfig(c));
    expect(again.config.outbound[0]!.protocols).toEqual([6]);
  });

  it('refuses an allocation that does not fit and says by how much', () => {
    // 4 nics x 16384 = 65536 IPv4 ports; one IP holds 64512 minus the chunks of the VIP's rule ports
    const e = errs([{ name: 'big', frontendIps: ['203.0.113.200', '2001:db8:ff::200'], pool: 'web', portsPerNic: 16384 }]);
    const fit = e.find((x) => x.path === 'outbound[0].portsPerNic');
    expect(fit?.message).toContain(
      '65536 IPv4 ports, but 1 frontend IP(s) hold 64512: 1024 ports too many; give at most 16128 ports per nic',
    );
    // On the VIP itself the chunks holding its rules' ports >= 1024 are not usable: examples/lab.yaml gives
    // 203.0.113.10 the ports 8080 (chunk 8080-8087) and 7002, 7003 (one chunk, 7000-7007): 64512 - 16 = 64496.
    const onVip = errs([{ name: 'big', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web', portsPerNic: 16128 }]);
    expect(onVip.find((x) => x.path === 'outbound[0].portsPerNic')?.message).toContain(
      '64512 IPv4 ports, but 1 frontend IP(s) hold 64496: 16 ports too many',
    );
    const cfg = ok([{ name: 'x', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web' }]);
    expect(usableChunks(cfg, cfg.vips[0]!.address)).not.toContain(8080);
    expect(usableChunks(cfg, cfg.vips[0]!.address)).not.toContain(7000);
    expect(usableChunks(cfg, cfg.vips[0]!.address)).toContain(7008);
  });

  it('names the field and the fix for each bad input', () => {
    const cases: [unknown, string, string][] = [
      [[{ name: 'a', frontendIps: ['198.18.0.21'], pool: 'web' }], 'outbound[0].frontendIps[0]', 'the provider address of host host1'],
      [[{ name: 'a', frontendIps: ['192.0.2.250'], pool: 'web' }], 'outbound[0].frontendIps[0]', 'lies in no vipRanges prefix'],
      [[{ name: 'a', frontendIps: ['203.0.113.10'], pool: 'nope' }], 'outbound[0].pool', 'unknown pool "nope"'],
      [[{ name: 'a', frontendIps: ['203.0.113.10'] }], 'outbound[0]', 'exactly one of pool'],
      [
        [{ name: 'a', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web', portsPerNic: 100 }],
        'outbound[0].portsPerNic',
        'a multiple of 8',
      ],
      [
        [{ name: 'a', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web', idleTimeoutMin: 3 }],
        'outbound[0].idleTimeoutMin',
        'must be an integer 4..100',
      ],
      [
        [{ name: 'a', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web', idleTimeoutMin: 101 }],
        'outbound[0].idleTimeoutMin',
        'must be an integer 4..100',
      ],
      [[{ name: 'a', frontendIps: ['203.0.113.10'], pool: 'web' }], 'outbound[0].frontendIps', 'no IPv6 frontend IP'],
      [
        [{ name: 'a', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web', preallocatedPorts: 2048 }],
        'outbound[0].preallocatedPorts',
        'at most portsPerNic (1024)',
      ],
      [
        [
          { name: 'a', frontendIps: ['203.0.113.10', '2001:db8:ff::10'], pool: 'web' },
          { name: 'b', frontendIps: ['203.0.113.201', '2001:db8:ff::201'], nics: ['h1vm1'] },
        ],
        'outbound[1].nics',
        'nic h1vm1 is already served by outbound[0]',
      ],
      [[{ name: 'a', frontendIps: ['203.0.113.10'], pool: 'web', protcol: 'tcp' }], 'outbound[0].protcol', "did you mean 'protocol'"],
    ];
    for (const [out, path, text] of cases) {
      const e = errs(out);
      const hit = e.find((x) => x.path === path && x.message.includes(text));
      expect(hit, `${path}: ${text}\n got: ${JSON.stringify(e.map((x) => [x.path, x.message]))}`).toBeDefined();
    }
  });

  it('a config without outbound has none (and writes none)', () => {
    const r = validateConfig(parseYaml(LAB_TEXT), 'lab');
    if (!r.ok) throw new Error('lab');
    expect(r.config.outbound).toEqual([]);
    expect(serializeConfig(r.config)).not.toContain('outbound');
  });
});
