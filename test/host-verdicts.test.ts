// What the host agent does with each of the data plane's verdicts (host-agent/verdicts.ts), the one
// handler the single-threaded daemon and every worker thread use: a frame delivered goes to its VM port's
// socket and into the nic's delivered slot; a backend's reply leaves by the DSR sender of its own family
// and into the nic's DSR slot; a send that fails, or has no socket, is counted under its own name; the
// data plane throwing is handed to the thread (internal error), never thrown on. The sockets are fakes that
// keep what they were given; the frames are built here (the lab config's host1, h1vm1).
import { describe, expect, it } from 'vitest';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK } from '../shared/tcp.js';
import { compileHostTables } from '../host-agent/tables.js';
import { buildHostContext, DSR_MTU_UNKNOWN } from '../host-agent/context.js';
import type { HostContext } from '../host-agent/data-plane.js';
import { HostTrafficCounters, HOST_TRAFFIC_STRIDE } from '../host-agent/traffic-counters.js';
import { handleInbound, handleOutbound, type VerdictIo, type VerdictSender } from '../host-agent/verdicts.js';
import { labConfig } from './helpers/lab-config.js';

const full = labConfig();

class FakeSender implements VerdictSender {
  sent: { bytes: Buffer; off: number; len: number }[] = [];
  constructor(public ok = true) {}
  send(buf: Uint8Array, off: number, len: number): boolean {
    this.sent.push({ bytes: Buffer.from(buf.subarray(off, off + len)), off, len });
    return this.ok;
  }
}

function setup() {
  const tables = compileHostTables(full, 'host1', 1);
  const ctx: HostContext = buildHostContext(
    full,
    tables,
    tables.nics.map(() => new Uint8Array(6)),
    DSR_MTU_UNKNOWN,
  );
  const nic = tables.nics.find((n) => n.name === 'h1vm1')!;
  ctx.portMacs[nic.index] = new Uint8Array([2, 0, 0, 1, 0, 1]);
  const traffic = new HostTrafficCounters(tables.nics);
  const port = new FakeSender();
  const raw4 = new FakeSender();
  const raw6 = new FakeSender();
  const calls: string[] = [];
  /** What the fake thread has open (a test closes some). */
  const open = { ports: [] as (FakeSender | null)[], raw4: raw4 as FakeSender | null };
  const io: VerdictIo = {
    internalError: (e: unknown) => calls.push(`internalError ${(e as Error).name}`),
    hold: () => calls.push('hold'),
    echo: () => calls.push('echo'),
    expedite: (peer: number) => calls.push(`expedite ${peer}`),
    local: (p: number) => calls.push(`local ${p}`),
    port: (i: number) => open.ports[i] ?? null,
    fabric: () => null,
    dsr: (v6: boolean) => (v6 ? raw6 : open.raw4),
  };
  open.ports[nic.index] = port;
  const C = ctx.counters.index;
  const cv = ctx.counters.values;
  // the client's packet through a MUX (a copy each call, as the reply) (VXLAN to host1), addressed to h1vm1's MAC
  const inner = pkt()
    .eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:0a' })
    .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
    .tcp({ sport: 40002, dport: 80, flags: TCP_ACK })
    .build();
  Buffer.from(nic.mac).copy(inner, 0);
  const vxlan = pkt()
    .eth({ src: '02:00:00:00:00:11', dst: '02:00:00:00:00:21' })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 50000, dport: 4789 })
    .vxlan({ vni: nic.network.vni })
    .payload(inner)
    .build();
  // the backend's reply on its port (each call gets a copy: the data plane rewrites a frame in place)
  const reply = pkt()
    .eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:01:00:01' })
    .ipv4({ src: '192.0.2.10', dst: '198.51.100.10' })
    .tcp({ sport: 80, dport: 40002, flags: TCP_ACK, seq: 1000, ack: 2000 })
    .build();
  return {
    ctx,
    traffic,
    io,
    open,
    port,
    raw4,
    raw6,
    calls,
    C,
    cv,
    k: nic.index * HOST_TRAFFIC_STRIDE,
    nic: nic.index,
    vxlan,
    inner,
    reply,
  };
}

