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
//   words 10-11 0
//   records     return path: the 11 key words, the value (kind << 24 | frontend port), seconds left;
//               then outbound NAT: as snat.ts exportFlows writes them
//   last word   CRC-32 of every byte before it
// Words are little-endian. Times are seconds left at the copy, so a restored entry gets what it had left
// minus the time the agent was down (Unix clock), capped at the current config's idle timeout.
// East-west entries (to_mux, fastpath) are not kept: their actions index the policy's MUXes and targets,
// which a new process may number differently, and losing one costs one trip through a MUX, no reset.
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
  { ok: false; reason: string } | { ok: true; unixMs: number; dsr: Uint32Array; dsrCount: number; snat: Uint32Array; snatCount: number };

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
  finish(snat: Uint32Array | null): Uint8Array {
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
    w.set(this.words.subarray(0, dsrWords), HEADER_BYTES / 4);
    if (snat !== null) w.set(snat.subarray(0, snatWords), HEADER_BYTES / 4 + dsrWords);
    w[w.length - 1] = crc32(buf.subarray(0, bytes - 4)) >>> 0;
    return buf;
  }
}

/** A whole snapshot at once (SIGTERM, tests). */
export function encodeFlowSnapshot(flows: HostFlowTable, nowS: number, unixMs: number, snat: SnatEngine | null = null): Uint8Array {
  const b = new FlowSnapshotBuilder(flows, nowS, unixMs);
  while (!b.step(1 << 30));
  return b.finish(snat === null ? null : snat.exportFlows(nowS));
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
}

export interface FlowSnapshotRestore {
  /** null: restored (maybe partly); else why the file was refused as a whole (nothing restored). */
  refused: string | null;
  /** How old the snapshot was (ms, by the Unix clock). */
  ageMs: number;
  dsrRestored: number;
  /** Entries whose time left had run out while the agent was down. */
  dsrExpired: number;
  /** Records that are no return-path entry (kind, key space, family): skipped. */
  dsrInvalid: number;
  /** Entries the table had no room for (its limit). */
  dsrFull: number;
  snat: SnatImportResult | null;
}

/** Puts a snapshot's flows into a (fresh) table and engine. Never throws: a bad file is refused. */
export function restoreFlowSnapshot(bytes: Uint8Array, t: FlowSnapshotTarget): FlowSnapshotRestore {
  const r: FlowSnapshotRestore = { refused: null, ageMs: 0, dsrRestored: 0, dsrExpired: 0, dsrInvalid: 0, dsrFull: 0, snat: null };
  const d = decodeFlowSnapshot(bytes);
  if (!d.ok) {
    r.refused = d.reason;
    return r;
  }
  r.ageMs = t.unixMs - d.unixMs;
  // seconds gone by since the copy, rounded up (a restored entry never gets more than it had left);
  // a clock that went back counts as none
  const goneS = Math.max(0, Math.ceil(r.ageMs / 1000));
  const key = new Uint32Array(HOST_FLOW_KEY_WORDS);
  const w = d.dsr;
  for (let o = 0; o < w.length; o += DSR_RECORD_WORDS) {
    const value = w[o + HOST_FLOW_KEY_WORDS]!;
    const kind = value >>> 24;
    const family = w[o]! & 0xff;
    if ((kind !== FLOW_DSR && kind !== FLOW_DSR_CLOSING) || w[o + 9]! >>> 8 !== KEY_SPACE_DSR || (family !== 4 && family !== 6)) {
      r.dsrInvalid++;
      continue;
    }
    const left = Math.min(w[o + HOST_FLOW_KEY_WORDS + 1]!, kind === FLOW_DSR ? t.maxLeftS : DSR_CLOSING_S) - goneS;
    if (left <= 0) {
      r.dsrExpired++;
      continue;
    }
    for (let i = 0; i < HOST_FLOW_KEY_WORDS; i++) key[i] = w[o + i]!;
    t.flows.setKeyWords(key);
    if (t.flows.insert(kind, value & 0xffffff, t.nowS + left)) r.dsrRestored++;
    else r.dsrFull++;
  }
  if (t.snat !== undefined && t.snat !== null) r.snat = t.snat.importFlows(d.snat, t.nowS, goneS);
  return r;
}

// ---------------------------------------------------------------------------------------------
// The daemon's side: the file, the timer's decisions, status.

export interface FlowSnapshotterOptions {
  /** The directory (created if missing); the file is host-agent-NAME.flows in it. */
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

export class FlowSnapshotter {
  readonly path: string;
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
  }

  /** Reads the snapshot at the start. A missing file is a first start; a bad one is refused and logged. */
  load(t: Omit<FlowSnapshotTarget, 'unixMs'>): FlowSnapshotRestore | null {
    let bytes: Uint8Array;
    try {
      bytes = readFileSync(this.path);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') this.o.log('warn', 'flow_snapshot_unreadable', { path: this.path, error: (e as Error).message });
      return null;
    }
    const r = restoreFlowSnapshot(bytes, { ...t, unixMs: Date.now() });
    this.loaded = { ...r, file: this.path };
    if (r.refused !== null)
      this.o.log('warn', 'flow_snapshot_refused', {
        path: this.path,
        reason: r.refused,
        effect: 'started with no recorded flows: they are re-learned from their clients',
      });
    else this.o.log('info', 'flow_snapshot_loaded', { path: this.path, bytes: bytes.length, ...r });
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
      const bytes = b.finish(cur.snat === null ? null : cur.snat.exportFlows(cur.nowS));
      copyMs += performance.now() - a;
      this.lastCopyMs = copyMs;
      this.writing = true;
      this.writeFile(bytes).then(
        () => {
          this.writing = false;
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
    const t0 = performance.now();
    const unixMs = Date.now();
    try {
      const bytes = encodeFlowSnapshot(s.flows, s.nowS, unixMs, s.snat);
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
    };
  }
}
