// The east-west paths of both data planes (docs/east-west.md) under random and mutated frames: nothing
// throws, every frame ends in exactly one counted outcome (a DROP bumps by one exactly the one drop counter its
// lastDrop names, never drop_internal_error; any other verdict bumps none), and the mutations keep
// enough frames valid that the paths are really exercised (forwards, accepted redirects).
import { describe, expect, it } from 'vitest';
import { ip, mac, writeIpAddr } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, newRedirect, writeRedirect } from '../shared/redirect.js';
import { compileHostTables, macKey } from '../host-agent/tables.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  VERDICT_CONSUMED,
  VERDICT_DROP,
  VERDICT_FORWARD,
} from '../host-agent/data-plane.js';
import { ALL_HEALTHY, compileMuxTables } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_DROP as MUX_DROP, VERDICT_FORWARD as MUX_FORWARD } from '../mux/data-plane.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';
import { labConfig } from './helpers/lab-config.js';
import { Rng, mutate } from './helpers/random.js';
import { DropJudge, type JudgedContext } from './helpers/drop-judge.js';

const N = 30_000;
const TOKEN = 'ef'.repeat(32);
const config = labConfig((c) => {
  const rules = [
    { name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, pool: 'web' },
    { name: 'ew-udp', protocol: 'udp', frontendPort: 7001, pool: 'web' },
  ];
  c.vips.push({ address: '192.0.2.100', scope: 'internal', network: 'tenant-a', rules });
  c.vips.push({ address: '2001:db8:d::100', scope: 'internal', network: 'tenant-a', rules });
});

const judge = new DropJudge();
/** One frame through a data plane, judged by its counters (helpers/drop-judge.ts). */
function judged(ctx: JudgedContext, isDrop: (v: number) => boolean, run: () => number): number {
  judge.start(ctx);
  const v = run();
  judge.finish(ctx, isDrop(v), v);
  return v;
}

function frames(seed: number, seeds: Buffer[], visit: (b: Buffer) => void): void {
  const rng = new Rng(seed);
  for (let i = 0; i < N; i++) {
    const b = i % 4 === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(seeds));
    visit(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }
}

function hostCtx(host: string) {
  const ctx = newHostContext(compileHostTables(config, host, 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
  for (const p of ctx.tables.peers) ctx.peerMacs[p.index] = macKey(mac('02:00:00:00:00:99'), 0);
  ctx.ew.mac = redirectMacFor(TOKEN);
  ctx.ew.unixS = 1000;
  return ctx;
}

const vmOut = [
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv4({ src: '192.0.2.10', dst: '192.0.2.100' })
    .tcp({ sport: 40000, dport: 7000, flags: TCP_SYN })
    .build(),
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv4({ src: '192.0.2.10', dst: '192.0.2.100' })
    .udp({ sport: 40000, dport: 7001 })
    .payload(30)
    .build(),
  pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: '2001:db8:d::100' }).tcp({ sport: 1, dport: 7000 }).build(),
  // a DIP's replies (h1vm1 serves the internal VIP on 7000 and 7001) to a client on host2 and on host1
  pkt()
    .eth({ src: '02:00:c0:00:02:0a' })
    .ipv4({ src: '192.0.2.10', dst: '192.0.2.12' })
    .tcp({ sport: 7000, dport: 40000, flags: TCP_ACK })
    .payload(9)
    .build(),
  pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv4({ src: '192.0.2.10', dst: '192.0.2.11' }).udp({ sport: 7001, dport: 40000 }).build(),
  pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: '2001:db8:d::12' }).udp({ sport: 7001, dport: 3 }).build(),
];

function redirectFrame(): Buffer {
  const r = newRedirect();
  r.family = 4;
  r.protocol = 6;
  r.vni = 5001;
  r.expiresS = 2000;
  writeIpAddr(ip('192.0.2.10'), r.src, 0);
  writeIpAddr(ip('192.0.2.100'), r.dst, 0);
  r.srcPort = 40000;
  r.dstPort = 7000;
  writeIpAddr(ip('192.0.2.12'), r.dip, 0);
  writeIpAddr(ip('198.18.0.22'), r.dipHostPa, 0);
  r.dipMac.set(mac('02:00:c0:00:02:0c'));
  const body = new Uint8Array(REDIRECT_LEN);
  writeRedirect(r, body, 0);
  redirectMacFor(TOKEN)(body, 0, REDIRECT_SIGNED_LEN, body, REDIRECT_SIGNED_LEN);
  return pkt()
    .eth()
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: REDIRECT_PORT, dport: REDIRECT_PORT })
    .payload(body)
    .build();
}
const fromPeer = (src: string, inner: Buffer) =>
  pkt()
    .eth()
    .ipv4({ src, dst: '198.18.0.21' })
    .udp({ sport: 50000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ dst: '02:00:c0:00:02:0a', type: inner[0]! >>> 4 === 6 ? 0x86dd : 0x0800 })
    .payload(inner)
    .build();
const hostIn = [
  redirectFrame(),
  redirectFrame(),
  fromPeer('198.18.0.22', pkt().ipv4({ src: '192.0.2.100', dst: '192.0.2.10' }).tcp({ sport: 7000, dport: 40000 }).payload(5).build()),
  fromPeer('198.18.0.22', pkt().ipv4({ src: '192.0.2.12', dst: '192.0.2.100' }).udp({ sport: 4, dport: 7001 }).build()),
  fromPeer('198.18.0.11', pkt().ipv6({ src: '2001:db8:d::100', dst: '2001:db8:d::10' }).udp({ sport: 7001, dport: 4 }).build()),
];

