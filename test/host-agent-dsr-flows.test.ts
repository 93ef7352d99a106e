// The return path's state (host-agent/dsr-flows.ts, issue 16): packet-in / packet-out fixtures. A
// backend packet leaves from the VIP only when the client's packet of its flow came in first through a
// MUX; everything else is dropped as drop_out_dsr_unsolicited. Expected frames are built from scratch
// with the packet builder (full checksums), independent of the NAT's incremental updates.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound, OUT_DSR, VERDICT_FORWARD, type HostContext } from '../host-agent/data-plane.js';
import { newEwState } from '../host-agent/east-west.js';
import { carryEwState, listHostFlows } from '../host-agent/east-west-io.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03'];
const CLIENT = '198.51.100.10';
const STRANGER = '198.51.100.77'; // never sent anything to the VIP
const CLIENT6 = '2001:db8:c::10';
const VIP = '203.0.113.10';
const VIP6 = '2001:db8:ff::10';
const H1VM1 = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };

function newCtx(config: SlbxConfig = labConfig()): HostContext {
  return newHostContext(
    compileHostTables(config, 'host1', 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
}

function vxlanTo(innerMac: string, inner: (p: PacketBuilder) => PacketBuilder, o: { vni?: number; v6?: boolean } = {}): Buffer {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: o.vni ?? 5001 })
    .eth({ src: MUX_MAC, dst: innerMac, ...(o.v6 ? { type: 0x86dd } : {}) });
  return inner(p).build();
}

/** The client's TCP segment (flags) or UDP datagram to the VIP, through a MUX; must be delivered. */
function clientIn(
  ctx: HostContext,
  o: { cport: number; fport?: number; flags?: number; udp?: boolean; v6?: boolean; vni?: number; vip?: string },
) {
  const f = vxlanTo(
    H1VM1.mac,
    (p) => {
      const ip = o.v6 ? p.ipv6({ src: CLIENT6, dst: VIP6 }) : p.ipv4({ src: CLIENT, dst: o.vip ?? VIP });
      return o.udp
        ? ip.udp({ sport: o.cport, dport: o.fport ?? 7 }).payload('q')
        : ip.tcp({ sport: o.cport, dport: o.fport ?? 80, flags: o.flags ?? TCP_ACK });
    },
    { ...(o.v6 ? { v6: true } : {}), ...(o.vni !== undefined ? { vni: o.vni } : {}) },
  );
  const v = processInbound(f, f.length, ctx);
  expect(ctx.lastDrop).toBe(-1);
  expect(v).toBe(VERDICT_FORWARD);
}

/** A backend's packet from its service port (h1vm1's port 80/tcp, 7/udp) on port `port`. */
function fromBackend(o: {
  dst?: string;
  dport: number;
  flags?: number;
  udp?: boolean;
  v6?: boolean;
  sport?: number;
  payload?: string;
}): Buffer {
  const p = pkt().eth({ src: H1VM1.mac, dst: PORT_MACS[0] });
  const ip = o.v6 ? p.ipv6({ src: H1VM1.ip6, dst: o.dst ?? CLIENT6 }) : p.ipv4({ src: H1VM1.ip, dst: o.dst ?? CLIENT });
  const l4 = o.udp
    ? ip.udp({ sport: o.sport ?? 7, dport: o.dport })
    : ip.tcp({ sport: o.sport ?? 80, dport: o.dport, flags: o.flags ?? TCP_ACK | TCP_PSH, seq: 1000, ack: 2000 });
  return l4.payload(o.payload ?? 'r').build();
}

