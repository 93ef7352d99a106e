// Outbound NAT flows in the flow journal (host-agent/snat.ts SnatJournalSink, host-agent/flow-journal.ts,
// host-agent/flow-snapshot.ts restoreFlowState; issue 16 point 2): the engine writes a record when a flow
// opens, becomes ESTABLISHED and ends; a fresh engine that replays the journal after an older snapshot
// translates the same flows with the same ports, and a new flow toward the same remote endpoint gets
// another port. Expected frames come from the packet builder; the ports from the frames the first
// engine sent (what the remote end saw), never from the journal code.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ip } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN } from '../shared/tcp.js';
import { HostFlowTable } from '../host-agent/flow-table.js';
import { SNAT_FLOW_RECORD_WORDS, SnatEngine } from '../host-agent/snat.js';
import { encodeFlowSnapshot, restoreFlowState, FlowSnapshotter } from '../host-agent/flow-snapshot.js';
import {
  FlowJournalBuffer,
  JOURNAL_SNAT_END,
  JOURNAL_SNAT_OPEN,
  JOURNAL_SNAT_RECORD_WORDS,
  decodeFlowJournal,
  encodeJournalHeader,
} from '../host-agent/flow-journal.js';

const FIP = '203.0.113.200';
const REMOTE = '198.51.100.5';
const DIP = '192.0.2.11';
const FIRST = 1024;
const LAST = 1087; // 64 ports
const IDLE_S = 240;
const T0_MS = 1_800_000_000_000;
const T0_S = T0_MS / 1000;

function engine(): SnatEngine {
  const e = new SnatEngine(new HostFlowTable(10_000), 10_000);
  e.setNic(0, {
    vni: 5001,
    idleS: IDLE_S,
    tcpResetOnIdle: false,
    tcp: true,
    udp: true,
    ranges4: [{ ip: ip(FIP).words, first: FIRST, last: LAST }],
    ranges6: [],
  });
  return e;
}

const seg = (src: string, dst: string, sport: number, dport: number, flags: number) =>
  pkt().eth().ipv4({ src, dst, id: 7 }).tcp({ sport, dport, flags, seq: 1000, ack: 5 }).payload('hello').build();
const dgram = (src: string, dst: string, sport: number, dport: number) =>
  pkt().eth().ipv4({ src, dst, id: 9 }).udp({ sport, dport }).payload('ping').build();

/** A backend's packet through the engine: the frontend port it left with (read from the sent frame), or the error. */
function out(e: SnatEngine, f: Buffer, now: number): number {
  const r = e.out4(f, 14, f.length, 0, now);
  if (r < 0) return r;
  expect(ip(FIP).words[0]).toBe(f.readUInt32BE(14 + 12)); // it left from the frontend IP
  return f.readUInt16BE(14 + 20);
}

/** Whether a reply from REMOTE:rport to FIP:fport reaches DIP:dport as the builder writes it. */
function replyReaches(e: SnatEngine, fport: number, dport: number, now: number, rport = 9000, flags = TCP_ACK): boolean {
  const f = seg(REMOTE, FIP, rport, fport, flags);
  if (e.in4(f, 14, f.length, now) < 0) return false;
  return f.equals(seg(REMOTE, DIP, rport, dport, flags));
}

/** A journal file: its header (generation) and one turn's records written at Unix time unixS. */
const journalFile = (gen: number, j: FlowJournalBuffer, nowS: number, unixS: number) =>
  Buffer.concat([encodeJournalHeader(gen, T0_MS), j.encode(nowS, unixS)]);

