// The host agent's flow snapshot (host-agent/flow-snapshot.ts, issue 16 point 2 and issue 15 point 7): the
// return path's entries and the outbound NAT engine's flows written, read back into a fresh agent's state,
// and what a restarted agent then sends. The expected frames come from the agent that recorded the flows
// (the same backend packet before the restart) and from the packet builder; never from the snapshot code.
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { ip, mac } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound, OUT_DSR, VERDICT_FORWARD, type HostContext } from '../host-agent/data-plane.js';
import { listHostFlows } from '../host-agent/east-west-io.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import { SnatEngine, SNAT_ESTABLISHED, SNAT_SYN_SENT, type SnatNicPolicy } from '../host-agent/snat.js';
import {
  FLOW_SNAPSHOT_VERSION,
  FlowSnapshotBuilder,
  FlowSnapshotter,
  decodeFlowSnapshot,
  encodeFlowSnapshot,
  restoreFlowSnapshot,
} from '../host-agent/flow-snapshot.js';
import { labConfig } from './helpers/lab-config.js';
import { Rng } from './helpers/random.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03'];
const CLIENT = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
const VIP = '203.0.113.10';
const VIP6 = '2001:db8:ff::10';
const H1VM1 = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
const T0_MS = 1_800_000_000_000; // the Unix time (ms) of the copy in these tests

function newCtx(config: SlbxConfig = labConfig()): HostContext {
  return newHostContext(
    compileHostTables(config, 'host1', 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
}

function clientIn(ctx: HostContext, o: { cport: number; flags?: number; udp?: boolean; v6?: boolean }): void {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ src: MUX_MAC, dst: H1VM1.mac, ...(o.v6 ? { type: 0x86dd } : {}) });
  const ipb: PacketBuilder = o.v6 ? p.ipv6({ src: CLIENT6, dst: VIP6 }) : p.ipv4({ src: CLIENT, dst: VIP });
  const f = (
    o.udp ? ipb.udp({ sport: o.cport, dport: 7 }).payload('q') : ipb.tcp({ sport: o.cport, dport: 80, flags: o.flags ?? TCP_ACK })
  ).build();
  expect(processInbound(f, f.length, ctx)).toBe(VERDICT_FORWARD);
}

function fromBackend(o: { dport: number; udp?: boolean; v6?: boolean; flags?: number }): Buffer {
  const p = pkt().eth({ src: H1VM1.mac, dst: PORT_MACS[0] });
  const ipb = o.v6 ? p.ipv6({ src: H1VM1.ip6, dst: CLIENT6 }) : p.ipv4({ src: H1VM1.ip, dst: CLIENT });
  const l4 = o.udp
    ? ipb.udp({ sport: 7, dport: o.dport })
    : ipb.tcp({ sport: 80, dport: o.dport, flags: o.flags ?? TCP_ACK | TCP_PSH, seq: 1000, ack: 2000 });
  return l4.payload('r').build();
}

/** What the agent does with a backend's packet: the frame it sends by DSR, or the drop counter's name. */
function send(ctx: HostContext, frame: Buffer): string {
  const v = processOutbound(frame, frame.length, 0, ctx);
  if (v === VERDICT_FORWARD && ctx.outPort === OUT_DSR)
    return Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + ctx.outLen)).toString('hex');
  return ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : `verdict ${v} port ${ctx.outPort}`;
}

/** An agent with four recorded flows: TCP over IPv4 (open and closing), UDP over IPv4 and IPv6. */
function recordedAgent(): HostContext {
  const a = newCtx();
  a.ew.nowS = 100;
  clientIn(a, { cport: 40000, flags: TCP_SYN });
  clientIn(a, { cport: 40001, flags: TCP_ACK });
  clientIn(a, { cport: 40001, flags: TCP_RST }); // closing: kept DSR_CLOSING_S
  clientIn(a, { cport: 5000, udp: true });
  clientIn(a, { cport: 5001, udp: true, v6: true });
  return a;
}