function out(ctx: HostContext, frame: Buffer, port = 0) {
  const v = processOutbound(frame, frame.length, port, ctx);
  return {
    v,
    port: ctx.outPort,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

describe('return path state: unsolicited backend packets never leave from the VIP', () => {
  it.each([
    ['a TCP SYN-ACK', { dport: 5555, flags: TCP_SYN | TCP_ACK }],
    ['TCP data', { dport: 5555, flags: TCP_ACK | TCP_PSH }],
    ['a TCP RST', { dport: 5555, flags: TCP_RST }],
    ['a UDP datagram', { dport: 5555, udp: true }],
    ['a TCP SYN-ACK over IPv6', { dport: 5555, flags: TCP_SYN | TCP_ACK, v6: true, dst: '2001:db8:c::77' }],
    ['a UDP datagram over IPv6', { dport: 5555, udp: true, v6: true, dst: '2001:db8:c::77' }],
  ])('%s from the service port to an address that never contacted the VIP is dropped and counted', (_n, o) => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000 }); // another flow of the VIP is recorded: it permits nothing else
    clientIn(ctx, { cport: 40000, v6: true });
    const r = out(ctx, fromBackend({ dst: STRANGER, ...o }));
    expect(r.drop).toBe('drop_out_dsr_unsolicited');
    expect(ctx.counters.get('drop_out_dsr_unsolicited')).toBe(1);
    expect(ctx.counters.get('out_dsr')).toBe(0);
  });

  it('the 5-tuple decides: the recorded client at another port, or the same port over UDP, is unsolicited', () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000 });
    expect(out(ctx, fromBackend({ dport: 40001 })).drop).toBe('drop_out_dsr_unsolicited');
    expect(out(ctx, fromBackend({ dport: 40000, udp: true })).drop).toBe('drop_out_dsr_unsolicited');
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    expect(ctx.counters.get('drop_out_dsr_unsolicited')).toBe(2);
    expect(ctx.counters.get('dsr_flows_learned')).toBe(1);
  });

  it("IPv6: the client's later segments find the entry their first recorded (learned once), and so does the reply", () => {
    // inboundIpv6 hashes the key from the rule's precomputed share (NatRule.dsrKeyPart); a share that
    // differs from the full hash misses the entry on every packet and learns it again
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000, v6: true, flags: TCP_SYN });
    clientIn(ctx, { cport: 40000, v6: true });
    clientIn(ctx, { cport: 40000, v6: true, udp: true });
    clientIn(ctx, { cport: 40000, v6: true, udp: true });
    expect(ctx.counters.get('dsr_flows_learned')).toBe(2);
    expect(out(ctx, fromBackend({ dport: 40000, v6: true })).port).toBe(OUT_DSR);
    expect(out(ctx, fromBackend({ dport: 40000, v6: true, udp: true })).port).toBe(OUT_DSR);
    expect(ctx.ew.flows.size).toBe(2);
  });

  it('GET /flows lists a recorded flow as the client, the VIP and the backend saw it', () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000 });
    clientIn(ctx, { cport: 40000, v6: true, udp: true });
    expect(listHostFlows(ctx.ew, ctx.tables, 10).sort((a, b) => a.protocol.toString().localeCompare(b.protocol.toString()))).toEqual([
      expect.objectContaining({
        kind: 'dsr',
        vni: 5001,
        protocol: 'tcp',
        client: `${CLIENT}:40000`,
        vip: `${VIP}:80`,
        backend: `h1vm1 ${H1VM1.ip}:80`,
      }),
      expect.objectContaining({
        kind: 'dsr',
        protocol: 'udp',
        client: `[${CLIENT6}]:40000`,
        vip: `[${VIP6}]:7`,
        backend: `h1vm1 [${H1VM1.ip6}]:7`,
      }),
    ]);
  });

  it("a recorded flow's reply goes out from the VIP, checksums as if built there", () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    const r = out(ctx, fromBackend({ dport: 40000, flags: TCP_SYN | TCP_ACK, payload: '' }));
    expect(r.port).toBe(OUT_DSR);
    expectFrame(
      r.out,
      pkt()
        .ipv4({ src: VIP, dst: CLIENT })
        .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 1000, ack: 2000 })
        .build(),
      LINKTYPE_RAW,
    );
  });
});

