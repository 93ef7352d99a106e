// BGP UPDATE message (RFC 4271 4.3) with the path attributes slbx sends or must understand: ORIGIN,
// AS_PATH (2- or 4-octet ASNs, RFC 6793), NEXT_HOP, MULTI_EXIT_DISC, LOCAL_PREF, ATOMIC_AGGREGATE,
// AGGREGATOR, COMMUNITIES, MP_REACH_NLRI / MP_UNREACH_NLRI (RFC 4760: IPv6 unicast), extended and large
// communities, AS4_PATH / AS4_AGGREGATOR; any other optional attribute is carried through raw.
//
// Errors follow RFC 4271 6.3 for the code and subcode and RFC 7606 for what to do:
//   session reset      the parse returns the negative error (withdrawn routes / total attribute length
//                      overrunning the message, an unparsable NLRI or withdrawn field, a malformed or
//                      repeated MP_REACH_NLRI / MP_UNREACH_NLRI, an unrecognized well-known attribute);
//                      out.error holds the NOTIFICATION data;
//   treat-as-withdraw  the parse succeeds and out.error says so (a malformed ORIGIN, AS_PATH, NEXT_HOP,
//                      MED, LOCAL_PREF, COMMUNITIES, extended or large communities; flags that conflict
//                      with the type; a missing well-known attribute; an attribute overrunning the list):
//                      the UPDATE's routes are withdrawn, no NOTIFICATION is sent;
//   attribute discard  the attribute is dropped from out.attributes (ATOMIC_AGGREGATE, AGGREGATOR,
//                      AS4_PATH, AS4_AGGREGATOR malformed; any repeated attribute).
// The attributes keep their wire order and flags, so a valid UPDATE parses and writes back byte for byte.
import { formatIpv4, formatIpv6, type IpAddr } from './addr.js';
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';
import {
  BGP_ERR_ATTRIBUTE_FLAGS,
  BGP_ERR_ATTRIBUTE_LENGTH,
  BGP_ERR_BAD_MESSAGE_TYPE,
  BGP_ERR_INVALID_NETWORK_FIELD,
  BGP_ERR_INVALID_NEXT_HOP,
  BGP_ERR_INVALID_ORIGIN,
  BGP_ERR_MALFORMED_AS_PATH,
  BGP_ERR_MALFORMED_ATTRIBUTE_LIST,
  BGP_ERR_MISSING_WELL_KNOWN,
  BGP_ERR_OPTIONAL_ATTRIBUTE,
  BGP_ERR_UNRECOGNIZED_WELL_KNOWN,
  BGP_HEADER_LEN,
  BGP_MAX_MESSAGE_LEN,
  BGP_TYPE_UPDATE,
  BGP_UPDATE_MIN_LEN,
  newBgpHeader,
  parseBgpHeader,
  writeBgpHeader,
} from './bgp-message.js';
import { BGP_AFI_IPV4, BGP_AFI_IPV6, BGP_AS_TRANS, BGP_SAFI_UNICAST } from './bgp-open.js';

export const BGP_ATTR_ORIGIN = 1;
export const BGP_ATTR_AS_PATH = 2;
export const BGP_ATTR_NEXT_HOP = 3;
export const BGP_ATTR_MED = 4;
export const BGP_ATTR_LOCAL_PREF = 5;
export const BGP_ATTR_ATOMIC_AGGREGATE = 6;
export const BGP_ATTR_AGGREGATOR = 7;
export const BGP_ATTR_COMMUNITIES = 8;
export const BGP_ATTR_MP_REACH_NLRI = 14;
export const BGP_ATTR_MP_UNREACH_NLRI = 15;
export const BGP_ATTR_EXT_COMMUNITIES = 16;
export const BGP_ATTR_AS4_PATH = 17;
export const BGP_ATTR_AS4_AGGREGATOR = 18;
export const BGP_ATTR_LARGE_COMMUNITIES = 32;

export const BGP_FLAG_OPTIONAL = 0x80;
export const BGP_FLAG_TRANSITIVE = 0x40;
export const BGP_FLAG_PARTIAL = 0x20;
export const BGP_FLAG_EXTENDED_LENGTH = 0x10;
const WELL_KNOWN = BGP_FLAG_TRANSITIVE;
const OPTIONAL_TRANSITIVE = BGP_FLAG_OPTIONAL | BGP_FLAG_TRANSITIVE;
const OPTIONAL_NON_TRANSITIVE = BGP_FLAG_OPTIONAL;

