// tcpResetOnIdle (issue 15, outbound rules; docs/outbound.md): an ESTABLISHED TCP flow that its idle
// timeout ends, under a rule with the setting, gets exactly two RSTs: toward the remote from frontend
// IP:port (seq = the backend's next sequence number) and toward the DIP from remote:port (seq = the
// remote's next sequence number). The expected frames are built independently by the packet builder
// (full checksums); the expected sequence numbers are computed here from the segments this test sends.
import { describe, expect, it } from 'vitest';
import { ip } from '../shared/addr.js';
import { VLAN_NONE } from '../shared/ethernet.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import {
  SNAT_RESET_QUEUE_MAX,
  SnatEngine,
  snatResetToDip,
  snatResetToRemote,
  type SnatIdleReset,
  type SnatNicPolicy,
} from '../host-agent/snat.js';

const L3 = 14;
const FIP = '203.0.113.200';
const FIP6 = '2001:db8:ff::200';
const REMOTE = '198.51.100.5';
const REMOTE6 = '2001:db8:c::5';
const DIP = '192.0.2.11';
const DIP6 = '2001:db8:d::11';
const NIC_MAC = '02:00:00:00:00:11';
const PORT_MAC = '02:00:00:00:aa:01';
const IDLE_S = 240;
const FPORT = 1024; // the first port of the nic's one range
const DPORT = 40000;
const RPORT = 9000;

function policy(tcpResetOnIdle: boolean): SnatNicPolicy {
  return {
    vni: 5001,
    idleS: IDLE_S,
    tcpResetOnIdle,
    tcp: true,
    udp: true,
    ranges4: [{ ip: ip(FIP).words, first: FPORT, last: FPORT + 7 }],
    ranges6: [{ ip: ip(FIP6).words, first: FPORT, last: FPORT + 7 }],
  };
}

function engine(tcpResetOnIdle = true): SnatEngine {
  const e = new SnatEngine(new HostFlowTable(10_000), 10_000);
  e.setNic(0, policy(tcpResetOnIdle));
  return e;
}

interface Seg {
  seq: number;
  flags: number;
  data?: number;
}

function seg(v6: boolean, src: string, dst: string, sport: number, dport: number, s: Seg): Buffer {
  const b = pkt().eth();
  (v6 ? b.ipv6({ src, dst }) : b.ipv4({ src, dst, id: 7 })).tcp({ sport, dport, seq: s.seq >>> 0, flags: s.flags, ack: 1 });
  if (s.data !== undefined) b.payload(s.data);
  return b.build();
}

/** A backend's segment out (DIP -> remote) and a remote's segment in (remote -> frontend). */
function out(e: SnatEngine, v6: boolean, s: Seg, now: number): number {
  const f = seg(v6, v6 ? DIP6 : DIP, v6 ? REMOTE6 : REMOTE, DPORT, RPORT, s);
  return v6 ? e.out6(f, L3, f.length, 0, now) : e.out4(f, L3, f.length, 0, now);
}
function back(e: SnatEngine, v6: boolean, s: Seg, now: number): number {
  const f = seg(v6, v6 ? REMOTE6 : REMOTE, v6 ? FIP6 : FIP, RPORT, FPORT, s);
  return v6 ? e.in6(f, L3, f.length, now) : e.in4(f, L3, f.length, now);
}

/** The expected RSTs, from scratch: RST only, ack 0, window 0, IPv4 DF with id 0, TTL / hop limit 64. */
function expectedToRemote(v6: boolean, seq: number): string {
  const b = pkt();
  (v6 ? b.ipv6({ src: FIP6, dst: REMOTE6, hopLimit: 64 }) : b.ipv4({ src: FIP, dst: REMOTE, id: 0, flags: 2, ttl: 64 })).tcp({
    sport: FPORT,
    dport: RPORT,
    seq,
    ack: 0,
    flags: TCP_RST,
    window: 0,
  });
  return b.build().toString('hex');
}
function expectedToDip(v6: boolean, seq: number, vlan?: number): string {
  const b = pkt().eth({ dst: NIC_MAC, src: PORT_MAC, ...(vlan !== undefined ? { vlan } : {}) });
  (v6 ? b.ipv6({ src: REMOTE6, dst: DIP6, hopLimit: 64 }) : b.ipv4({ src: REMOTE, dst: DIP, id: 0, flags: 2, ttl: 64 })).tcp({
    sport: RPORT,
    dport: DPORT,
    seq,
    ack: 0,
    flags: TCP_RST,
    window: 0,
  });
  return b.build().toString('hex');
}

const macBytes = (m: string): Uint8Array => Uint8Array.from(m.split(':').map((x) => parseInt(x, 16)));
const hex = (a: Uint8Array): string => Buffer.from(a).toString('hex');

