// UDP header (RFC 768).
import { readU16, writeU16 } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_UDP_LENGTH } from './codec-error.js';

export const UDP_HEADER_LEN = 8;
export const UDP_OFF_LENGTH = 4;
export const UDP_OFF_CHECKSUM = 6;

export interface UdpHeader {
  srcPort: number;
  dstPort: number;
  /** Header plus payload, in bytes. */
  length: number;
  checksum: number;
}

export function newUdpHeader(): UdpHeader {
  return { srcPort: 0, dstPort: 0, length: UDP_HEADER_LEN, checksum: 0 };
}

/** Parses the header of a datagram that ends at `end` (default: end of buffer); returns 8 or an error. */
export function parseUdp(buf: Uint8Array, off: number, out: UdpHeader, end = buf.length): number {
  const avail = end - off;
  if (off < 0 || avail < UDP_HEADER_LEN || end > buf.length) return ERR_TRUNCATED;
  const len = readU16(buf, off + 4);
  // RFC 768: length counts header and data, so at least 8, and must fit what IP carried
  if (len < UDP_HEADER_LEN || len > avail) return ERR_BAD_UDP_LENGTH;
  out.srcPort = readU16(buf, off);
  out.dstPort = readU16(buf, off + 2);
  out.length = len;
  out.checksum = readU16(buf, off + 6);
  return UDP_HEADER_LEN;
}

export function writeUdp(h: UdpHeader, buf: Uint8Array, off: number): number {
  writeU16(buf, off, h.srcPort);
  writeU16(buf, off + 2, h.dstPort);
  writeU16(buf, off + 4, h.length);
  writeU16(buf, off + 6, h.checksum);
  return UDP_HEADER_LEN;
}