export const BGP_ORIGIN_IGP = 0;
export const BGP_ORIGIN_EGP = 1;
export const BGP_ORIGIN_INCOMPLETE = 2;

export const BGP_AS_SET = 1;
export const BGP_AS_SEQUENCE = 2;
export const BGP_AS_CONFED_SEQUENCE = 3;
export const BGP_AS_CONFED_SET = 4;
/** ASNs in one AS_PATH segment at most (the segment length is one octet). */
export const BGP_AS_SEGMENT_MAX = 255;

export interface BgpPrefix {
  /** The address, bits beyond `len` as received (zero when we build it). */
  readonly addr: IpAddr;
  readonly len: number;
}

export interface BgpAttribute {
  flags: number;
  type: number;
  value: Uint8Array;
}

export interface AsPathSegment {
  type: number;
  asns: number[];
}

export interface BgpMpReach {
  afi: number;
  safi: number;
  /** The next hop field as received. */
  nextHop: Uint8Array;
  /** IPv6 unicast: the global address, then the link-local one when present; IPv4 unicast: one address. */
  nextHops: IpAddr[];
  /** null for an address family slbx does not decode (kept raw in the attribute). */
  nlri: BgpPrefix[] | null;
}

export interface BgpMpUnreach {
  afi: number;
  safi: number;
  withdrawn: BgpPrefix[] | null;
}

/** RFC 7606 2: what a receiver does about an error. */
export type BgpErrorHandling = 'session-reset' | 'treat-as-withdraw' | 'attribute-discard';

export interface BgpUpdateError {
  /** Negative BGP error code: the NOTIFICATION code/subcode (bgpErrorNotification, bgpErrorName). */
  error: number;
  handling: BgpErrorHandling;
  /** The attribute type at fault, or null. */
  attrType: number | null;
  /** The NOTIFICATION data RFC 4271 6.3 names (the attribute, or the missing type code). */
  data: Uint8Array;
}

export interface BgpUpdate {
  /** The IPv4 Withdrawn Routes field. */
  withdrawn: BgpPrefix[];
  /** Path attributes in wire order; a discarded one is left out. */
  attributes: BgpAttribute[];
  /** The IPv4 NLRI field. */
  nlri: BgpPrefix[];
  // Typed views, set by parseBgpUpdate (null when absent or malformed)
  origin: number | null;
  asPath: AsPathSegment[] | null;
  nextHop: IpAddr | null;
  med: number | null;
  localPref: number | null;
  mpReach: BgpMpReach | null;
  mpUnreach: BgpMpUnreach | null;
  /** The most severe error found (session reset > treat-as-withdraw > attribute discard), or null. */
  error: BgpUpdateError | null;
}

export interface BgpUpdateOptions {
  /** Both sides announced the 4-octet AS capability: AS_PATH and AGGREGATOR carry 4-octet ASNs. */
  as4: boolean;
}

export function newBgpUpdate(): BgpUpdate {
  return {
    withdrawn: [],
    attributes: [],
    nlri: [],
    origin: null,
    asPath: null,
    nextHop: null,
    med: null,
    localPref: null,
    mpReach: null,
    mpUnreach: null,
    error: null,
  };
}

// ---------------------------------------------------------------------------------------------
// Prefixes (RFC 4271 4.3: a length in bits, then the fewest octets that hold it)

function ipFromBytes(family: 4 | 6, b: Uint8Array): IpAddr {
  if (family === 4) {
    const w = readU32(b, 0);
    return { family: 4, text: formatIpv4(w), words: Uint32Array.of(w) };
  }
  const words = Uint32Array.of(readU32(b, 0), readU32(b, 4), readU32(b, 8), readU32(b, 12));
  return { family: 6, text: formatIpv6(words, 0), words };
}

/** Parses the prefixes in buf[p .. end) into `out`; returns false when one is malformed (too long or overrunning). */
function parsePrefixes(buf: Uint8Array, p: number, end: number, family: 4 | 6, out: BgpPrefix[]): boolean {
  const maxBits = family === 4 ? 32 : 128;
  while (p < end) {
    const bits = buf[p]!;
    if (bits > maxBits) return false;
    const n = (bits + 7) >>> 3;
    if (p + 1 + n > end) return false;
    const a = new Uint8Array(family === 4 ? 4 : 16);
    a.set(buf.subarray(p + 1, p + 1 + n));
    out.push({ addr: ipFromBytes(family, a), len: bits });
    p += 1 + n;
  }
  return true;
}

