// ICMP for IPv4 (RFC 792) and ICMPv6 (RFC 4443) share one 8-byte header shape: type, code, checksum,
// and 4 bytes whose meaning depends on the type (echo id/sequence, next-hop MTU, pointer, unused).
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';

export const ICMP_HEADER_LEN = 8;
export const ICMP_OFF_CHECKSUM = 2;
// RFC 792
export const ICMP_ECHO_REPLY = 0;
export const ICMP_DEST_UNREACH = 3;
export const ICMP_ECHO_REQUEST = 8;
export const ICMP_TIME_EXCEEDED = 11;
export const ICMP_PARAM_PROBLEM = 12;
export const ICMP_CODE_FRAG_NEEDED = 4; // RFC 1191: destination unreachable, fragmentation needed and DF set
export const ICMP_CODE_PORT_UNREACH = 3;

export interface IcmpHeader {
  type: number;
  code: number;
  checksum: number;
  /** The second 32-bit word (echo id << 16 | seq; next-hop MTU in the low 16 bits for frag-needed; ...). */
  rest: number;
}

export function newIcmpHeader(): IcmpHeader {
  return { type: 0, code: 0, checksum: 0, rest: 0 };
}

/** Parses an ICMP header (either family); returns 8 or an error. */
export function parseIcmp(buf: Uint8Array, off: number, out: IcmpHeader, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < ICMP_HEADER_LEN) return ERR_TRUNCATED;
  out.type = buf[off]!;
  out.code = buf[off + 1]!;
  out.checksum = readU16(buf, off + 2);
  out.rest = readU32(buf, off + 4);
  return ICMP_HEADER_LEN;
}

export function writeIcmp(h: IcmpHeader, buf: Uint8Array, off: number): number {
  buf[off] = h.type & 0xff;
  buf[off + 1] = h.code & 0xff;
  writeU16(buf, off + 2, h.checksum);
  writeU32(buf, off + 4, h.rest);
  return ICMP_HEADER_LEN;
}

/** True for ICMPv4 types that carry the header of the packet that caused them. */
export function isIcmpError(type: number): boolean {
  return type === ICMP_DEST_UNREACH || type === ICMP_TIME_EXCEEDED || type === ICMP_PARAM_PROBLEM;
}
