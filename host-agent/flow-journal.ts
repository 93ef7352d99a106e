// The host agent's flow journal (docs/design.md "Return path", docs/reliability.md): what changed in the
// per-flow state since the last flow snapshot (host-agent/flow-snapshot.ts), so that a host agent killed
// with SIGKILL comes back with every flow it had recorded, not only those up to its last snapshot.
//
// Each new or re-kinded return-path entry (host-agent/dsr-flows.ts calls addDsr) and each outbound NAT
// flow opened, become ESTABLISHED or ended (host-agent/snat.ts calls addSnat with its exportFlows record:
// JOURNAL_SNAT_OPEN carries the flow as it is then, a replay keeps the last one; JOURNAL_SNAT_END its end;
// a closing TCP flow writes nothing, snat.ts SnatJournalSink says why) is kept in memory and appended to
// STATE_DIR/host-agent-NAME.journal at the end of the event-loop turn that made it: one synchronous
// write per turn that has records (the daemon schedules flush() with setImmediate when the first record
// of a turn comes), never one per packet. A write(2) lands in the page cache, which a process's death
// does not lose (a power cut may lose the tail, which a reboot makes moot).
//
// Each snapshot starts a new journal generation (rotate(): the current file becomes NAME.journal.prev,
// a new NAME.journal starts with a header naming the generation) and writes that generation into the
// snapshot: a reader replays the journals whose generation is the snapshot's or later, in order, and
// ignores older ones (their records are in the snapshot). The previous file is kept until the next
// rotation, so a SIGKILL between a rotation and its snapshot's rename loses nothing.
//
// The file:
//   header (32 bytes): "SLBXJRNL", format version, header bytes (32), generation, Unix time of its
//                      start in ms (low, high), CRC-32 of the 28 bytes before it
//   records:           word 0: type << 24 | the record's length in words (this word and the CRC included)
//                      word 1: Unix time of the write (s)
//                      payload, then the CRC-32 of the record's bytes before it
//   JOURNAL_DSR:       the host flow table key (11 words), the value (kind << 24 | action), seconds left
//   JOURNAL_SNAT_OPEN / JOURNAL_SNAT_END: one exportFlows record (SNAT_FLOW_RECORD_WORDS)
// Words are little-endian. A record cut short by the process's death (the last one) is ignored and
// counted as torn; a record whose CRC or length does not hold stops the replay there (counted damaged;
// what follows cannot be framed), never a crash.
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { HOST_FLOW_KEY_WORDS } from './flow-table.js';
import { SNAT_FLOW_RECORD_WORDS, SNAT_RECORD_END, SNAT_RECORD_OPEN } from './snat.js';

/** CRC-32 (IEEE, as zlib's crc32), table-driven: a record's 60 bytes cost less than a call into zlib. */
const CRC_TABLE = (() => {
  const t = new Int32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  return t;
})();

