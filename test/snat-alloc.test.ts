// The controller's SNAT port allocation (issue 15, point 2): preallocation, demand in chunks, release,
// reconcile, and durability; a model-based property test over random sequences checks, from the
// pushed ranges themselves, that no port is given twice, rule ports stay out, caps hold, and a reload
// (JSON round trip, as the store keeps it) loses nothing.
import { describe, expect, it } from 'vitest';
import { SnatAllocator, type SnatAllocState, type SnatChunk } from '../controller/snat-alloc.js';
import type { SlbxConfig } from '../shared/config.js';
import { labConfig } from './helpers/lab-config.js';
import { Rng } from './helpers/random.js';

const NICS = ['h1vm1', 'h1vm2', 'h2vm1', 'h2vm2'];

function config(portsPerNic: number | 'auto', pre: number, edit?: (raw: any) => void): SlbxConfig {
  return labConfig((raw) => {
    raw.outbound = [
      { name: 'out', frontendIps: ['203.0.113.10', '2001:db8:ff::200'], pool: 'web', portsPerNic, preallocatedPorts: pre, protocol: 'all' },
    ];
    edit?.(raw);
  });
}

/** Every (ip, port) of the ranges, counted: independent of the allocator's own map. */
function checkRanges(a: SnatAllocator, cfg: SlbxConfig): void {
  const seen = new Map<string, Uint8Array>();
  const rulePorts = new Set<string>();
  for (const v of cfg.vips) for (const r of v.rules) rulePorts.add(`${v.address.text}|${r.frontendPort}`);
  for (const r of a.ranges()) {
    expect(r.first).toBeGreaterThanOrEqual(1024);
    expect(r.last).toBeLessThanOrEqual(65535);
    let m = seen.get(r.ip);
    if (m === undefined) seen.set(r.ip, (m = new Uint8Array(65536)));
    for (let p = r.first; p <= r.last; p++) {
      if (m[p] !== 0) throw new Error(`${r.ip}:${p} given twice`);
      m[p] = 1;
    }
  }
  for (const k of rulePorts) {
    const [ip, port] = k.split('|') as [string, string];
    if (seen.get(ip)?.[Number(port)] === 1) throw new Error(`${ip}:${port} is a rule's frontend port, and in a SNAT range`);
  }
}

