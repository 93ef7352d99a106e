// The Fastpath redirect (docs/east-west.md): a MUX tells a source host agent where a flow's DIP is, so the
// rest of the flow goes host PA to host PA. UDP REDIRECT_PORT, from the MUX's PA to the source host's PA.
// Authenticated with HMAC-SHA256 under the policy key; the HMAC itself is computed by the caller (the
// daemons hand the data planes node:crypto), this codec only lays out the bytes it covers.
import { readU16, readU32, writeU16, writeU32 } from './bytes.js';
import { ERR_BAD_VERSION, ERR_TRUNCATED } from './codec-error.js';

export const REDIRECT_PORT = 4799;
export const REDIRECT_MAGIC = 0x534c4252; // 'SLBR'
export const REDIRECT_VERSION = 1;
/** The bytes the HMAC covers. */
export const REDIRECT_SIGNED_LEN = 92;
export const REDIRECT_MAC_LEN = 32;
export const REDIRECT_LEN = REDIRECT_SIGNED_LEN + REDIRECT_MAC_LEN;
/** How long a redirect may be believed after it was sent. */
export const REDIRECT_VALID_S = 30;

export interface Redirect {
  /** Of the inner flow: 4 or 6. */
  family: 4 | 6;
  protocol: number;
  vni: number;
  /** Unix seconds after which the message is refused. */
  expiresS: number;
  /** 16 bytes each; an IPv4 address in the first 4, the rest zero. */
  readonly src: Uint8Array;
  readonly dst: Uint8Array;
  srcPort: number;
  dstPort: number;
  readonly dip: Uint8Array;
  /** The DIP host's provider address (16 bytes, IPv4 in the first 4). */
  readonly dipHostPa: Uint8Array;
  readonly dipMac: Uint8Array;
}

export function newRedirect(): Redirect {
  return {
    family: 4,
    protocol: 0,
    vni: 0,
    expiresS: 0,
    src: new Uint8Array(16),
    dst: new Uint8Array(16),
    srcPort: 0,
    dstPort: 0,
    dip: new Uint8Array(16),
    dipHostPa: new Uint8Array(16),
    dipMac: new Uint8Array(6),
  };
}

/**
 * Reads the signed part of a redirect at buf[off .. end): REDIRECT_LEN on success (the HMAC follows at
 * off + REDIRECT_SIGNED_LEN, for the caller to verify), ERR_TRUNCATED, or ERR_BAD_VERSION (wrong magic,
 * version, family or protocol).
 */
export function parseRedirect(buf: Uint8Array, off: number, out: Redirect, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < REDIRECT_LEN) return ERR_TRUNCATED;
  if (readU32(buf, off) !== REDIRECT_MAGIC || buf[off + 4] !== REDIRECT_VERSION) return ERR_BAD_VERSION;
  const fam = buf[off + 5];
  const proto = buf[off + 6]!;
  if ((fam !== 4 && fam !== 6) || (proto !== 6 && proto !== 17)) return ERR_BAD_VERSION;
  out.family = fam;
  out.protocol = proto;
  out.vni = readU32(buf, off + 8) & 0xffffff;
  out.expiresS = readU32(buf, off + 12);
  for (let i = 0; i < 16; i++) {
    out.src[i] = buf[off + 16 + i]!;
    out.dst[i] = buf[off + 32 + i]!;
    out.dip[i] = buf[off + 52 + i]!;
    out.dipHostPa[i] = buf[off + 68 + i]!;
  }
  out.srcPort = readU16(buf, off + 48);
  out.dstPort = readU16(buf, off + 50);
  for (let i = 0; i < 6; i++) out.dipMac[i] = buf[off + 84 + i]!;
  return REDIRECT_LEN;
}

/** Writes the signed part (REDIRECT_SIGNED_LEN bytes); the caller writes the HMAC after it. Returns REDIRECT_SIGNED_LEN. */
export function writeRedirect(r: Redirect, buf: Uint8Array, off: number): number {
  writeU32(buf, off, REDIRECT_MAGIC);
  buf[off + 4] = REDIRECT_VERSION;
  buf[off + 5] = r.family;
  buf[off + 6] = r.protocol;
  buf[off + 7] = 0;
  writeU32(buf, off + 8, r.vni & 0xffffff);
  writeU32(buf, off + 12, r.expiresS >>> 0);
  for (let i = 0; i < 16; i++) {
    buf[off + 16 + i] = r.src[i]!;
    buf[off + 32 + i] = r.dst[i]!;
    buf[off + 52 + i] = r.dip[i]!;
    buf[off + 68 + i] = r.dipHostPa[i]!;
  }
  writeU16(buf, off + 48, r.srcPort);
  writeU16(buf, off + 50, r.dstPort);
  for (let i = 0; i < 6; i++) buf[off + 84 + i] = r.dipMac[i]!;
  buf[off + 90] = 0;
  buf[off + 91] = 0;
  return REDIRECT_SIGNED_LEN;
}

/**
 * The HMAC-SHA256 the daemons provide: writes the 32-byte HMAC of data[off .. off + len) under the policy
 * key at out[outOff ..). Synchronous (node:crypto's createHmac), so the data planes stay synchronous.
 */
export type RedirectMac = (data: Uint8Array, off: number, len: number, out: Uint8Array, outOff: number) => void;

/** Constant-time comparison of two 32-byte HMACs. */
export function redirectMacEqual(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number): boolean {
  let d = 0;
  for (let i = 0; i < REDIRECT_MAC_LEN; i++) d |= a[aOff + i]! ^ b[bOff + i]!;
  return d === 0;
}
