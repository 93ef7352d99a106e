// BGP OPEN message (RFC 4271 4.2) with capabilities (RFC 5492): multiprotocol (RFC 4760) and 4-octet AS
// numbers (RFC 6793; AS_TRANS 23456 in the 2-octet My AS field). Optional parameters and capabilities are
// kept in wire order, so an OPEN parses and writes back byte for byte; unknown capabilities are kept, not
// interpreted. checkBgpOpen applies the semantic checks of RFC 4271 6.2 against what we expect.
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_TRUNCATED } from './codec-error.js';
import {
  BGP_ERR_BAD_BGP_ID,
  BGP_ERR_BAD_MESSAGE_TYPE,
  BGP_ERR_BAD_PEER_AS,
  BGP_ERR_OPEN_MALFORMED,
  BGP_ERR_UNACCEPTABLE_HOLD_TIME,
  BGP_ERR_UNSUPPORTED_OPT_PARAM,
  BGP_ERR_UNSUPPORTED_VERSION,
  BGP_HEADER_LEN,
  BGP_MAX_MESSAGE_LEN,
  BGP_OPEN_MIN_LEN,
  BGP_TYPE_OPEN,
  BGP_VERSION,
  newBgpHeader,
  parseBgpHeader,
  writeBgpHeader,
} from './bgp-message.js';

/** RFC 6793 9: the 2-octet stand-in for a 4-octet AS number. */
export const BGP_AS_TRANS = 23456;
export const BGP_OPT_PARAM_CAPABILITIES = 2;

export const BGP_CAP_MULTIPROTOCOL = 1;
export const BGP_CAP_ROUTE_REFRESH = 2;
export const BGP_CAP_GRACEFUL_RESTART = 64;
export const BGP_CAP_AS4 = 65;
export const BGP_CAP_ENHANCED_ROUTE_REFRESH = 70;
export const BGP_CAP_LLGR = 71;

export const BGP_AFI_IPV4 = 1;
export const BGP_AFI_IPV6 = 2;
export const BGP_SAFI_UNICAST = 1;

/** RFC 4271 4.2: a hold time is 0 or at least 3 seconds. */
export const BGP_MIN_HOLD_TIME_S = 3;

export interface BgpFamily {
  readonly afi: number;
  readonly safi: number;
}

export const BGP_IPV4_UNICAST: BgpFamily = Object.freeze({ afi: BGP_AFI_IPV4, safi: BGP_SAFI_UNICAST });
export const BGP_IPV6_UNICAST: BgpFamily = Object.freeze({ afi: BGP_AFI_IPV6, safi: BGP_SAFI_UNICAST });

export interface BgpCapability {
  code: number;
  value: Uint8Array;
}

/** One optional parameter; for type 2 its capabilities are parsed into `capabilities` (value stays raw). */
export interface BgpOptParam {
  type: number;
  value: Uint8Array;
  capabilities: BgpCapability[] | null;
}

export interface BgpOpen {
  version: number;
  /** The 2-octet My Autonomous System field (AS_TRANS when the real AS needs 4 octets). */
  myAs: number;
  holdTimeS: number;
  /** BGP Identifier as a uint32. */
  bgpId: number;
  params: BgpOptParam[];
  // Derived on parse (and by newBgpOpen): every capability of every capabilities parameter, in order
  capabilities: BgpCapability[];
  /** The 4-octet AS capability's value, or null when absent. */
  as4: number | null;
  /** The multiprotocol capabilities' (AFI, SAFI) pairs, in order. */
  families: BgpFamily[];
}

export function newBgpOpenRecord(): BgpOpen {
  return { version: BGP_VERSION, myAs: 0, holdTimeS: 0, bgpId: 0, params: [], capabilities: [], as4: null, families: [] };
}

