// The classic libpcap file format (what `tcpdump -w` writes): a 24-byte global header, then records of
// a 16-byte header and the captured bytes. Both byte orders and both microsecond and nanosecond
// resolutions are read; files are written little-endian with microseconds. pcapng is not read.
import { ERR_BAD_PCAP, ERR_TRUNCATED } from './codec-error.js';

export const PCAP_GLOBAL_HEADER_LEN = 24;
export const PCAP_RECORD_HEADER_LEN = 16;
export const PCAP_MAGIC_US = 0xa1b2c3d4;
export const PCAP_MAGIC_NS = 0xa1b23c4d;
export const PCAPNG_MAGIC = 0x0a0d0d0a;
export const LINKTYPE_ETHERNET = 1;
export const LINKTYPE_RAW = 101; // raw IPv4/IPv6 packets, no link header
export const PCAP_DEFAULT_SNAPLEN = 262144;

export interface PcapHeader {
  littleEndian: boolean;
  nanoseconds: boolean;
  versionMajor: number;
  versionMinor: number;
  snaplen: number;
  linkType: number;
}

export interface PcapRecord {
  /** Capture time in microseconds since the epoch (nanosecond files are rounded down). */
  tsUs: number;
  /** Captured length (bytes present in the file). */
  capLen: number;
  /** Length of the packet on the wire. */
  origLen: number;
  /** Offset of the packet bytes in the file buffer. */
  dataOff: number;
}

export function newPcapHeader(): PcapHeader {
  return {
    littleEndian: true,
    nanoseconds: false,
    versionMajor: 2,
    versionMinor: 4,
    snaplen: PCAP_DEFAULT_SNAPLEN,
    linkType: LINKTYPE_ETHERNET,
  };
}

export function newPcapRecord(): PcapRecord {
  return { tsUs: 0, capLen: 0, origLen: 0, dataOff: 0 };
}