export function bgpPrefixesLength(list: readonly BgpPrefix[]): number {
  let n = 0;
  for (const x of list) n += 1 + ((x.len + 7) >>> 3);
  return n;
}

function writePrefixes(list: readonly BgpPrefix[], buf: Uint8Array, off: number): number {
  let p = off;
  for (const x of list) {
    buf[p++] = x.len;
    const n = (x.len + 7) >>> 3;
    for (let i = 0; i < n; i++) buf[p + i] = (x.addr.words[i >>> 2]! >>> (24 - 8 * (i & 3))) & 0xff;
    p += n;
  }
  return p - off;
}

/** "203.0.113.10/32" */
export function formatBgpPrefix(p: BgpPrefix): string {
  return `${p.addr.text}/${p.len}`;
}

/** The host route of an address: /32 or /128. */
export function hostPrefix(a: IpAddr): BgpPrefix {
  return { addr: a, len: a.family === 4 ? 32 : 128 };
}

// ---------------------------------------------------------------------------------------------
// Parse

const SEVERITY: Record<BgpErrorHandling, number> = { 'session-reset': 3, 'treat-as-withdraw': 2, 'attribute-discard': 1 };

function noteError(out: BgpUpdate, error: number, handling: BgpErrorHandling, attrType: number | null, data: Uint8Array): void {
  if (out.error !== null && SEVERITY[out.error.handling] >= SEVERITY[handling]) return;
  out.error = { error, handling, attrType, data };
}

/** What a malformed attribute of this type gets (RFC 7606 7; RFC 6793 6 for the AS4_ attributes). */
function malformedHandling(type: number): BgpErrorHandling {
  switch (type) {
    case BGP_ATTR_ATOMIC_AGGREGATE:
    case BGP_ATTR_AGGREGATOR:
    case BGP_ATTR_AS4_PATH:
    case BGP_ATTR_AS4_AGGREGATOR:
      return 'attribute-discard';
    case BGP_ATTR_MP_REACH_NLRI:
    case BGP_ATTR_MP_UNREACH_NLRI:
      return 'session-reset';
    default:
      return 'treat-as-withdraw';
  }
}

/** The Optional and Transitive bits each known attribute must carry (RFC 4271 5, RFC 4760, RFC 6793, RFC 8092). */
const EXPECTED_FLAGS: Record<number, number> = {
  [BGP_ATTR_ORIGIN]: WELL_KNOWN,
  [BGP_ATTR_AS_PATH]: WELL_KNOWN,
  [BGP_ATTR_NEXT_HOP]: WELL_KNOWN,
  [BGP_ATTR_MED]: OPTIONAL_NON_TRANSITIVE,
  [BGP_ATTR_LOCAL_PREF]: WELL_KNOWN,
  [BGP_ATTR_ATOMIC_AGGREGATE]: WELL_KNOWN,
  [BGP_ATTR_AGGREGATOR]: OPTIONAL_TRANSITIVE,
  [BGP_ATTR_COMMUNITIES]: OPTIONAL_TRANSITIVE,
  [BGP_ATTR_MP_REACH_NLRI]: OPTIONAL_NON_TRANSITIVE,
  [BGP_ATTR_MP_UNREACH_NLRI]: OPTIONAL_NON_TRANSITIVE,
  [BGP_ATTR_EXT_COMMUNITIES]: OPTIONAL_TRANSITIVE,
  [BGP_ATTR_AS4_PATH]: OPTIONAL_TRANSITIVE,
  [BGP_ATTR_AS4_AGGREGATOR]: OPTIONAL_TRANSITIVE,
  [BGP_ATTR_LARGE_COMMUNITIES]: OPTIONAL_TRANSITIVE,
};

/** Parses AS_PATH segments (asnLen 2 or 4); null when malformed (RFC 7606 7.2: overrun, zero length, unknown type). */
export function parseAsPath(v: Uint8Array, asnLen: 2 | 4): AsPathSegment[] | null {
  const segs: AsPathSegment[] = [];
  let p = 0;
  while (p < v.length) {
    if (v.length - p < 2) return null;
    const type = v[p]!;
    const n = v[p + 1]!;
    if (type < BGP_AS_SET || type > BGP_AS_CONFED_SET || n === 0) return null;
    if (p + 2 + n * asnLen > v.length) return null;
    const asns: number[] = [];
    for (let i = 0; i < n; i++) asns.push(asnLen === 4 ? readU32(v, p + 2 + i * 4) : readU16(v, p + 2 + i * 2));
    segs.push({ type, asns });
    p += 2 + n * asnLen;
  }
  return segs;
}