describe('SNAT allocation', () => {
  it('preallocates each nic its share per family, on the rule IPs, outside the VIP rule ports', () => {
    const cfg = config(1024, 64);
    const a = new SnatAllocator(cfg);
    for (const n of NICS) {
      expect([n, a.portsOf(n, 4), a.portsOf(n, 6)]).toEqual([n, 64, 64]);
    }
    // 4 nics x 64 ports x 2 families = 512 ports = 64 chunks
    expect(a.toState().chunks).toHaveLength(64);
    checkRanges(a, cfg);
    // host1 holds h1vm1 and h1vm2: its ranges name only those
    expect(new Set(a.ranges('host1').map((r) => r.nic))).toEqual(new Set(['h1vm1', 'h1vm2']));
  });

  it('demand grows a nic in chunks of 8 up to portsPerNic, then says nic_cap', () => {
    const a = new SnatAllocator(config(128, 64));
    const r1 = a.demand('h1vm1', 4, 20); // 20 ports -> 3 chunks
    expect(r1.ok && r1.granted.length).toBe(3);
    expect(a.portsOf('h1vm1', 4)).toBe(64 + 24);
    const r2 = a.demand('h1vm1', 4, 1000);
    expect(r2.ok && r2.granted.length).toBe(5); // up to 128
    expect(a.demand('h1vm1', 4, 8)).toEqual({ ok: false, reason: 'nic_cap', granted: [] });
    expect(a.demand('nope', 4, 8)).toEqual({ ok: false, reason: 'unknown_nic', granted: [] });
  });

  it('release takes back on-demand chunks of their own host only; preallocated ones stay', () => {
    const a = new SnatAllocator(config(128, 64));
    const r = a.demand('h2vm1', 6, 8);
    const ch = r.granted[0]!;
    expect(a.release('host1', ch.ip, ch.first)).toBe(false); // not host1's
    const pre = a.toState().chunks.find((c) => c.nic === 'h2vm1' && c.pre)!;
    expect(a.release('host2', pre.ip, pre.first)).toBe(false);
    expect(a.release('host2', ch.ip, ch.first)).toBe(true);
    expect(a.portsOf('h2vm1', 6)).toBe(64);
  });

  it('a stored state with a chunk twice is refused (never one range to two hosts)', () => {
    const cfg = config(128, 64);
    const s = new SnatAllocator(cfg).toState();
    const dup: SnatAllocState = { version: 1, chunks: [...s.chunks, { ...s.chunks[0]!, nic: 'h2vm2', host: 'host2' }] };
    expect(() => new SnatAllocator(cfg, dup)).toThrow(/listed twice/);
  });

  it('a nic moved to another host loses its chunks to the new host; a nic removed from the pool gives them back', () => {
    const cfg = config(128, 64);
    const a = new SnatAllocator(cfg);
    const before = a
      .toState()
      .chunks.filter((c) => c.nic === 'h1vm1')
      .map((c) => `${c.ip}:${c.first}`);
    const moved = config(128, 64, (raw) => {
      raw.nics.find((n: any) => n.name === 'h1vm1').host = 'host2';
    });
    const res = a.reconcile(moved);
    expect(res.removed.map((c) => `${c.ip}:${c.first}`).sort()).toEqual([...before].sort());
    expect(
      a
        .toState()
        .chunks.filter((c) => c.nic === 'h1vm1')
        .every((c) => c.host === 'host2'),
    ).toBe(true);
    checkRanges(a, moved);
  });

  it('property: random demand, release, reload and reconcile; no port twice, caps hold, nothing lost', () => {
    for (let seed = 1; seed <= 4; seed++) {
      const rng = new Rng(seed);
      const cfgs = [config(16120, 64), config(2048, 0), config(512, 256)];
      let cfg = cfgs[0]!;
      let a = new SnatAllocator(cfg);
      // the model: chunk -> owner, from what the allocator said it granted and took back
      const model = new Map<string, string>();
      const sync = (cs: readonly SnatChunk[], del = false): void => {
        for (const c of cs) {
          const k = `${c.ip}|${c.first}`;
          if (del) model.delete(k);
          else {
            expect(model.has(k), `${k} granted while owned`).toBe(false);
            model.set(k, c.nic);
          }
        }
      };
      sync(a.toState().chunks);
      for (let step = 0; step < 200; step++) {
        const op = rng.int(10);
        if (op < 5) {
          const r = a.demand(NICS[rng.int(4)]!, rng.int(2) === 0 ? 4 : 6, 1 + rng.int(600));
          sync(r.granted);
        } else if (op < 8) {
          const owned = a.toState().chunks;
          const c = owned[rng.int(owned.length)];
          if (c !== undefined && a.release(rng.int(4) === 0 ? 'host9' : c.host, c.ip, c.first)) sync([c], true);
        } else if (op === 8) {
          const before = JSON.stringify(a.toState());
          a = new SnatAllocator(cfg, JSON.parse(before) as SnatAllocState);
          expect(JSON.stringify(a.toState())).toBe(before);
        } else {
          cfg = cfgs[rng.int(cfgs.length)]!;
          const r = a.reconcile(cfg);
          sync(r.removed, true);
          sync(r.granted);
        }
        checkRanges(a, cfg);
        const rule = cfg.outbound[0]!;
        for (const n of NICS)
          for (const f of [4, 6] as const) {
            expect(a.portsOf(n, f)).toBeLessThanOrEqual(rule.portsPerNic);
            expect(a.portsOf(n, f, true)).toBe(rule.preallocatedPorts);
          }
        expect(new Map(a.toState().chunks.map((c) => [`${c.ip}|${c.first}`, c.nic]))).toEqual(model);
      }
    }
  });
});
