// 100,000+ random and mutated frames through each data plane function: nothing throws, every frame ends
// in exactly one outcome, and every drop is a named counter (never the catch-all internal_error), bumped
// once by the frame that was dropped and named by lastDrop, set for that frame.
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { IPV4_FLAG_MF } from '../shared/ipv4.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_CONTROL, VERDICT_DROP, VERDICT_FORWARD, VERDICT_REPLY } from '../mux/data-plane.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound } from '../host-agent/data-plane.js';
import { labConfig } from './helpers/lab-config.js';
import { Rng, mutate } from './helpers/random.js';
import { loadTargets } from '../scripts/fuzz/fuzz.js';
import { DropJudge, type JudgedContext } from './helpers/drop-judge.js';

const FRAMES_PER_PLANE = 100_000;
const config = labConfig();

// seeds: valid frames of every kind each plane handles, to mutate
const clientSeeds = [
  pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN }).build(),
  pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).udp({ sport: 5000, dport: 7 }).payload(20).build(),
  pkt()
    .eth({ vlan: 3 })
    .ipv4({ src: '198.51.100.10', dst: '203.0.113.10', options: new Uint8Array(4) })
    .udp({ sport: 5000, dport: 7003 })
    .build(),
  pkt()
    .eth()
    .ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: IPV4_FLAG_MF })
    .udp({ sport: 5000, dport: 7, length: 900 })
    .payload(100)
    .build(),
  pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', fragOffset: 20, protocol: 17 }).payload(60).build(),
  pkt()
    .eth()
    .ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' })
    .ext6({ type: 'hop' })
    .ext6({ type: 'fragment', more: true })
    .tcp({ sport: 1, dport: 80 })
    .build(),
  pkt().eth().ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' }).udp({ sport: 1, dport: 7 }).payload(8).build(),
  pkt().eth().arp({ senderIp: '198.18.0.21', targetIp: '198.18.0.11' }).build(),
  pkt()
    .eth()
    .ipv4({ src: '198.51.100.1', dst: '203.0.113.10' })
    .icmp({ type: 3, code: 4, rest: 1300 })
    .payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 80, dport: 4000 }).payload(20).build())
    .build(),
  pkt()
    .eth()
    .ipv6({ src: '2001:db8:c::1', dst: '2001:db8:ff::10' })
    .icmpv6({ type: 2, rest: 1280 })
    .payload(pkt().ipv6({ src: '2001:db8:ff::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4000 }).payload(20).build())
    .build(),
  pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: 2 }).tcp({ sport: 1, dport: 80 }).payload(1580).build(),
];
const vx = (inner: Buffer) =>
  pkt()
    .eth()
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 50000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ dst: '02:00:c0:00:02:0a', type: inner[0]! >>> 4 === 6 ? 0x86dd : 0x0800 })
    .payload(inner)
    .build();