/** host1's fabric MAC: the MUX accepts host VXLAN only from the MAC the host's PA resolves to. */
const HOST1_MAC = '02:00:00:00:00:21';
const toMux = (inner: Buffer) =>
  pkt()
    .eth({ src: HOST1_MAC })
    .ipv4({ src: '198.18.0.21', dst: '198.18.0.11' })
    .udp({ sport: 50000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ type: inner[0]! >>> 4 === 6 ? 0x86dd : 0x0800 })
    .payload(inner)
    .build();
const muxIn = [
  toMux(pkt().ipv4({ src: '192.0.2.10', dst: '192.0.2.100' }).tcp({ sport: 40000, dport: 7000, flags: TCP_SYN }).build()),
  toMux(pkt().ipv4({ src: '192.0.2.10', dst: '192.0.2.100' }).tcp({ sport: 40000, dport: 7000, flags: TCP_ACK }).payload(7).build()),
  toMux(pkt().ipv4({ src: '192.0.2.10', dst: '192.0.2.100' }).udp({ sport: 40000, dport: 7001 }).payload(7).build()),
  toMux(pkt().ipv6({ src: '2001:db8:d::10', dst: '2001:db8:d::100' }).tcp({ sport: 9, dport: 7000, flags: TCP_ACK }).build()),
];

describe(`east-west paths under ${N.toLocaleString('en')} random and mutated frames each`, () => {
  it('host agent processOutbound (VM to internal VIP, DIP replies)', () => {
    const ctx = hostCtx('host1');
    let fwd = 0;
    frames(11, vmOut, (b) => {
      const v = judged(
        ctx,
        (x) => x === VERDICT_DROP,
        () => processOutbound(b, b.length, 0, ctx),
      );
      if (v !== VERDICT_DROP) fwd++;
    });
    const c = ctx.counters;
    expect(c.totalDrops() + fwd).toBe(N);
    const ew = c.get('ew_to_mux') + c.get('ew_fastpath_out') + c.get('ew_fastpath_local') + c.get('ew_return') + c.get('ew_return_local');
    expect(c.get('out_dsr') + c.get('out_local') + c.get('arp_replies') + c.get('nd_replies') + c.get('icmp_too_big_sent') + ew).toBe(fwd);
    expect(c.get('ew_to_mux')).toBeGreaterThan(1000);
    expect(c.get('ew_return')).toBeGreaterThan(100);
    expect(c.get('drop_internal_error')).toBe(0);
  });

  it('host agent processInbound (redirects, replies from an internal VIP)', () => {
    const ctx = hostCtx('host1');
    // the flow the redirect names was sent to the MUX, so a good redirect is accepted
    const syn = vmOut[0]!;
    ctx.peerMacs.fill(-1);
    for (const p of ctx.tables.peers) ctx.peerMacs[p.index] = p.address.text === '198.18.0.11' || p.kind === 'host' ? 1 : -1;
    expect(processOutbound(Buffer.from(syn), syn.length, 0, ctx)).toBe(VERDICT_FORWARD);
    let fwd = 0;
    let consumed = 0;
    frames(12, hostIn, (b) => {
      const v = judged(
        ctx,
        (x) => x === VERDICT_DROP,
        () => processInbound(b, b.length, ctx),
      );
      if (v === VERDICT_FORWARD) fwd++;
      if (v === VERDICT_CONSUMED) consumed++;
    });
    const c = ctx.counters;
    expect(c.totalDrops() + fwd + consumed + c.get('in_latency_echo')).toBe(N);
    expect(consumed).toBe(c.get('redirects_accepted') + c.get('redirects_repeated'));
    expect(c.get('redirects_accepted')).toBe(1);
    expect(c.get('redirects_repeated')).toBeGreaterThan(100);
    expect(c.get('ew_reply_in')).toBeGreaterThan(100);
    expect(c.get('drop_redirect_bad_signature')).toBeGreaterThan(100);
    expect(c.get('drop_internal_error')).toBe(0);
  });

  it('mux processPacket (VXLAN from hosts)', () => {
    const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
    for (const h of tables.hosts.values()) {
      h.mac.set(mac(HOST1_MAC));
      h.macKnown = true;
    }
    const ctx = newMuxContext({
      tables,
      localMac: mac('02:00:00:00:00:11'),
      localPa4: config.muxes[0]!.address.words[0]!,
      hashSeed: config.hashSeed,
      mtu: 1600,
      vxlanPort: 4789,
      flowTable: config.flowTable,
    });
    ctx.ew.mac = redirectMacFor(TOKEN);
    let fwd = 0;
    let other = 0;
    frames(13, muxIn, (b) => {
      const v = judged(
        ctx,
        (x) => x === MUX_DROP,
        () => processPacket(b, b.length, ctx),
      );
      if (v === MUX_FORWARD) fwd++;
      else if (v !== MUX_DROP) other++;
    });
    const c = ctx.counters;
    expect(c.totalDrops() + fwd + other).toBe(N);
    expect(c.get('ew_from_host')).toBeGreaterThan(1000);
    expect(c.get('redirects_sent')).toBeGreaterThan(100);
    expect(c.get('drop_internal_error')).toBe(0);
  });
});
