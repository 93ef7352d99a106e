// Helpers for the data planes' per-packet path, each the measured faster form of a plain one
// (docs/performance.md, "Where the data plane's time goes"). Same results byte for byte; the tests in
// test/hot-path.test.ts hold each against the plain form.
import { readU16 } from './bytes.js';
import { ERR_BAD_DATA_OFFSET, ERR_BAD_UDP_LENGTH, ERR_BAD_VLAN, ERR_TRUNCATED } from './codec-error.js';
import { ETH_HEADER_LEN, ETH_VLAN_TAG_LEN, ETHERTYPE_QINQ, ETHERTYPE_VLAN, VLAN_NONE, type EthernetHeader } from './ethernet.js';
import { IPPROTO_TCP, IPV4_HEADER_LEN, type Ipv4Header } from './ipv4.js';
import { finishChecksum, sumBytes } from './checksum.js';
import { TCP_HEADER_LEN } from './tcp.js';
import { UDP_HEADER_LEN } from './udp.js';

/**
 * parseEthernet without the MAC addresses, for data planes that never read them from the header object
 * (the MAC copies were most of parseEthernet's time): the same checks, results and errors; fills
 * out.etherType, out.vlanId and out.vlanPcp, and leaves out.dst and out.src as they were.
 */
export function readEtherType(buf: Uint8Array, off: number, out: EthernetHeader, end: number): number {
  if (off < 0 || end > buf.length || end - off < ETH_HEADER_LEN) return ERR_TRUNCATED;
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

/**
 * Below this many bytes a copy by 32-bit words beats `dst.set(src.subarray(...))`, which makes a view
 * object per call (~60 ns whatever the length; the word loop is ~20 ns at 20 bytes, ~45 at 50, even at
 * about 64). At or above it, set() (a memmove) wins more every byte.
 */
export const WORD_COPY_MAX_LEN = 64;

/**
 * Copies src[srcOff .. srcOff + len) to dst[dstOff ..]. `dstView` is a DataView over exactly `dst` (made
 * once, with dst's byteOffset and byteLength). Short runs go as 32-bit words: four byte loads, one
 * little-endian store (the bytes land in the order they were read, whatever the alignment); not through
 * Float64, whose NaN handling may change bytes. The caller has checked both ranges.
 */
export function copyPayload(src: Uint8Array, srcOff: number, dst: Uint8Array, dstView: DataView, dstOff: number, len: number): void {
  if (len >= WORD_COPY_MAX_LEN) {
    dst.set(src.subarray(srcOff, srcOff + len), dstOff);
    return;
  }
  let i = 0;
  for (; i + 4 <= len; i += 4) {
    const s = srcOff + i;
    dstView.setUint32(dstOff + i, src[s]! | (src[s + 1]! << 8) | (src[s + 2]! << 16) | (src[s + 3]! << 24), true);
  }
  for (; i < len; i++) dst[dstOff + i] = src[srcOff + i]!;
}

/**
 * True when the IPv4 header at buf[off], just parsed into `h` by parseIpv4, carries a correct checksum
 * (RFC 791 3.1; RFC 1071: the header sums to 0xffff, its checksum included). The same answer as
 * verifyIpv4HeaderChecksum, from the fields parseIpv4 has already read: only options are read again.
 */
export function ipv4ChecksumOk(buf: Uint8Array, off: number, h: Ipv4Header): boolean {
  const hl = h.headerLen;
  const src = h.src;
  const dst = h.dst;
  let s =
    (((0x40 | (hl >>> 2)) << 8) | h.tos) +
    h.totalLength +
    h.id +
    ((h.flags << 13) | h.fragOffset) +
    ((h.ttl << 8) | h.protocol) +
    h.checksum +
    (src >>> 16) +
    (src & 0xffff) +
    (dst >>> 16) +
    (dst & 0xffff);
  if (hl > IPV4_HEADER_LEN) s = sumBytes(buf, off + IPV4_HEADER_LEN, hl - IPV4_HEADER_LEN, s);
  return finishChecksum(s) === 0;
}

/** What the data planes read of a TCP or UDP header (readL4Ports fills it; one reused object per context). */
export interface L4Ports {
  srcPort: number;
  dstPort: number;
  /** TCP: the flags byte (SYN, ACK, ...); UDP: 0. */
  tcpFlags: number;
}

export function newL4Ports(): L4Ports {
  return { srcPort: 0, dstPort: 0, tcpFlags: 0 };
}

/**
 * The step both data planes take after the IP header of a packet that is not a later fragment: the TCP
 * or UDP header at buf[l4 .. end) checked as parseTcp and parseUdp check it, with the same results and
 * errors, and only what the data planes read of it kept in `out` (the ports, TCP's flags). `proto` is
 * IPPROTO_TCP or IPPROTO_UDP (the caller has answered every other protocol). A UDP first fragment
 * (`firstFragment`) carries the UDP header but not the whole datagram its length field names: only the
 * header's 8 bytes are checked there. Returns the L4 header's length, or a negative codec error of the TCP
 * layer (TCP) or the UDP layer (UDP). Not parseTcp/parseUdp themselves: their other fields cost stores and
 * inlining budget in the data planes' largest functions (docs/performance.md, "Shared data-plane steps").
 */
export function readL4Ports(buf: Uint8Array, l4: number, end: number, proto: number, firstFragment: boolean, out: L4Ports): number {
  const avail = end - l4;
  if (proto === IPPROTO_TCP) {
    if (l4 < 0 || avail < TCP_HEADER_LEN || end > buf.length) return ERR_TRUNCATED;
    const hlen = (buf[l4 + 12]! >>> 4) * 4;
    // RFC 9293 3.1: data offset is at least 5
    if (hlen < TCP_HEADER_LEN || hlen > avail) return ERR_BAD_DATA_OFFSET;
    out.srcPort = readU16(buf, l4);
    out.dstPort = readU16(buf, l4 + 2);
    out.tcpFlags = buf[l4 + 13]!;
    return hlen;
  }
  if (firstFragment) {
    if (avail < UDP_HEADER_LEN) return ERR_TRUNCATED;
  } else {
    if (l4 < 0 || avail < UDP_HEADER_LEN || end > buf.length) return ERR_TRUNCATED;
    const len = readU16(buf, l4 + 4);
    // RFC 768: length counts header and data, so at least 8, and must fit what IP carried
    if (len < UDP_HEADER_LEN || len > avail) return ERR_BAD_UDP_LENGTH;
  }
  out.srcPort = readU16(buf, l4);
  out.dstPort = readU16(buf, l4 + 2);
  out.tcpFlags = 0;
  return UDP_HEADER_LEN;
}

/** True when two IPv6 addresses, each four 32-bit words in network order, are the same. */
export function ipv6Equal(a: Uint32Array, b: Uint32Array): boolean {
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
}