/** A NEXT_HOP that cannot be a unicast next hop at all (RFC 4271 6.3: syntactically incorrect). */
function badNextHop4(w: number): boolean {
  const first = w >>> 24;
  return w === 0 || first === 0 || first === 127 || first >= 224;
}

function parseMpReach(v: Uint8Array): BgpMpReach | null {
  if (v.length < 5) return null;
  const afi = readU16(v, 0);
  const safi = v[2]!;
  const nhLen = v[3]!;
  if (4 + nhLen + 1 > v.length) return null;
  const nextHop = v.slice(4, 4 + nhLen);
  const nlriOff = 4 + nhLen + 1; // a reserved octet follows the next hop (RFC 4760 3)
  const r: BgpMpReach = { afi, safi, nextHop, nextHops: [], nlri: null };
  if (safi !== BGP_SAFI_UNICAST || (afi !== BGP_AFI_IPV4 && afi !== BGP_AFI_IPV6)) return r;
  if (afi === BGP_AFI_IPV6) {
    // RFC 2545 3: a global address, optionally followed by a link-local one
    if (nhLen !== 16 && nhLen !== 32) return null;
    r.nextHops.push(ipFromBytes(6, nextHop.subarray(0, 16)));
    if (nhLen === 32) r.nextHops.push(ipFromBytes(6, nextHop.subarray(16, 32)));
  } else {
    if (nhLen !== 4) return null;
    r.nextHops.push(ipFromBytes(4, nextHop));
  }
  const nlri: BgpPrefix[] = [];
  if (!parsePrefixes(v, nlriOff, v.length, afi === BGP_AFI_IPV6 ? 6 : 4, nlri)) return null;
  r.nlri = nlri;
  return r;
}

function parseMpUnreach(v: Uint8Array): BgpMpUnreach | null {
  if (v.length < 3) return null;
  const afi = readU16(v, 0);
  const safi = v[2]!;
  const r: BgpMpUnreach = { afi, safi, withdrawn: null };
  if (safi !== BGP_SAFI_UNICAST || (afi !== BGP_AFI_IPV4 && afi !== BGP_AFI_IPV6)) return r;
  const list: BgpPrefix[] = [];
  if (!parsePrefixes(v, 3, v.length, afi === BGP_AFI_IPV6 ? 6 : 4, list)) return null;
  r.withdrawn = list;
  return r;
}

/**
 * Parses a whole UPDATE message (header included) at `off`. Returns its length, or a negative error
 * when RFC 7606 leaves only a session reset (out.error then holds the NOTIFICATION's data). A
 * successful parse may still carry out.error: treat-as-withdraw or attribute discard.
 */
