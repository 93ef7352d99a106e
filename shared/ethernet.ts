// Ethernet II (IEEE 802.3 framing with EtherType) with at most one IEEE 802.1Q tag.
import { readU16, writeU16, copyBytes } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_VLAN } from './codec-error.js';

export const ETH_HEADER_LEN = 14;
export const ETH_VLAN_TAG_LEN = 4;
export const ETHERTYPE_IPV4 = 0x0800;
export const ETHERTYPE_ARP = 0x0806;
export const ETHERTYPE_VLAN = 0x8100;
export const ETHERTYPE_QINQ = 0x88a8;
export const ETHERTYPE_IPV6 = 0x86dd;
/** VLAN id value meaning "untagged". */
export const VLAN_NONE = -1;

export interface EthernetHeader {
  readonly dst: Uint8Array; // 6 bytes, filled in place by parseEthernet
  readonly src: Uint8Array;
  /** EtherType of the payload (after the tag when tagged). */
  etherType: number;
  /** 802.1Q VLAN id 0..4095, or VLAN_NONE. */
  vlanId: number;
  /** 802.1Q priority code point 0..7 (0 when untagged). */
  vlanPcp: number;
}

export function newEthernetHeader(): EthernetHeader {
  return { dst: new Uint8Array(6), src: new Uint8Array(6), etherType: 0, vlanId: VLAN_NONE, vlanPcp: 0 };
}

/** Parses an Ethernet header (14 bytes, or 18 with one 802.1Q tag); returns bytes consumed or an error. */
/** `end` bounds the frame inside a larger buffer (a capture ring); default: the whole buffer. */
export function parseEthernet(buf: Uint8Array, off: number, out: EthernetHeader, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < ETH_HEADER_LEN) return ERR_TRUNCATED;
  copyBytes(buf, off, out.dst, 0, 6);
  copyBytes(buf, off + 6, out.src, 0, 6);
  let type = readU16(buf, off + 12);
  if (type === ETHERTYPE_VLAN || type === ETHERTYPE_QINQ) {
    if (end - off < ETH_HEADER_LEN + ETH_VLAN_TAG_LEN) return ERR_TRUNCATED;
    const tci = readU16(buf, off + 14);
    type = readU16(buf, off + 16);
    if (type === ETHERTYPE_VLAN || type === ETHERTYPE_QINQ) return ERR_BAD_VLAN;
    out.vlanId = tci & 0x0fff;
    out.vlanPcp = tci >>> 13;
    out.etherType = type;
    return ETH_HEADER_LEN + ETH_VLAN_TAG_LEN;
  }
  out.vlanId = VLAN_NONE;
  out.vlanPcp = 0;
  out.etherType = type;
  return ETH_HEADER_LEN;
}

/** Writes the header (with a tag when vlanId !== VLAN_NONE); returns bytes written. */
export function writeEthernet(h: EthernetHeader, buf: Uint8Array, off: number): number {
  copyBytes(h.dst, 0, buf, off, 6);
  copyBytes(h.src, 0, buf, off + 6, 6);
  if (h.vlanId !== VLAN_NONE) {
    writeU16(buf, off + 12, ETHERTYPE_VLAN);
    writeU16(buf, off + 14, ((h.vlanPcp & 7) << 13) | (h.vlanId & 0x0fff));
    writeU16(buf, off + 16, h.etherType);
    return ETH_HEADER_LEN + ETH_VLAN_TAG_LEN;
  }
  writeU16(buf, off + 12, h.etherType);
  return ETH_HEADER_LEN;
}

/** Writes an untagged header from MAC byte arrays; the hot-path form of writeEthernet. */
export function writeEthernetRaw(dst: Uint8Array, src: Uint8Array, etherType: number, buf: Uint8Array, off: number): number {
  copyBytes(dst, 0, buf, off, 6);
  copyBytes(src, 0, buf, off + 6, 6);
  writeU16(buf, off + 12, etherType);
  return ETH_HEADER_LEN;
}
