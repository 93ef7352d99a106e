// Latency routing's measurement (docs/latency.md), the pure parts: the echo a MUX sends to a host agent
// and the host agent's answer, and the smoothing of the samples.
//
// The echo request travels as VXLAN with VNI 0 (no network can have it: config VNIs are 1..16777215)
// from the MUX's provider address to the host's, so it passes every check VXLAN passes at the host
// agent (a known peer address, from the MAC that address resolves to) and takes the fabric path the
// data does. Its VXLAN payload is not an Ethernet frame but this request:
//   0  u32 magic 'SLBE'   4  u8 version 1   5  u8 type 1 (request)   6  u16 0   8  u32 nonce high   12 u32 nonce low
// The host agent answers with a UDP datagram from its provider address to the request's source
// address and port:
//   0  u32 magic   4  u8 version   5  u8 type 2 (answer)   6  u16 entry count   8  nonce (8 bytes, the request's)
//   16 entries: u8 nic name length (1..32), the name (ASCII), u32 the nic's last probe round trip in
//      microseconds (PROBE_RTT_NONE: not probed, or no successful probe yet)
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';

/** The VNI of the echo request: never a network's (config VNIs are 1..16777215). */
export const LATENCY_ECHO_VNI = 0;
export const LATENCY_ECHO_MAGIC = 0x534c4245; // 'SLBE'
export const LATENCY_ECHO_VERSION = 1;
export const LATENCY_ECHO_REQUEST = 1;
export const LATENCY_ECHO_ANSWER = 2;
/** The request after the VXLAN header (16 bytes). */
export const LATENCY_ECHO_REQUEST_LEN = 16;
export const LATENCY_ECHO_ANSWER_HEADER_LEN = 16;
/** A nic name is at most 32 characters (config names). */
export const LATENCY_ECHO_NAME_MAX = 32;
/** The most entries an answer carries (a host's nics). */
export const LATENCY_ECHO_MAX_ENTRIES = 256;
export const PROBE_RTT_NONE = 0xffffffff;

/** Negative results of the parsers (never a valid length). */
export const ERR_ECHO_BAD_MAGIC = -101;
export const ERR_ECHO_BAD_VERSION = -102;
export const ERR_ECHO_BAD_TYPE = -103;
export const ERR_ECHO_BAD_ENTRY = -104;
export const ERR_ECHO_TRAILING = -105;

export interface EchoRequest {
  nonceHi: number;
  nonceLo: number;
}

export interface EchoEntry {
  readonly nic: string;
  /** Microseconds; PROBE_RTT_NONE = none. */
  readonly probeRttUs: number;
}

export interface EchoAnswer {
  nonceHi: number;
  nonceLo: number;
  entries: EchoEntry[];
}

/** Writes a request at `off`; returns LATENCY_ECHO_REQUEST_LEN. */
export function writeEchoRequest(h: EchoRequest, buf: Uint8Array, off: number): number {
  writeU32(buf, off, LATENCY_ECHO_MAGIC);
  buf[off + 4] = LATENCY_ECHO_VERSION;
  buf[off + 5] = LATENCY_ECHO_REQUEST;
  writeU16(buf, off + 6, 0);
  writeU32(buf, off + 8, h.nonceHi >>> 0);
  writeU32(buf, off + 12, h.nonceLo >>> 0);
  return LATENCY_ECHO_REQUEST_LEN;
}

function readHeader(buf: Uint8Array, off: number, end: number, type: number): number {
  if (off < 0 || end > buf.length || end - off < 16) return ERR_TRUNCATED;
  if (readU32(buf, off) !== LATENCY_ECHO_MAGIC) return ERR_ECHO_BAD_MAGIC;
  if (buf[off + 4] !== LATENCY_ECHO_VERSION) return ERR_ECHO_BAD_VERSION;
  if (buf[off + 5] !== type) return ERR_ECHO_BAD_TYPE;
  return 16;
}

/** Parses a request (the VXLAN payload, buf[off .. end)); returns 16 or a negative error. Trailing bytes are an error. */
export function parseEchoRequest(buf: Uint8Array, off: number, out: EchoRequest, end = buf.length): number {
  const n = readHeader(buf, off, end, LATENCY_ECHO_REQUEST);
  if (n < 0) return n;
  if (end - off !== LATENCY_ECHO_REQUEST_LEN) return ERR_ECHO_TRAILING;
  out.nonceHi = readU32(buf, off + 8);
  out.nonceLo = readU32(buf, off + 12);
  return LATENCY_ECHO_REQUEST_LEN;
}