export function parseBgpUpdate(
  buf: Uint8Array,
  off: number,
  out: BgpUpdate,
  end = buf.length,
  opts: BgpUpdateOptions = { as4: true },
): number {
  const h = newBgpHeader();
  const r = parseBgpHeader(buf, off, h, end);
  if (r < 0) return r;
  if (h.type !== BGP_TYPE_UPDATE) return BGP_ERR_BAD_MESSAGE_TYPE;
  if (end - off < h.length) return ERR_TRUNCATED;
  const o = newBgpUpdate();
  Object.assign(out, o);
  const msgEnd = off + h.length;
  const fatal = (e: number, attrType: number | null = null, data: Uint8Array = new Uint8Array(0)) => {
    noteError(out, e, 'session-reset', attrType, data);
    return e;
  };
  let p = off + BGP_HEADER_LEN;
  const wlen = readU16(buf, p);
  p += 2;
  // RFC 4271 6.3: Withdrawn Routes Length + Total Attribute Length + 23 must fit the message
  if (p + wlen + 2 > msgEnd) return fatal(BGP_ERR_MALFORMED_ATTRIBUTE_LIST);
  if (!parsePrefixes(buf, p, p + wlen, 4, out.withdrawn)) return fatal(BGP_ERR_INVALID_NETWORK_FIELD); // RFC 7606 5.3
  p += wlen;
  const alen = readU16(buf, p);
  p += 2;
  if (p + alen > msgEnd) return fatal(BGP_ERR_MALFORMED_ATTRIBUTE_LIST);
  const attrEnd = p + alen;
  if (!parsePrefixes(buf, attrEnd, msgEnd, 4, out.nlri)) return fatal(BGP_ERR_INVALID_NETWORK_FIELD); // RFC 7606 5.3

  const seen = new Set<number>();
  const asnLen = opts.as4 ? 4 : 2;
  while (p < attrEnd) {
    const start = p;
    // RFC 7606 4: an attribute header or value that overruns the list: treat-as-withdraw, and the
    // Total Attribute Length still locates the NLRI
    if (attrEnd - p < 3) {
      noteError(out, BGP_ERR_MALFORMED_ATTRIBUTE_LIST, 'treat-as-withdraw', null, new Uint8Array(0));
      break;
    }
    const flags = buf[p]!;
    const type = buf[p + 1]!;
    const ext = (flags & BGP_FLAG_EXTENDED_LENGTH) !== 0;
    const hdr = ext ? 4 : 3;
    if (attrEnd - p < hdr) {
      noteError(out, BGP_ERR_MALFORMED_ATTRIBUTE_LIST, 'treat-as-withdraw', type, new Uint8Array(0));
      break;
    }
    const len = ext ? readU16(buf, p + 2) : buf[p + 2]!;
    if (p + hdr + len > attrEnd) {
      if (type === BGP_ATTR_MP_REACH_NLRI || type === BGP_ATTR_MP_UNREACH_NLRI)
        return fatal(BGP_ERR_ATTRIBUTE_LENGTH, type, buf.slice(start, attrEnd));
      noteError(out, BGP_ERR_ATTRIBUTE_LENGTH, 'treat-as-withdraw', type, buf.slice(start, attrEnd));
      break;
    }
    p += hdr + len;
    const raw = () => buf.slice(start, p);
    const value = buf.slice(start + hdr, p);
    if (seen.has(type)) {
      // RFC 7606 3.g: a repeated MP_REACH_NLRI / MP_UNREACH_NLRI resets the session; others: keep the first
      if (type === BGP_ATTR_MP_REACH_NLRI || type === BGP_ATTR_MP_UNREACH_NLRI) return fatal(BGP_ERR_MALFORMED_ATTRIBUTE_LIST, type);
      noteError(out, BGP_ERR_MALFORMED_ATTRIBUTE_LIST, 'attribute-discard', type, new Uint8Array(0));
      continue;
    }
    seen.add(type);
    const expected = EXPECTED_FLAGS[type];
    if (expected === undefined) {
      // RFC 4271 6.3: an unrecognized well-known attribute resets the session; optional ones pass through
      if ((flags & BGP_FLAG_OPTIONAL) === 0) return fatal(BGP_ERR_UNRECOGNIZED_WELL_KNOWN, type, raw());
      out.attributes.push({ flags, type, value });
      continue;
    }
    // RFC 7606 3.c: Optional or Transitive bits in conflict make the attribute malformed
    if ((flags & (BGP_FLAG_OPTIONAL | BGP_FLAG_TRANSITIVE)) !== expected) {
      const handling = malformedHandling(type);
      if (handling === 'session-reset') return fatal(BGP_ERR_ATTRIBUTE_FLAGS, type, raw());
      noteError(out, BGP_ERR_ATTRIBUTE_FLAGS, handling, type, raw());
      continue;
    }
    const bad = (e: number) => {
      const handling = malformedHandling(type);
      noteError(out, e, handling, type, raw());
    };
    switch (type) {
      case BGP_ATTR_ORIGIN:
        if (len !== 1) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        if (value[0]! > BGP_ORIGIN_INCOMPLETE) {
          bad(BGP_ERR_INVALID_ORIGIN);
          continue;
        }
        out.origin = value[0]!;
        break;
      case BGP_ATTR_AS_PATH: {
        const segs = parseAsPath(value, asnLen);
        if (segs === null) {
          bad(BGP_ERR_MALFORMED_AS_PATH);
          continue;
        }
        out.asPath = segs;
        break;
      }
      case BGP_ATTR_NEXT_HOP:
        if (len !== 4) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        if (badNextHop4(readU32(value, 0))) {
          bad(BGP_ERR_INVALID_NEXT_HOP);
          continue;
        }
        out.nextHop = ipFromBytes(4, value);
        break;
      case BGP_ATTR_MED:
        if (len !== 4) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        out.med = readU32(value, 0);
        break;
      case BGP_ATTR_LOCAL_PREF:
        if (len !== 4) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        out.localPref = readU32(value, 0);
        break;
      case BGP_ATTR_ATOMIC_AGGREGATE:
        if (len !== 0) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        break;
      case BGP_ATTR_AGGREGATOR:
        if (len !== asnLen + 4) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        break;
      case BGP_ATTR_AS4_AGGREGATOR:
        if (len !== 8) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        }
        break;
      case BGP_ATTR_AS4_PATH:
        if (parseAsPath(value, 4) === null) {
          bad(BGP_ERR_MALFORMED_AS_PATH);
          continue;
        }
        break;
      case BGP_ATTR_COMMUNITIES:
        if (len === 0 || len % 4 !== 0) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        } // RFC 7606 7.8
        break;
      case BGP_ATTR_EXT_COMMUNITIES:
        if (len === 0 || len % 8 !== 0) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        } // RFC 7606 7.14
        break;
      case BGP_ATTR_LARGE_COMMUNITIES:
        if (len === 0 || len % 12 !== 0) {
          bad(BGP_ERR_ATTRIBUTE_LENGTH);
          continue;
        } // RFC 8092 6
        break;
      case BGP_ATTR_MP_REACH_NLRI: {
        const mp = parseMpReach(value); // RFC 4760 7, RFC 7606 7.11: session reset
        if (mp === null) return fatal(BGP_ERR_OPTIONAL_ATTRIBUTE, type, raw());
        out.mpReach = mp;
        break;
      }
      case BGP_ATTR_MP_UNREACH_NLRI: {
        const mp = parseMpUnreach(value);
        if (mp === null) return fatal(BGP_ERR_OPTIONAL_ATTRIBUTE, type, raw());
        out.mpUnreach = mp;
        break;
      }
    }
    out.attributes.push({ flags, type, value });
  }

  // RFC 4271 6.3 / RFC 7606 3.d: routes need ORIGIN and AS_PATH (and NEXT_HOP for IPv4 NLRI)
  const missing = (t: number) => !seen.has(t);
  const mpRoutes = (out.mpReach?.nlri?.length ?? 0) > 0;
  if (out.nlri.length > 0 || mpRoutes) {
    const need = out.nlri.length > 0 ? [BGP_ATTR_ORIGIN, BGP_ATTR_AS_PATH, BGP_ATTR_NEXT_HOP] : [BGP_ATTR_ORIGIN, BGP_ATTR_AS_PATH];
    const m = need.find(missing);
    if (m !== undefined) noteError(out, BGP_ERR_MISSING_WELL_KNOWN, 'treat-as-withdraw', m, Uint8Array.of(m));
  }
  return h.length;
}

