// The bench's DSR phase (scripts/bench/send-paths.ts): the replies trafgen sends are those of the flows the
// seed records, and the smoke's floor for the DSR rows (scripts/bench/report-lib.ts smokeDsrProblems).
import { describe, expect, it } from 'vitest';
import { dissect } from '../shared/dissect.js';
import {
  CLIENT_IP,
  DIP,
  DSR_FLOWS,
  VIP,
  VIP_PORT,
  VXLAN_INNER_IP_OFFSET,
  dsrReplyTrafgen,
  dsrSeedFrame,
} from '../scripts/bench/send-paths.js';
import { smokeDsrProblems } from '../scripts/bench/report-lib.js';

const MUX = '02:00:00:00:00:11';
const HOST = '02:00:00:00:00:21';
const NIC = '02:00:c0:00:02:0a';
const PORT = '02:00:00:01:00:01';

/** The cells of a trafgen packet: one per byte, as written between the braces. */
function cells(text: string): string[] {
  const body = text.slice(text.indexOf('{') + 1, text.lastIndexOf('}'));
  return body
    .split(/,\s*(?![^(]*\))/)
    .map((c) => c.trim())
    .filter((c) => c !== '');
}

/** What trafgen can put in a byte (its man page: drnd() any byte, dinc(min, max, step) min..max by step). */
function byteValues(cell: string): number[] {
  if (cell === 'drnd()') return Array.from({ length: 256 }, (_, i) => i);
  const m = /^dinc\((\d+), (\d+), (\d+)\)$/.exec(cell);
  if (m !== null) {
    const out: number[] = [];
    for (let v = Number(m[1]); v <= Number(m[2]); v += Number(m[3])) out.push(v);
    return out;
  }
  return [Number(cell)];
}

/** burst(h, template, ..., seq, ipOff, ports, srcBase) of native/slbx_ring.c, as its comment specifies it. */
function burstCopy(tpl: Uint8Array, ipOff: number, k: number, ports: number): Uint8Array {
  const f = Uint8Array.from(tpl);
  const port = 1024 + (k % ports);
  const ihl = (f[ipOff]! & 0x0f) * 4;
  f[ipOff + ihl] = port >> 8;
  f[ipOff + ihl + 1] = port & 0xff;
  return f;
}

describe('the DSR phase: replies of the seeded flows only', () => {
  it('the seed frame is a MUX-encapsulated client packet to the VIP, its inner IPv4 header where burst() rewrites it', () => {
    const f = dsrSeedFrame(MUX, HOST, NIC);
    const d = dissect(f);
    expect(d.first('vxlan')?.vni).toBe(5001);
    const ips = d.all('ipv4');
    expect(ips.map((x) => `${x.src}>${x.dst}`)).toEqual(['198.18.0.11>198.18.0.21', `${CLIENT_IP}>${VIP}`]);
    expect(d.all('udp')[1]!.dstPort).toBe(VIP_PORT);
    // the offset burst() is given: an IPv4 header (version 4, IHL 5) whose source is the client
    expect(f[VXLAN_INNER_IP_OFFSET]).toBe(0x45);
    expect([...f.subarray(VXLAN_INNER_IP_OFFSET + 12, VXLAN_INNER_IP_OFFSET + 16)].join('.')).toBe(CLIENT_IP);
    // flow k's copy carries client port 1024 + k, still to VIP:7
    const c = dissect(burstCopy(f, VXLAN_INNER_IP_OFFSET, 777, DSR_FLOWS));
    expect(c.all('udp')[1]!.srcPort).toBe(1024 + 777);
    expect(c.all('udp')[1]!.dstPort).toBe(VIP_PORT);
  });

  it('every reply trafgen can send is the reply of a seeded flow, and every seeded flow gets replies', () => {
    const text = dsrReplyTrafgen(NIC, PORT, 64);
    const c = cells(text);
    expect(c).toHaveLength(64);
    const fixed = Uint8Array.from(c.map((x) => (x.startsWith('0x') ? Number(x) : 0)));
    const d = dissect(fixed);
    const ip = d.first('ipv4')!;
    expect([ip.src, ip.dst]).toEqual([DIP, CLIENT_IP]);
    expect(d.first('udp')!.srcPort).toBe(VIP_PORT);
    // no byte other than the destination port varies: one client, one backend port
    c.forEach((x, i) => {
      if (i !== 36 && i !== 37) expect(x, `byte ${i}`).toMatch(/^0x[0-9a-f]{2}$/);
    });
    const ports = new Set<number>();
    for (const hi of byteValues(c[36]!)) for (const lo of byteValues(c[37]!)) ports.add(hi * 256 + lo);
    // the seed's flows: the client ports burst() writes for k = 0 .. DSR_FLOWS - 1 (seq 0, ports DSR_FLOWS)
    const seeded = new Set<number>();
    for (let k = 0; k < DSR_FLOWS; k++) seeded.add(1024 + (k % DSR_FLOWS));
    expect(ports.size).toBe(seeded.size);
    expect([...ports].filter((p) => !seeded.has(p))).toEqual([]);
  });

  it('the flows fit the host flow table by default (flowTable.maxFastpathFlows 100,000)', () => {
    expect(DSR_FLOWS).toBeLessThanOrEqual(100_000);
  });
});

describe("the smoke's DSR floor", () => {
  const row = (variant: string, phase: string, offered: number, delivered: number, topDrop?: { counter: string; count: number }) => ({
    variant,
    phase,
    baseline: false,
    deliveredPps: { median: delivered },
    offeredPps: { median: offered },
    deliveredShare: offered > 0 ? delivered / offered : 0,
    ...(topDrop !== undefined ? { topDrop } : {}),
  });

  it('fails a DSR row that delivered under half of what was offered, naming the largest drop counter', () => {
    const p = smokeDsrProblems([
      row('agent-dsr-ring', 'dsr', 5000, 4, { counter: 'drop_out_dsr_unsolicited', count: 29_980 }),
      row('mux-ring', 'mux', 5000, 4),
    ]);
    expect(p).toHaveLength(1);
    expect(p[0]).toContain('agent-dsr-ring: delivered 0.1 % of the 5000 packets/s offered (under 50 %)');
    expect(p[0]).toContain('drop_out_dsr_unsolicited 29980');
  });

  it('passes rows at or over half, and checks DSR rows of other frame sizes', () => {
    const unsolicited = { counter: 'drop_out_dsr_unsolicited', count: 500 };
    expect(smokeDsrProblems([row('agent-dsr', 'dsr', 5000, 2500, unsolicited), row('kernel-forward-return', 'dsr', 5000, 5000)])).toEqual(
      [],
    );
    expect(smokeDsrProblems([row('agent-dsr@1400', 'dsr@1400', 5000, 2499, unsolicited)])).toHaveLength(1);
    expect(smokeDsrProblems([row('agent-dsr', 'dsr', 0, 0)])[0]).toContain('no drop counter of the daemon grew');
  });

  it('a loss the daemon did not count (the kernel, on a busy machine) fails only under 10 %', () => {
    expect(smokeDsrProblems([row('agent-dsr-ring', 'dsr', 4444, 2649)])).toEqual([]);
    expect(smokeDsrProblems([row('agent-dsr-ring', 'dsr', 4444, 2649, { counter: 'drop_out_dsr_unsolicited', count: 3 })])).toEqual([]);
    expect(smokeDsrProblems([row('agent-dsr-ring', 'dsr', 4444, 400)])[0]).toContain('(under 10 %); no drop counter of the daemon grew');
  });
});
