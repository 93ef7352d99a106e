// The host agent's flow journal (host-agent/flow-journal.ts, issue 16): what changed after the last
// snapshot, replayed at the start. The expected behaviour comes from the agent that recorded the flows
// (what it sends for the same backend packet) and from the packet builder, never from the journal code.
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ip, mac } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound, OUT_DSR, VERDICT_FORWARD, type HostContext } from '../host-agent/data-plane.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import { SnatEngine } from '../host-agent/snat.js';
import { encodeFlowSnapshot, restoreFlowState, FlowSnapshotter } from '../host-agent/flow-snapshot.js';
import {
  FlowJournalBuffer,
  JOURNAL_DSR_RECORD_WORDS,
  JOURNAL_SNAT_END,
  JOURNAL_SNAT_OPEN,
  decodeFlowJournal,
  encodeJournalHeader,
} from '../host-agent/flow-journal.js';
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
const T0_MS = 1_800_000_000_000;
const T0_S = T0_MS / 1000;

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
  const v = processOutbound(Buffer.from(frame), frame.length, 0, ctx);
  if (v === VERDICT_FORWARD && ctx.outPort === OUT_DSR)
    return Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + ctx.outLen)).toString('hex');
  return ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : `verdict ${v} port ${ctx.outPort}`;
}

/** A journal file's bytes: header (generation) and the buffer's records written at `unixS`. */
function journalFile(gen: number, ...turns: [FlowJournalBuffer, number, number][]): Uint8Array {
  const parts = [encodeJournalHeader(gen, T0_MS)];
  for (const [b, nowS, unixS] of turns) parts.push(b.encode(nowS, unixS));
  return Buffer.concat(parts);
}

/** An agent whose return-path changes go to a journal buffer. */
function journaled(): { a: HostContext; j: FlowJournalBuffer } {
  const a = newCtx();
  const j = new FlowJournalBuffer();
  a.ew.journal = j;
  a.ew.nowS = 100;
  return { a, j };
}

const PROBE_PORTS = [40000, 40001, 40002, 40003];
const probes = () => [
  ...PROBE_PORTS.map((dport) => fromBackend({ dport })),
  fromBackend({ dport: 5000, udp: true }),
  fromBackend({ dport: 5001, udp: true, v6: true }),
];
const restore = (b: HostContext, snapshot: Uint8Array | null, journals: Uint8Array[], unixMs = T0_MS + 1000) =>
  restoreFlowState(snapshot, journals, { flows: b.ew.flows, nowS: b.ew.nowS, unixMs, maxLeftS: 240 });

