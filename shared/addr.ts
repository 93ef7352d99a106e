// Addresses as the data plane keeps them: IPv4 as one uint32, IPv6 as four uint32 words (network order),
// MACs as 6 bytes. Text parsing uses `ip-address` and happens only in config, CLI and tests, never per packet.
import { Address4, Address6 } from 'ip-address';

export type IpFamily = 4 | 6;

export interface IpAddr {
  readonly family: IpFamily;
  /** Canonical text: dotted quad, or RFC 5952 compressed IPv6. */
  readonly text: string;
  /** One word for IPv4, four for IPv6; each word is the address bytes read big-endian. */
  readonly words: Uint32Array;
}

export const IPV4_ADDR_LEN = 4;
export const IPV6_ADDR_LEN = 16;
export const MAC_LEN = 6;

/**
 * Addresses parsed before, by their text (at most PARSED_MAX, then forgotten all at once). The controller
 * validates its whole config on every change (docs/controller.md, "Changes per second"): without this,
 * ip-address's parsing of the same few dozen addresses was a fifth of all it allocated at 50 changes/s.
 */
const parsed = new Map<string, IpAddr | null>();
const PARSED_MAX = 4096;

/** Parses an IPv4 or IPv6 address without prefix length; null when it is not one. */
export function parseIpAddr(text: string): IpAddr | null {
  if (typeof text !== 'string') return null;
  const known = parsed.get(text);
  // a copy of the words: a caller may change its own (the cached ones stay as parsed)
  if (known !== undefined) return known === null ? null : { family: known.family, text: known.text, words: known.words.slice() };
  const a = parseIpAddrText(text);
  if (text.length > 64) return a; // no address is this long: not kept
  if (parsed.size >= PARSED_MAX) parsed.clear();
  parsed.set(text, a === null ? null : { family: a.family, text: a.text, words: a.words.slice() });
  return a;
}

function parseIpAddrText(text: string): IpAddr | null {
  if (text.includes('/') || text.includes('%')) return null;
  // dotted quad only, no leading zeros (01.2.3.4 is octal to some parsers and decimal to others)
  if (/^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/.test(text) && Address4.isValid(text)) {
    const a = new Address4(text);
    const w = Number(a.bigInt()) >>> 0;
    return { family: 4, text: formatIpv4(w), words: Uint32Array.of(w) };
  }
  if (Address6.isValid(text)) {
    const a = new Address6(text);
    const bytes = a.toUnsignedByteArray();
    const full = new Uint8Array(16);
    full.set(bytes, 16 - bytes.length);
    const words = new Uint32Array(4);
    for (let i = 0; i < 4; i++) {
      words[i] = ((full[i * 4]! << 24) | (full[i * 4 + 1]! << 16) | (full[i * 4 + 2]! << 8) | full[i * 4 + 3]!) >>> 0;
    }
    return { family: 6, text: formatIpv6(words, 0), words };
  }
  return null;
}

/** Like parseIpAddr, but throws with the text in the message; for tests and tools. */
export function ip(text: string): IpAddr {
  const a = parseIpAddr(text);
  if (a === null) throw new Error(`not an IP address: ${JSON.stringify(text)}`);
  return a;
}

/** True when `a` lies inside `net`/`len` (same family, the first `len` bits equal). */
export function inPrefix(a: IpAddr, net: IpAddr, len: number): boolean {
  if (a.family !== net.family) return false;
  for (let i = 0, left = len; left > 0 && i < a.words.length; i++, left -= 32) {
    const mask = left >= 32 ? 0xffffffff : ~(0xffffffff >>> left);
    if (((a.words[i]! ^ net.words[i]!) & mask) !== 0) return false;
  }
  return true;
}

export function formatIpv4(v: number): string {
  return `${(v >>> 24) & 0xff}.${(v >>> 16) & 0xff}.${(v >>> 8) & 0xff}.${v & 0xff}`;
}

/** RFC 5952 text of the four words starting at words[off]. */
export function formatIpv6(words: ArrayLike<number>, off = 0): string {
  const groups: number[] = [];
  for (let i = 0; i < 4; i++) {
    const w = words[off + i]! >>> 0;
    groups.push(w >>> 16, w & 0xffff);
  }
  // longest run of zero groups (length >= 2), first one on ties: RFC 5952 4.2
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/** Writes the address (4 or 16 bytes) at buf[off]. */
export function writeIpAddr(a: IpAddr, buf: Uint8Array, off: number): number {
  for (let i = 0; i < a.words.length; i++) {
    const w = a.words[i]!;
    buf[off + i * 4] = w >>> 24;
    buf[off + i * 4 + 1] = (w >>> 16) & 0xff;
    buf[off + i * 4 + 2] = (w >>> 8) & 0xff;
    buf[off + i * 4 + 3] = w & 0xff;
  }
  return a.words.length * 4;
}

const MAC_RE = /^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$/;

/** Parses `02:00:5e:10:00:01` (or with dashes) into 6 bytes; null when it is not a MAC. */
export function parseMac(text: string): Uint8Array | null {
  if (typeof text !== 'string' || !MAC_RE.test(text)) return null;
  return Uint8Array.from(text.split(/[:-]/).map((h) => parseInt(h, 16)));
}

export function mac(text: string): Uint8Array {
  const m = parseMac(text);
  if (m === null) throw new Error(`not a MAC address: ${JSON.stringify(text)}`);
  return m;
}

export function formatMac(buf: Uint8Array, off = 0): string {
  const parts: string[] = [];
  for (let i = 0; i < MAC_LEN; i++) parts.push(buf[off + i]!.toString(16).padStart(2, '0'));
  return parts.join(':');
}