describe('return path state: TCP closing and UDP idle', () => {
  it("half-close: the client's FIN keeps the full idle timeout, the server's data 20 s later (and 200 s later) goes out", () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    clientIn(ctx, { cport: 40000, flags: TCP_FIN | TCP_ACK }); // the request sent, then FIN: half-closed
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr: 1 });
    ctx.ew.nowS = t0 + 20; // a slow response: more than DSR_CLOSING_S (10 s) without a packet
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    ctx.ew.nowS = t0 + 220;
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    // still the idle timeout after the last packet (240 s by default), then gone
    ctx.ew.nowS = t0 + 220 + 240;
    expect(out(ctx, fromBackend({ dport: 40000 })).drop).toBe('drop_out_dsr_unsolicited');
  });

  it("the server's FIN, then the client's: closing, the last segments go out for 10 s after the flow's last packet, then none", () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    clientIn(ctx, { cport: 40001, flags: TCP_SYN }); // stays open
    expect(out(ctx, fromBackend({ dport: 40000, flags: TCP_FIN | TCP_ACK })).port).toBe(OUT_DSR);
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr: 2 }); // half-closed: one FIN only
    clientIn(ctx, { cport: 40000, flags: TCP_FIN | TCP_ACK });
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr: 1, dsr_closing: 1 });
    ctx.ew.nowS = t0 + 5;
    expect(out(ctx, fromBackend({ dport: 40000, flags: TCP_ACK })).port).toBe(OUT_DSR); // the last ACK; closing until t0 + 15
    ctx.ew.nowS = t0 + 15;
    expect(out(ctx, fromBackend({ dport: 40000 })).drop).toBe('drop_out_dsr_unsolicited');
    expect(out(ctx, fromBackend({ dport: 40001 })).port).toBe(OUT_DSR); // an open flow lives tcpIdleTimeoutS
  });

  it("the client's RST closes at once (no FIN needed): gone 10 s after its last packet", () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    clientIn(ctx, { cport: 40000, flags: TCP_RST });
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr_closing: 1 });
    ctx.ew.nowS = t0 + 10;
    expect(out(ctx, fromBackend({ dport: 40000 })).drop).toBe('drop_out_dsr_unsolicited');
  });

  it('a new SYN on a half-closed tuple opens it again: the old half-close is forgotten, one FIN no longer closes it', () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    clientIn(ctx, { cport: 40000, flags: TCP_FIN | TCP_ACK });
    clientIn(ctx, { cport: 40000, flags: TCP_SYN }); // the tuple reused
    expect(out(ctx, fromBackend({ dport: 40000, flags: TCP_FIN | TCP_ACK })).port).toBe(OUT_DSR);
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr: 1 }); // the server's FIN alone: half-closed, not closing
    ctx.ew.nowS = t0 + 100;
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
  });

  it("the backend's RST closes too; a later client ACK keeps it closing, a new SYN on the same tuple opens it again", () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    expect(out(ctx, fromBackend({ dport: 40000, flags: TCP_RST })).port).toBe(OUT_DSR);
    clientIn(ctx, { cport: 40000, flags: TCP_ACK });
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr_closing: 1 });
    clientIn(ctx, { cport: 40000, flags: TCP_SYN });
    expect(ctx.ew.flows.countByKind(t0)).toEqual({ dsr: 1 });
    ctx.ew.nowS = t0 + 100;
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
  });

  it('TCP: an idle flow expires after flowTable.tcpIdleTimeoutS; packets either way keep it', () => {
    const ctx = newCtx();
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 40000 });
    ctx.ew.nowS = t0 + 200;
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR); // refreshes: until t0 + 440
    ctx.ew.nowS = t0 + 439;
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    ctx.ew.nowS = t0 + 439 + 240;
    expect(out(ctx, fromBackend({ dport: 40000 })).drop).toBe('drop_out_dsr_unsolicited');
  });

  it("UDP: replies while the client's datagrams keep the flow (udpIdleTimeoutS, 30 s by default); the backend's own do not", () => {
    const ctx = newCtx();
    expect(ctx.ew.udpIdleS).toBe(30);
    const t0 = ctx.ew.nowS;
    clientIn(ctx, { cport: 5353, udp: true });
    ctx.ew.nowS = t0 + 29;
    expect(out(ctx, fromBackend({ dport: 5353, udp: true })).port).toBe(OUT_DSR);
    ctx.ew.nowS = t0 + 30;
    expect(out(ctx, fromBackend({ dport: 5353, udp: true })).drop).toBe('drop_out_dsr_unsolicited');
    clientIn(ctx, { cport: 5353, udp: true }); // learned again
    ctx.ew.nowS = t0 + 59;
    expect(out(ctx, fromBackend({ dport: 5353, udp: true })).port).toBe(OUT_DSR);
  });
});

describe('return path state: ICMP errors from a backend', () => {
  const quote4 = (dst: string, dport: number) => pkt().ipv4({ src: CLIENT, dst }).udp({ sport: 5353, dport }).payload('q').build();
  const quote6 = (dst: string, dport: number) => pkt().ipv6({ src: CLIENT6, dst }).udp({ sport: 5353, dport }).payload('q').build();
  const err4 = () =>
    pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv4({ src: H1VM1.ip, dst: CLIENT })
      .icmp({ type: 3, code: 3 })
      .payload(quote4(H1VM1.ip, 7))
      .build();
  const err6 = () =>
    pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv6({ src: H1VM1.ip6, dst: CLIENT6 })
      .icmpv6({ type: 1, code: 4 })
      .payload(quote6(H1VM1.ip6, 7))
      .build();

  it('port unreachable about a recorded UDP flow goes out from the VIP, quoting the client -> VIP:port packet', () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 5353, udp: true });
    const r = out(ctx, err4());
    expect(r.drop).toBeNull();
    expect(r.port).toBe(OUT_DSR);
    expectFrame(r.out, pkt().ipv4({ src: VIP, dst: CLIENT }).icmp({ type: 3, code: 3 }).payload(quote4(VIP, 7)).build(), LINKTYPE_RAW);
    expect(ctx.counters.get('icmp_errors_out')).toBe(1);
  });

  it('ICMPv6 port unreachable about a recorded flow, with the pseudo-header and the quoted UDP checksum', () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 5353, udp: true, v6: true });
    const r = out(ctx, err6());
    expect(r.drop).toBeNull();
    expectFrame(r.out, pkt().ipv6({ src: VIP6, dst: CLIENT6 }).icmpv6({ type: 1, code: 4 }).payload(quote6(VIP6, 7)).build(), LINKTYPE_RAW);
  });

  it('an ICMP error about no recorded flow is unsolicited; one quoting another address is a bad quote', () => {
    const ctx = newCtx();
    expect(out(ctx, err4()).drop).toBe('drop_out_dsr_unsolicited');
    expect(out(ctx, err6()).drop).toBe('drop_out_dsr_unsolicited');
    const forged = pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv4({ src: H1VM1.ip, dst: CLIENT })
      .icmp({ type: 3, code: 3 })
      .payload(quote4('192.0.2.99', 7))
      .build();
    expect(out(ctx, forged).drop).toBe('drop_out_icmp_bad_quote');
    expect(ctx.counters.get('out_dsr')).toBe(0);
  });
});