/** The OPEN we send: one capabilities parameter holding multiprotocol (per family) and 4-octet AS. */
export function newBgpOpen(o: { asn: number; holdTimeS: number; bgpId: number; families: readonly BgpFamily[] }): BgpOpen {
  const caps: BgpCapability[] = o.families.map((f) => {
    const v = new Uint8Array(4);
    writeU16(v, 0, f.afi);
    v[3] = f.safi;
    return { code: BGP_CAP_MULTIPROTOCOL, value: v };
  });
  const as4 = new Uint8Array(4);
  writeU32(as4, 0, o.asn >>> 0);
  caps.push({ code: BGP_CAP_AS4, value: as4 });
  const value = encodeCapabilities(caps);
  return {
    version: BGP_VERSION,
    myAs: o.asn > 0xffff ? BGP_AS_TRANS : o.asn,
    holdTimeS: o.holdTimeS,
    bgpId: o.bgpId >>> 0,
    params: [{ type: BGP_OPT_PARAM_CAPABILITIES, value, capabilities: caps }],
    capabilities: caps,
    as4: o.asn >>> 0,
    families: o.families.map((f) => ({ ...f })),
  };
}

function encodeCapabilities(caps: readonly BgpCapability[]): Uint8Array {
  const out = new Uint8Array(caps.reduce((n, c) => n + 2 + c.value.length, 0));
  let p = 0;
  for (const c of caps) {
    out[p] = c.code;
    out[p + 1] = c.value.length;
    out.set(c.value, p + 2);
    p += 2 + c.value.length;
  }
  return out;
}

/**
 * Parses a whole OPEN message (header included) at `off`. Structural errors only (RFC 4271 6.2):
 * version other than 4 (Unsupported Version Number), an optional parameter of another type than
 * capabilities (Unsupported Optional Parameter), lengths that overrun (Unspecific), a multiprotocol or
 * 4-octet AS capability of the wrong length (Unspecific). Returns the message length or an error.
 */
export function parseBgpOpen(buf: Uint8Array, off: number, out: BgpOpen, end = buf.length): number {
  const h = newBgpHeader();
  const r = parseBgpHeader(buf, off, h, end);
  if (r < 0) return r;
  if (h.type !== BGP_TYPE_OPEN) return BGP_ERR_BAD_MESSAGE_TYPE;
  if (end - off < h.length) return ERR_TRUNCATED;
  const p0 = off + BGP_HEADER_LEN;
  out.version = buf[p0]!;
  if (out.version !== BGP_VERSION) return BGP_ERR_UNSUPPORTED_VERSION;
  out.myAs = readU16(buf, p0 + 1);
  out.holdTimeS = readU16(buf, p0 + 3);
  out.bgpId = readU32(buf, p0 + 5);
  const optLen = buf[p0 + 9]!;
  const msgEnd = off + h.length;
  let p = p0 + 10;
  if (p + optLen !== msgEnd) return BGP_ERR_OPEN_MALFORMED;
  out.params = [];
  out.capabilities = [];
  out.as4 = null;
  out.families = [];
  let unsupported = false;
  while (p < msgEnd) {
    if (msgEnd - p < 2) return BGP_ERR_OPEN_MALFORMED;
    const type = buf[p]!;
    const len = buf[p + 1]!;
    if (p + 2 + len > msgEnd) return BGP_ERR_OPEN_MALFORMED;
    const value = buf.slice(p + 2, p + 2 + len);
    const param: BgpOptParam = { type, value, capabilities: null };
    if (type === BGP_OPT_PARAM_CAPABILITIES) {
      const caps: BgpCapability[] = [];
      let q = 0;
      while (q < len) {
        if (len - q < 2) return BGP_ERR_OPEN_MALFORMED;
        const code = value[q]!;
        const clen = value[q + 1]!;
        if (q + 2 + clen > len) return BGP_ERR_OPEN_MALFORMED;
        const cv = value.slice(q + 2, q + 2 + clen);
        if (code === BGP_CAP_MULTIPROTOCOL) {
          if (clen !== 4) return BGP_ERR_OPEN_MALFORMED; // RFC 4760 8: AFI, reserved, SAFI
          out.families.push({ afi: readU16(cv, 0), safi: cv[3]! });
        } else if (code === BGP_CAP_AS4) {
          if (clen !== 4) return BGP_ERR_OPEN_MALFORMED; // RFC 6793 3
          out.as4 = readU32(cv, 0);
        }
        caps.push({ code, value: cv });
        q += 2 + clen;
      }
      param.capabilities = caps;
      out.capabilities.push(...caps);
    } else {
      unsupported = true; // RFC 4271 6.2; reported after the rest was read (the record stays complete)
    }
    out.params.push(param);
    p += 2 + len;
  }
  if (unsupported) return BGP_ERR_UNSUPPORTED_OPT_PARAM;
  return h.length;
}

