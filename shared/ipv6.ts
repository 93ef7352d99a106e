// IPv6 header (RFC 8200) with a walk over extension headers to the upper-layer header.
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_VERSION, ERR_BAD_PAYLOAD_LENGTH, ERR_BAD_EXT_HEADER, ERR_TOO_MANY_EXT_HEADERS } from './codec-error.js';

export const IPV6_HEADER_LEN = 40;
export const IPV6_FRAGMENT_HEADER_LEN = 8;
/** The most extension headers walked before the packet is refused. */
export const IPV6_MAX_EXT_HEADERS = 8;
export const IPV6_NH_HOP_BY_HOP = 0;
export const IPV6_NH_ROUTING = 43;
export const IPV6_NH_FRAGMENT = 44;
export const IPV6_NH_ESP = 50;
export const IPV6_NH_AH = 51;
export const IPV6_NH_NONE = 59;
export const IPV6_NH_DEST_OPTS = 60;
export const IPV6_OFF_PAYLOAD_LENGTH = 4;
export const IPV6_OFF_HOP_LIMIT = 7;
export const IPV6_OFF_SRC = 8;
export const IPV6_OFF_DST = 24;

export interface Ipv6Header {
  trafficClass: number;
  flowLabel: number;
  payloadLength: number;
  /** Next Header field of the fixed header. */
  nextHeader: number;
  hopLimit: number;
  readonly src: Uint32Array; // 4 words, big-endian
  readonly dst: Uint32Array;
  /** Upper-layer protocol found after the extension headers (or the fragment's next header). */
  protocol: number;
  /** Bytes from the start of the fixed header to the upper-layer header. */
  headerLen: number;
  extCount: number;
  /** A fragment header was present. */
  hasFragment: boolean;
  /** Fragment offset in 8-byte units (0 when no fragment header). */
  fragOffset: number;
  moreFragments: boolean;
  fragId: number;
  /** Offset (from the fixed header) of the fragment header, or -1. */
  fragHeaderOff: number;
}

export function newIpv6Header(): Ipv6Header {
  return {
    trafficClass: 0,
    flowLabel: 0,
    payloadLength: 0,
    nextHeader: 0,
    hopLimit: 64,
    src: new Uint32Array(4),
    dst: new Uint32Array(4),
    protocol: 0,
    headerLen: IPV6_HEADER_LEN,
    extCount: 0,
    hasFragment: false,
    fragOffset: 0,
    moreFragments: false,
    fragId: 0,
    fragHeaderOff: -1,
  };
}

/**
 * Parses the fixed header and walks hop-by-hop, routing, fragment, destination options and AH headers.
 * Returns the offset from `off` of the upper-layer header (out.headerLen) or an error. For a non-first
 * fragment the walk stops at the fragment header: out.protocol is its Next Header and no upper-layer
 * header follows. The packet is buf[off .. off + 40 + payloadLength); `end` bounds it inside a larger buffer.
 * `quoted`: the packet is one an ICMPv6 error carries, cut short (RFC 4443 2.4(c)): its payload length may
 * run past `end`; extension headers are walked as far as the bytes go.
 */
export function parseIpv6(buf: Uint8Array, off: number, out: Ipv6Header, end = buf.length, quoted = false): number {
  const avail = end - off;
  if (off < 0 || end > buf.length || avail < IPV6_HEADER_LEN) return ERR_TRUNCATED;
  const w0 = readU32(buf, off);
  if (w0 >>> 28 !== 6) return ERR_BAD_VERSION;
  const plen = readU16(buf, off + 4);
  if (IPV6_HEADER_LEN + plen > avail && !quoted) return ERR_BAD_PAYLOAD_LENGTH;
  out.trafficClass = (w0 >>> 20) & 0xff;
  out.flowLabel = w0 & 0xfffff;
  out.payloadLength = plen;
  out.nextHeader = buf[off + 6]!;
  out.hopLimit = buf[off + 7]!;
  for (let i = 0; i < 4; i++) {
    out.src[i] = readU32(buf, off + 8 + i * 4);
    out.dst[i] = readU32(buf, off + 24 + i * 4);
  }
  out.hasFragment = false;
  out.fragOffset = 0;
  out.moreFragments = false;
  out.fragId = 0;
  out.fragHeaderOff = -1;
  const pktEnd = quoted && IPV6_HEADER_LEN + plen > avail ? avail : IPV6_HEADER_LEN + plen;
  let nh = out.nextHeader;
  let pos = IPV6_HEADER_LEN;
  let count = 0;
  for (;;) {
    if (nh === IPV6_NH_HOP_BY_HOP || nh === IPV6_NH_ROUTING || nh === IPV6_NH_DEST_OPTS || nh === IPV6_NH_AH) {
      // RFC 8200 4.3: hop-by-hop options only immediately after the fixed header
      if (nh === IPV6_NH_HOP_BY_HOP && count !== 0) return ERR_BAD_EXT_HEADER;
      if (count >= IPV6_MAX_EXT_HEADERS) return ERR_TOO_MANY_EXT_HEADERS;
      if (pktEnd - pos < 8) return ERR_TRUNCATED;
      // RFC 8200 4.3-4.6: length in 8-octet units not counting the first; RFC 4302 2.2: AH in 4-octet units minus 2
      const len = nh === IPV6_NH_AH ? (buf[off + pos + 1]! + 2) * 4 : (buf[off + pos + 1]! + 1) * 8;
      if (pktEnd - pos < len) return ERR_TRUNCATED;
      nh = buf[off + pos]!;
      pos += len;
      count++;
      continue;
    }
    if (nh === IPV6_NH_FRAGMENT) {
      if (count >= IPV6_MAX_EXT_HEADERS) return ERR_TOO_MANY_EXT_HEADERS;
      if (out.hasFragment) return ERR_BAD_EXT_HEADER; // RFC 8200 4.1: each at most once
      if (pktEnd - pos < IPV6_FRAGMENT_HEADER_LEN) return ERR_TRUNCATED;
      const fo = readU16(buf, off + pos + 2);
      out.hasFragment = true;
      out.fragHeaderOff = pos;
      out.fragOffset = fo >>> 3;
      out.moreFragments = (fo & 1) === 1;
      out.fragId = readU32(buf, off + pos + 4);
      nh = buf[off + pos]!;
      pos += IPV6_FRAGMENT_HEADER_LEN;
      count++;
      if (out.fragOffset !== 0) break; // RFC 8200 4.5: later fragments carry no upper-layer header
      continue;
    }
    break;
  }
  out.protocol = nh;
  out.headerLen = pos;
  out.extCount = count;
  return pos;
}

/** Writes the 40-byte fixed header (Next Header = h.nextHeader); returns 40. */
export function writeIpv6(h: Ipv6Header, buf: Uint8Array, off: number): number {
  writeU32(buf, off, ((6 << 28) | ((h.trafficClass & 0xff) << 20) | (h.flowLabel & 0xfffff)) >>> 0);
  writeU16(buf, off + 4, h.payloadLength);
  buf[off + 6] = h.nextHeader & 0xff;
  buf[off + 7] = h.hopLimit & 0xff;
  for (let i = 0; i < 4; i++) {
    writeU32(buf, off + 8 + i * 4, h.src[i]!);
    writeU32(buf, off + 24 + i * 4, h.dst[i]!);
  }
  return IPV6_HEADER_LEN;
}

/** True when the packet is a fragment (a fragment header with MF set or a non-zero offset). */
export function isIpv6Fragment(h: Ipv6Header): boolean {
  return h.hasFragment && (h.moreFragments || h.fragOffset !== 0);
}