/** CRC-32 of bytes[from, to). */
export function crc32Bytes(bytes: Uint8Array, from: number, to: number): number {
  let c = -1;
  for (let i = from; i < to; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}

export const FLOW_JOURNAL_MAGIC = 'SLBXJRNL';
export const FLOW_JOURNAL_VERSION = 1;
export const FLOW_JOURNAL_HEADER_BYTES = 32;
export const JOURNAL_DSR = 1;
export const JOURNAL_SNAT_OPEN = SNAT_RECORD_OPEN;
export const JOURNAL_SNAT_END = SNAT_RECORD_END;
/** Words of a return-path record: type/length, time, key, value, seconds left, CRC (64 bytes). */
export const JOURNAL_DSR_RECORD_WORDS = 2 + HOST_FLOW_KEY_WORDS + 2 + 1;
/** Words of an outbound NAT record: type/length, time, the exportFlows record, CRC. */
export const JOURNAL_SNAT_RECORD_WORDS = 2 + SNAT_FLOW_RECORD_WORDS + 1;

/** What the data plane sees of the journal: appends to memory only (no I/O, no timer). */
export interface FlowJournalSink {
  /** A return-path entry was created or changed kind: the table's key words, its value, its expiry (agent clock, s). */
  addDsr(key: Uint32Array, value: number, expiresAt: number): void;
  /** An outbound NAT flow opened or changed (JOURNAL_SNAT_OPEN) or ended (JOURNAL_SNAT_END): its exportFlows record. */
  addSnat(type: number, record: Uint32Array): void;
}

/** One record read back from a journal file. */
export interface JournalRecord {
  type: number;
  /** Unix time of the write (s). */
  unixS: number;
  /** The payload (a view into the file's bytes). */
  words: Uint32Array;
}

export type DecodedFlowJournal =
  | { ok: false; reason: string }
  | { ok: true; generation: number; startUnixMs: number; records: JournalRecord[]; torn: number; damaged: number };

/** Reads a journal's bytes: its header, then records up to the end or the first that does not hold. Never throws. */
export function decodeFlowJournal(bytes: Uint8Array): DecodedFlowJournal {
  const H = FLOW_JOURNAL_HEADER_BYTES;
  if (bytes.length < H) return { ok: false, reason: `too short (${bytes.length} bytes)` };
  if (Buffer.from(bytes.buffer, bytes.byteOffset, 8).toString('latin1') !== FLOW_JOURNAL_MAGIC)
    return { ok: false, reason: 'not a flow journal (no SLBXJRNL magic)' };
  // a whole number of words, aligned (a torn tail may leave a part of a word: it is dropped here and counted below)
  const whole = bytes.length - (bytes.length % 4);
  const al = bytes.byteOffset % 4 === 0 ? bytes.subarray(0, whole) : bytes.slice(0, whole);
  const w = new Uint32Array(al.buffer, al.byteOffset, whole / 4);
  if (crc32(al.subarray(0, H - 4)) >>> 0 !== w[7]) return { ok: false, reason: 'damaged header: CRC-32 mismatch' };
  if (w[2] !== FLOW_JOURNAL_VERSION)
    return { ok: false, reason: `format version ${w[2]}, this host agent reads version ${FLOW_JOURNAL_VERSION}` };
  if (w[3] !== H) return { ok: false, reason: `damaged: header of ${w[3]} bytes` };
  const records: JournalRecord[] = [];
  let torn = bytes.length !== whole ? 1 : 0;
  let damaged = 0;
  let o = H / 4;
  while (o < w.length) {
    const type = w[o]! >>> 24;
    const len = w[o]! & 0xffffff;
    const expect =
      type === JOURNAL_DSR
        ? JOURNAL_DSR_RECORD_WORDS
        : type === JOURNAL_SNAT_OPEN || type === JOURNAL_SNAT_END
          ? JOURNAL_SNAT_RECORD_WORDS
          : -1;
    if (expect < 0 || len !== expect) {
      // a write cut short leaves zeros or part of a record at the end: torn; anything else is damage
      if (o + expect > w.length || w.subarray(o).every((x) => x === 0)) torn = 1;
      else damaged++;
      break;
    }
    if (o + len > w.length) {
      torn = 1;
      break;
    }
    const sum = crc32Bytes(al, o * 4, (o + len - 1) * 4);
    if (sum !== w[o + len - 1]) {
      if (o + len === w.length && torn === 0) torn = 1;
      else damaged++;
      break;
    }
    records.push({ type, unixS: w[o + 1]!, words: w.subarray(o + 2, o + len - 1) });
    o += len;
  }
  return { ok: true, generation: w[4]!, startUnixMs: w[5]! + w[6]! * 0x1_0000_0000, records, torn, damaged };
}

/** A journal file's header. */
export function encodeJournalHeader(generation: number, unixMs: number): Uint8Array {
  const buf = new Uint8Array(FLOW_JOURNAL_HEADER_BYTES);
  const w = new Uint32Array(buf.buffer);
  buf.set(Buffer.from(FLOW_JOURNAL_MAGIC, 'latin1'), 0);
  w[2] = FLOW_JOURNAL_VERSION;
  w[3] = FLOW_JOURNAL_HEADER_BYTES;
  w[4] = generation >>> 0;
  w[5] = unixMs % 0x1_0000_0000;
  w[6] = Math.floor(unixMs / 0x1_0000_0000);
  w[7] = crc32(buf.subarray(0, FLOW_JOURNAL_HEADER_BYTES - 4)) >>> 0;
  return buf;
}

/**
 * The records of one event-loop turn, in memory: addDsr/addSnat append, encode() turns them into the
 * file's bytes (times made relative, CRCs). No I/O: FlowJournal writes them.
 */
export class FlowJournalBuffer implements FlowJournalSink {
  private words = new Uint32Array(1024);
  private used = 0;
  /** Records waiting for the next encode(). */
  pending = 0;
  /** Called when the first record of a turn is appended (the daemon: setImmediate(flush)). */
  onFirst: (() => void) | null = null;

  private room(n: number): number {
    if (this.used + n > this.words.length) {
      const w = new Uint32Array(Math.max(this.words.length * 2, this.used + n));
      w.set(this.words.subarray(0, this.used));
      this.words = w;
    }
    const at = this.used;
    this.used += n;
    if (this.pending++ === 0 && this.onFirst !== null) this.onFirst();
    return at;
  }

  addDsr(key: Uint32Array, value: number, expiresAt: number): void {
    const at = this.room(JOURNAL_DSR_RECORD_WORDS);
    const w = this.words;
    w[at] = (JOURNAL_DSR << 24) | JOURNAL_DSR_RECORD_WORDS;
    for (let i = 0; i < HOST_FLOW_KEY_WORDS; i++) w[at + 2 + i] = key[i]!;
    w[at + 2 + HOST_FLOW_KEY_WORDS] = value;
    w[at + 3 + HOST_FLOW_KEY_WORDS] = expiresAt; // made relative in encode()
  }

  /** An outbound NAT flow opened or ended (JOURNAL_SNAT_OPEN/END): its exportFlows record (the last word: seconds left). */
  addSnat(type: number, record: Uint32Array): void {
    const at = this.room(JOURNAL_SNAT_RECORD_WORDS);
    const w = this.words;
    w[at] = (type << 24) | JOURNAL_SNAT_RECORD_WORDS;
    for (let i = 0; i < SNAT_FLOW_RECORD_WORDS; i++) w[at + 2 + i] = record[i]!; // no subarray view: no allocation
  }

  /** The pending records as file bytes (seconds left at nowS, Unix time unixS, a CRC each); empties the buffer. */
  encode(nowS: number, unixS: number): Uint8Array {
    const out = new Uint8Array(this.used * 4);
    const w = new Uint32Array(out.buffer);
    w.set(this.words.subarray(0, this.used));
    let o = 0;
    while (o < this.used) {
      const len = w[o]! & 0xffffff;
      w[o + 1] = unixS >>> 0;
      if (w[o]! >>> 24 === JOURNAL_DSR) {
        const e = o + 3 + HOST_FLOW_KEY_WORDS;
        w[e] = Math.max(0, w[e]! - nowS);
      }
      w[o + len - 1] = crc32Bytes(out, o * 4, (o + len - 1) * 4);
      o += len;
    }
    this.used = 0;
    this.pending = 0;
    if (this.words.length > 65_536) this.words = new Uint32Array(1024); // a burst's room is given back
    return out;
  }
}

export interface FlowJournalOptions {
  readonly dir: string;
  readonly name: string;
  readonly log: (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) => void;
}

/** The journal files of one host agent: the current one appended to, the previous one kept until the next rotation. */
export class FlowJournal {
  readonly path: string;
  readonly prevPath: string;
  readonly buffer = new FlowJournalBuffer();
  private readonly o: FlowJournalOptions;
  private fd: number | null = null;
  generation = 0;
  // status
  written = 0;
  bytes = 0;
  records = 0;
  writeErrors = 0;
  lastError: string | null = null;
  /** The longest flush (ms) since the start, and the last one's. */
  maxFlushMs = 0;
  lastFlushMs = 0;

  constructor(o: FlowJournalOptions) {
    this.o = o;
    this.path = join(o.dir, `host-agent-${o.name}.journal`);
    this.prevPath = `${this.path}.prev`;
  }

  /** The files as they are on disk (for the start's replay): the previous one first. Missing ones are left out. */
  readFiles(): { file: string; bytes: Uint8Array }[] {
    const out: { file: string; bytes: Uint8Array }[] = [];
    for (const file of [this.prevPath, this.path]) {
      try {
        out.push({ file, bytes: readFileSync(file) });
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT') this.o.log('warn', 'flow_journal_unreadable', { path: file, error: (e as Error).message });
      }
    }
    return out;
  }

  /**
   * Starts generation `generation`: the current file becomes the previous one (kept until the next
   * rotation) and a new file starts with its header. The records still in memory go to the old file first.
   */
  rotate(generation: number, nowS: number): boolean {
    this.flush(nowS);
    try {
      mkdirSync(this.o.dir, { recursive: true });
      if (this.fd !== null) closeSync(this.fd);
      this.fd = null;
      if (existsSync(this.path)) renameSync(this.path, this.prevPath);
      const tmp = `${this.path}.tmp`;
      const fd = openSync(tmp, 'w', 0o600);
      writeAll(fd, encodeJournalHeader(generation, Date.now()));
      renameSync(tmp, this.path);
      this.fd = fd; // the descriptor follows the file across the rename
      this.generation = generation;
      this.ok();
      return true;
    } catch (e) {
      this.failed(e as Error);
      return false;
    }
  }

  /** Writes the turn's records (one write); called at the end of the turn that made them. */
  flush(nowS: number): void {
    if (this.buffer.pending === 0) return;
    const t0 = performance.now();
    const n = this.buffer.pending;
    const bytes = this.buffer.encode(nowS, Math.floor(Date.now() / 1000));
    if (this.fd === null) {
      this.failed(new Error('no journal file open'));
      return;
    }
    try {
      writeAll(this.fd, bytes);
      this.written++;
      this.records += n;
      this.bytes += bytes.length;
      this.ok();
    } catch (e) {
      this.failed(e as Error);
    }
    this.lastFlushMs = performance.now() - t0;
    if (this.lastFlushMs > this.maxFlushMs) this.maxFlushMs = this.lastFlushMs;
  }

  close(nowS: number): void {
    this.flush(nowS);
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private ok(): void {
    if (this.lastError !== null) this.o.log('info', 'flow_journal_written', { path: this.path, after: this.lastError });
    this.lastError = null;
  }

  private failed(e: Error): void {
    this.writeErrors++;
    if (this.lastError !== e.message)
      this.o.log('warn', 'flow_journal_write_failed', {
        path: this.path,
        error: e.message,
        effect: 'a SIGKILL would lose the flows recorded since the last snapshot',
      });
    this.lastError = e.message;
  }

  status(): Record<string, unknown> {
    return {
      path: this.path,
      generation: this.generation,
      written: this.written,
      records: this.records,
      bytes: this.bytes,
      writeErrors: this.writeErrors,
      lastError: this.lastError,
      lastFlushMs: Math.round(this.lastFlushMs * 1000) / 1000,
      maxFlushMs: Math.round(this.maxFlushMs * 1000) / 1000,
    };
  }
}

function writeAll(fd: number, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
}