/** Bytes the OPEN takes on the wire. */
export function bgpOpenLength(o: BgpOpen): number {
  return BGP_OPEN_MIN_LEN + o.params.reduce((n, p) => n + 2 + p.value.length, 0);
}

/** Writes the OPEN (header included) from its fields and raw optional parameters; returns its length. */
export function writeBgpOpen(o: BgpOpen, buf: Uint8Array, off: number): number {
  const len = bgpOpenLength(o);
  const optLen = len - BGP_OPEN_MIN_LEN;
  if (optLen > 255 || len > BGP_MAX_MESSAGE_LEN) throw new RangeError(`OPEN optional parameters too long (${optLen} bytes; at most 255)`);
  writeBgpHeader({ length: len, type: BGP_TYPE_OPEN }, buf, off);
  let p = off + BGP_HEADER_LEN;
  buf[p] = o.version;
  writeU16(buf, p + 1, o.myAs);
  writeU16(buf, p + 3, o.holdTimeS);
  writeU32(buf, p + 5, o.bgpId >>> 0);
  buf[p + 9] = optLen;
  p += 10;
  for (const param of o.params) {
    buf[p] = param.type;
    buf[p + 1] = param.value.length;
    buf.set(param.value, p + 2);
    p += 2 + param.value.length;
  }
  return len;
}

export function encodeBgpOpen(o: BgpOpen): Uint8Array {
  const b = new Uint8Array(bgpOpenLength(o));
  writeBgpOpen(o, b, 0);
  return b;
}

/** The peer's AS: its 4-octet AS capability when present, else the My AS field. */
export function bgpOpenPeerAs(o: BgpOpen): number {
  return o.as4 ?? o.myAs;
}

/**
 * Semantic checks of a received OPEN (RFC 4271 6.2, RFC 6793 4.1, RFC 6286): hold time 1 or 2 is
 * unacceptable; a zero BGP Identifier is bad; the peer's AS (4-octet capability first) must be the
 * expected one, and a My AS field that contradicts the capability is a Bad Peer AS. Returns 0 or an error.
 */
export function checkBgpOpen(o: BgpOpen, expect: { peerAs: number }): number {
  if (o.version !== BGP_VERSION) return BGP_ERR_UNSUPPORTED_VERSION;
  if (o.myAs === 0 || o.as4 === 0) return BGP_ERR_BAD_PEER_AS; // RFC 7607: AS 0 is never valid
  if (o.as4 !== null && o.myAs !== (o.as4 > 0xffff ? BGP_AS_TRANS : o.as4)) return BGP_ERR_BAD_PEER_AS;
  if (bgpOpenPeerAs(o) !== expect.peerAs) return BGP_ERR_BAD_PEER_AS;
  if (o.bgpId === 0) return BGP_ERR_BAD_BGP_ID;
  if (o.holdTimeS === 1 || o.holdTimeS === 2) return BGP_ERR_UNACCEPTABLE_HOLD_TIME;
  return 0;
}

/** Data of the NOTIFICATION for an OPEN error: Unsupported Version Number carries the version we speak (RFC 4271 6.2). */
export function bgpOpenErrorData(e: number): Uint8Array {
  if (e === BGP_ERR_UNSUPPORTED_VERSION) return Uint8Array.of(0, BGP_VERSION);
  return new Uint8Array(0);
}

/** RFC 4271 4.2: the smaller of the two hold times (0: no hold timer and no keepalives). */
export function negotiateHoldTime(localS: number, peerS: number): number {
  return Math.min(localS, peerS);
}

/**
 * The families both sides announced. RFC 4760 8: a peer that sends no multiprotocol capability at all
 * speaks IPv4 unicast only.
 */
export function commonFamilies(local: readonly BgpFamily[], peer: BgpOpen): BgpFamily[] {
  const theirs = peer.families.length === 0 ? [BGP_IPV4_UNICAST] : peer.families;
  return local.filter((f) => theirs.some((t) => t.afi === f.afi && t.safi === f.safi));
}

export function hasFamily(list: readonly BgpFamily[], f: BgpFamily): boolean {
  return list.some((x) => x.afi === f.afi && x.safi === f.safi);
}