/**
 * A connection with data both ways, a retransmission of old data (it must not move the next sequence
 * number back), and the expected next sequence numbers computed from these segments.
 */
function establish(e: SnatEngine, v6: boolean, isnOut: number, isnIn: number, t0: number): { seqOut: number; seqIn: number } {
  expect(out(e, v6, { seq: isnOut, flags: TCP_SYN }, t0)).toBeGreaterThanOrEqual(0);
  expect(back(e, v6, { seq: isnIn, flags: TCP_SYN | TCP_ACK }, t0)).toBeGreaterThanOrEqual(0);
  expect(out(e, v6, { seq: isnOut + 1, flags: TCP_ACK | TCP_PSH, data: 100 }, t0 + 1)).toBeGreaterThanOrEqual(0);
  expect(back(e, v6, { seq: isnIn + 1, flags: TCP_ACK | TCP_PSH, data: 1400 }, t0 + 2)).toBeGreaterThanOrEqual(0);
  expect(back(e, v6, { seq: isnIn + 1401, flags: TCP_ACK | TCP_PSH, data: 37 }, t0 + 2)).toBeGreaterThanOrEqual(0);
  expect(out(e, v6, { seq: isnOut + 101, flags: TCP_ACK | TCP_PSH, data: 50 }, t0 + 3)).toBeGreaterThanOrEqual(0);
  expect(out(e, v6, { seq: isnOut + 151, flags: TCP_ACK }, t0 + 3)).toBeGreaterThanOrEqual(0); // a pure ACK: no data
  expect(out(e, v6, { seq: isnOut + 1, flags: TCP_ACK | TCP_PSH, data: 100 }, t0 + 4)).toBeGreaterThanOrEqual(0); // a retransmission
  expect(back(e, v6, { seq: isnIn + 1, flags: TCP_ACK | TCP_PSH, data: 1400 }, t0 + 4)).toBeGreaterThanOrEqual(0); // one in too
  // SYN counts 1, then the payloads: 100 + 50 out; 1400 + 37 in
  return { seqOut: (isnOut + 1 + 100 + 50) >>> 0, seqIn: (isnIn + 1 + 1400 + 37) >>> 0 };
}