function u32(buf: Uint8Array, off: number, le: boolean): number {
  return le
    ? (buf[off]! | (buf[off + 1]! << 8) | (buf[off + 2]! << 16) | (buf[off + 3]! << 24)) >>> 0
    : ((buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!) >>> 0;
}

function u16(buf: Uint8Array, off: number, le: boolean): number {
  return le ? buf[off]! | (buf[off + 1]! << 8) : (buf[off]! << 8) | buf[off + 1]!;
}

function putU32le(buf: Uint8Array, off: number, v: number): void {
  buf[off] = v & 0xff;
  buf[off + 1] = (v >>> 8) & 0xff;
  buf[off + 2] = (v >>> 16) & 0xff;
  buf[off + 3] = (v >>> 24) & 0xff;
}

/** Parses the global header; returns 24 or an error (ERR_BAD_PCAP for pcapng or an unknown magic). */
export function parsePcapHeader(buf: Uint8Array, off: number, out: PcapHeader): number {
  if (off < 0 || buf.length - off < PCAP_GLOBAL_HEADER_LEN) return ERR_TRUNCATED;
  const be = u32(buf, off, false);
  let le: boolean;
  let ns: boolean;
  if (be === PCAP_MAGIC_US) {
    le = false;
    ns = false;
  } else if (be === PCAP_MAGIC_NS) {
    le = false;
    ns = true;
  } else {
    const l = u32(buf, off, true);
    if (l === PCAP_MAGIC_US) {
      le = true;
      ns = false;
    } else if (l === PCAP_MAGIC_NS) {
      le = true;
      ns = true;
    } else return ERR_BAD_PCAP;
  }
  out.littleEndian = le;
  out.nanoseconds = ns;
  out.versionMajor = u16(buf, off + 4, le);
  out.versionMinor = u16(buf, off + 6, le);
  out.snaplen = u32(buf, off + 16, le);
  out.linkType = u32(buf, off + 20, le) & 0x0fffffff; // upper bits: FCS length flags
  return PCAP_GLOBAL_HEADER_LEN;
}

/** Parses the record at `off`; returns the record's total length (16 + capLen) or an error. */
export function parsePcapRecord(buf: Uint8Array, off: number, h: PcapHeader, out: PcapRecord): number {
  if (off < 0 || buf.length - off < PCAP_RECORD_HEADER_LEN) return ERR_TRUNCATED;
  const sec = u32(buf, off, h.littleEndian);
  const frac = u32(buf, off + 4, h.littleEndian);
  const capLen = u32(buf, off + 8, h.littleEndian);
  const origLen = u32(buf, off + 12, h.littleEndian);
  if (capLen > buf.length - off - PCAP_RECORD_HEADER_LEN) return ERR_TRUNCATED;
  if (capLen > 0x4000000) return ERR_BAD_PCAP;
  out.tsUs = sec * 1e6 + (h.nanoseconds ? Math.floor(frac / 1000) : frac);
  out.capLen = capLen;
  out.origLen = origLen;
  out.dataOff = off + PCAP_RECORD_HEADER_LEN;
  return PCAP_RECORD_HEADER_LEN + capLen;
}

/** Writes a little-endian microsecond global header; returns 24. */
export function writePcapHeader(linkType: number, snaplen: number, buf: Uint8Array, off: number): number {
  putU32le(buf, off, PCAP_MAGIC_US);
  buf[off + 4] = 2;
  buf[off + 5] = 0;
  buf[off + 6] = 4;
  buf[off + 7] = 0;
  putU32le(buf, off + 8, 0);
  putU32le(buf, off + 12, 0);
  putU32le(buf, off + 16, snaplen);
  putU32le(buf, off + 20, linkType);
  return PCAP_GLOBAL_HEADER_LEN;
}

/** Writes a record header for `len` captured bytes at time tsUs; returns 16 (the caller copies the bytes). */
export function writePcapRecordHeader(tsUs: number, len: number, origLen: number, buf: Uint8Array, off: number): number {
  const sec = Math.floor(tsUs / 1e6);
  putU32le(buf, off, sec);
  putU32le(buf, off + 4, Math.floor(tsUs - sec * 1e6));
  putU32le(buf, off + 8, len);
  putU32le(buf, off + 12, origLen);
  return PCAP_RECORD_HEADER_LEN;
}

export interface PcapPacket {
  readonly tsUs: number;
  readonly data: Uint8Array;
  readonly origLen: number;
}

/**
 * Reads a whole pcap file held in memory. Returns the link type and the packets (views into `buf`),
 * or an error code. A truncated last record (a capture cut short) ends the list and sets `truncated`.
 */
export function readPcap(buf: Uint8Array): { linkType: number; packets: PcapPacket[]; truncated: boolean } | number {
  const h = newPcapHeader();
  const n = parsePcapHeader(buf, 0, h);
  if (n < 0) return n;
  const packets: PcapPacket[] = [];
  const rec = newPcapRecord();
  let off = n;
  let truncated = false;
  while (off < buf.length) {
    const r = parsePcapRecord(buf, off, h, rec);
    if (r < 0) {
      truncated = true;
      break;
    }
    packets.push({ tsUs: rec.tsUs, data: buf.subarray(rec.dataOff, rec.dataOff + rec.capLen), origLen: rec.origLen });
    off += r;
  }
  return { linkType: h.linkType, packets, truncated };
}

/** Builds a pcap file image from packets. */
export function buildPcap(linkType: number, packets: readonly PcapPacket[]): Uint8Array {
  let total = PCAP_GLOBAL_HEADER_LEN;
  for (const p of packets) total += PCAP_RECORD_HEADER_LEN + p.data.length;
  const out = new Uint8Array(total);
  let off = writePcapHeader(linkType, PCAP_DEFAULT_SNAPLEN, out, 0);
  for (const p of packets) {
    off += writePcapRecordHeader(p.tsUs, p.data.length, Math.max(p.origLen, p.data.length), out, off);
    out.set(p.data, off);
    off += p.data.length;
  }
  return out;
}
