// TCP header (RFC 9293 3.1). Options are skipped by data offset.
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_DATA_OFFSET } from './codec-error.js';

export const TCP_HEADER_LEN = 20;
export const TCP_OFF_CHECKSUM = 16;
export const TCP_FIN = 0x01;
export const TCP_SYN = 0x02;
export const TCP_RST = 0x04;
export const TCP_PSH = 0x08;
export const TCP_ACK = 0x10;
export const TCP_URG = 0x20;
export const TCP_ECE = 0x40;
export const TCP_CWR = 0x80;

export interface TcpHeader {
  srcPort: number;
  dstPort: number;
  seq: number;
  ack: number;
  /** Header length in bytes (data offset * 4). */
  headerLen: number;
  flags: number;
  window: number;
  checksum: number;
  urgent: number;
}

export function newTcpHeader(): TcpHeader {
  return { srcPort: 0, dstPort: 0, seq: 0, ack: 0, headerLen: TCP_HEADER_LEN, flags: 0, window: 0, checksum: 0, urgent: 0 };
}

/** Parses the header of a segment that ends at `end` (default: end of buffer); returns the header length or an error. */
export function parseTcp(buf: Uint8Array, off: number, out: TcpHeader, end = buf.length): number {
  const avail = end - off;
  if (off < 0 || avail < TCP_HEADER_LEN || end > buf.length) return ERR_TRUNCATED;
  const hlen = (buf[off + 12]! >>> 4) * 4;
  // RFC 9293 3.1: data offset is at least 5
  if (hlen < TCP_HEADER_LEN || hlen > avail) return ERR_BAD_DATA_OFFSET;
  out.srcPort = readU16(buf, off);
  out.dstPort = readU16(buf, off + 2);
  out.seq = readU32(buf, off + 4);
  out.ack = readU32(buf, off + 8);
  out.headerLen = hlen;
  out.flags = buf[off + 13]!;
  out.window = readU16(buf, off + 14);
  out.checksum = readU16(buf, off + 16);
  out.urgent = readU16(buf, off + 18);
  return hlen;
}

/** Writes a 20-byte header (no options) with h.checksum as given; returns 20. */
export function writeTcp(h: TcpHeader, buf: Uint8Array, off: number): number {
  writeU16(buf, off, h.srcPort);
  writeU16(buf, off + 2, h.dstPort);
  writeU32(buf, off + 4, h.seq);
  writeU32(buf, off + 8, h.ack);
  buf[off + 12] = (TCP_HEADER_LEN / 4) << 4;
  buf[off + 13] = h.flags & 0xff;
  writeU16(buf, off + 14, h.window);
  writeU16(buf, off + 16, h.checksum);
  writeU16(buf, off + 18, h.urgent);
  return TCP_HEADER_LEN;
}