// ---------------------------------------------------------------------------------------------
// Write

function attrLength(a: BgpAttribute): number {
  const ext = (a.flags & BGP_FLAG_EXTENDED_LENGTH) !== 0 || a.value.length > 255;
  return (ext ? 4 : 3) + a.value.length;
}

export function bgpUpdateLength(u: {
  withdrawn: readonly BgpPrefix[];
  attributes: readonly BgpAttribute[];
  nlri: readonly BgpPrefix[];
}): number {
  return (
    BGP_UPDATE_MIN_LEN + bgpPrefixesLength(u.withdrawn) + u.attributes.reduce((n, a) => n + attrLength(a), 0) + bgpPrefixesLength(u.nlri)
  );
}

/** Writes an UPDATE from its withdrawn prefixes, raw attributes (flags kept; extended length when set or needed) and NLRI. */
export function writeBgpUpdate(
  u: { withdrawn: readonly BgpPrefix[]; attributes: readonly BgpAttribute[]; nlri: readonly BgpPrefix[] },
  buf: Uint8Array,
  off: number,
): number {
  const len = bgpUpdateLength(u);
  if (len > BGP_MAX_MESSAGE_LEN)
    throw new RangeError(`UPDATE of ${len} bytes is longer than ${BGP_MAX_MESSAGE_LEN}; split it (buildBgpAnnouncements does)`);
  writeBgpHeader({ length: len, type: BGP_TYPE_UPDATE }, buf, off);
  let p = off + BGP_HEADER_LEN;
  const wlen = bgpPrefixesLength(u.withdrawn);
  writeU16(buf, p, wlen);
  p += 2;
  p += writePrefixes(u.withdrawn, buf, p);
  const alenAt = p;
  p += 2;
  for (const a of u.attributes) {
    const ext = (a.flags & BGP_FLAG_EXTENDED_LENGTH) !== 0 || a.value.length > 255;
    buf[p] = ext ? a.flags | BGP_FLAG_EXTENDED_LENGTH : a.flags;
    buf[p + 1] = a.type;
    if (ext) {
      writeU16(buf, p + 2, a.value.length);
      p += 4;
    } else {
      buf[p + 2] = a.value.length;
      p += 3;
    }
    buf.set(a.value, p);
    p += a.value.length;
  }
  writeU16(buf, alenAt, p - alenAt - 2);
  p += writePrefixes(u.nlri, buf, p);
  return len;
}