describe('return path state: tenants, restart, a full table', () => {
  it('two tenants with the same DIP and client: a flow recorded on one VNI permits nothing on the other', () => {
    const config = labConfig((raw) => {
      raw.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
      raw.nics.push({ name: 'b-h1vm1', host: 'host1', network: 'tenant-b', port: 'b-h1vm1', mac: H1VM1.mac, addresses: [H1VM1.ip] });
      raw.pools.push({ name: 'b-web', backends: [{ nic: 'b-h1vm1' }] });
      raw.vips.push({ address: '203.0.113.20', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'b-web' }] });
    });
    const ctx = newCtx(config);
    const b = ctx.tables.nics.findIndex((n) => n.name === 'b-h1vm1');
    clientIn(ctx, { cport: 40000 }); // tenant A's VIP
    expect(out(ctx, fromBackend({ dport: 40000 }), b).drop).toBe('drop_out_dsr_unsolicited');
    clientIn(ctx, { cport: 40000, vni: 5002, vip: '203.0.113.20' });
    const r = out(ctx, fromBackend({ dport: 40000 }), b);
    expect(r.port).toBe(OUT_DSR);
    expect(r.out.subarray(12, 16)).toEqual(Buffer.from([203, 0, 113, 20]));
  });

  it("a restarted agent without its flows (no snapshot, no journal): the backend's segment is dropped, the client's next segment re-learns the flow", () => {
    const ctx = newCtx(); // a new process: nothing recorded
    expect(out(ctx, fromBackend({ dport: 40000 })).drop).toBe('drop_out_dsr_unsolicited'); // a response retransmitted
    expect(out(ctx, fromBackend({ dport: 40000, flags: TCP_SYN | TCP_ACK })).drop).toBe('drop_out_dsr_unsolicited');
    clientIn(ctx, { cport: 40000, flags: TCP_ACK }); // the client's next segment (an ACK, no SYN)
    expect(ctx.counters.get('dsr_flows_learned')).toBe(1);
    expect(ctx.counters.get('dsr_flows_learned_midstream')).toBe(1);
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    clientIn(ctx, { cport: 40001, flags: TCP_SYN }); // a new connection: learned, not mid-stream
    expect([ctx.counters.get('dsr_flows_learned'), ctx.counters.get('dsr_flows_learned_midstream')]).toEqual([2, 1]);
  });

  it('a policy that replaces the east-west state (a MUX added) keeps the return path entries', () => {
    const ctx = newCtx();
    clientIn(ctx, { cport: 40000 });
    clientIn(ctx, { cport: 5353, udp: true, v6: true });
    const next = labConfig((raw) => {
      raw.muxes.push({ name: 'mux3', address: '198.18.0.13', address6: '2001:db8:f::13' });
    });
    const tables = compileHostTables(next, 'host1', 2);
    const s = carryEwState(ctx.ew, ctx.tables, tables, next, new Uint8Array(6));
    expect(s).not.toBe(ctx.ew); // a fresh state: the MUXes changed
    ctx.tables = tables;
    ctx.ew = s;
    expect(s.flows.countByKind(s.nowS)).toEqual({ dsr: 2 });
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
  });

  it('a full host flow table: the new flow is delivered and counted dsr_flows_full, its reply dropped; recorded flows unharmed', () => {
    const ctx = newCtx();
    ctx.ew = newEwState(2);
    clientIn(ctx, { cport: 40000 });
    clientIn(ctx, { cport: 40001 });
    clientIn(ctx, { cport: 40002 });
    expect(ctx.counters.get('dsr_flows_full')).toBe(1);
    expect(out(ctx, fromBackend({ dport: 40002 })).drop).toBe('drop_out_dsr_unsolicited');
    expect(out(ctx, fromBackend({ dport: 40000 })).port).toBe(OUT_DSR);
    expect(out(ctx, fromBackend({ dport: 40001 })).port).toBe(OUT_DSR);
  });
});
