// Big-endian (network order) byte access on plain Uint8Arrays. Callers check bounds first.

export function readU16(buf: Uint8Array, off: number): number {
  return (buf[off]! << 8) | buf[off + 1]!;
}

export function readU32(buf: Uint8Array, off: number): number {
  return ((buf[off]! << 24) | (buf[off + 1]! << 16) | (buf[off + 2]! << 8) | buf[off + 3]!) >>> 0;
}

export function writeU16(buf: Uint8Array, off: number, v: number): void {
  buf[off] = (v >>> 8) & 0xff;
  buf[off + 1] = v & 0xff;
}

export function writeU32(buf: Uint8Array, off: number, v: number): void {
  buf[off] = (v >>> 24) & 0xff;
  buf[off + 1] = (v >>> 16) & 0xff;
  buf[off + 2] = (v >>> 8) & 0xff;
  buf[off + 3] = v & 0xff;
}

/** Copies `len` bytes; faster than subarray+set for the short runs (MACs, addresses) of headers. */
export function copyBytes(src: Uint8Array, srcOff: number, dst: Uint8Array, dstOff: number, len: number): void {
  for (let i = 0; i < len; i++) dst[dstOff + i] = src[srcOff + i]!;
}

export function bytesEqual(a: Uint8Array, aOff: number, b: Uint8Array, bOff: number, len: number): boolean {
  for (let i = 0; i < len; i++) if (a[aOff + i] !== b[bOff + i]) return false;
  return true;
}
