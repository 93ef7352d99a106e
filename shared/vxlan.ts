// VXLAN header (RFC 7348 5): flags (I bit), 24-bit VNI, reserved fields.
import { readU32, writeU32 } from './bytes.js';
import { ERR_TRUNCATED, ERR_BAD_VXLAN_FLAGS } from './codec-error.js';

export const VXLAN_HEADER_LEN = 8;
export const VXLAN_PORT = 4789;
export const VXLAN_FLAG_I = 0x08;
/** Outer IPv4 + UDP + VXLAN + inner Ethernet: the bytes VXLAN adds to an inner IP packet on an IPv4 underlay (50). */
export const VXLAN_OVERHEAD_V4 = 20 + 8 + 8 + 14;
/** Same over an IPv6 underlay (70). */
export const VXLAN_OVERHEAD_V6 = 40 + 8 + 8 + 14;
/** The VXLAN source port range (RFC 7348 5: 49152-65535 recommended). */
export const VXLAN_SRC_PORT_MIN = 49152;
export const VXLAN_SRC_PORT_MAX = 65535;

export interface VxlanHeader {
  flags: number;
  vni: number;
}

export function newVxlanHeader(): VxlanHeader {
  return { flags: VXLAN_FLAG_I, vni: 0 };
}

export function parseVxlan(buf: Uint8Array, off: number, out: VxlanHeader, end = buf.length): number {
  if (off < 0 || end > buf.length || end - off < VXLAN_HEADER_LEN) return ERR_TRUNCATED;
  const flags = buf[off]!;
  // RFC 7348 5: the I flag must be 1 for a valid VNI; other bits are reserved and ignored on receipt
  if ((flags & VXLAN_FLAG_I) === 0) return ERR_BAD_VXLAN_FLAGS;
  out.flags = flags;
  out.vni = readU32(buf, off + 4) >>> 8;
  return VXLAN_HEADER_LEN;
}

/** Writes the header with only the I flag and zero reserved fields; returns 8. */
export function writeVxlan(h: VxlanHeader, buf: Uint8Array, off: number): number {
  writeU32(buf, off, (VXLAN_FLAG_I << 24) >>> 0);
  writeU32(buf, off + 4, ((h.vni & 0xffffff) << 8) >>> 0);
  return VXLAN_HEADER_LEN;
}