const PROBES = [
  fromBackend({ dport: 40000 }),
  fromBackend({ dport: 40001 }),
  fromBackend({ dport: 5000, udp: true }),
  fromBackend({ dport: 5001, udp: true, v6: true }),
];

describe('flow snapshot: the return path survives a restart', () => {
  it("round trip: a fresh agent sends the recorded flows' replies as the old one did, and nothing else", () => {
    const a = recordedAgent();
    const bytes = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const b = newCtx();
    b.ew.nowS = 7; // a new process: its own clock
    const r = restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: b.ew.nowS, unixMs: T0_MS + 2500, maxLeftS: 240 });
    expect(r).toMatchObject({ refused: null, ageMs: 2500, dsrRestored: 4, dsrExpired: 0, dsrInvalid: 0, dsrFull: 0 });
    // each entry has what it had left less the 3 s (2.5 rounded up) the agent was down; the closing one stays closing
    const left = Object.fromEntries(listHostFlows(b.ew, b.tables, 10).map((f) => [`${f.kind} ${f.client}`, f.expiresInS]));
    expect(left).toEqual({
      [`dsr ${CLIENT}:40000`]: 240 - 3,
      [`dsr_closing ${CLIENT}:40001`]: 10 - 3,
      [`dsr ${CLIENT}:5000`]: 30 - 3,
      [`dsr [${CLIENT6}]:5001`]: 30 - 3,
    });
    // before: a new agent without the snapshot drops them all
    const fresh = newCtx();
    for (const f of PROBES) expect(send(fresh, Buffer.from(f))).toBe('drop_out_dsr_unsolicited');
    for (const f of PROBES) expect(send(b, Buffer.from(f))).toBe(send(a, Buffer.from(f)));
    expect(send(b, fromBackend({ dport: 40000 })).slice(24, 32)).toBe('cb00710a'); // the IPv4 source: the VIP (203.0.113.10)
    expect(send(b, fromBackend({ dport: 40002 }))).toBe('drop_out_dsr_unsolicited');
  });

  it('entries whose time ran out while the agent was down are not restored', () => {
    const a = recordedAgent();
    const bytes = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const b = newCtx();
    // 31 s later: both UDP flows (30 s) and the closing TCP flow (10 s) are over, the open TCP flow (240 s) is not
    const r = restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: b.ew.nowS, unixMs: T0_MS + 31_000, maxLeftS: 240 });
    expect(r).toMatchObject({ refused: null, dsrRestored: 1, dsrExpired: 3 });
    expect(PROBES.map((f) => send(b, Buffer.from(f)) === 'drop_out_dsr_unsolicited')).toEqual([false, true, true, true]);
  });

  it('a restored entry never gets more time than the current config gives (a shorter idle timeout since)', () => {
    const a = recordedAgent();
    const bytes = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const b = newCtx();
    restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: 50, unixMs: T0_MS, maxLeftS: 60 });
    const tcp = listHostFlows(b.ew, b.tables, 10).find((f) => f.client === `${CLIENT}:40000`)!;
    expect(tcp.expiresInS + b.ew.nowS - 50).toBe(60);
  });

  it('a damaged file is refused as a whole, never a crash: one flipped bit, a truncation, random bytes, another file', () => {
    const a = recordedAgent();
    const good = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const rng = new Rng(16);
    const cases: [string, Uint8Array, RegExp][] = [];
    const flipped = good.slice();
    flipped[60]! ^= 0x01; // a key word of the first record
    cases.push(['a flipped bit', flipped, /CRC-32 mismatch/]);
    cases.push(['truncated', good.slice(0, good.length - 8), /damaged/]);
    cases.push(['empty', new Uint8Array(0), /too short/]);
    cases.push(['another file', Buffer.from('{"generation": 3, "vips": []}\n'.repeat(4)), /no SLBXFLOW magic/]);
    for (let i = 0; i < 200; i++) {
      const n = rng.int(400);
      const junk = rng.bytes(n);
      if (n >= 8 && rng.int(2) === 1) junk.set(Buffer.from('SLBXFLOW'), 0); // past the magic half the time
      cases.push([`random ${n} bytes`, junk, /./]);
    }
    for (const [what, bytes, reason] of cases) {
      const b = newCtx();
      const r = restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: b.ew.nowS, unixMs: T0_MS, maxLeftS: 240 });
      expect(r.refused, what).toMatch(reason);
      expect(r.dsrRestored, what).toBe(0);
      expect(b.ew.flows.size, what).toBe(0);
    }
  });

  it('another format version is refused naming both versions (its checksum right)', () => {
    const a = recordedAgent();
    const bytes = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const w = new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
    w[2] = FLOW_SNAPSHOT_VERSION + 1;
    w[w.length - 1] = crc32(bytes.subarray(0, bytes.length - 4)) >>> 0;
    const d = decodeFlowSnapshot(bytes);
    expect(d.ok).toBe(false);
    expect(!d.ok && d.reason).toBe(`format version ${FLOW_SNAPSHOT_VERSION + 1}, this host agent reads version ${FLOW_SNAPSHOT_VERSION}`);
    const b = newCtx();
    expect(restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: 1, unixMs: T0_MS, maxLeftS: 240 }).dsrRestored).toBe(0);
  });

  it('copied in slices, the same records as at once; a table that grows during the copy voids it', () => {
    const a = recordedAgent();
    for (let p = 41000; p < 41500; p++) clientIn(a, { cport: p, flags: TCP_SYN });
    const whole = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS);
    const sb = new FlowSnapshotBuilder(a.ew.flows, a.ew.nowS, T0_MS);
    let steps = 0;
    while (!sb.step(100)) steps++;
    expect(steps).toBeGreaterThan(5);
    expect(Buffer.from(sb.finish(null)).equals(Buffer.from(whole))).toBe(true);
    const grown = new FlowSnapshotBuilder(a.ew.flows, a.ew.nowS, T0_MS);
    grown.step(100);
    for (let p = 42000; p < 43000; p++) clientIn(a, { cport: p, flags: TCP_SYN }); // 1,500+ entries: the 1,024-slot table doubles
    expect(grown.step(1 << 30)).toBe(true);
    expect(grown.aborted).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Outbound NAT flows (host-agent/snat.ts exportFlows / importFlows)

const FIP = '203.0.113.200';
const FIP6 = '2001:db8:ff::200';
const REMOTE = '198.51.100.5';
const REMOTE6 = '2001:db8:c::5';
const DIP = '192.0.2.11';
const DIP6 = '2001:db8:d::11';
const L3 = 14;

function nicPolicy(): SnatNicPolicy {
  return {
    vni: 5001,
    idleS: 240,
    tcpResetOnIdle: false,
    tcp: true,
    udp: true,
    ranges4: [{ ip: ip(FIP).words, first: 1024, last: 1031 }],
    ranges6: [{ ip: ip(FIP6).words, first: 1024, last: 1031 }],
  };
}
function snatEngine(table = new HostFlowTable(10_000)): SnatEngine {
  const e = new SnatEngine(table, 10_000);
  e.setNic(0, nicPolicy());
  return e;
}
function seg4(src: string, dst: string, sport: number, dport: number, flags: number): Buffer {
  return pkt().eth().ipv4({ src, dst, id: 7 }).tcp({ sport, dport, flags, seq: 1000, ack: 5 }).payload('hello').build();
}
function seg6(src: string, dst: string, sport: number, dport: number, flags: number): Buffer {
  return pkt().eth().ipv6({ src, dst }).tcp({ sport, dport, flags, seq: 1000, ack: 5 }).payload('hello').build();
}
function dgram4(src: string, dst: string, sport: number, dport: number): Buffer {
  return pkt().eth().ipv4({ src, dst, id: 7 }).udp({ sport, dport }).payload('datagram').build();
}
const outOf = (e: SnatEngine, f: Buffer, now: number) =>
  f[12] === 0x86 ? e.out6(f, L3, f.length, 0, now) : e.out4(f, L3, f.length, 0, now);
const inOf = (e: SnatEngine, f: Buffer, now: number) => (f[12] === 0x86 ? e.in6(f, L3, f.length, now) : e.in4(f, L3, f.length, now));

/** An engine with three flows: TCP v4 established (port 1024), UDP v4 (1025), TCP v6 (1024). */
function snatWithFlows(): SnatEngine {
  const e = snatEngine();
  outOf(e, seg4(DIP, REMOTE, 40000, 9000, TCP_SYN), 100);
  expect(inOf(e, seg4(REMOTE, FIP, 9000, 1024, TCP_SYN | TCP_ACK), 100)).toBeGreaterThanOrEqual(0);
  outOf(e, dgram4(DIP, REMOTE, 5353, 53), 100);
  outOf(e, seg6(DIP6, REMOTE6, 40000, 9000, TCP_SYN), 100);
  return e;
}

describe('outbound NAT flows survive a restart (exportFlows / importFlows)', () => {
  it('a flow exported and imported into a fresh engine translates the same packets the same way', () => {
    const a = snatWithFlows();
    const b = snatEngine();
    expect(b.importFlows(a.exportFlows(100), 3, 0)).toEqual({ restored: 3, expired: 0, skipped: 0 });
    // slots in export order, the TCP state as it was: v4 established, v6 still waiting for its SYN-ACK
    expect([b.slotState(0), b.slotState(2)]).toEqual([SNAT_ESTABLISHED, SNAT_SYN_SENT]);
    expect(b.exportFlows(3)).toEqual(a.exportFlows(100));
    // replies come back to DIP:port (builder-made expected frames), the next segments leave from the same port
    const cases: [Buffer, Buffer, 'in' | 'out'][] = [
      [seg4(REMOTE, FIP, 9000, 1024, TCP_ACK), seg4(REMOTE, DIP, 9000, 40000, TCP_ACK), 'in'],
      [seg4(DIP, REMOTE, 40000, 9000, TCP_ACK | TCP_PSH), seg4(FIP, REMOTE, 1024, 9000, TCP_ACK | TCP_PSH), 'out'],
      [dgram4(REMOTE, FIP, 53, 1025), dgram4(REMOTE, DIP, 53, 5353), 'in'],
      [dgram4(DIP, REMOTE, 5353, 53), dgram4(FIP, REMOTE, 1025, 53), 'out'],
      [seg6(REMOTE6, FIP6, 9000, 1024, TCP_SYN | TCP_ACK), seg6(REMOTE6, DIP6, 9000, 40000, TCP_SYN | TCP_ACK), 'in'],
    ];
    for (const [pkt, want, dir] of cases) {
      const f = Buffer.from(pkt);
      const slot = dir === 'in' ? inOf(b, f, 4) : outOf(b, f, 4);
      expect(slot).toBeGreaterThanOrEqual(0);
      expect(f.toString('hex')).toBe(want.toString('hex'));
    }
    // the TCP state came along: established, not a new SYN_SENT flow
    expect(b.slotState(inOf(b, seg4(REMOTE, FIP, 9000, 1024, TCP_ACK), 4))).toBe(SNAT_ESTABLISHED);
    // the port is taken in the new engine: a new TCP flow to the same remote endpoint gets the next one
    // (1025 is the UDP flow's toward port 53, another remote endpoint)
    const n = seg4(DIP, REMOTE, 40009, 9000, TCP_SYN);
    outOf(b, n, 4);
    expect(n.toString('hex')).toBe(seg4(FIP, REMOTE, 1025, 9000, TCP_SYN).toString('hex'));
    expect(b.status()[0]).toMatchObject({ inUse4: 3, inUse6: 1 });
  });

  it('time left less the time down; a flow with none left is not imported; a taken port is skipped', () => {
    const a = snatWithFlows(); // TCP v4 established: 240 s; UDP: 240 s; TCP v6 SYN sent: 60 s
    const words = a.exportFlows(100);
    expect(snatEngine().importFlows(words, 3, 60)).toEqual({ restored: 2, expired: 1, skipped: 0 });
    const b = snatEngine();
    outOf(b, seg4(DIP, REMOTE, 41000, 9000, TCP_SYN), 1); // takes port 1024 toward REMOTE first
    expect(b.importFlows(words, 3, 0)).toEqual({ restored: 2, expired: 0, skipped: 1 });
  });

  it('through the snapshot file: both kinds of state in one file', () => {
    const a = recordedAgent();
    const sa = snatWithFlows();
    const bytes = encodeFlowSnapshot(a.ew.flows, 100, T0_MS, sa);
    const b = newCtx();
    const sb = snatEngine(b.ew.flows);
    const r = restoreFlowSnapshot(bytes, { flows: b.ew.flows, nowS: 5, unixMs: T0_MS + 1000, maxLeftS: 240, snat: sb });
    expect(r).toMatchObject({ refused: null, dsrRestored: 4, snat: { restored: 3, expired: 0, skipped: 0 } });
    const f = seg4(REMOTE, FIP, 9000, 1024, TCP_ACK);
    expect(inOf(sb, f, 6)).toBeGreaterThanOrEqual(0);
    expect(f.toString('hex')).toBe(seg4(REMOTE, DIP, 9000, 40000, TCP_ACK).toString('hex'));
  });
});

describe('the snapshot file (FlowSnapshotter)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'slbx-flow-snapshot-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('written at stop, read at the next start; a damaged file refused with a log line and nothing restored', () => {
    const logs: [string, string, Record<string, unknown>][] = [];
    const log = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) => logs.push([level, event, fields]);
    const a = recordedAgent();
    const w = new FlowSnapshotter({ dir, name: 'host1', intervalMs: 1000, log });
    w.writeNow({ flows: a.ew.flows, nowS: a.ew.nowS, mark: '', minIdleS: 30, snat: null });
    expect(w.status()).toMatchObject({ written: 1, writeErrors: 0, lastFlows: 4 });
    const b = newCtx();
    const r = new FlowSnapshotter({ dir, name: 'host1', intervalMs: 1000, log }).load({
      flows: b.ew.flows,
      nowS: b.ew.nowS,
      maxLeftS: 240,
    });
    expect(r).toMatchObject({ refused: null, dsrRestored: 4 });
    expect(logs.at(-1)?.[1]).toBe('flow_snapshot_loaded');
    // another host's file is its own
    expect(
      new FlowSnapshotter({ dir, name: 'host2', intervalMs: 1000, log }).load({ flows: newCtx().ew.flows, nowS: 1, maxLeftS: 240 }),
    ).toBeNull();
    const path = join(dir, 'host-agent-host1.flows');
    const bytes = readFileSync(path);
    bytes[bytes.length - 10]! ^= 0xff;
    writeFileSync(path, bytes);
    const c = newCtx();
    const rc = new FlowSnapshotter({ dir, name: 'host1', intervalMs: 1000, log }).load({
      flows: c.ew.flows,
      nowS: c.ew.nowS,
      maxLeftS: 240,
    });
    expect(rc?.refused).toMatch(/CRC-32/);
    expect(c.ew.flows.size).toBe(0);
    expect(logs.find((l) => l[1] === 'flow_snapshot_refused')).toEqual([
      'warn',
      'flow_snapshot_refused',
      expect.objectContaining({ reason: 'damaged: CRC-32 mismatch' }),
    ]);
  });

  it('the timer writes when the flows changed, in slices, and the file reads back', async () => {
    const a = recordedAgent();
    const w = new FlowSnapshotter({ dir, name: 'host3', intervalMs: 1000, log: () => undefined });
    const src = () => ({ flows: a.ew.flows, nowS: a.ew.nowS, mark: String(a.ew.flows.size), minIdleS: 30, snat: null });
    w.tick(src);
    for (let i = 0; i < 200 && w.written === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(w.written).toBe(1);
    w.tick(src); // nothing changed: no copy
    await new Promise((r) => setTimeout(r, 50));
    expect(w.written).toBe(1);
    const d = decodeFlowSnapshot(readFileSync(join(dir, 'host-agent-host3.flows')));
    expect(d.ok && d.dsrCount).toBe(4);
  });
});