export function encodeBgpUpdate(u: {
  withdrawn: readonly BgpPrefix[];
  attributes: readonly BgpAttribute[];
  nlri: readonly BgpPrefix[];
}): Uint8Array {
  const b = new Uint8Array(bgpUpdateLength(u));
  writeBgpUpdate(u, b, 0);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Attribute builders

export function bgpOriginAttr(origin: number): BgpAttribute {
  return { flags: WELL_KNOWN, type: BGP_ATTR_ORIGIN, value: Uint8Array.of(origin) };
}

/** AS_PATH (or AS4_PATH with type BGP_ATTR_AS4_PATH) from segments; asnLen 4 when both sides speak 4-octet AS. */
export function bgpAsPathAttr(segments: readonly AsPathSegment[], asnLen: 2 | 4, type = BGP_ATTR_AS_PATH): BgpAttribute {
  const parts: AsPathSegment[] = [];
  for (const s of segments) {
    for (let i = 0; i < s.asns.length; i += BGP_AS_SEGMENT_MAX) parts.push({ type: s.type, asns: s.asns.slice(i, i + BGP_AS_SEGMENT_MAX) });
  }
  const v = new Uint8Array(parts.reduce((n, s) => n + 2 + s.asns.length * asnLen, 0));
  let p = 0;
  for (const s of parts) {
    v[p] = s.type;
    v[p + 1] = s.asns.length;
    p += 2;
    for (const a of s.asns) {
      if (asnLen === 4) writeU32(v, p, a >>> 0);
      else writeU16(v, p, a > 0xffff ? BGP_AS_TRANS : a); // RFC 6793 4.2.2
      p += asnLen;
    }
  }
  return { flags: type === BGP_ATTR_AS_PATH ? WELL_KNOWN : OPTIONAL_TRANSITIVE, type, value: v };
}

export function bgpNextHopAttr(a: IpAddr): BgpAttribute {
  if (a.family !== 4) throw new RangeError('NEXT_HOP is IPv4; IPv6 next hops go in MP_REACH_NLRI');
  const v = new Uint8Array(4);
  writeU32(v, 0, a.words[0]!);
  return { flags: WELL_KNOWN, type: BGP_ATTR_NEXT_HOP, value: v };
}

function writeAddr(a: IpAddr, buf: Uint8Array, off: number): number {
  for (let i = 0; i < a.words.length; i++) writeU32(buf, off + 4 * i, a.words[i]!);
  return a.words.length * 4;
}

/** MP_REACH_NLRI for IPv6 (or IPv4) unicast: next hops (IPv6: global, then optionally link-local), NLRI. */
export function bgpMpReachAttr(family: 4 | 6, nextHops: readonly IpAddr[], nlri: readonly BgpPrefix[]): BgpAttribute {
  const nhLen = nextHops.reduce((n, a) => n + a.words.length * 4, 0);
  const v = new Uint8Array(5 + nhLen + bgpPrefixesLength(nlri));
  writeU16(v, 0, family === 6 ? BGP_AFI_IPV6 : BGP_AFI_IPV4);
  v[2] = BGP_SAFI_UNICAST;
  v[3] = nhLen;
  let p = 4;
  for (const a of nextHops) p += writeAddr(a, v, p);
  v[p++] = 0; // reserved
  writePrefixes(nlri, v, p);
  return { flags: OPTIONAL_NON_TRANSITIVE, type: BGP_ATTR_MP_REACH_NLRI, value: v };
}

export function bgpMpUnreachAttr(family: 4 | 6, withdrawn: readonly BgpPrefix[]): BgpAttribute {
  const v = new Uint8Array(3 + bgpPrefixesLength(withdrawn));
  writeU16(v, 0, family === 6 ? BGP_AFI_IPV6 : BGP_AFI_IPV4);
  v[2] = BGP_SAFI_UNICAST;
  writePrefixes(withdrawn, v, 3);
  return { flags: OPTIONAL_NON_TRANSITIVE, type: BGP_ATTR_MP_UNREACH_NLRI, value: v };
}

// ---------------------------------------------------------------------------------------------
// Messages for a speaker: announcements and withdrawals split to fit 4096 bytes

export interface BgpRouteAttributes {
  origin: number;
  /** One AS_SEQUENCE, leftmost first (an eBGP speaker's own AS first). */
  asPath: readonly number[];
  /** Both sides speak 4-octet AS numbers. */
  as4: boolean;
}

/** ORIGIN, AS_PATH (and AS4_PATH when a 4-octet AS has to travel over 2-octet AS_PATH, RFC 6793 4.2.2). */
function pathAttributes(a: BgpRouteAttributes): BgpAttribute[] {
  const seq = [{ type: BGP_AS_SEQUENCE, asns: [...a.asPath] }];
  const out = [bgpOriginAttr(a.origin), bgpAsPathAttr(a.asPath.length === 0 ? [] : seq, a.as4 ? 4 : 2)];
  if (!a.as4 && a.asPath.some((x) => x > 0xffff)) out.push(bgpAsPathAttr(seq, 4, BGP_ATTR_AS4_PATH));
  return out;
}

function chunk<T>(list: readonly T[], fits: (part: readonly T[]) => boolean): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  for (const x of list) {
    cur.push(x);
    if (!fits(cur)) {
      cur.pop();
      if (cur.length === 0) throw new RangeError('one prefix does not fit in an UPDATE');
      out.push(cur);
      cur = [x];
    }
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/**
 * UPDATE messages announcing `prefixes` (all of one family) with the given next hops and attributes:
 * IPv4 in the NLRI field with NEXT_HOP, IPv6 in MP_REACH_NLRI, which goes first (RFC 7606 5.1).
 */
export function buildBgpAnnouncements(
  family: 4 | 6,
  prefixes: readonly BgpPrefix[],
  nextHops: readonly IpAddr[],
  attrs: BgpRouteAttributes,
): Uint8Array[] {
  if (prefixes.length === 0) return [];
  const path = pathAttributes(attrs);
  if (family === 4) {
    const attributes = [...path, bgpNextHopAttr(nextHops[0]!)];
    return chunk(prefixes, (part) => bgpUpdateLength({ withdrawn: [], attributes, nlri: part }) <= BGP_MAX_MESSAGE_LEN).map((part) =>
      encodeBgpUpdate({ withdrawn: [], attributes, nlri: part }),
    );
  }
  const make = (part: readonly BgpPrefix[]) => ({ withdrawn: [], attributes: [bgpMpReachAttr(6, nextHops, part), ...path], nlri: [] });
  return chunk(prefixes, (part) => bgpUpdateLength(make(part)) <= BGP_MAX_MESSAGE_LEN).map((part) => encodeBgpUpdate(make(part)));
}

/** UPDATE messages withdrawing `prefixes` (one family): the Withdrawn Routes field, or MP_UNREACH_NLRI. */
export function buildBgpWithdrawals(family: 4 | 6, prefixes: readonly BgpPrefix[]): Uint8Array[] {
  if (prefixes.length === 0) return [];
  if (family === 4) {
    return chunk(prefixes, (part) => bgpUpdateLength({ withdrawn: part, attributes: [], nlri: [] }) <= BGP_MAX_MESSAGE_LEN).map((part) =>
      encodeBgpUpdate({ withdrawn: part, attributes: [], nlri: [] }),
    );
  }
  const make = (part: readonly BgpPrefix[]) => ({ withdrawn: [], attributes: [bgpMpUnreachAttr(6, part)], nlri: [] });
  return chunk(prefixes, (part) => bgpUpdateLength(make(part)) <= BGP_MAX_MESSAGE_LEN).map((part) => encodeBgpUpdate(make(part)));
}

/** RFC 4724 2: End-of-RIB, an empty UPDATE for IPv4 unicast, an empty MP_UNREACH_NLRI for the others. */
export function buildBgpEndOfRib(family: 4 | 6): Uint8Array {
  return family === 4
    ? encodeBgpUpdate({ withdrawn: [], attributes: [], nlri: [] })
    : encodeBgpUpdate({ withdrawn: [], attributes: [bgpMpUnreachAttr(6, [])], nlri: [] });
}

/** True for an End-of-RIB marker (RFC 4724 2). */
export function isBgpEndOfRib(u: BgpUpdate): boolean {
  if (u.withdrawn.length > 0 || u.nlri.length > 0) return false;
  if (u.attributes.length === 0) return true;
  return u.attributes.length === 1 && u.mpUnreach !== null && (u.mpUnreach.withdrawn?.length ?? 0) === 0;
}