describe('flow journal: the changes after the last snapshot survive a SIGKILL', () => {
  it('round trip: new, half-closed and closing entries replayed into a fresh agent, which sends what the old one sent', () => {
    const { a, j } = journaled();
    clientIn(a, { cport: 40000, flags: TCP_SYN }); // open
    clientIn(a, { cport: 40001, flags: TCP_ACK }); // learned mid-stream
    clientIn(a, { cport: 40001, flags: TCP_FIN | TCP_ACK }); // half-closed by the client
    clientIn(a, { cport: 40002, flags: TCP_SYN });
    clientIn(a, { cport: 40002, flags: TCP_RST }); // closing
    clientIn(a, { cport: 5000, udp: true });
    clientIn(a, { cport: 5001, udp: true, v6: true });
    clientIn(a, { cport: 40000, flags: TCP_ACK }); // the common case: no record
    expect(j.pending).toBe(7); // 5 new entries, 2 changes of kind
    const file = journalFile(1, [j, a.ew.nowS, T0_S]);
    expect(file.length).toBe(32 + 7 * JOURNAL_DSR_RECORD_WORDS * 4);
    const b = newCtx();
    b.ew.nowS = 7;
    const r = restore(b, null, [file]);
    expect(r.journal).toMatchObject({ files: 1, dsrReplayed: 7, dsrExpired: 0, torn: 0, damaged: 0 });
    const fresh = newCtx();
    for (const f of probes()) expect(send(fresh, f)).toBe('drop_out_dsr_unsolicited');
    // 40003 was never recorded: unsolicited in both
    for (const f of probes()) expect(send(b, f)).toBe(send(a, f));
    expect(send(b, fromBackend({ dport: 40000 })).slice(24, 32)).toBe('cb00710a'); // from the VIP (203.0.113.10)
    // the half-closed flow came back half-closed: the server's FIN now closes it (10 s), as it would have in a
    b.ew.nowS = 8;
    expect(send(b, fromBackend({ dport: 40001, flags: TCP_FIN | TCP_ACK }))).not.toBe('drop_out_dsr_unsolicited');
    b.ew.nowS = 18;
    expect(send(b, fromBackend({ dport: 40001 }))).toBe('drop_out_dsr_unsolicited');
  });

  it('the snapshot, then the journal of its generation; a journal older than the snapshot is ignored', () => {
    const { a, j } = journaled();
    clientIn(a, { cport: 40000, flags: TCP_SYN });
    clientIn(a, { cport: 40001, flags: TCP_SYN });
    const old = journalFile(4, [j, a.ew.nowS, T0_S]); // generation 4: both flows
    const snap = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS, null, 5); // names generation 5
    clientIn(a, { cport: 40002, flags: TCP_SYN }); // after the copy: only in journal 5
    clientIn(a, { cport: 40000, flags: TCP_RST }); // closing after the copy
    const cur = journalFile(5, [j, a.ew.nowS, T0_S]);
    const b = newCtx();
    const r = restore(b, snap, [old, cur]);
    expect(r).toMatchObject({ refused: null, generation: 5, dsrRestored: 2 });
    expect(r.journal).toMatchObject({ files: 1, ignoredOlder: 1, dsrReplayed: 2 });
    for (const f of probes()) expect(send(b, f)).toBe(send(a, f));
    expect(b.ew.flows.countByKind(b.ew.nowS)).toEqual({ dsr: 2, dsr_closing: 1 });
    // the older journal's records are not applied over the snapshot: an entry it names, gone from the
    // snapshot, stays gone (without the generation check it came back)
    const c = newCtx();
    const snap2 = encodeFlowSnapshot(newCtx().ew.flows, 100, T0_MS, null, 5); // nothing recorded
    expect(restore(c, snap2, [old]).journal).toMatchObject({ ignoredOlder: 1, dsrReplayed: 0 });
    expect(send(c, fromBackend({ dport: 40000 }))).toBe('drop_out_dsr_unsolicited');
  });

  it('a torn last record (the process died in its write) is ignored and counted; the records before it replayed', () => {
    const { a, j } = journaled();
    clientIn(a, { cport: 40000, flags: TCP_SYN });
    clientIn(a, { cport: 40001, flags: TCP_SYN });
    const whole = journalFile(1, [j, a.ew.nowS, T0_S]);
    const rec = JOURNAL_DSR_RECORD_WORDS * 4;
    for (let cut = 1; cut < rec; cut++) {
      const b = newCtx();
      const r = restore(b, null, [whole.subarray(0, whole.length - cut)]);
      expect(r.journal, `cut ${cut}`).toMatchObject({ dsrReplayed: 1, torn: 1, damaged: 0 });
      expect(send(b, fromBackend({ dport: 40000 }))).toBe(send(a, fromBackend({ dport: 40000 })));
      expect(send(b, fromBackend({ dport: 40001 }))).toBe('drop_out_dsr_unsolicited');
    }
    // a file whose last write left zeros (a hole) is torn too
    const zeros = Buffer.concat([whole, Buffer.alloc(24)]);
    expect(restore(newCtx(), null, [zeros]).journal).toMatchObject({ dsrReplayed: 2, torn: 1, damaged: 0 });
  });

  it('a damaged record stops the replay there (counted), a damaged header refuses the file; random bytes never crash', () => {
    const { a, j } = journaled();
    for (const cport of [40000, 40001, 40002]) clientIn(a, { cport, flags: TCP_SYN });
    const whole = journalFile(1, [j, a.ew.nowS, T0_S]);
    const mid = Buffer.from(whole);
    mid[32 + JOURNAL_DSR_RECORD_WORDS * 4 + 12]! ^= 0x10; // a key word of the second record
    const b = newCtx();
    expect(restore(b, null, [mid]).journal).toMatchObject({ dsrReplayed: 1, damaged: 1, torn: 0 });
    expect(PROBE_PORTS.slice(0, 3).map((p) => send(b, fromBackend({ dport: p })) === 'drop_out_dsr_unsolicited')).toEqual([
      false,
      true,
      true,
    ]);
    const hdr = Buffer.from(whole);
    hdr[16]! ^= 0x01; // the generation
    const rh = restore(newCtx(), null, [hdr]);
    expect(rh.journal.refused).toEqual(['damaged header: CRC-32 mismatch']);
    expect(rh.journal.dsrReplayed).toBe(0);
    const rng = new Rng(16);
    const c = newCtx();
    for (let i = 0; i < 300; i++) {
      const n = rng.int(600);
      const junk = rng.bytes(n);
      if (i % 2 === 0) junk.set(whole.subarray(0, Math.min(n, 32 + rng.int(200))), 0); // a good start, then junk
      expect(() => restore(c, null, [junk])).not.toThrow();
    }
  });

  it('a record whose time ran out removes the entry the snapshot had (the journal holds the later state)', () => {
    const { a, j } = journaled();
    clientIn(a, { cport: 40000, flags: TCP_SYN });
    const snap = encodeFlowSnapshot(a.ew.flows, a.ew.nowS, T0_MS, null, 2);
    j.encode(a.ew.nowS, T0_S); // (before the copy: in the snapshot)
    clientIn(a, { cport: 40000, flags: TCP_RST }); // closing: 10 s left
    const cur = journalFile(2, [j, a.ew.nowS, T0_S]);
    const b = newCtx();
    const r = restore(b, snap, [cur], T0_MS + 30_000); // 30 s later
    expect(r).toMatchObject({ dsrRestored: 1 });
    expect(r.journal).toMatchObject({ dsrReplayed: 0, dsrExpired: 1 });
    expect(send(b, fromBackend({ dport: 40000 }))).toBe('drop_out_dsr_unsolicited');
  });

  it('outbound NAT flows: opened ones imported, ended ones (in the snapshot or the journal) not', () => {
    const FIP = '203.0.113.200';
    const REMOTE = '198.51.100.5';
    const DIP = '192.0.2.11';
    const engine = () => {
      const e = new SnatEngine(new HostFlowTable(10_000), 10_000);
      e.setNic(0, {
        vni: 5001,
        idleS: 240,
        tcpResetOnIdle: false,
        tcp: true,
        udp: true,
        ranges4: [{ ip: ip(FIP).words, first: 1024, last: 1031 }],
        ranges6: [],
      });
      return e;
    };
    const seg = (src: string, dst: string, sport: number, dport: number, flags: number) =>
      pkt().eth().ipv4({ src, dst, id: 7 }).tcp({ sport, dport, flags, seq: 1000, ack: 5 }).payload('hello').build();
    const ea = engine();
    ea.out4(seg(DIP, REMOTE, 40000, 9000, TCP_SYN), 14, 74, 0, 100); // port 1024: in the snapshot
    const snap = encodeFlowSnapshot(new HostFlowTable(10), 100, T0_MS, ea, 3);
    const before = ea.exportFlows(100);
    ea.out4(seg(DIP, REMOTE, 40001, 9000, TCP_SYN), 14, 74, 0, 100); // port 1025: in the journal only
    ea.out4(seg(DIP, REMOTE, 40002, 9000, TCP_SYN), 14, 74, 0, 100); // port 1026: opened and ended
    const all = ea.exportFlows(100);
    const R = all.length / 3;
    const j = new FlowJournalBuffer();
    j.addSnat(JOURNAL_SNAT_OPEN, all.subarray(R, 2 * R));
    j.addSnat(JOURNAL_SNAT_OPEN, all.subarray(2 * R, 3 * R));
    j.addSnat(JOURNAL_SNAT_END, all.subarray(2 * R, 3 * R));
    j.addSnat(JOURNAL_SNAT_END, before.subarray(0, R)); // the snapshot's flow ended after the copy
    const eb = engine();
    const b = newCtx();
    const r = restoreFlowState(snap, [journalFile(3, [j, 100, T0_S])], {
      flows: b.ew.flows,
      nowS: 5,
      unixMs: T0_MS + 1000,
      maxLeftS: 240,
      snat: eb,
    });
    expect(r.journal).toMatchObject({ snatOpened: 2, snatEnded: 2 });
    expect(r.snat).toEqual({ restored: 1, expired: 0, skipped: 0 });
    // the reply to port 1025 reaches DIP:40001 (the builder's frame); 1024's and 1026's find no flow
    const f = seg(REMOTE, FIP, 9000, 1025, TCP_SYN | TCP_ACK);
    expect(eb.in4(f, 14, f.length, 6)).toBeGreaterThanOrEqual(0);
    expect(f.toString('hex')).toBe(seg(REMOTE, DIP, 9000, 40001, TCP_SYN | TCP_ACK).toString('hex'));
    for (const port of [1024, 1026]) expect(eb.in4(seg(REMOTE, FIP, 9000, port, TCP_SYN | TCP_ACK), 14, 74, 6)).toBeLessThan(0);
  });
});