describe('outbound NAT flows in the flow journal', () => {
  it('open, ESTABLISHED and end each write one record; a data segment, a FIN or a reply none', () => {
    const e = engine();
    const j = new FlowJournalBuffer();
    e.journal = j;
    const p = out(e, seg(DIP, REMOTE, 40000, 9000, TCP_SYN), 100);
    expect(j.pending).toBe(1);
    expect(replyReaches(e, p, 40000, 100, 9000, TCP_SYN | TCP_ACK)).toBe(true); // ESTABLISHED
    expect(j.pending).toBe(2);
    out(e, seg(DIP, REMOTE, 40000, 9000, TCP_ACK | TCP_PSH), 101);
    expect(replyReaches(e, p, 40000, 101)).toBe(true);
    out(e, seg(DIP, REMOTE, 40000, 9000, TCP_FIN | TCP_ACK), 102); // closing: no record (SnatJournalSink says why)
    expect(replyReaches(e, p, 40000, 102, 9000, TCP_FIN | TCP_ACK)).toBe(true);
    expect(j.pending).toBe(2);
    out(e, dgram(DIP, REMOTE, 5353, 53), 102); // a UDP flow: opened
    expect(j.pending).toBe(3);
    e.sweep(102 + 121, 100); // the TCP flow's TIME-WAIT guard is over: freed
    expect(j.pending).toBe(4);
    const d = decodeFlowJournal(journalFile(1, j, 300, T0_S));
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(d.records.map((r) => r.type)).toEqual([JOURNAL_SNAT_OPEN, JOURNAL_SNAT_OPEN, JOURNAL_SNAT_OPEN, JOURNAL_SNAT_END]);
    expect(d.records.map((r) => r.words.length)).toEqual([21, 21, 21, 21].map(() => SNAT_FLOW_RECORD_WORDS));
    // the bytes a TCP flow costs in the journal: open, ESTABLISHED, end
    expect(JOURNAL_SNAT_RECORD_WORDS * 4).toBe(96);
  });

  it('SIGKILL after an older snapshot: the journal brings back each flow with its port; a new flow gets another port', () => {
    const a = engine();
    const j = new FlowJournalBuffer();
    const p0 = out(a, seg(DIP, REMOTE, 40000, 9000, TCP_SYN), 100); // before the snapshot
    const snap = encodeFlowSnapshot(new HostFlowTable(10), 100, T0_MS, a, 2);
    a.journal = j; // (the snapshot's generation 2 journal starts here)
    const ports = new Map<number, number>(); // DIP port -> frontend port, as the remote end saw them
    ports.set(40000, p0);
    for (let sp = 40001; sp <= 40020; sp++) ports.set(sp, out(a, seg(DIP, REMOTE, sp, 9000, TCP_SYN), 100));
    for (let sp = 40001; sp <= 40010; sp++) expect(replyReaches(a, ports.get(sp)!, sp, 100, 9000, TCP_SYN | TCP_ACK)).toBe(true);
    const u = out(a, dgram(DIP, REMOTE, 5353, 9000), 100);
    expect(new Set(ports.values()).size).toBe(21);
    const file = journalFile(2, j, 100, T0_S);
    // a fresh process, 2 s later by the Unix clock, its own agent clock at 5
    const b = engine();
    const r = restoreFlowState(snap, [file], { flows: new HostFlowTable(10), nowS: 5, unixMs: T0_MS + 2000, maxLeftS: IDLE_S, snat: b });
    expect(r.journal).toMatchObject({ files: 1, snatOpened: 31, snatEnded: 0, snatRestored: 21 });
    expect(r.snat).toEqual({ restored: 22, expired: 0, skipped: 0 });
    expect(b.live).toBe(22);
    // every flow's replies reach its DIP port through the port it had
    for (const [sp, fp] of ports) expect(replyReaches(b, fp, sp, 6)).toBe(true);
    const ud = dgram(REMOTE, FIP, 9000, u);
    expect(b.in4(ud, 14, ud.length, 6)).toBeGreaterThanOrEqual(0);
    expect(ud.equals(dgram(REMOTE, DIP, 9000, 5353))).toBe(true);
    // the backend's next segments leave with the same ports
    for (const [sp, fp] of ports) expect(out(b, seg(DIP, REMOTE, sp, 9000, TCP_ACK), 6)).toBe(fp);
    // no port handed out twice: new TCP flows toward the same remote endpoint get other ports of the range
    // (a port is taken per protocol: the UDP flow's may serve TCP)
    const taken = new Set(ports.values());
    for (let sp = 41000; sp < 41010; sp++) {
      const fp = out(b, seg(DIP, REMOTE, sp, 9000, TCP_SYN), 7);
      expect(fp).toBeGreaterThanOrEqual(FIRST);
      expect(fp).toBeLessThanOrEqual(LAST);
      expect(taken.has(fp)).toBe(false);
      taken.add(fp);
    }
    expect(b.status()[0]).toMatchObject({ inUse4: 32 });
  });

  it('an ESTABLISHED flow comes back with its idle timeout, not the SYN timeout; an ended one does not come back', () => {
    const a = engine();
    const j = new FlowJournalBuffer();
    a.journal = j;
    const pe = out(a, seg(DIP, REMOTE, 40000, 9000, TCP_SYN), 100);
    expect(replyReaches(a, pe, 40000, 100, 9000, TCP_SYN | TCP_ACK)).toBe(true);
    const pu = out(a, dgram(DIP, REMOTE, 5353, 9000), 100);
    a.sweep(100 + IDLE_S + 1, 100); // both idle: the UDP flow's and the TCP flow's time ran out, both freed
    const pe2 = out(a, seg(DIP, REMOTE, 40001, 9000, TCP_SYN), 400);
    expect(replyReaches(a, pe2, 40001, 400, 9000, TCP_SYN | TCP_ACK)).toBe(true);
    const b = engine();
    const r = restoreFlowState(null, [journalFile(1, j, 400, T0_S)], {
      flows: new HostFlowTable(10),
      nowS: 5,
      unixMs: T0_MS + 1000,
      maxLeftS: IDLE_S,
      snat: b,
    });
    expect(r.journal).toMatchObject({ snatOpened: 5, snatEnded: 2, snatRestored: 1 });
    expect(b.live).toBe(1);
    expect(replyReaches(b, pu, 5353, 6)).toBe(false);
    // 100 s after the restart (past the SYN timeout of 60 s, inside the idle timeout) the flow still translates
    expect(replyReaches(b, pe2, 40001, 105)).toBe(true);
  });

  it('through the files: a FlowSnapshotter killed (no writeNow) comes back with the flows opened after its last snapshot', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-snat-journal-'));
    try {
      const log = () => undefined;
      const a = engine();
      const s1 = new FlowSnapshotter({ dir, name: 'h1', intervalMs: 1000, log });
      const fa = new HostFlowTable(10);
      expect(s1.load({ flows: fa, nowS: 100, maxLeftS: IDLE_S, snat: a })).toBeNull(); // its snapshot: no flow
      a.journal = s1.journalSink(() => 100);
      const ports = new Map<number, number>();
      for (let sp = 40000; sp < 40050; sp++) {
        ports.set(sp, out(a, seg(DIP, REMOTE, sp, 9000, TCP_SYN), 100));
        expect(replyReaches(a, ports.get(sp)!, sp, 100, 9000, TCP_SYN | TCP_ACK)).toBe(true);
      }
      await new Promise((r) => setImmediate(r)); // the end of the turn: written
      expect(s1.journal.status()).toMatchObject({ records: 100, bytes: 100 * 96 });
      // SIGKILL: nothing more written. The next process:
      const b = engine();
      const s2 = new FlowSnapshotter({ dir, name: 'h1', intervalMs: 1000, log });
      const r = s2.load({ flows: new HostFlowTable(10), nowS: 3, maxLeftS: IDLE_S, snat: b });
      expect(r?.journal).toMatchObject({ files: 1, snatOpened: 100, snatRestored: 50, torn: 0, damaged: 0 });
      expect(r?.snat).toEqual({ restored: 50, expired: 0, skipped: 0 });
      for (const [sp, fp] of ports) expect(replyReaches(b, fp, sp, 4)).toBe(true);
      expect(s2.status()).toMatchObject({ lastSnatFlows: 50 }); // its start's snapshot holds them now
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
