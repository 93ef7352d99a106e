// IPv4 header (RFC 791). Options are skipped by IHL, never interpreted.
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_VERSION, ERR_BAD_IHL, ERR_BAD_TOTAL_LENGTH } from './codec-error.js';
import { ipv4HeaderChecksum } from './checksum.js';

export const IPV4_HEADER_LEN = 20;
export const IPV4_MAX_HEADER_LEN = 60;
export const IPV4_FLAG_DF = 0x2; // don't fragment
export const IPV4_FLAG_MF = 0x1; // more fragments
export const IPPROTO_ICMP = 1;
export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;
export const IPPROTO_ICMPV6 = 58;
/** Offsets of fields inside the header, for in-place rewrites. */
export const IPV4_OFF_TTL = 8;
export const IPV4_OFF_CHECKSUM = 10;
export const IPV4_OFF_SRC = 12;
export const IPV4_OFF_DST = 16;

export interface Ipv4Header {
  /** Header length in bytes (IHL * 4). */
  headerLen: number;
  /** DSCP and ECN byte. */
  tos: number;
  totalLength: number;
  id: number;
  /** The three flag bits (IPV4_FLAG_DF, IPV4_FLAG_MF). */
  flags: number;
  /** Fragment offset in 8-byte units, as on the wire. */
  fragOffset: number;
  ttl: number;
  protocol: number;
  checksum: number;
  src: number; // uint32
  dst: number; // uint32
}

export function newIpv4Header(): Ipv4Header {
  return {
    headerLen: IPV4_HEADER_LEN,
    tos: 0,
    totalLength: 0,
    id: 0,
    flags: 0,
    fragOffset: 0,
    ttl: 64,
    protocol: 0,
    checksum: 0,
    src: 0,
    dst: 0,
  };
}

/**
 * Parses the header at `off`; returns the header length (IHL * 4) or an error. The packet is
 * buf[off .. off + totalLength); bytes after it (Ethernet padding) are ignored. The checksum is not verified
 * here (see verifyIpv4HeaderChecksum). `end` bounds the packet inside a larger buffer (default: its end).
 * `quoted`: the packet is one an ICMP error carries, which may be cut short (RFC 792, RFC 1812 4.3.2.3):
 * its total length may run past `end`, and only the header must be present.
 */
export function parseIpv4(buf: Uint8Array, off: number, out: Ipv4Header, end = buf.length, quoted = false): number {
  const avail = end - off;
  if (off < 0 || end > buf.length || avail < IPV4_HEADER_LEN) return ERR_TRUNCATED;
  const vihl = buf[off]!;
  if (vihl >>> 4 !== 4) return ERR_BAD_VERSION;
  const hlen = (vihl & 0x0f) * 4;
  // RFC 791 3.1: IHL is at least 5
  if (hlen < IPV4_HEADER_LEN || hlen > avail) return ERR_BAD_IHL;
  const total = readU16(buf, off + 2);
  if (total < hlen || (total > avail && !quoted)) return ERR_BAD_TOTAL_LENGTH;
  out.headerLen = hlen;
  out.tos = buf[off + 1]!;
  out.totalLength = total;
  out.id = readU16(buf, off + 4);
  const ff = readU16(buf, off + 6);
  out.flags = ff >>> 13;
  out.fragOffset = ff & 0x1fff;
  out.ttl = buf[off + 8]!;
  out.protocol = buf[off + 9]!;
  out.checksum = readU16(buf, off + 10);
  out.src = readU32(buf, off + 12);
  out.dst = readU32(buf, off + 16);
  return hlen;
}

/** Writes a 20-byte header (no options) with a computed checksum; returns 20. */
export function writeIpv4(h: Ipv4Header, buf: Uint8Array, off: number): number {
  buf[off] = 0x45;
  buf[off + 1] = h.tos & 0xff;
  writeU16(buf, off + 2, h.totalLength);
  writeU16(buf, off + 4, h.id);
  writeU16(buf, off + 6, ((h.flags & 7) << 13) | (h.fragOffset & 0x1fff));
  buf[off + 8] = h.ttl & 0xff;
  buf[off + 9] = h.protocol & 0xff;
  writeU16(buf, off + 10, 0);
  writeU32(buf, off + 12, h.src);
  writeU32(buf, off + 16, h.dst);
  const c = ipv4HeaderChecksum(buf, off, IPV4_HEADER_LEN);
  writeU16(buf, off + 10, c);
  h.checksum = c;
  return IPV4_HEADER_LEN;
}

/** True when the header describes a fragment (MF set or a non-zero offset). */
export function isIpv4Fragment(h: Ipv4Header): boolean {
  return (h.flags & IPV4_FLAG_MF) !== 0 || h.fragOffset !== 0;
}
