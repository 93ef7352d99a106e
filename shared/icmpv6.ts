// ICMPv6 (RFC 4443) and the neighbour discovery messages the host agent answers (RFC 4861).
// The 8-byte header is the same shape as ICMPv4's: see icmp.ts for parseIcmp/writeIcmp.
import { readU32, writeU32, copyBytes } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';

export { ICMP_HEADER_LEN as ICMPV6_HEADER_LEN, parseIcmp as parseIcmpv6, writeIcmp as writeIcmpv6 } from './icmp.js';
export type { IcmpHeader as Icmpv6Header } from './icmp.js';

export const ICMPV6_DEST_UNREACH = 1;
export const ICMPV6_PACKET_TOO_BIG = 2;
export const ICMPV6_TIME_EXCEEDED = 3;
export const ICMPV6_PARAM_PROBLEM = 4;
export const ICMPV6_ECHO_REQUEST = 128;
export const ICMPV6_ECHO_REPLY = 129;
export const ICMPV6_NEIGHBOR_SOLICIT = 135;
export const ICMPV6_NEIGHBOR_ADVERT = 136;
/** RFC 4861 4.6.1: option types carrying a link-layer address. */
export const ND_OPT_SOURCE_LL = 1;
export const ND_OPT_TARGET_LL = 2;
/** Neighbour solicitation/advertisement body after the 8-byte ICMPv6 header: 16-byte target. */
export const ND_TARGET_LEN = 16;
export const ND_NA_FLAG_ROUTER = 0x80000000;
export const ND_NA_FLAG_SOLICITED = 0x40000000;
export const ND_NA_FLAG_OVERRIDE = 0x20000000;

/** True for ICMPv6 types that carry the packet that caused them (RFC 4443 2.1: types below 128). */
export function isIcmpv6Error(type: number): boolean {
  return type < 128;
}

export interface NdMessage {
  /** Target address words (the 16 bytes after the ICMPv6 header). */
  readonly target: Uint32Array;
  /** Link-layer address from a source/target LL option, when present. */
  readonly linkAddr: Uint8Array;
  hasLinkAddr: boolean;
}

export function newNdMessage(): NdMessage {
  return { target: new Uint32Array(4), linkAddr: new Uint8Array(6), hasLinkAddr: false };
}

/**
 * Parses the body of a neighbour solicitation or advertisement: `off` points at the ICMPv6 header,
 * `end` at the end of the ICMPv6 message. Returns bytes consumed or an error.
 */
export function parseNd(buf: Uint8Array, off: number, out: NdMessage, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < 8 + ND_TARGET_LEN) return ERR_TRUNCATED;
  for (let i = 0; i < 4; i++) out.target[i] = readU32(buf, off + 8 + i * 4);
  out.hasLinkAddr = false;
  let pos = off + 8 + ND_TARGET_LEN;
  while (end - pos >= 2) {
    const type = buf[pos]!;
    const len = buf[pos + 1]! * 8;
    // RFC 4861 4.6: an option of length 0 is invalid and the packet must be dropped
    if (len === 0 || end - pos < len) return ERR_TRUNCATED;
    if ((type === ND_OPT_SOURCE_LL || type === ND_OPT_TARGET_LL) && len >= 8) {
      copyBytes(buf, pos + 2, out.linkAddr, 0, 6);
      out.hasLinkAddr = true;
    }
    pos += len;
  }
  return end - off;
}

/** Writes an ND body (target and one link-layer option of `optType`) after the 8-byte header at `off`; returns 32. */
export function writeNdBody(target: Uint32Array, optType: number, linkAddr: Uint8Array, buf: Uint8Array, off: number): number {
  for (let i = 0; i < 4; i++) writeU32(buf, off + 8 + i * 4, target[i]!);
  buf[off + 24] = optType;
  buf[off + 25] = 1;
  copyBytes(linkAddr, 0, buf, off + 26, 6);
  return 32;
}
