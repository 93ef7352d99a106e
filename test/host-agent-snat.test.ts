// The host agent's outbound NAT (issue 15, point 3): packet in -> packet out, IPv4 and IPv6, TCP and UDP.
// Every expected frame is built independently by the packet builder (full checksums), never by snat.ts.
import { describe, expect, it } from 'vitest';
import { ip } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import { Rng } from './helpers/random.js';
import {
  SNAT_DROP_REASONS,
  SNAT_ERR_EXHAUSTED,
  SNAT_ERR_NO_FLOW_OUT,
  SNAT_ERR_NOT_OURS,
  SNAT_ESTABLISHED,
  SNAT_TIME_WAIT,
  SNAT_TIME_WAIT_S,
  SnatEngine,
  type SnatNicPolicy,
} from '../host-agent/snat.js';

const L3 = 14;
const FIP = '203.0.113.200';
const FIP6 = '2001:db8:ff::200';
const REMOTE = '198.51.100.5';
const REMOTE_B = '198.51.100.6';
const REMOTE6 = '2001:db8:c::5';
const DIP = '192.0.2.11';
const DIP6 = '2001:db8:d::11';

function nicPolicy(first: number, last: number, vni = 5001): SnatNicPolicy {
  return {
    vni,
    idleS: 240,
    tcpResetOnIdle: false,
    tcp: true,
    udp: true,
    ranges4: [{ ip: ip(FIP).words, first, last }],
    ranges6: [{ ip: ip(FIP6).words, first, last }],
  };
}

function engine(first = 1024, last = 1031): SnatEngine {
  const e = new SnatEngine(new HostFlowTable(10_000), 10_000);
  e.setNic(0, nicPolicy(first, last));
  return e;
}

function tcp4(src: string, dst: string, sport: number, dport: number, flags: number): Buffer {
  return pkt()
    .eth()
    .ipv4({ src, dst, id: 7 })
    .tcp({ sport, dport, flags, seq: 1000, ack: flags & TCP_ACK ? 5 : 0 })
    .payload('hello')
    .build();
}
function tcp6(src: string, dst: string, sport: number, dport: number, flags: number): Buffer {
  return pkt()
    .eth()
    .ipv6({ src, dst })
    .tcp({ sport, dport, flags, seq: 1000, ack: flags & TCP_ACK ? 5 : 0 })
    .payload('hello')
    .build();
}
function udp4(src: string, dst: string, sport: number, dport: number, checksum?: 'zero'): Buffer {
  return pkt()
    .eth()
    .ipv4({ src, dst, id: 7 })
    .udp({ sport, dport, ...(checksum ? { checksum } : {}) })
    .payload('datagram')
    .build();
}

function out(e: SnatEngine, f: Buffer, now = 100, nic = 0): number {
  return f[12] === 0x86 ? e.out6(f, L3, f.length, nic, now) : e.out4(f, L3, f.length, nic, now);
}
function back(e: SnatEngine, f: Buffer, now = 100): number {
  return f[12] === 0x86 ? e.in6(f, L3, f.length, now) : e.in4(f, L3, f.length, now);
}