describe('host agent verdicts: inbound', () => {
  it("a delivered frame goes to its port's socket (the inner frame) and into the nic's delivered slot", () => {
    const s = setup();
    handleInbound(s.ctx, s.traffic, s.io, Buffer.from(s.vxlan), s.vxlan.length);
    expect(s.cv[s.C.in_delivered]).toBe(1);
    expect(s.port.sent.length).toBe(1);
    // the inner frame: the client's packet, to the backend's DIP (the VIP translated), h1vm1's MAC first
    const d = s.port.sent[0]!.bytes;
    expect(d.subarray(0, 6)).toEqual(s.inner.subarray(0, 6));
    expect([...d.subarray(14 + 12, 14 + 20)].join('.')).toBe('198.51.100.10.192.0.2.10');
    expect(s.port.sent[0]!.len).toBe(s.inner.length);
    expect([s.traffic.delivered[s.k], s.traffic.delivered[s.k + 1]]).toEqual([1, s.inner.length]);
    expect(s.calls).toEqual([]);
    // the kernel refuses it: send_error_port; no socket for the nic: an internal error, not counted as delivered traffic
    s.port.ok = false;
    handleInbound(s.ctx, s.traffic, s.io, Buffer.from(s.vxlan), s.vxlan.length);
    expect(s.cv[s.C.send_error_port]).toBe(1);
    s.open.ports[s.nic] = null;
    handleInbound(s.ctx, s.traffic, s.io, Buffer.from(s.vxlan), s.vxlan.length);
    expect(s.cv[s.C.drop_internal_error]).toBe(1);
    expect(s.traffic.delivered[s.k]).toBe(2);
  });

  it('the data plane throwing is handed to the thread, not thrown', () => {
    const s = setup();
    handleInbound(null as unknown as HostContext, s.traffic, s.io, s.vxlan, s.vxlan.length);
    handleOutbound(null as unknown as HostContext, s.traffic, s.io, s.reply, s.reply.length, s.nic);
    expect(s.calls).toEqual(['internalError TypeError', 'internalError TypeError']);
  });
});

describe('host agent verdicts: outbound', () => {
  it("a backend's reply leaves by the DSR sender of its family, from the IP header on, into the nic's DSR slot", () => {
    const s = setup();
    handleInbound(s.ctx, s.traffic, s.io, Buffer.from(s.vxlan), s.vxlan.length); // the flow, recorded
    handleOutbound(s.ctx, s.traffic, s.io, Buffer.from(s.reply), s.reply.length, s.nic);
    expect(s.cv[s.C.out_dsr]).toBe(1);
    expect(s.raw6.sent.length).toBe(0);
    expect(s.raw4.sent.length).toBe(1);
    const sent = s.raw4.sent[0]!;
    expect(sent.bytes[0]! >>> 4).toBe(4);
    expect(sent.len).toBe(s.reply.length - 14);
    expect([s.traffic.dsr[s.k], s.traffic.dsr[s.k + 1]]).toEqual([1, s.reply.length - 14]);
    // refused: send_error_dsr; no sender of the family: send_error_dsr_unavailable
    s.raw4.ok = false;
    handleOutbound(s.ctx, s.traffic, s.io, Buffer.from(s.reply), s.reply.length, s.nic);
    expect(s.cv[s.C.send_error_dsr]).toBe(1);
    s.open.raw4 = null;
    handleOutbound(s.ctx, s.traffic, s.io, Buffer.from(s.reply), s.reply.length, s.nic);
    expect(s.cv[s.C.send_error_dsr_unavailable]).toBe(1);
    expect(s.cv[s.C.out_dsr]).toBe(3);
    expect(s.traffic.dsr[s.k]).toBe(3);
  });
});
