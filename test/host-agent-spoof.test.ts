// Defence in depth against VXLAN spoofed with a MUX's provider address (docs/security.md): on a single-L2
// fabric the host agent accepts a peer's VXLAN only from the MAC that peer's address resolves to, learned
// by the host agent's own ARP requests and neighbour solicitations (host-agent/neighbors.ts). Packet
// fixtures for the data plane's check, and the learning rules (what is believed, a conflict, a changed MAC).
// The MACs below are written out here, not taken from the code under test.
import { describe, expect, it } from 'vitest';
import { ip, mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { ARP_OP_REPLY, ARP_OP_REQUEST, newArpPacket, parseArp } from '../shared/arp.js';
import { pseudoSumV6Bytes, verifyL4Checksum } from '../shared/checksum.js';
import { IPPROTO_ICMPV6 } from '../shared/ipv4.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables, macKey } from '../host-agent/tables.js';
import { newHostContext, processInbound, VERDICT_DROP, VERDICT_FORWARD, VERDICT_HOLD, type HostContext } from '../host-agent/data-plane.js';
import {
  FabricNeighbors,
  NEIGHBOR_REFRESH_MS,
  NEIGHBOR_RETRY_MS,
  NEIGHBOR_ROUND_CONFIRM_MS,
  NEIGHBOR_SOLICIT_WINDOW_MS,
} from '../host-agent/neighbors.js';
import { labConfig } from './helpers/lab-config.js';

/** An IPv4 address as the uint32 the data plane keeps. */
const ipv4Number = (text: string): number => ip(text).words[0]!;
const MUX1_MAC = '02:00:c6:12:00:0b';
const MUX2_MAC = '02:00:c6:12:00:0c';
const ROUTER_MAC = '02:00:c6:12:00:01';
const ROGUE_MAC = '02:00:c6:12:00:63';
const HOST1_MAC = '02:00:c6:12:00:15';
const HOST2_MAC = '02:00:c6:12:00:16';
const H1VM1 = '02:00:c0:00:02:0a';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
const MUX1 = '198.18.0.11';
const MUX1_6 = '2001:db8:f::11';
const HOST1 = '198.18.0.21';
const HOST1_6 = '2001:db8:f::21';

function newCtx(config: SlbxConfig = labConfig()): HostContext {
  const ctx = newHostContext(
    compileHostTables(config, 'host1', 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  ctx.sourceMacCheck = true;
  return ctx;
}

/** Teaches the context the MAC of the peer at `address`, as the control plane would. */
function know(ctx: HostContext, address: string, m: string): void {
  const p = ctx.tables.peers.find((x) => x.address.text === address);
  if (p === undefined) throw new Error(`no peer ${address}`);
  ctx.peerMacs[p.index] = macKey(mac(m), 0);
}

/** VXLAN to h1vm1 (VIP:80, a SYN) with outer source MAC `srcMac` and outer source address `src`. */
function vx4(srcMac: string, src = MUX1): Buffer {
  return pkt()
    .eth({ src: srcMac, dst: HOST1_MAC })
    .ipv4({ src, dst: HOST1 })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ src: srcMac, dst: H1VM1 })
    .ipv4({ src: '198.51.100.77', dst: '203.0.113.10' })
    .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
    .build();
}
function vx6(srcMac: string, src = MUX1_6): Buffer {
  return pkt()
    .eth({ src: srcMac, dst: HOST1_MAC })
    .ipv6({ src, dst: HOST1_6 })
    .udp({ sport: 51000, dport: 4789 })
    .vxlan({ vni: 5001 })
    .eth({ src: srcMac, dst: H1VM1 })
    .ipv4({ src: '198.51.100.77', dst: '203.0.113.10' })
    .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
    .build();
}

function run(ctx: HostContext, frame: Buffer) {
  const v = processInbound(frame, frame.length, ctx);
  return { v, drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null, peer: ctx.lastPeer };
}

describe("host agent: VXLAN from a peer address must come from that peer's MAC", () => {
  const cases: [string, (ctx: HostContext) => void, Buffer, string | null][] = [
    ["mux1's PA from mux1's MAC is delivered", (c) => know(c, MUX1, MUX1_MAC), vx4(MUX1_MAC), null],
    [
      "mux1's PA from the router's MAC (a spoofed source routed in) is refused",
      (c) => know(c, MUX1, MUX1_MAC),
      vx4(ROUTER_MAC),
      'drop_in_spoofed_source',
    ],
    [
      "mux1's PA from mux2's MAC (one MUX posing as another) is refused",
      (c) => {
        know(c, MUX1, MUX1_MAC);
        know(c, '198.18.0.12', MUX2_MAC);
      },
      vx4(MUX2_MAC),
      'drop_in_spoofed_source',
    ],
    [
      "mux1's PA from a node on the segment that is no MUX is refused",
      (c) => know(c, MUX1, MUX1_MAC),
      vx4(ROGUE_MAC),
      'drop_in_spoofed_source',
    ],
    ["mux1's PA before its MAC is learned is refused (fail closed)", () => undefined, vx4(MUX1_MAC), 'drop_in_source_unresolved'],
    [
      'an address that is no peer is refused first as unknown_source',
      (c) => know(c, MUX1, MUX1_MAC),
      vx4(MUX1_MAC, '198.18.0.99'),
      'drop_in_unknown_source',
    ],
    [
      "host2's PA from host2's MAC passes the check (hosts are peers too)",
      (c) => know(c, '198.18.0.22', HOST2_MAC),
      vx4(HOST2_MAC, '198.18.0.22'),
      null,
    ],
    ["over IPv6: mux1's address6 from mux1's MAC is delivered", (c) => know(c, MUX1_6, MUX1_MAC), vx6(MUX1_MAC), null],
    [
      "over IPv6: mux1's address6 from the router's MAC is refused",
      (c) => know(c, MUX1_6, MUX1_MAC),
      vx6(ROUTER_MAC),
      'drop_in_spoofed_source',
    ],
    [
      'over IPv6: learned for IPv4 only is not learned for IPv6 (per family)',
      (c) => know(c, MUX1, MUX1_MAC),
      vx6(MUX1_MAC),
      'drop_in_source_unresolved',
    ],
  ];
  it.each(cases)('%s', (_n, setup, frame, reason) => {
    const ctx = newCtx();
    setup(ctx);
    const r = run(ctx, frame);
    expect(r.drop).toBe(reason);
    expect(r.v).toBe(reason === null ? VERDICT_FORWARD : VERDICT_DROP);
    expect(ctx.counters.get('in_delivered')).toBe(reason === null ? 1 : 0);
    if (reason !== null) expect(ctx.counters.get(reason as 'drop_in_spoofed_source')).toBe(1);
  });

  it('names the peer of a refused frame, so the control plane can ask for its MAC again', () => {
    const ctx = newCtx();
    know(ctx, MUX1, MUX1_MAC);
    const r = run(ctx, vx4(ROUTER_MAC));
    expect(ctx.tables.peers[r.peer]!.address.text).toBe(MUX1);
    expect(ctx.tables.peers[r.peer]!.name).toBe('mux1');
  });

  it("is off unless turned on (slbx-replay has no neighbours): then the router's MAC is accepted", () => {
    const ctx = newCtx();
    ctx.sourceMacCheck = false;
    expect(run(ctx, vx4(ROUTER_MAC)).drop).toBeNull();
  });

  it('after a start (holdUnresolved) VXLAN from a peer not resolved yet is held, not judged; once known it is delivered', () => {
    const ctx = newCtx();
    ctx.holdUnresolved = true;
    const f = vx4(MUX1_MAC);
    const r = run(ctx, f);
    expect(r.v).toBe(VERDICT_HOLD);
    expect(r.drop).toBeNull();
    expect([
      ctx.counters.get('in_held'),
      ctx.counters.get('in_packets'),
      ctx.counters.get('in_bytes'),
      ctx.counters.get('drop_in_source_unresolved'),
    ]).toEqual([1, 0, 0, 0]);
    // a spoofed one from the router's MAC is held too (nothing is known to compare with), and refused later
    expect(run(ctx, vx4(ROUTER_MAC)).v).toBe(VERDICT_HOLD);
    know(ctx, MUX1, MUX1_MAC);
    ctx.holdUnresolved = false;
    expect(run(ctx, f).drop).toBeNull();
    expect(run(ctx, vx4(ROUTER_MAC)).drop).toBe('drop_in_spoofed_source');
    expect([ctx.counters.get('in_packets'), ctx.counters.get('in_delivered')]).toEqual([2, 1]);
  });

  it('20 spoofed packets from the issue are all refused and counted, none delivered', () => {
    const ctx = newCtx();
    know(ctx, MUX1, MUX1_MAC);
    for (let i = 0; i < 20; i++) run(ctx, vx4(ROUTER_MAC));
    expect(ctx.counters.get('drop_in_spoofed_source')).toBe(20);
    expect(ctx.counters.get('in_delivered')).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// learning

const OUR_MAC = HOST1_MAC;

function neighbors(config: SlbxConfig = labConfig()) {
  const t = compileHostTables(config, 'host1', 1);
  const n = new FabricNeighbors(mac(OUR_MAC), ipv4Number(HOST1), t.pa6);
  n.setPeers(t.peers);
  const sent: Buffer[] = [];
  const tick = (now: number) =>
    n.tick(now, (f, len) => {
      sent.push(Buffer.from(f.subarray(0, len)));
    });
  const macOf = (address: string) => {
    const m = new Float64Array(t.peers.length);
    n.fill(m);
    const p = t.peers.find((x) => x.address.text === address)!;
    return m[p.index]!;
  };
  const indexOf = (address: string) => t.peers.find((x) => x.address.text === address)!.index;
  return { n, t, sent, tick, macOf, indexOf };
}

function arpReply(from: string, senderIp: string, o: { ethSrc?: string; ethDst?: string; targetIp?: string; op?: number } = {}): Buffer {
  return pkt()
    .eth({ src: o.ethSrc ?? from, dst: o.ethDst ?? OUR_MAC, type: 0x0806 })
    .arp({ op: o.op ?? ARP_OP_REPLY, senderMac: from, senderIp, targetMac: OUR_MAC, targetIp: o.targetIp ?? HOST1 })
    .build();
}

/** A neighbour advertisement (RFC 4861 4.4) for `target` from `from`, solicited, with a target link-layer option. */
function na(from: string, target: string, o: { dst?: string; ethDst?: string } = {}): Buffer {
  const body = Buffer.alloc(24);
  const t = target.split(':');
  // 2001:db8:f::11 -> bytes, written out (the code under test has its own IPv6 parser)
  const words = [0x2001, 0x0db8, 0x000f, 0, 0, 0, 0, parseInt(t[t.length - 1]!, 16)];
  words.forEach((w, i) => body.writeUInt16BE(w, i * 2));
  body[16] = 2;
  body[17] = 1;
  mac(from).forEach((b, i) => {
    body[18 + i] = b;
  });
  return pkt()
    .eth({ src: from, dst: o.ethDst ?? OUR_MAC, type: 0x86dd })
    .ipv6({ src: target, dst: o.dst ?? HOST1_6, hopLimit: 255 })
    .icmpv6({ type: 136, rest: 0x60000000 })
    .payload(body)
    .build();
}

const NOW = 1_000_000;

describe('host agent neighbours: what is asked', () => {
  it('asks every peer at once: an ARP request per IPv4 address, a solicitation per IPv6 address', () => {
    const { sent, tick, t } = neighbors();
    tick(NOW);
    expect(sent.length).toBe(t.peers.length);
    const arps = sent.filter((f) => f.readUInt16BE(12) === 0x0806);
    const nss = sent.filter((f) => f.readUInt16BE(12) === 0x86dd);
    // default lab: mux1, mux2, host2, each with an IPv4 and an IPv6 provider address
    expect(arps.length).toBe(3);
    expect(nss.length).toBe(3);
    const a = newArpPacket();
    expect(parseArp(arps[0]!, 14, a)).toBe(28);
    expect(a.op).toBe(ARP_OP_REQUEST);
    expect(a.senderIp).toBe(ipv4Number(HOST1));
    expect(a.targetIp).toBe(ipv4Number(MUX1));
    expect([...arps[0]!.subarray(0, 6)]).toEqual([255, 255, 255, 255, 255, 255]);
    const ns = nss[0]!;
    // RFC 4861 7.2.2: to the solicited-node multicast address ff02::1:ff00:11, hop limit 255, a valid checksum
    expect(ns.subarray(0, 6).toString('hex')).toBe('3333ff000011');
    expect(ns.subarray(38, 54).toString('hex')).toBe('ff0200000000000000000001ff000011');
    expect(ns[21]).toBe(255);
    expect(ns[54]).toBe(135);
    expect(verifyL4Checksum(ns, 54, 32, pseudoSumV6Bytes(ns, 22, 38, IPPROTO_ICMPV6, 32))).toBe(true);
  });

  it('asks again every retry interval while unresolved, every 30 s once resolved', () => {
    const { n, sent, tick } = neighbors();
    tick(NOW);
    const first = sent.length;
    tick(NOW + NEIGHBOR_RETRY_MS - 1);
    expect(sent.length).toBe(first);
    tick(NOW + NEIGHBOR_RETRY_MS);
    expect(sent.length).toBe(2 * first);
    // everyone answers the second round
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + NEIGHBOR_RETRY_MS + 1);
    tick(NOW + NEIGHBOR_RETRY_MS + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    const after = sent.length;
    tick(NOW + 2 * NEIGHBOR_RETRY_MS + NEIGHBOR_ROUND_CONFIRM_MS);
    const arpsToMux1 = sent.slice(after).filter((f) => f.readUInt16BE(12) === 0x0806 && f.readUInt32BE(38) === ipv4Number(MUX1));
    expect(arpsToMux1.length).toBe(0); // resolved: not asked again within 30 s
    tick(NOW + NEIGHBOR_RETRY_MS + NEIGHBOR_REFRESH_MS + 1);
    expect(sent.slice(after).some((f) => f.readUInt16BE(12) === 0x0806 && f.readUInt32BE(38) === ipv4Number(MUX1))).toBe(true);
  });
});

describe('host agent neighbours: what is believed', () => {
  it('an answer to our request is adopted after the confirmation time', () => {
    const { n, tick, macOf } = neighbors();
    tick(NOW);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 3);
    tick(NOW + 3 + NEIGHBOR_ROUND_CONFIRM_MS - 1);
    expect(macOf(MUX1)).toBe(-1);
    const ev = tick(NOW + 3 + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1)).toBe(macKey(mac(MUX1_MAC), 0));
    expect(ev).toContainEqual({ event: 'neighbor_learned', peer: 'mux1', address: MUX1, mac: MUX1_MAC, previous: null });
  });

  it('a solicited neighbour advertisement teaches an IPv6 address', () => {
    const { n, tick, macOf } = neighbors();
    tick(NOW);
    expect(n.learn(na(MUX1_MAC, MUX1_6), 86, NOW + 1)).toBe(true);
    tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1_6)).toBe(macKey(mac(MUX1_MAC), 0));
    expect(macOf(MUX1)).toBe(-1);
  });

  const ignored: [string, () => Buffer, number][] = [
    [
      "a gratuitous ARP request claiming mux1's address",
      () => arpReply(ROGUE_MAC, MUX1, { op: ARP_OP_REQUEST, ethDst: 'ff:ff:ff:ff:ff:ff' }),
      NOW + 1,
    ],
    ['a reply not sent to our MAC', () => arpReply(ROGUE_MAC, MUX1, { ethDst: '02:00:00:00:00:99' }), NOW + 1],
    ['a reply to another address than ours', () => arpReply(ROGUE_MAC, MUX1, { targetIp: '198.18.0.22' }), NOW + 1],
    ["a reply whose sender MAC is not the frame's source", () => arpReply(ROGUE_MAC, MUX1, { ethSrc: MUX1_MAC }), NOW + 1],
    ['a reply long after our request (we did not ask)', () => arpReply(ROGUE_MAC, MUX1), NOW + NEIGHBOR_SOLICIT_WINDOW_MS + 1],
    ['an advertisement to another address than ours', () => na(ROGUE_MAC, MUX1_6, { dst: '2001:db8:f::22' }), NOW + 1],
  ];
  it.each(ignored)('ignores %s', (_n, frame, at) => {
    const { n, tick, macOf } = neighbors();
    tick(NOW);
    const f = frame();
    expect(n.learn(f, f.length, at)).toBe(true);
    tick(at + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1)).toBe(-1);
    expect(macOf(MUX1_6)).toBe(-1);
    expect(n.counters.ignored).toBe(1);
  });

  it('two MACs answering one request is a conflict: nothing is adopted (fail closed)', () => {
    const { n, tick, macOf } = neighbors();
    tick(NOW);
    n.learn(arpReply(ROGUE_MAC, MUX1), 42, NOW + 1);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 2);
    const ev = tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1)).toBe(-1);
    expect(ev).toContainEqual({ event: 'neighbor_conflict', peer: 'mux1', address: MUX1, macs: [ROGUE_MAC, MUX1_MAC], kept: null });
    expect(n.counters.conflicts).toBe(1);
  });

  it('a conflict keeps a learned MAC: a forger answering beside the real MUX changes nothing', () => {
    const { n, tick, macOf, indexOf } = neighbors();
    tick(NOW);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 1);
    tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    n.expedite(indexOf(MUX1));
    tick(NOW + NEIGHBOR_RETRY_MS);
    n.learn(arpReply(ROGUE_MAC, MUX1), 42, NOW + NEIGHBOR_RETRY_MS + 1);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + NEIGHBOR_RETRY_MS + 2);
    tick(NOW + NEIGHBOR_RETRY_MS + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1)).toBe(macKey(mac(MUX1_MAC), 0));
  });

  it('a MUX restarted with a new MAC: its refused VXLAN makes us ask at once, and the new MAC is adopted', () => {
    const NEW_MAC = '02:00:c6:12:00:7b';
    const { n, sent, tick, macOf, indexOf } = neighbors();
    tick(NOW);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 1);
    tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    const t1 = NOW + 5000; // long before the 30 s refresh
    const toMux1 = (from: number) =>
      sent.slice(from).filter((f) => f.readUInt16BE(12) === 0x0806 && f.readUInt32BE(38) === ipv4Number(MUX1)).length;
    const before = sent.length;
    tick(t1);
    expect(toMux1(before)).toBe(0); // resolved: the next request would be the 30 s refresh
    n.expedite(indexOf(MUX1)); // what the daemon does on drop_in_spoofed_source
    tick(t1 + 1);
    expect(toMux1(before)).toBe(1);
    n.learn(arpReply(NEW_MAC, MUX1), 42, t1 + 1);
    const ev = tick(t1 + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    expect(macOf(MUX1)).toBe(macKey(mac(NEW_MAC), 0));
    expect(ev).toContainEqual({ event: 'neighbor_learned', peer: 'mux1', address: MUX1, mac: NEW_MAC, previous: MUX1_MAC });
    expect(n.counters.changes).toBe(1);
  });

  it('a new policy keeps what was learned for addresses still present', () => {
    const { n, tick, macOf, t } = neighbors();
    tick(NOW);
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 1);
    tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS);
    n.setPeers([...t.peers].reverse().map((p, i) => ({ ...p, index: i })));
    const m = new Float64Array(t.peers.length);
    n.fill(m);
    expect(m[t.peers.length - 1]).toBe(macKey(mac(MUX1_MAC), 0));
    expect(macOf(MUX1)).toBe(-1); // the old index now holds another peer
  });
});

describe('host agent: neighbours and data plane together', () => {
  it("refuses mux1 until its ARP answer is confirmed, then delivers; the router's MAC stays refused", () => {
    const ctx = newCtx();
    const n = new FabricNeighbors(mac(OUR_MAC), ipv4Number(HOST1), ctx.tables.pa6);
    n.setPeers(ctx.tables.peers);
    n.tick(NOW, () => undefined);
    expect(run(ctx, vx4(MUX1_MAC)).drop).toBe('drop_in_source_unresolved');
    n.learn(arpReply(MUX1_MAC, MUX1), 42, NOW + 1);
    n.tick(NOW + 1 + NEIGHBOR_ROUND_CONFIRM_MS, () => undefined);
    n.fill(ctx.peerMacs);
    expect(run(ctx, vx4(MUX1_MAC)).drop).toBeNull();
    expect(run(ctx, vx4(ROUTER_MAC)).drop).toBe('drop_in_spoofed_source');
    expect(ctx.counters.get('in_delivered')).toBe(1);
  });
});