const inboundSeeds = [
  vx(pkt().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 4, dport: 80 }).payload(10).build()),
  vx(pkt().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).udp({ sport: 4, dport: 7 }).build()),
  vx(pkt().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', fragOffset: 9, protocol: 6 }).payload(24).build()),
  vx(pkt().ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' }).tcp({ sport: 4, dport: 80 }).build()),
  vx(
    pkt()
      .ipv4({ src: '198.51.100.1', dst: '203.0.113.10' })
      .icmp({ type: 3, code: 4 })
      .payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 8080, dport: 4000 }).payload(20).build())
      .build(),
  ),
  pkt()
    .eth()
    .ipv6({ src: '2001:db8:f::11', dst: '2001:db8:f::21' })
    .udp({ sport: 50000, dport: 4789 })
    .vxlan({ vni: 5001 })
    .eth({ dst: '02:00:c0:00:02:0a' })
    .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
    .udp({ sport: 4, dport: 7 })
    .build(),
];
const outboundSeeds = [
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv4({ src: '192.0.2.10', dst: '198.51.100.10' })
    .tcp({ sport: 80, dport: 4 })
    .payload(30)
    .build(),
  pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv4({ src: '192.0.2.10', dst: '198.51.100.10' }).udp({ sport: 7, dport: 4 }).build(),
  pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4 }).build(),
  pkt().eth({ src: '02:00:c0:00:02:0a', dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build(),
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv6({ src: '2001:db8:d::10', dst: 'ff02::1:ff00:1' })
    .icmpv6({ type: 135 })
    .payload(new Uint8Array(24))
    .build(),
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv4({ src: '192.0.2.10', dst: '198.51.100.10', flags: 2 })
    .tcp({ sport: 80, dport: 4 })
    .payload(1460)
    .build(),
];

const judge = new DropJudge();
/** One frame through a data plane, judged by its counters (helpers/drop-judge.ts). Returns the drop reason or null. */
function judged(ctx: JudgedContext, isDrop: (v: number) => boolean, run: () => number): string | null {
  judge.start(ctx);
  const v = run();
  return judge.finish(ctx, isDrop(v), v);
}

function frames(seed: number, seeds: Buffer[], n: number, visit: (b: Buffer) => void): void {
  const rng = new Rng(seed);
  for (let i = 0; i < n; i++) {
    const b = i % 4 === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(seeds));
    visit(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }
}

describe(`data planes under ${FRAMES_PER_PLANE.toLocaleString('en')} random and mutated frames each`, () => {
  it('mux processPacket', () => {
    const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
    for (const h of tables.hosts.values()) h.macKnown = true;
    const ctx = newMuxContext({
      tables,
      localMac: mac('02:00:00:00:00:11'),
      localPa4: config.muxes[0]!.address.words[0]!,
      hashSeed: config.hashSeed,
      mtu: 1600,
      vxlanPort: 4789,
      flowTable: config.flowTable,
    });
    ctx.icmpTokens = 1e9; // the rate limit is tested elsewhere; here every too-big frame is answered
    const outcomes = [0, 0, 0, 0];
    const reasons = new Set<string>();
    frames(1, clientSeeds, FRAMES_PER_PLANE, (b) => {
      let v = -1;
      const reason = judged(
        ctx,
        (x) => x === VERDICT_DROP,
        () => (v = processPacket(b, b.length, ctx)),
      );
      outcomes[v]!++;
      if (reason !== null) reasons.add(reason);
    });
    expect(reasons.size).toBe(Object.keys(ctx.counters.drops()).length); // every reason counted was named by a verdict
    const c = ctx.counters;
    expect(c.get('rx_packets')).toBe(FRAMES_PER_PLANE);
    expect(outcomes[VERDICT_DROP]! + outcomes[VERDICT_FORWARD]! + outcomes[VERDICT_CONTROL]! + outcomes[VERDICT_REPLY]!).toBe(
      FRAMES_PER_PLANE,
    );
    expect(c.totalDrops()).toBe(outcomes[VERDICT_DROP]);
    expect(c.get('tx_packets')).toBe(0); // counted by the daemon after the send, never by the data plane
    expect(outcomes[VERDICT_REPLY]).toBeGreaterThan(0);
    expect(c.get('drop_internal_error')).toBe(0);
    expect(outcomes[VERDICT_FORWARD]).toBeGreaterThan(1000); // the mutations keep many frames valid
    expect(Object.keys(c.drops()).length).toBeGreaterThan(10);
  });

  it('host agent processInbound', () => {
    const ctx = newHostContext(compileHostTables(config, 'host1', 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
    let fwd = 0;
    frames(2, inboundSeeds, FRAMES_PER_PLANE, (b) => {
      let v = -1;
      judged(
        ctx,
        (x) => x === VERDICT_DROP,
        () => (v = processInbound(b, b.length, ctx)),
      );
      if (v === VERDICT_FORWARD) fwd++;
    });
    const c = ctx.counters;
    // VERDICT_LOCAL: a latency echo request (VNI 0), counted as in_latency_echo
    expect(c.totalDrops() + fwd + c.get('in_latency_echo')).toBe(FRAMES_PER_PLANE);
    expect(c.get('in_delivered')).toBe(fwd);
    expect(c.get('drop_internal_error')).toBe(0);
    expect(fwd).toBeGreaterThan(1000);
  });

  it('host agent processOutbound', () => {
    const ctx = newHostContext(compileHostTables(config, 'host1', 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
    ctx.dsrMtu = 1400;
    let fwd = 0;
    frames(3, outboundSeeds, FRAMES_PER_PLANE, (b) => {
      let v = -1;
      judged(
        ctx,
        (x) => x === VERDICT_DROP,
        () => (v = processOutbound(b, b.length, 0, ctx)),
      );
      if (v !== VERDICT_DROP) fwd++;
    });
    const c = ctx.counters;
    expect(c.totalDrops() + fwd).toBe(FRAMES_PER_PLANE);
    expect(c.get('out_dsr') + c.get('out_local') + c.get('arp_replies') + c.get('nd_replies') + c.get('icmp_too_big_sent')).toBe(fwd);
    expect(c.get('drop_internal_error')).toBe(0);
    expect(fwd).toBeGreaterThan(1000);
  });
});

describe('the kept corpus (test/corpus): every input that ever caused trouble', () => {
  const dir = fileURLToPath(new URL('./corpus/', import.meta.url));
  const files = readdirSync(dir).filter((f) => f.endsWith('.bin'));
  const targets = loadTargets();
  // a file is named <target>-<why>-<hash>.bin (scripts/fuzz) or any-<what>.bin (every target whose input is raw bytes)
  const targetsOf = (file: string) => {
    if (file.startsWith('any-')) return targets.filter((t) => t.raw);
    const t = [...targets].sort((a, b) => b.name.length - a.name.length).find((x) => file.startsWith(`${x.name}-`));
    return t === undefined ? [] : [t];
  };
  it('is not empty, and every file names a target', () => {
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(targetsOf(f).length, f).toBeGreaterThan(0);
  });
  // one test per target: the config targets parse YAML (about 3 ms a text), 400 times, which alone took
  // 2 s idle and 9 s at load 10 (the whole loop over the 22 targets in one test was near its limit under load)
  it.each(targets.map((t) => [t.name, t] as const))(
    'target %s reads back from its corpus bytes the input it wrote, and runs it the same way',
    (_, t) => {
      const rng = new Rng(0x5eed);
      for (let i = 0; i < 200; i++) {
        const x = t.make(rng);
        const kept = t.bytes(x).slice(); // the data planes rewrite packets in place
        const first = t.run(x);
        const again = t.run(t.fromBytes(kept));
        if (again !== first) expect(again, `${t.name}, input ${i}`).toBe(first);
      }
    },
  );
  it.each(files)('%s', (file) => {
    const b = new Uint8Array(readFileSync(dir + file));
    for (const t of targetsOf(file)) {
      const input = t.fromBytes(b);
      expect(() => t.run(input), t.name).not.toThrow();
      expect(t.run(input)).not.toMatch(/internal_error|unnamed/);
    }
  });
});
