// The host agent's per-flow state across a restart (docs/design.md "Return path", docs/reliability.md):
// a snapshot of the return path's entries (host flow table kinds dsr and dsr_closing) and of the
// outbound NAT engine's flows (host-agent/snat.ts exportFlows), written every --flow-snapshot-ms when
// something changed (and at least every quarter of the shortest idle timeout, so that a busy flow's time
// left stays fresh), on SIGTERM, and read back at the start: a host agent killed with SIGKILL comes back
// with every flow it had recorded up to its last snapshot.
//
// The file (one per host agent: STATE_DIR/host-agent-NAME.flows), written to NAME.flows.tmp and renamed
// over the old one, so a reader sees a whole old or a whole new file, never a torn one (a process's death
// cannot tear it; a power cut may lose the last one, which a host's reboot makes moot):
//   bytes 0-7   "SLBXFLOW"
//   word  2     format version (FLOW_SNAPSHOT_VERSION)
//   word  3     header bytes (48)
//   words 4-5   Unix time of the copy in ms (low, high)
//   words 6-7   return-path records, words per record (DSR_RECORD_WORDS)
//   words 8-9   outbound NAT records, words per record (SNAT_FLOW_RECORD_WORDS)
//   word  10    the flow journal's generation that follows this snapshot (host-agent/flow-journal.ts;
//               0: none, as files of before the journal)
//   word  11    0
//   records     return path: the 11 key words, the value (kind << 24 | frontend port), seconds left;
//               then outbound NAT: as snat.ts exportFlows writes them
//   last word   CRC-32 of every byte before it
// Words are little-endian. Times are seconds left at the copy, so a restored entry gets what it had left
// minus the time the agent was down (Unix clock), capped at the current config's idle timeout.
// East-west entries (to_mux, fastpath) are not kept: their actions index the policy's MUXes and targets,
// which a new process may number differently, and losing one costs one trip through a MUX, no reset.
//
// What changed after the copy started is in the flow journal (host-agent/flow-journal.ts): each copy
// starts a new journal generation and names it in word 10; at the start the snapshot is read, then the
// journals of that generation or later are replayed (restoreFlowState).
//
// A big table is copied in slices (FLOW_SNAPSHOT_SLICE_SLOTS slots per event-loop turn) so that packets
// are handled between slices; the file is written asynchronously. An entry moved by a deletion during the
// copy can be missed by that snapshot (the next one has it); a table that grows during it starts over.
import { open, rename, unlink } from 'node:fs/promises';
import { openSync, readFileSync, renameSync, writeSync, closeSync, mkdirSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { DSR_CLOSING_S, FLOW_DSR, FLOW_DSR_CLOSING, HOST_FLOW_KEY_WORDS, KEY_SPACE_DSR, type HostFlowTable } from './flow-table.js';
import { SNAT_FLOW_RECORD_WORDS, type SnatEngine, type SnatImportResult } from './snat.js';
import { FlowJournal, type FlowJournalSink, JOURNAL_DSR, JOURNAL_SNAT_END, JOURNAL_SNAT_OPEN, decodeFlowJournal } from './flow-journal.js';

export const FLOW_SNAPSHOT_VERSION = 1;
export const FLOW_SNAPSHOT_MAGIC = 'SLBXFLOW';
const HEADER_BYTES = 48;
/** Words of a return-path record: the key, the value, the seconds left. */
export const DSR_RECORD_WORDS = HOST_FLOW_KEY_WORDS + 2;
/** Slots of the host flow table copied per event-loop turn. */
export const FLOW_SNAPSHOT_SLICE_SLOTS = 65_536;
export const DEFAULT_FLOW_SNAPSHOT_MS = 1000;

/** A snapshot read back: refused with a reason, or its records (views into the file's bytes). */
export type DecodedFlowSnapshot =
  | { ok: false; reason: string }
  | { ok: true; unixMs: number; generation: number; dsr: Uint32Array; dsrCount: number; snat: Uint32Array; snatCount: number };

/** Copies the return path's live entries out of a host flow table, a slice at a time. */
export class FlowSnapshotBuilder {
  private readonly flows: HostFlowTable;
  private readonly nowS: number;
  readonly unixMs: number;
  private readonly capacity: number;
  private cursor = 0;
  private words: Uint32Array;
  private count = 0;
  /** The table grew during the copy (its entries moved): this copy is void. */
  aborted = false;

  constructor(flows: HostFlowTable, nowS: number, unixMs: number) {
    this.flows = flows;
    this.nowS = nowS;
    this.unixMs = unixMs;
    this.capacity = flows.table.capacity;
    this.words = new Uint32Array(Math.max(64, flows.size) * DSR_RECORD_WORDS);
  }

  get done(): boolean {
    return this.aborted || this.cursor >= this.capacity;
  }

  /** Copies the next `slots` slots; true when the whole table has been copied (or the copy is void). */
  step(slots: number): boolean {
    if (this.done) return true;
    if (this.flows.table.capacity !== this.capacity) {
      this.aborted = true;
      return true;
    }
    const to = Math.min(this.capacity, this.cursor + slots);
    const at = this.count * DSR_RECORD_WORDS;
    let end = this.flows.table.copyLive(this.cursor, to, this.nowS, FLOW_DSR, FLOW_DSR_CLOSING, this.words, at);
    while (end < 0) {
      // no room: twice the room, and the same slots again (the records of a slice are written in one go)
      const w = new Uint32Array(this.words.length * 2);
      w.set(this.words.subarray(0, at));
      this.words = w;
      end = this.flows.table.copyLive(this.cursor, to, this.nowS, FLOW_DSR, FLOW_DSR_CLOSING, this.words, at);
    }
    this.count = end / DSR_RECORD_WORDS;
    this.cursor = to;
    return this.done;
  }

  /** The file's bytes: the records copied so far and the outbound NAT's (exportFlows' words). */
  finish(snat: Uint32Array | null, generation = 0): Uint8Array {
    const dsrWords = this.count * DSR_RECORD_WORDS;
    const snatWords = snat === null ? 0 : snat.length - (snat.length % SNAT_FLOW_RECORD_WORDS);
    const bytes = HEADER_BYTES + 4 * (dsrWords + snatWords) + 4;
    const buf = new Uint8Array(bytes);
    const w = new Uint32Array(buf.buffer, 0, bytes / 4);
    buf.set(Buffer.from(FLOW_SNAPSHOT_MAGIC, 'latin1'), 0);
    w[2] = FLOW_SNAPSHOT_VERSION;
    w[3] = HEADER_BYTES;
    w[4] = this.unixMs % 0x1_0000_0000;
    w[5] = Math.floor(this.unixMs / 0x1_0000_0000);
    w[6] = this.count;
    w[7] = DSR_RECORD_WORDS;
    w[8] = snatWords / SNAT_FLOW_RECORD_WORDS;
    w[9] = SNAT_FLOW_RECORD_WORDS;
    w[10] = generation >>> 0;
    w.set(this.words.subarray(0, dsrWords), HEADER_BYTES / 4);
    if (snat !== null) w.set(snat.subarray(0, snatWords), HEADER_BYTES / 4 + dsrWords);
    w[w.length - 1] = crc32(buf.subarray(0, bytes - 4)) >>> 0;
    return buf;
  }
}

/** A whole snapshot at once (SIGTERM, tests). */
export function encodeFlowSnapshot(
  flows: HostFlowTable,
  nowS: number,
  unixMs: number,
  snat: SnatEngine | null = null,
  generation = 0,
): Uint8Array {
  const b = new FlowSnapshotBuilder(flows, nowS, unixMs);
  while (!b.step(1 << 30));
  return b.finish(snat === null ? null : snat.exportFlows(nowS), generation);
}

/** Checks a snapshot's bytes: its magic, version, lengths and checksum. Never throws. */
export function decodeFlowSnapshot(bytes: Uint8Array): DecodedFlowSnapshot {
  if (bytes.length < HEADER_BYTES + 4) return { ok: false, reason: `too short (${bytes.length} bytes)` };
  if (Buffer.from(bytes.buffer, bytes.byteOffset, 8).toString('latin1') !== FLOW_SNAPSHOT_MAGIC)
    return { ok: false, reason: 'not a flow snapshot (no SLBXFLOW magic)' };
  if (bytes.length % 4 !== 0) return { ok: false, reason: `damaged: ${bytes.length} bytes is no whole number of words` };
  // a copy when the bytes are not word-aligned in their buffer (a Buffer from readFileSync may not be)
  const al = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  const w = new Uint32Array(al.buffer, al.byteOffset, al.length / 4);
  if (w[2] !== FLOW_SNAPSHOT_VERSION)
    return { ok: false, reason: `format version ${w[2]}, this host agent reads version ${FLOW_SNAPSHOT_VERSION}` };
  const dsrCount = w[6]!;
  const snatCount = w[8]!;
  if (w[3] !== HEADER_BYTES || w[7] !== DSR_RECORD_WORDS || w[9] !== SNAT_FLOW_RECORD_WORDS)
    return { ok: false, reason: `damaged: header ${w[3]} bytes, records of ${w[7]} and ${w[9]} words` };
  const expect = HEADER_BYTES + 4 * (dsrCount * DSR_RECORD_WORDS + snatCount * SNAT_FLOW_RECORD_WORDS) + 4;
  if (expect !== al.length) return { ok: false, reason: `damaged: ${al.length} bytes, its header says ${expect}` };
  const sum = crc32(al.subarray(0, al.length - 4)) >>> 0;
  if (sum !== w[w.length - 1]) return { ok: false, reason: 'damaged: CRC-32 mismatch' };
  const d0 = HEADER_BYTES / 4;
  const s0 = d0 + dsrCount * DSR_RECORD_WORDS;
  return {
    ok: true,
    unixMs: w[4]! + w[5]! * 0x1_0000_0000,
    generation: w[10]!,
    dsr: w.subarray(d0, s0),
    dsrCount,
    snat: w.subarray(s0, s0 + snatCount * SNAT_FLOW_RECORD_WORDS),
    snatCount,
  };
}

export interface FlowSnapshotTarget {
  readonly flows: HostFlowTable;
  /** The agent's clock (seconds, as EwState.nowS) and the Unix time now (ms). */
  readonly nowS: number;
  readonly unixMs: number;
  /** The longest time left a restored return-path entry may get (the config's longest idle timeout). */
  readonly maxLeftS: number;
  readonly snat?: SnatEngine | null;
  /**
   * Which records this table takes (--workers: the flows steering gives this worker,
   * host-agent/flow-state-sets.ts); null or absent: every one.
   */
  readonly keep?: FlowRecordFilter | null;
}

/** Decides per record whether a restore takes it: a return-path record (key, value, seconds left) and an outbound NAT record. */
export interface FlowRecordFilter {
  dsr(record: Uint32Array): boolean;
  snat(record: Uint32Array): boolean;
}

export interface FlowSnapshotRestore {
  /** null: restored (maybe partly); else why the snapshot was refused as a whole (its flows not restored). */
  refused: string | null;
  /** How old the snapshot was (ms, by the Unix clock). */
  ageMs: number;
  /** The journal generation the snapshot names (0: none, or no snapshot). */
  generation: number;
  dsrRestored: number;
  /** Entries whose time left had run out while the agent was down. */
  dsrExpired: number;
  /** Records that are no return-path entry (kind, key space, family): skipped. */
  dsrInvalid: number;
  /** Entries the table had no room for (its limit). */
  dsrFull: number;
  snat: SnatImportResult | null;
  /** The journals replayed after it (host-agent/flow-journal.ts). */
  journal: FlowJournalReplay;
  /** Return-path entries in the table after both (FlowSnapshotter.load; -1 elsewhere). */
  dsrAfter: number;
  /** Records left out by the target's filter (another worker's flows), return path and outbound NAT, snapshot and journals. */
  dsrOther: number;
  snatOther: number;
}

export interface FlowJournalReplay {
  /** Files read, and those ignored: older than the snapshot (their records are in it) or refused (header). */
  files: number;
  ignoredOlder: number;
  refused: string[];
  /** Return-path records applied (an entry created or changed), and those whose time had run out (entry removed). */
  dsrReplayed: number;
  dsrExpired: number;
  dsrInvalid: number;
  dsrFull: number;
  /** Outbound NAT records replayed: opens (a flow opened, or its state changed) and ends. */
  snatOpened: number;
  snatEnded: number;
  /** Outbound NAT flows restored whose last record was a journal's (the rest of FlowSnapshotRestore.snat came from the snapshot). */
  snatRestored: number;
  /** A last record cut short (the process died in its write): ignored. */
  torn: number;
  /** Records that did not hold (CRC, length) in the middle of a file: the rest of that file ignored. */
  damaged: number;
}

/** One set's files as read from disk: its snapshot (null: none) and its journals, the previous one first. */
export interface FlowStateBytes {
  snapshot: Uint8Array | null;
  journals: Uint8Array[];
}

/** A snapshot file's bytes, or null when it is missing (or unreadable: logged). */
export function readSnapshotFile(path: string, log: FlowSnapshotterOptions['log']): Uint8Array | null {
  try {
    return readFileSync(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') log('warn', 'flow_snapshot_unreadable', { path, error: (e as Error).message });
    return null;
  }
}

/** Puts a snapshot's flows into a (fresh) table and engine. Never throws: a bad file is refused. */
export function restoreFlowSnapshot(bytes: Uint8Array, t: FlowSnapshotTarget): FlowSnapshotRestore {
  return restoreFlowState(bytes, [], t);
}

/**
 * The start: the snapshot (null: none), then the journals (oldest first) whose generation is the
 * snapshot's or later, record by record in the order they were written. Never throws.
 */
export function restoreFlowState(snapshot: Uint8Array | null, journals: readonly Uint8Array[], t: FlowSnapshotTarget): FlowSnapshotRestore {
  const j: FlowJournalReplay = {
    files: 0,
    ignoredOlder: 0,
    refused: [],
    dsrReplayed: 0,
    dsrExpired: 0,
    dsrInvalid: 0,
    dsrFull: 0,
    snatOpened: 0,
    snatEnded: 0,
    snatRestored: 0,
    torn: 0,
    damaged: 0,
  };
  const r: FlowSnapshotRestore = {
    refused: null,
    ageMs: 0,
    generation: 0,
    dsrRestored: 0,
    dsrExpired: 0,
    dsrInvalid: 0,
    dsrFull: 0,
    snat: null,
    journal: j,
    dsrAfter: -1,
    dsrOther: 0,
    snatOther: 0,
  };
  const keep = t.keep ?? null;
  const key = new Uint32Array(HOST_FLOW_KEY_WORDS);
  // outbound NAT flows by identity, with the seconds gone since their record: the snapshot's, then the
  // journals' opens (the flow as it was then: the last one counts) and ends; imported at the end, so
  // that each flow's port is taken once, with its last state (the engine has no removal by record)
  const snat = new Map<string, { rec: Uint32Array; goneS: number; journal: boolean }>();
  const d = snapshot === null ? null : decodeFlowSnapshot(snapshot);
  if (d !== null && !d.ok) r.refused = d.reason;
  if (d !== null && d.ok) {
    r.ageMs = t.unixMs - d.unixMs;
    r.generation = d.generation;
    // seconds gone by since the copy, rounded up (a restored entry never gets more than it had left);
    // a clock that went back counts as none
    const goneS = Math.max(0, Math.ceil(r.ageMs / 1000));
    const w = d.dsr;
    for (let o = 0; o < w.length; o += DSR_RECORD_WORDS) {
      const rec = w.subarray(o, o + DSR_RECORD_WORDS);
      if (keep !== null && !keep.dsr(rec)) {
        r.dsrOther++;
        continue;
      }
      const a = applyDsr(t, key, rec, goneS);
      if (a === APPLIED) r.dsrRestored++;
      else if (a === EXPIRED) r.dsrExpired++;
      else if (a === INVALID) r.dsrInvalid++;
      else r.dsrFull++;
    }
    for (let o = 0; o + SNAT_FLOW_RECORD_WORDS <= d.snat.length; o += SNAT_FLOW_RECORD_WORDS) {
      const rec = d.snat.subarray(o, o + SNAT_FLOW_RECORD_WORDS);
      if (keep !== null && !keep.snat(rec)) {
        r.snatOther++;
        continue;
      }
      snat.set(snatIdentity(rec), { rec, goneS, journal: false });
    }
  }
  const nowUnixS = Math.ceil(t.unixMs / 1000);
  for (const bytes of journals) {
    const jd = decodeFlowJournal(bytes);
    if (!jd.ok) {
      j.refused.push(jd.reason);
      continue;
    }
    if (d !== null && d.ok && jd.generation < d.generation) {
      j.ignoredOlder++;
      continue;
    }
    j.files++;
    j.torn += jd.torn;
    j.damaged += jd.damaged;
    for (const rec of jd.records) {
      const goneS = Math.max(0, nowUnixS - rec.unixS);
      if (keep !== null && !(rec.type === JOURNAL_DSR ? keep.dsr(rec.words) : keep.snat(rec.words))) {
        if (rec.type === JOURNAL_DSR) r.dsrOther++;
        else r.snatOther++;
        continue;
      }
      if (rec.type === JOURNAL_DSR) {
        const a = applyDsr(t, key, rec.words, goneS);
        if (a === APPLIED) j.dsrReplayed++;
        else if (a === EXPIRED) j.dsrExpired++;
        else if (a === INVALID) j.dsrInvalid++;
        else j.dsrFull++;
      } else if (rec.type === JOURNAL_SNAT_OPEN) {
        snat.set(snatIdentity(rec.words), { rec: rec.words, goneS, journal: true });
        j.snatOpened++;
      } else if (rec.type === JOURNAL_SNAT_END) {
        snat.delete(snatIdentity(rec.words));
        j.snatEnded++;
      }
    }
  }
  if (t.snat !== undefined && t.snat !== null && (snat.size > 0 || (d !== null && d.ok))) {
    const total: SnatImportResult = { restored: 0, expired: 0, skipped: 0 };
    for (const { rec, goneS, journal } of snat.values()) {
      const x = t.snat.importFlows(rec, t.nowS, goneS);
      if (journal) j.snatRestored += x.restored;
      total.restored += x.restored;
      total.expired += x.expired;
      total.skipped += x.skipped;
    }
    r.snat = total;
  }
  return r;
}

const APPLIED = 0;
const EXPIRED = 1;
const INVALID = 2;
const FULL = 3;

/**
 * One return-path record (key, value, seconds left) into the table, `goneS` seconds after it was taken:
 * inserted or overwritten with what it has left (capped at the config's idle timeout); one whose time
 * ran out removes the entry (it is the flow's last state: a journal record may follow the snapshot's).
 */
function applyDsr(t: FlowSnapshotTarget, key: Uint32Array, w: Uint32Array, goneS: number): number {
  const value = w[HOST_FLOW_KEY_WORDS]!;
  const kind = value >>> 24;
  const family = w[0]! & 0xff;
  if ((kind !== FLOW_DSR && kind !== FLOW_DSR_CLOSING) || w[9]! >>> 8 !== KEY_SPACE_DSR || (family !== 4 && family !== 6)) return INVALID;
  for (let i = 0; i < HOST_FLOW_KEY_WORDS; i++) key[i] = w[i]!;
  t.flows.setKeyWords(key);
  const left = Math.min(w[HOST_FLOW_KEY_WORDS + 1]!, kind === FLOW_DSR ? t.maxLeftS : DSR_CLOSING_S) - goneS;
  if (left <= 0) {
    t.flows.remove();
    return EXPIRED;
  }
  return t.flows.insert(kind, value & 0xffffff, t.nowS + left) ? APPLIED : FULL;
}

/** An outbound NAT record's flow, whatever its state and time left: family, protocol, VNI, addresses, ports. */
function snatIdentity(w: Uint32Array): string {
  let s = `${w[0]}/${w[1]}/${w[5]}`;
  for (let i = 6; i < 20; i++) s += `/${w[i]}`;
  return s;
}

// ---------------------------------------------------------------------------------------------
// The daemon's side: the file, the timer's decisions, status.

export interface FlowSnapshotterOptions {
  /** The directory (created if missing); the files are host-agent-NAME.flows and NAME.journal in it. */
  readonly dir: string;
  readonly name: string;
  /** How often to look for changes (ms); a copy runs only when something changed or the refresh is due. */
  readonly intervalMs: number;
  /** Logs a state change (JSON line); the daemon's logInfo/logWarn. */
  readonly log: (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) => void;
}

export interface FlowSnapshotSource {
  readonly flows: HostFlowTable;
  readonly nowS: number;
  /** Something that changes when entries are added or removed (the daemon: table size and learned count). */
  readonly mark: string;
  /** The shortest idle timeout of the entries (s): a snapshot is written at least every quarter of it. */
  readonly minIdleS: number;
  readonly snat: SnatEngine | null;
}

/**
 * What a snapshot copies from a data-plane thread (the one-thread daemon, or a worker): its host flow
 * table, its outbound NAT engine; the mark changes when the table's size or the learned count does.
 */
export function flowSnapshotSourceOf(
  ew: { readonly flows: HostFlowTable; readonly nowS: number; readonly tcpIdleS: number; readonly udpIdleS: number },
  learned: number,
  snat: SnatEngine | null,
): FlowSnapshotSource {
  return {
    flows: ew.flows,
    nowS: ew.nowS,
    mark: `${ew.flows.size}/${learned}`,
    minIdleS: Math.min(ew.tcpIdleS, ew.udpIdleS),
    snat,
  };
}

export class FlowSnapshotter {
  readonly path: string;
  /** The flow journal beside the snapshot: what changed since the copy of the last one began. */
  readonly journal: FlowJournal;
  /** The journal generation the last snapshot written names (the journals before it are in it). */
  private writtenGen = 0;
  private readonly o: FlowSnapshotterOptions;
  private building: FlowSnapshotBuilder | null = null;
  private buildingFlows: HostFlowTable | null = null;
  private writing = false;
  private lastMark = '';
  private lastWriteUnixMs = 0;
  private stopped = false;
  // status
  written = 0;
  writeErrors = 0;
  aborted = 0;
  lastFlows = 0;
  lastSnatFlows = 0;
  lastBytes = 0;
  /** The last copy's time on the event loop (ms, its slices added up) and from its start to the rename (ms). */
  lastCopyMs = 0;
  lastTotalMs = 0;
  lastError: string | null = null;
  loaded: (FlowSnapshotRestore & { file: string }) | null = null;

  get intervalMs(): number {
    return this.o.intervalMs;
  }

  constructor(o: FlowSnapshotterOptions) {
    this.o = o;
    this.path = join(o.dir, `host-agent-${o.name}.flows`);
    this.journal = new FlowJournal(o);
  }

  /** What the data plane appends to (EwState.journal); each turn's records are written at its end (setImmediate). */
  journalSink(clock: () => number): FlowJournalSink {
    const j = this.journal;
    j.buffer.onFirst = () => setImmediate(() => j.flush(clock()));
    return j.buffer;
  }

  /**
   * The start: reads the snapshot and replays the journals after it, then writes a new snapshot of what
   * was restored and starts a new journal generation (before any packet: the old files are then
   * covered). A missing file is a first start; a bad one is refused and logged, never a crash.
   */
  load(
    t: Omit<FlowSnapshotTarget, 'unixMs'>,
    given: FlowStateBytes | null = null,
    beforeWrite: (() => void) | null = null,
  ): FlowSnapshotRestore | null {
    // `given`: this set's files as another thread read them before (--workers: the main thread at the start)
    const bytes = given !== null ? given.snapshot : readSnapshotFile(this.path, this.o.log);
    const files = given !== null ? given.journals.map((b) => ({ file: this.journal.path, bytes: b })) : this.journal.readFiles();
    let r: FlowSnapshotRestore | null = null;
    if (bytes !== null || files.length > 0) {
      r = restoreFlowState(
        bytes,
        files.map((f) => f.bytes),
        { ...t, unixMs: Date.now() },
      );
      // the return path's entries now (a flow in both the snapshot and the journal counts once)
      const byKind = t.flows.countByKind(t.nowS);
      r.dsrAfter = (byKind['dsr'] ?? 0) + (byKind['dsr_closing'] ?? 0);
      this.loaded = { ...r, file: this.path };
      if (r.refused !== null)
        this.o.log('warn', 'flow_snapshot_refused', {
          path: this.path,
          reason: r.refused,
          effect: "the snapshot's flows are not restored: they are re-learned from their clients (the journal's are replayed)",
        });
      if (r.journal.refused.length > 0 || r.journal.damaged > 0)
        this.o.log('warn', 'flow_journal_refused', {
          path: this.journal.path,
          refused: r.journal.refused,
          damaged: r.journal.damaged,
          effect: 'flows recorded in the refused part are re-learned from their clients',
        });
      this.o.log('info', 'flow_snapshot_loaded', { path: bytes === null ? null : this.path, bytes: bytes?.length ?? 0, ...r });
    }
    // the next generation: after every one seen, so that no old file is read as newer than the new snapshot
    let gen = r?.generation ?? 0;
    for (const f of files) {
      const d = decodeFlowJournal(f.bytes);
      if (d.ok && d.generation > gen) gen = d.generation;
    }
    beforeWrite?.(); // (a worker: its outbound NAT flows on chunks no longer held end here, before the new snapshot)
    this.writeSync({ flows: t.flows, nowS: t.nowS, mark: '', minIdleS: 0, snat: t.snat ?? null }, gen + 1);
    return r;
  }

  /** The timer: starts a copy when the flows changed or the refresh is due; the copy goes on in slices. */
  tick(src: () => FlowSnapshotSource): void {
    if (this.stopped || this.building !== null || this.writing) return;
    const s = src();
    const refreshMs = Math.max(this.o.intervalMs, (s.minIdleS * 1000) / 4);
    const mark = `${s.mark}/${s.snat?.live ?? 0}`;
    if (mark === this.lastMark && Date.now() - this.lastWriteUnixMs < refreshMs) return;
    this.lastMark = mark;
    const t0 = performance.now();
    // a new journal generation from now on (the records made during the copy go there, and this
    // snapshot names it), unless the last one's snapshot was never written: that journal is still needed
    if (this.writtenGen === this.journal.generation) this.journal.rotate(this.journal.generation + 1, s.nowS);
    const gen = this.journal.generation;
    const b = new FlowSnapshotBuilder(s.flows, s.nowS, Date.now());
    this.building = b;
    this.buildingFlows = s.flows;
    let copyMs = 0;
    const slice = (): void => {
      if (this.stopped || this.building !== b) return;
      const cur = src();
      if (cur.flows !== this.buildingFlows) b.aborted = true; // a new table (a policy change): start over on the next tick
      const a = performance.now();
      const done = b.step(FLOW_SNAPSHOT_SLICE_SLOTS);
      if (!done) {
        copyMs += performance.now() - a;
        setImmediate(slice);
        return;
      }
      this.building = null;
      if (b.aborted) {
        this.aborted++;
        this.lastMark = '';
        return;
      }
      const bytes = b.finish(cur.snat === null ? null : cur.snat.exportFlows(cur.nowS), gen);
      copyMs += performance.now() - a;
      this.lastCopyMs = copyMs;
      this.writing = true;
      this.writeFile(bytes).then(
        () => {
          this.writing = false;
          if (this.stopped) return; // writeNow wrote a newer one
          this.writtenGen = gen;
          this.done(bytes, b.unixMs, t0);
        },
        (e: Error) => {
          this.writing = false;
          this.failed(e);
        },
      );
    };
    slice();
  }

  /** SIGTERM: the state as it is now, written before the process ends (synchronously). */
  writeNow(s: FlowSnapshotSource): void {
    this.stopped = true;
    this.building = null;
    this.writeSync(s, Math.max(this.journal.generation, this.writtenGen) + 1);
    this.journal.close(s.nowS);
  }

  /**
   * A whole snapshot naming journal generation `gen`, written and renamed, then that journal started:
   * in this order, a death between the two leaves a snapshot that holds every flow and older journals
   * that the reader ignores.
   */
  private writeSync(s: FlowSnapshotSource, gen: number): void {
    const t0 = performance.now();
    const unixMs = Date.now();
    try {
      const bytes = encodeFlowSnapshot(s.flows, s.nowS, unixMs, s.snat, gen);
      this.lastCopyMs = performance.now() - t0;
      mkdirSync(this.o.dir, { recursive: true });
      const tmp = `${this.path}.tmp-stop`; // not the timer's .tmp: a write of it may still be under way
      const fd = openSync(tmp, 'w', 0o600);
      try {
        let off = 0;
        while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, this.path);
      this.done(bytes, unixMs, t0);
      if (this.journal.rotate(gen, s.nowS)) this.writtenGen = gen;
    } catch (e) {
      this.failed(e as Error);
    }
  }

  /** Allows copies again after writeNow (a daemon started again in the same process). */
  resume(): void {
    this.stopped = false;
  }

  private async writeFile(bytes: Uint8Array): Promise<void> {
    const tmp = `${this.path}.tmp`;
    mkdirSync(this.o.dir, { recursive: true });
    const fh = await open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(bytes);
    } catch (e) {
      await fh.close();
      await unlink(tmp).catch(() => undefined);
      throw e;
    }
    await fh.close();
    if (this.stopped) return; // writeNow has written a newer one meanwhile
    await rename(tmp, this.path);
  }

  private done(bytes: Uint8Array, unixMs: number, t0: number): void {
    const w = new Uint32Array(bytes.buffer, bytes.byteOffset, HEADER_BYTES / 4);
    this.written++;
    this.lastWriteUnixMs = unixMs;
    this.lastFlows = w[6]!;
    this.lastSnatFlows = w[8]!;
    this.lastBytes = bytes.length;
    this.lastTotalMs = performance.now() - t0;
    if (this.lastError !== null) this.o.log('info', 'flow_snapshot_written', { path: this.path, after: this.lastError });
    this.lastError = null;
  }

  private failed(e: Error): void {
    this.writeErrors++;
    this.lastMark = '';
    // logged once per change of the error (a state change), not per attempt
    if (this.lastError !== e.message)
      this.o.log('warn', 'flow_snapshot_write_failed', {
        path: this.path,
        error: e.message,
        effect: 'a restart would start from an older snapshot or none',
      });
    this.lastError = e.message;
  }

  status(): Record<string, unknown> {
    return {
      path: this.path,
      intervalMs: this.o.intervalMs,
      written: this.written,
      writeErrors: this.writeErrors,
      aborted: this.aborted,
      lastError: this.lastError,
      lastAgeMs: this.lastWriteUnixMs === 0 ? null : Date.now() - this.lastWriteUnixMs,
      lastFlows: this.lastFlows,
      lastSnatFlows: this.lastSnatFlows,
      lastBytes: this.lastBytes,
      lastCopyMs: Math.round(this.lastCopyMs * 100) / 100,
      lastTotalMs: Math.round(this.lastTotalMs * 100) / 100,
      loaded: this.loaded,
      journal: this.journal.status(),
    };
  }
}