describe('host agent SNAT', () => {
  it('IPv4 TCP: DIP:port -> frontend:port out, and the reply back to DIP:port', () => {
    const e = engine();
    const f = tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN);
    const slot = out(e, f);
    expect(slot).toBeGreaterThanOrEqual(0);
    expect(f.toString('hex')).toBe(tcp4(FIP, REMOTE, 1024, 9000, TCP_SYN).toString('hex'));
    const r = tcp4(REMOTE, FIP, 9000, 1024, TCP_SYN | TCP_ACK);
    expect(back(e, r)).toBe(slot);
    expect(r.toString('hex')).toBe(tcp4(REMOTE, DIP, 9000, 40000, TCP_SYN | TCP_ACK).toString('hex'));
    expect(e.slotNic(slot)).toBe(0);
    expect(e.slotState(slot)).toBe(SNAT_ESTABLISHED);
    // the next segment of the same flow keeps the same port
    const f2 = tcp4(DIP, REMOTE, 40000, 9000, TCP_ACK);
    expect(out(e, f2)).toBe(slot);
    expect(f2.toString('hex')).toBe(tcp4(FIP, REMOTE, 1024, 9000, TCP_ACK).toString('hex'));
  });

  it('IPv4 UDP with a checksum and with none (zero stays zero)', () => {
    const e = engine();
    const f = udp4(DIP, REMOTE, 5353, 53);
    out(e, f);
    expect(f.toString('hex')).toBe(udp4(FIP, REMOTE, 1024, 53).toString('hex'));
    const z = udp4(DIP, REMOTE, 5354, 53, 'zero');
    out(e, z);
    expect(z.toString('hex')).toBe(udp4(FIP, REMOTE, 1025, 53, 'zero').toString('hex'));
    const r = udp4(REMOTE, FIP, 53, 1025);
    expect(back(e, r)).toBeGreaterThanOrEqual(0);
    expect(r.toString('hex')).toBe(udp4(REMOTE, DIP, 53, 5354).toString('hex'));
  });

  it('IPv6 TCP both ways', () => {
    const e = engine();
    const f = tcp6(DIP6, REMOTE6, 40000, 9000, TCP_SYN);
    const slot = out(e, f);
    expect(f.toString('hex')).toBe(tcp6(FIP6, REMOTE6, 1024, 9000, TCP_SYN).toString('hex'));
    const r = tcp6(REMOTE6, FIP6, 9000, 1024, TCP_SYN | TCP_ACK);
    expect(back(e, r)).toBe(slot);
    expect(r.toString('hex')).toBe(tcp6(REMOTE6, DIP6, 9000, 40000, TCP_SYN | TCP_ACK).toString('hex'));
  });

  it('a reply to a port no flow holds is refused (drop_in_snat_no_flow)', () => {
    const e = engine();
    out(e, tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN));
    expect(back(e, tcp4(REMOTE, FIP, 9000, 1025, TCP_ACK))).toBe(SNAT_ERR_NOT_OURS);
    expect(back(e, tcp4(REMOTE_B, FIP, 9000, 1024, TCP_ACK))).toBe(SNAT_ERR_NOT_OURS); // right port, other remote
    expect(SNAT_DROP_REASONS[SNAT_ERR_NOT_OURS]).toBe('drop_in_snat_no_flow');
    // and a backend's mid-stream segment with no flow (after a restart) opens none
    expect(out(e, tcp4(DIP, REMOTE, 40001, 9000, TCP_ACK))).toBe(SNAT_ERR_NO_FLOW_OUT);
    expect(SNAT_DROP_REASONS[SNAT_ERR_NO_FLOW_OUT]).toBe('drop_out_snat_no_flow');
  });

  it('exhaustion toward one remote endpoint: the 9th connection fails, the 8 live ones go on, another remote reuses the ports', () => {
    const e = engine(1024, 1031); // 8 ports
    const slots: number[] = [];
    for (let i = 0; i < 8; i++) slots.push(out(e, tcp4(DIP, REMOTE, 40000 + i, 9000, TCP_SYN)));
    expect(new Set(slots).size).toBe(8);
    expect(out(e, tcp4(DIP, REMOTE, 40100, 9000, TCP_SYN))).toBe(SNAT_ERR_EXHAUSTED);
    expect(SNAT_DROP_REASONS[SNAT_ERR_EXHAUSTED]).toBe('drop_out_snat_exhausted');
    expect(e.status()[0]).toMatchObject({ nic: 0, ports4: 8, inUse4: 8, exhausted: 1 });
    // the live ones still translate both ways
    const f = tcp4(DIP, REMOTE, 40003, 9000, TCP_ACK);
    expect(out(e, f)).toBe(slots[3]);
    expect(f.toString('hex')).toBe(tcp4(FIP, REMOTE, 1027, 9000, TCP_ACK).toString('hex'));
    // another remote endpoint (another DIP port even): port 1024 again, told apart by the reply's source
    const g = tcp4('192.0.2.12', REMOTE_B, 41000, 9000, TCP_SYN);
    const gs = out(e, g);
    expect(g.toString('hex')).toBe(tcp4(FIP, REMOTE_B, 1024, 9000, TCP_SYN).toString('hex'));
    const ra = tcp4(REMOTE, FIP, 9000, 1024, TCP_ACK);
    const rb = tcp4(REMOTE_B, FIP, 9000, 1024, TCP_ACK);
    expect([back(e, ra), back(e, rb)]).toEqual([slots[0], gs]);
    expect(ra.toString('hex')).toBe(tcp4(REMOTE, DIP, 9000, 40000, TCP_ACK).toString('hex'));
    expect(rb.toString('hex')).toBe(tcp4(REMOTE_B, '192.0.2.12', 9000, 41000, TCP_ACK).toString('hex'));
  });

  it('TIME-WAIT guard: a closed port is not reused toward the same remote endpoint until the guard has passed', () => {
    const e = engine(1024, 1024); // one port
    const s = out(e, tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN), 100);
    back(e, tcp4(REMOTE, FIP, 9000, 1024, TCP_SYN | TCP_ACK), 100);
    out(e, tcp4(DIP, REMOTE, 40000, 9000, TCP_FIN | TCP_ACK), 101);
    expect(e.slotState(s)).toBe(SNAT_ESTABLISHED);
    back(e, tcp4(REMOTE, FIP, 9000, 1024, TCP_FIN | TCP_ACK), 101);
    expect(e.slotState(s)).toBe(SNAT_TIME_WAIT);
    // the last ACK still goes out translated
    const ack = tcp4(DIP, REMOTE, 40000, 9000, TCP_ACK);
    expect(out(e, ack, 102)).toBe(s);
    expect(ack.toString('hex')).toBe(tcp4(FIP, REMOTE, 1024, 9000, TCP_ACK).toString('hex'));
    // another connection to the same remote endpoint inside the guard: no port
    expect(e.sweep(101 + SNAT_TIME_WAIT_S - 1, 100)).toBe(0);
    expect(out(e, tcp4(DIP, REMOTE, 40001, 9000, TCP_SYN), 101 + SNAT_TIME_WAIT_S - 1)).toBe(SNAT_ERR_EXHAUSTED);
    // after it: swept, and the port is free again
    expect(e.sweep(101 + SNAT_TIME_WAIT_S, 100)).toBe(1);
    const f = tcp4(DIP, REMOTE, 40001, 9000, TCP_SYN);
    expect(out(e, f, 101 + SNAT_TIME_WAIT_S)).toBeGreaterThanOrEqual(0);
    expect(f.toString('hex')).toBe(tcp4(FIP, REMOTE, 1024, 9000, TCP_SYN).toString('hex'));
  });

  it('an RST closes early; idle UDP expires; after that a reply is no longer ours', () => {
    const e = engine(1024, 1031);
    const s = out(e, tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN), 100);
    back(e, tcp4(REMOTE, FIP, 9000, 1024, TCP_RST | TCP_ACK), 100);
    expect(e.slotState(s)).toBe(SNAT_TIME_WAIT);
    out(e, udp4(DIP, REMOTE, 5353, 53), 100);
    expect(e.sweep(100 + SNAT_TIME_WAIT_S - 1, 100)).toBe(0);
    expect(e.sweep(100 + SNAT_TIME_WAIT_S, 100)).toBe(1); // the RST'd flow, after its guard (not its 240 s idle)
    expect(e.sweep(100 + 239, 100)).toBe(0);
    expect(e.sweep(100 + 240, 100)).toBe(1); // the UDP flow, idle 240 s
    expect(back(e, udp4(REMOTE, FIP, 53, 1025), 100 + 240)).toBe(SNAT_ERR_NOT_OURS);
    expect(e.live).toBe(0);
  });

  it('two tenants with the same addresses on different VNIs: different ports, each reply to its own nic', () => {
    const e = new SnatEngine(new HostFlowTable(1000), 1000);
    e.setNic(0, nicPolicy(1024, 1031, 5001));
    e.setNic(1, nicPolicy(1032, 1039, 5002));
    const a = tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN);
    const b = tcp4(DIP, REMOTE, 40000, 9000, TCP_SYN);
    const sa = out(e, a, 100, 0);
    const sb = out(e, b, 100, 1);
    expect([a.toString('hex'), b.toString('hex')]).toEqual([
      tcp4(FIP, REMOTE, 1024, 9000, TCP_SYN).toString('hex'),
      tcp4(FIP, REMOTE, 1032, 9000, TCP_SYN).toString('hex'),
    ]);
    expect(back(e, tcp4(REMOTE, FIP, 9000, 1032, TCP_ACK))).toBe(sb);
    expect([e.slotNic(sb), e.slotVni(sb), e.slotNic(sa), e.slotVni(sa)]).toEqual([1, 5002, 0, 5001]);
  });

  it('random bytes never throw: every call answers a slot or a named reason', () => {
    const e = engine(1024, 1031);
    const rng = new Rng(15);
    const reasons = new Set(Object.keys(SNAT_DROP_REASONS).map(Number));
    for (let i = 0; i < 20_000; i++) {
      const len = rng.int(120);
      const f = Buffer.from(rng.bytes(len + 16));
      // half the time a plausible IPv4 or IPv6 header start, so the deeper checks run too
      if (rng.int(2) === 0 && f.length > L3) f[L3] = rng.int(2) === 0 ? 0x45 : 0x60;
      const r = [out(e, f, 100 + (i >> 8)), e.in4(f, L3, len, 100), e.in6(f, L3, len, 100), e.out6(f, L3, len, 0, 100)];
      for (const x of r) if (!(x >= 0 || reasons.has(x))) throw new Error(`answer ${x} for ${f.toString('hex')}`);
      if (i % 1000 === 0) e.sweep(100 + (i >> 8), 1000);
    }
  });
});
