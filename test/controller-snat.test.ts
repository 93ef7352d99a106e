// The controller keeps outbound NAT's allocation in its durable state (issue 15, point 2): seeded with
// the config, grown by demands as new generations, the same after a restart, pushed in the policy; a
// stored allocation with a chunk twice is refused at open.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ControllerState } from '../controller/state.js';
import { toPlainConfig } from '../controller/document.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController } from './helpers/controller.js';
import { runSlbctl } from '../cli/slbctl.js';

let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'slbx-snat-test-'));
});
afterEach(() => {
  rmSync(tmp, { recursive: true, force: true });
});

const OUT = [{ name: 'out', frontendIps: ['203.0.113.200', '2001:db8:ff::200'], pool: 'web', portsPerNic: 256, preallocatedPorts: 64 }];

function open(path: string): ControllerState {
  const r = ControllerState.open(
    path,
    labConfig((raw) => (raw.outbound = OUT)),
  );
  if (!r.ok) throw new Error(r.error);
  return r.state;
}

describe('controller: SNAT allocation in the durable state', () => {
  it('seeded with the preallocation, pushed in the policy, the same after a restart', () => {
    const path = join(tmp, 'state.json');
    const st = open(path);
    const ranges = st.policy().snat!;
    // 4 nics x 64 ports x 2 families, merged per owner: host1 holds h1vm1, h1vm2
    expect(ranges.reduce((n, r) => n + r.last - r.first + 1, 0)).toBe(4 * 64 * 2);
    expect(new Set(st.snatRanges('host1').map((r) => r.nic))).toEqual(new Set(['h1vm1', 'h1vm2']));
    const again = open(path);
    expect(again.policy().snat).toEqual(ranges);
  });

  it('a demand is a new generation, durable: nothing granted is lost across a restart', async () => {
    const path = join(tmp, 'state.json');
    const st = open(path);
    const g = st.generation;
    const r = await st.snatDemandAsync('host2', 'h2vm1', 4, 20);
    expect(r.ok && r.granted.length).toBe(3);
    expect(st.generation).toBe(g + 1);
    const again = open(path);
    expect(again.snatNics().find((n) => n.nic === 'h2vm1')).toMatchObject({ ports4: 64 + 24, ports6: 64, portsPerNic: 256 });
    expect(again.policy().snat).toEqual(st.policy().snat);
    // up to the cap, then refused without a new generation
    await again.snatDemandAsync('host2', 'h2vm1', 4, 1000);
    const g2 = again.generation;
    const full = await again.snatDemandAsync('host2', 'h2vm1', 4, 8);
    expect([full.ok, !full.ok && full.reason, again.generation]).toEqual([false, 'nic_cap', g2]);
    await expect(again.snatDemandAsync('host1', 'h2vm1', 4, 8)).rejects.toThrow(/no nic h2vm1 on host host1/);
  });

  it('a config without the rule takes every chunk back; the policy then has no ranges', () => {
    const path = join(tmp, 'state.json');
    const st = open(path);
    st.replaceConfig(toPlainConfig(labConfig()), 'test');
    expect(st.policy().snat).toEqual([]);
  });

  it('a stored allocation giving one chunk twice is refused at open', () => {
    const path = join(tmp, 'state.json');
    open(path);
    const s = JSON.parse(readFileSync(path, 'utf8'));
    s.snat.chunks.push({ ...s.snat.chunks[0], nic: 'h2vm2', host: 'host2' });
    writeFileSync(path, JSON.stringify(s));
    const r = ControllerState.open(path, null);
    expect(r.ok ? 'opened' : r.error).toMatch(/snat allocation state refused: chunk 2001:db8:ff::200:1024 is listed twice|listed twice/);
  });

  it('API and slbctl snat: a host asks for ports, the answer survives a controller restart', async () => {
    const ctl = await startTestController({ init: labConfig((raw) => (raw.outbound = OUT)) });
    try {
      const bad = await ctl.req('POST', '/v1/agents/host/host1/snat-demand', { nic: 'h1vm1', family: 5, ports: 0 });
      expect([bad.status, (bad.body as { errors: { path: string }[] }).errors.map((e) => e.path)]).toEqual([400, ['family', 'ports']]);
      const r = await ctl.req('POST', '/v1/agents/host/host1/snat-demand', { nic: 'h1vm1', family: 4, ports: 16 });
      expect([r.status, (r.body as { ok: boolean; granted: unknown[] }).granted.length]).toEqual([200, 2]);
      // give one granted chunk back, and try a preallocated one (kept)
      const granted = (r.body as { granted: { ip: string; first: number }[] }).granted;
      const pre = (await ctl.req('GET', '/v1/snat')).body as { ranges: { ip: string; first: number; nic: string }[] };
      const pre0 = pre.ranges.find((x) => x.nic === 'h1vm1')!;
      const rel = await ctl.req('POST', '/v1/agents/host/host1/snat-release', {
        chunks: [
          { ip: granted[1]!.ip, first: granted[1]!.first },
          { ip: pre0.ip, first: pre0.first },
        ],
      });
      expect([rel.status, rel.body]).toMatchObject([200, { released: 1, kept: [{ ip: pre0.ip, first: pre0.first }] }]);
      expect((await ctl.req('POST', '/v1/agents/host/host1/snat-release', { chunks: 'x' })).status).toBe(400);
      const before = (await ctl.req('GET', '/v1/snat')).body;
      await ctl.restart();
      const after = (await ctl.req('GET', '/v1/snat')).body as { nics: { nic: string; ports4: number }[] };
      expect(after).toEqual(before);
      expect(after.nics.find((n) => n.nic === 'h1vm1')?.ports4).toBe(64 + 8);
      let out = '';
      const code = await runSlbctl(['snat'], { out: (t) => (out += t), err: () => {}, env: { SLBX_CONTROLLER: ctl.url } });
      expect(code).toBe(0);
      expect(out).toMatch(/^NIC\s+HOST\s+RULE\s+PORTS4\s+PORTS6\s+CAP/);
      expect(out).toMatch(/h1vm1\s+host1\s+out\s+72\s+64\s+256/);
      expect(out).toMatch(/host1\s+h1vm1\s+203\.0\.113\.200\s+\d+-\d+/);
    } finally {
      await ctl.cleanup();
    }
  });
});