describe('flow journal files (FlowSnapshotter): SIGKILL after the last snapshot', () => {
  const dir = mkdtempSync(join(tmpdir(), 'slbx-flow-journal-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const log = () => undefined;

  it('flows recorded after the start (no snapshot since) are all back after a SIGKILL; the next start covers them in its snapshot', async () => {
    const a = newCtx();
    a.ew.nowS = 100;
    const s1 = new FlowSnapshotter({ dir, name: 'h1', intervalMs: 1000, log });
    expect(s1.load({ flows: a.ew.flows, nowS: a.ew.nowS, maxLeftS: 240 })).toBeNull(); // a first start
    a.ew.journal = s1.journalSink(() => a.ew.nowS);
    for (let p = 40000; p < 40100; p++) clientIn(a, { cport: p, flags: TCP_SYN });
    clientIn(a, { cport: 40050, flags: TCP_FIN | TCP_ACK });
    await new Promise((r) => setImmediate(r)); // the end of the turn: one write
    expect(s1.journal.status()).toMatchObject({ written: 1, records: 101, generation: 1 });
    // SIGKILL: no writeNow. A new process reads the snapshot of its predecessor's start and its journal
    const b = newCtx();
    b.ew.nowS = 3;
    const s2 = new FlowSnapshotter({ dir, name: 'h1', intervalMs: 1000, log });
    const r = s2.load({ flows: b.ew.flows, nowS: b.ew.nowS, maxLeftS: 240 });
    expect(r).toMatchObject({ refused: null, generation: 1, dsrRestored: 0 });
    expect(r?.journal).toMatchObject({ files: 1, dsrReplayed: 101, torn: 0, damaged: 0 });
    for (const dport of [40000, 40050, 40099, 40100]) expect(send(b, fromBackend({ dport }))).toBe(send(a, fromBackend({ dport })));
    // its start wrote a snapshot naming generation 2 and started journal 2: a third start reads the same flows from the snapshot
    expect(s2.journal.generation).toBe(2);
    const c = newCtx();
    const r3 = new FlowSnapshotter({ dir, name: 'h1', intervalMs: 1000, log }).load({ flows: c.ew.flows, nowS: c.ew.nowS, maxLeftS: 240 });
    expect(r3).toMatchObject({ generation: 2, dsrRestored: 100 });
    expect(r3?.journal).toMatchObject({ ignoredOlder: 1, dsrReplayed: 0 });
  });

  it("the timer's snapshot starts a new generation; records made during its copy are in the new journal; a torn file tail is harmless", async () => {
    const a = newCtx();
    a.ew.nowS = 100;
    const s1 = new FlowSnapshotter({ dir, name: 'h2', intervalMs: 1000, log });
    s1.load({ flows: a.ew.flows, nowS: a.ew.nowS, maxLeftS: 240 });
    a.ew.journal = s1.journalSink(() => a.ew.nowS);
    clientIn(a, { cport: 40000, flags: TCP_SYN });
    const src = () => ({ flows: a.ew.flows, nowS: a.ew.nowS, mark: String(a.ew.flows.size), minIdleS: 30, snat: null });
    s1.tick(src); // rotates to generation 2 at once, then copies
    clientIn(a, { cport: 40001, flags: TCP_SYN }); // during the copy
    for (let i = 0; i < 300 && s1.written < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(s1.written).toBe(2); // the start's and the timer's
    expect(s1.journal.generation).toBe(2);
    clientIn(a, { cport: 40002, flags: TCP_SYN });
    await new Promise((r) => setImmediate(r));
    // SIGKILL in the middle of a write: the last record cut short
    truncateSync(s1.journal.path, readFileSync(s1.journal.path).length - 5);
    const b = newCtx();
    const r = new FlowSnapshotter({ dir, name: 'h2', intervalMs: 1000, log }).load({ flows: b.ew.flows, nowS: b.ew.nowS, maxLeftS: 240 });
    expect(r).toMatchObject({ generation: 2 });
    expect(r?.journal).toMatchObject({ files: 1, ignoredOlder: 1, torn: 1 });
    expect([40000, 40001, 40002].map((dport) => send(b, fromBackend({ dport })) === 'drop_out_dsr_unsolicited')).toEqual([
      false,
      false,
      true,
    ]);
    // a journal file that is no journal is refused by name, never a crash
    writeFileSync(join(dir, 'host-agent-h2.journal'), 'hello');
    const c = newCtx();
    const rc = new FlowSnapshotter({ dir, name: 'h2', intervalMs: 1000, log }).load({ flows: c.ew.flows, nowS: c.ew.nowS, maxLeftS: 240 });
    expect(rc?.journal.refused).toEqual(['too short (5 bytes)']);
  });
});