/** Bytes an answer with these entries takes. */
export function echoAnswerLength(entries: readonly EchoEntry[]): number {
  let n = LATENCY_ECHO_ANSWER_HEADER_LEN;
  for (const e of entries) n += 1 + e.nic.length + 4;
  return n;
}

/**
 * Writes an answer; returns its length. Throws RangeError on API misuse (a name that is empty, longer
 * than 32 or not ASCII, too many entries, a buffer too small): the host agent writes config names.
 */
export function writeEchoAnswer(
  h: { nonceHi: number; nonceLo: number; entries: readonly EchoEntry[] },
  buf: Uint8Array,
  off: number,
): number {
  if (h.entries.length > LATENCY_ECHO_MAX_ENTRIES)
    throw new RangeError(`at most ${LATENCY_ECHO_MAX_ENTRIES} entries, got ${h.entries.length}`);
  const len = echoAnswerLength(h.entries);
  if (off < 0 || off + len > buf.length) throw new RangeError(`the answer needs ${len} bytes at ${off}, the buffer has ${buf.length}`);
  writeU32(buf, off, LATENCY_ECHO_MAGIC);
  buf[off + 4] = LATENCY_ECHO_VERSION;
  buf[off + 5] = LATENCY_ECHO_ANSWER;
  writeU16(buf, off + 6, h.entries.length);
  writeU32(buf, off + 8, h.nonceHi >>> 0);
  writeU32(buf, off + 12, h.nonceLo >>> 0);
  let p = off + LATENCY_ECHO_ANSWER_HEADER_LEN;
  for (const e of h.entries) {
    const n = e.nic.length;
    if (n < 1 || n > LATENCY_ECHO_NAME_MAX || !/^[\x21-\x7e]+$/.test(e.nic)) throw new RangeError(`bad nic name ${JSON.stringify(e.nic)}`);
    buf[p++] = n;
    for (let i = 0; i < n; i++) buf[p++] = e.nic.charCodeAt(i);
    writeU32(buf, p, Number.isInteger(e.probeRttUs) && e.probeRttUs >= 0 && e.probeRttUs <= PROBE_RTT_NONE ? e.probeRttUs : PROBE_RTT_NONE);
    p += 4;
  }
  return len;
}

/** Parses an answer (a whole datagram, buf[off .. end)); returns it or a negative error. Control plane: allocates. */
export function parseEchoAnswer(buf: Uint8Array, off: number, end = buf.length): EchoAnswer | number {
  const n = readHeader(buf, off, end, LATENCY_ECHO_ANSWER);
  if (n < 0) return n;
  const count = readU16(buf, off + 6);
  if (count > LATENCY_ECHO_MAX_ENTRIES) return ERR_ECHO_BAD_ENTRY;
  const entries: EchoEntry[] = [];
  let p = off + LATENCY_ECHO_ANSWER_HEADER_LEN;
  for (let i = 0; i < count; i++) {
    if (p >= end) return ERR_TRUNCATED;
    const len = buf[p]!;
    if (len < 1 || len > LATENCY_ECHO_NAME_MAX) return ERR_ECHO_BAD_ENTRY;
    if (p + 1 + len + 4 > end) return ERR_TRUNCATED;
    let name = '';
    for (let k = 0; k < len; k++) {
      const ch = buf[p + 1 + k]!;
      if (ch < 0x21 || ch > 0x7e) return ERR_ECHO_BAD_ENTRY;
      name += String.fromCharCode(ch);
    }
    entries.push({ nic: name, probeRttUs: readU32(buf, p + 1 + len) });
    p += 1 + len + 4;
  }
  if (p !== end) return ERR_ECHO_TRAILING;
  return { nonceHi: readU32(buf, off + 8), nonceLo: readU32(buf, off + 12), entries };
}

/** The median of the samples (the mean of the two middle ones for an even count); NaN for none. */
export function medianOf(samples: readonly number[]): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The last `max` samples of one backend, oldest first. */
export class SampleWindow {
  private readonly s: number[] = [];
  constructor(public max: number) {}
  push(v: number): void {
    this.s.push(v);
    while (this.s.length > this.max) this.s.shift();
  }
  get size(): number {
    return this.s.length;
  }
  get last(): number | undefined {
    return this.s[this.s.length - 1];
  }
  /** The smallest sample of the window, or undefined while empty. */
  min(): number | undefined {
    return this.s.length === 0 ? undefined : Math.min(...this.s);
  }
  /** The median of the window, or undefined while empty. */
  median(): number | undefined {
    return this.s.length === 0 ? undefined : medianOf(this.s);
  }
  values(): readonly number[] {
    return this.s;
  }
  /** A smaller `max` drops the oldest samples. */
  resize(max: number): void {
    this.max = max;
    while (this.s.length > max) this.s.shift();
  }
}
