// The lab's BGP pieces, without namespaces: the plan's bgp line and its checks, the BIRD configuration
// (scripts/lab/bird-conf.ts; parsed by `bird -p`: without BIRD skipped with the reason, under CI a failure) and the MUX count
// (scripts/lab/derive-config.ts).
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../shared/config.js';
import { buildLabPlan, formatLabPlan } from '../scripts/lab/plan.js';
import { birdConfig, birdProtocolName } from '../scripts/lab/bird-conf.js';
import { deriveConfigText, labMuxes } from '../scripts/lab/derive-config.js';
import { labConfig, LAB_YAML_PATH } from './helpers/lab-config.js';
import { unmet } from './helpers/prerequisite.js';

const planOf = (config = labConfig()) => {
  const r = buildLabPlan(config);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.plan;
};

describe('lab plan with a bgp section', () => {
  it('says who peers with whom, with which timers', () => {
    const p = planOf();
    expect(p.bgp).toEqual({
      muxAsn: 65001,
      routerAsn: 65000,
      holdTimeS: 3,
      keepaliveS: 1,
      bfd: { enabled: false, intervalMs: 100, multiplier: 3 },
      peer4: '198.18.0.1',
      peer6: null,
    });
    expect(formatLabPlan(p)).toContain('\nbgp 65001 65000 3 1 off 100 3 198.18.0.1 -\n');
    expect(
      planOf(
        labConfig((raw) => {
          delete raw.bgp;
        }),
      ).bgp,
    ).toBeNull();
  });

  it('refuses peers that are not the lab router, public or equal ASNs, another port, all at once', () => {
    const r = buildLabPlan(
      labConfig((raw) => {
        raw.bgp.asn = 3320;
        raw.bgp.peers = [
          { address: '198.18.0.2', asn: 3320 },
          { address: '2001:db8:f::1', asn: 65000, port: 1179 },
        ];
      }),
    );
    expect(r.ok).toBe(false);
    const text = r.ok ? '' : r.errors.join('\n');
    expect(text).toMatch(/bgp\.asn: 3320 is not a private 2-octet ASN/);
    expect(text).toMatch(/bgp\.peers\[0\]\.address: 198\.18\.0\.2 is not the lab router \(198\.18\.0\.1 or 2001:db8:f::1\)/);
    expect(text).toMatch(/bgp\.peers\[0\]\.asn: 3320 is the muxes' own AS/);
    expect(text).toMatch(/bgp\.peers\[1\]\.asn: 65000 differs from bgp\.peers\[0\]\.asn/);
    expect(text).toMatch(/bgp\.peers\[1\]\.port: BIRD in the lab listens on 179/);
  });
});

describe('BIRD configuration of the lab router', () => {
  const conf = birdConfig(labConfig(), planOf());
  it('one passive eBGP neighbour per mux, VIP-only import filters, nothing exported, merge paths', () => {
    expect(conf).toContain('router id 198.18.0.1;');
    expect(conf).toMatch(/protocol bgp mux1 from slbx_mux4 \{ neighbor 198\.18\.0\.11 as 65001; \}/);
    expect(conf).toMatch(/protocol bgp mux2 from slbx_mux4 \{ neighbor 198\.18\.0\.12 as 65001; \}/);
    expect(conf).toContain('local 198.18.0.1 as 65000;');
    expect(conf).toContain('passive on;');
    expect(conf).toContain('hold time 3; keepalive time 1;');
    expect(conf).toContain('error wait time 1, 1;');
    expect(conf).toContain('define SLBX_VIP_RANGES4 = [ 203.0.113.0/24{32,32} ];'); // examples/lab.yaml's vipRanges
    expect(conf).toContain('define SLBX_VIP_RANGES6 = [ 2001:db8:ff::/48{128,128} ];');
    expect(conf).toMatch(/ipv4 \{ import filter slbx_vips4; import keep filtered on; export none; \}/);
    expect(conf).toMatch(/ipv6 \{ import filter slbx_vips6; import keep filtered on; export none; \}/);
    expect(conf.match(/merge paths yes/g)).toHaveLength(2);
    expect(conf).not.toContain('bfd');
    expect(birdProtocolName('mux-1', 6)).toBe('mux_1_6');
  });

  it('with BFD: a bfd protocol on the fabric interface and `bfd on` per neighbour; 8 muxes, IPv6 sessions', () => {
    const text = deriveConfigText(readFileSync(LAB_YAML_PATH, 'utf8'), 8);
    if ('error' in text) throw new Error(text.error);
    const r = parseConfig(text.text);
    if (!r.ok) throw new Error('derived config invalid');
    const raw = labConfig((x) => {
      x.muxes = labMuxes(8);
      x.bgp.bfd = { enabled: true, intervalMs: 50, multiplier: 4 };
      x.bgp.peers.push({ address: '2001:db8:f::1', asn: 65000 });
    });
    const c = birdConfig(raw, planOf(raw));
    expect(c).toContain('min rx interval 50 ms; min tx interval 50 ms;');
    expect(c).toContain('multiplier 4;');
    expect(c.match(/bfd on;/g)).toHaveLength(2);
    expect(c.match(/^protocol bgp mux\d from slbx_mux4/gm)).toHaveLength(8);
    expect(c).toMatch(/protocol bgp mux8_6 from slbx_mux6 \{ neighbor 2001:db8:f::18 as 65001; \}/);
    expect(c).toContain('local 2001:db8:f::1 as 65000;');
  });

  const bird = spawnSync('bird', ['--version'], { encoding: 'utf8' });
  const noBird =
    bird.error === undefined
      ? null
      : `BIRD cannot be run (${(bird.error as NodeJS.ErrnoException).code ?? bird.error.message}; apt-get install bird2)`;
  it.skipIf(unmet(noBird, 'bird -p on the generated configuration'))('BIRD itself accepts the configuration (bird -p)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-bird-'));
    try {
      for (const [name, cfg] of [
        ['plain', labConfig()],
        [
          'bfd',
          labConfig((x) => {
            x.bgp.bfd.enabled = true;
          }),
        ],
      ] as const) {
        const f = join(dir, `${name}.conf`);
        writeFileSync(f, birdConfig(cfg, planOf(cfg)));
        const r = spawnSync('bird', ['-p', '-c', f], { encoding: 'utf8' });
        expect(r.status, `${name}: ${r.stderr}`).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('lab MUX count (derive-config)', () => {
  const base = readFileSync(LAB_YAML_PATH, 'utf8');
  it('replaces the muxes with mux1..muxN on 198.18.0.11.. and 2001:db8:f::11.., keeping everything else', () => {
    const r = deriveConfigText(base, 4, 'lab.yaml');
    if ('error' in r) throw new Error(r.error);
    const c = parseConfig(r.text);
    if (!c.ok) throw new Error('invalid');
    expect(c.config.muxes.map((m) => `${m.name} ${m.address.text} ${m.address6?.text}`)).toEqual([
      'mux1 198.18.0.11 2001:db8:f::11',
      'mux2 198.18.0.12 2001:db8:f::12',
      'mux3 198.18.0.13 2001:db8:f::13',
      'mux4 198.18.0.14 2001:db8:f::14',
    ]);
    const orig = labConfig();
    expect({ ...c.config, muxes: [] }).toEqual({ ...orig, muxes: [] });
    expect(r.text).toContain("# The backends' interfaces.");
    expect(planOf(c.config).vips[0]!.nexthops).toEqual(['198.18.0.11', '198.18.0.12', '198.18.0.13', '198.18.0.14']);
  });
  it('1..8 only', () => {
    expect(() => deriveConfigText(base, 9)).toThrow(/1\.\.8/);
    expect(() => deriveConfigText(base, 0)).toThrow(/1\.\.8/);
    const one = deriveConfigText(base, 1);
    expect('text' in one && parseConfig(one.text).ok).toBe(true);
  });
});