describe('host agent SNAT: TCP reset on idle', () => {
  for (const v6 of [false, true]) {
    it(`IPv${v6 ? 6 : 4}: a flow idle past its timeout -> exactly two RSTs, each field as built independently`, () => {
      const e = engine();
      const want = establish(e, v6, 100_000, 7_000, 100);
      expect(e.sweep(100 + 4 + IDLE_S - 1, 1000)).toBe(0); // not idle yet
      expect(e.takeIdleResets()).toHaveLength(0);
      expect(e.sweep(100 + 4 + IDLE_S, 1000)).toBe(1);
      const rs = e.takeIdleResets();
      expect(rs).toHaveLength(1);
      const r = rs[0]!;
      expect(hex(snatResetToRemote(r))).toBe(expectedToRemote(v6, want.seqOut));
      expect(hex(snatResetToDip(r, macBytes(NIC_MAC), macBytes(PORT_MAC), VLAN_NONE))).toBe(expectedToDip(v6, want.seqIn));
      expect(e.takeIdleResets()).toHaveLength(0); // taken once
      expect(e.live).toBe(0);
    });
  }

  it('sequence numbers wrap around 2^32; a VLAN nic gets a tagged frame', () => {
    const e = engine();
    const want = establish(e, false, 0xffff_fff0, 0xffff_ffff, 100);
    expect(want.seqOut).toBe(0x87); // 0xfffffff0 + 151 - 2^32
    e.sweep(100 + 4 + IDLE_S, 1000);
    const r = e.takeIdleResets()[0]!;
    expect(hex(snatResetToRemote(r))).toBe(expectedToRemote(false, want.seqOut));
    expect(hex(snatResetToDip(r, macBytes(NIC_MAC), macBytes(PORT_MAC), 42))).toBe(expectedToDip(false, want.seqIn, 42));
  });

  it('no data: SYN and SYN-ACK count one each; a half-closed flow: its FIN counts one', () => {
    const e = engine();
    out(e, false, { seq: 500, flags: TCP_SYN }, 100);
    back(e, false, { seq: 900, flags: TCP_SYN | TCP_ACK }, 100);
    out(e, false, { seq: 501, flags: TCP_ACK }, 100);
    e.sweep(100 + IDLE_S, 1000);
    const r = e.takeIdleResets()[0]!;
    expect(hex(snatResetToRemote(r))).toBe(expectedToRemote(false, 501));
    expect(hex(snatResetToDip(r, macBytes(NIC_MAC), macBytes(PORT_MAC), VLAN_NONE))).toBe(expectedToDip(false, 901));

    const h = engine();
    const want = establish(h, false, 1, 2, 100);
    out(h, false, { seq: want.seqOut, flags: TCP_FIN | TCP_ACK }, 104); // the backend closed its side; the remote never did
    h.sweep(104 + IDLE_S, 1000);
    const hr = h.takeIdleResets()[0]!;
    expect(hex(snatResetToRemote(hr))).toBe(expectedToRemote(false, want.seqOut + 1));
  });

  it('a packet that finds its flow expired queues the RSTs too', () => {
    const e = engine();
    const want = establish(e, false, 5, 9, 100);
    // no sweep: the backend's next segment, long after, finds the flow expired (it is no SYN: dropped)
    expect(out(e, false, { seq: want.seqOut, flags: TCP_ACK, data: 10 }, 100 + 4 + IDLE_S + 60)).toBeLessThan(0);
    const rs = e.takeIdleResets();
    expect(rs).toHaveLength(1);
    expect(rs[0]!.seqOut).toBe(want.seqOut);
    expect(rs[0]!.seqIn).toBe(want.seqIn);
  });

  it('without the setting: the flow ends with no RST', () => {
    const e = engine(false);
    establish(e, false, 1, 2, 100);
    expect(e.sweep(100 + 4 + IDLE_S, 1000)).toBe(1);
    expect(e.takeIdleResets()).toHaveLength(0);
  });

  it('a UDP flow, a TCP flow never answered, and flows closed by FIN, by RST or by policy: no RST', () => {
    const e = engine();
    const u = pkt().eth().ipv4({ src: DIP, dst: REMOTE }).udp({ sport: 5353, dport: 53 }).payload('q').build();
    expect(e.out4(u, L3, u.length, 0, 100)).toBeGreaterThanOrEqual(0);
    // SYN_SENT: nothing to reset at the remote
    const syn = pkt().eth().ipv4({ src: DIP, dst: REMOTE }).tcp({ sport: 41000, dport: RPORT, flags: TCP_SYN }).build();
    expect(e.out4(syn, L3, syn.length, 0, 100)).toBeGreaterThanOrEqual(0);
    expect(e.sweep(100 + IDLE_S + 1, 1000)).toBe(2);
    expect(e.takeIdleResets()).toHaveLength(0);

    const f = engine();
    establish(f, false, 1, 2, 100);
    out(f, false, { seq: 152, flags: TCP_FIN | TCP_ACK }, 110);
    back(f, false, { seq: 1440, flags: TCP_FIN | TCP_ACK }, 110);
    expect(f.sweep(100 + 10_000, 1000)).toBe(1);
    expect(f.takeIdleResets()).toHaveLength(0);

    const g = engine();
    establish(g, false, 1, 2, 100);
    back(g, false, { seq: 1440, flags: TCP_RST }, 110);
    expect(g.sweep(100 + 10_000, 1000)).toBe(1);
    expect(g.takeIdleResets()).toHaveLength(0);

    const p = engine();
    establish(p, false, 1, 2, 100);
    expect(p.applyPolicies(new Map(), new Map([[0, 0]]))).toBe(1);
    expect(p.takeIdleResets()).toHaveLength(0);
  });

  it('the queue is bounded: past SNAT_RESET_QUEUE_MAX waiting, counted in resetsLost', () => {
    const ports = SNAT_RESET_QUEUE_MAX + 3;
    const e = new SnatEngine(new HostFlowTable(4 * ports), 2 * ports);
    e.setNic(0, { ...policy(true), ranges4: [{ ip: ip(FIP).words, first: 1024, last: 1024 + ports - 1 }] });
    for (let i = 0; i < ports; i++) {
      const a = pkt()
        .eth()
        .ipv4({ src: DIP, dst: REMOTE })
        .tcp({ sport: 10_000 + i, dport: RPORT, flags: TCP_SYN })
        .build();
      const slot = e.out4(a, L3, a.length, 0, 100);
      expect(slot).toBeGreaterThanOrEqual(0);
      const b = pkt()
        .eth()
        .ipv4({ src: REMOTE, dst: FIP })
        .tcp({ sport: RPORT, dport: 1024 + i, flags: TCP_SYN | TCP_ACK })
        .build();
      expect(e.in4(b, L3, b.length, 100)).toBe(slot);
    }
    e.sweep(100 + IDLE_S, 2 * ports);
    const rs: SnatIdleReset[] = e.takeIdleResets();
    expect(rs).toHaveLength(SNAT_RESET_QUEUE_MAX);
    expect(e.resetsLost).toBe(3);
  });
});
