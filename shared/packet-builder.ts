// One fluent builder for every packet the tests, fixtures, fuzzers and the replay demo need:
//   pkt().eth().ipv4({ src, dst }).tcp({ sport, dport, flags: TCP_SYN }).payload('GET /').build()
// and VXLAN with its inner frame in the same chain:
//   pkt().eth().ipv4(outer).udp({ sport, dport: 4789 }).vxlan({ vni }).eth().ipv4(inner).tcp(...).build()
// Lengths, next-protocol fields and checksums are filled in from the layers that follow, unless an
// override is given (to build malformed packets on purpose). Uses the codecs' own writers.
import { ip, mac, type IpAddr } from './addr.js';
import { writeU16 } from './bytes.js';
import { ipv4HeaderChecksum, l4Checksum, pseudoSumV4, pseudoSumV6Bytes, udpChecksumOnWire } from './checksum.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, VLAN_NONE, writeEthernet, newEthernetHeader } from './ethernet.js';
import { ARP_OP_REQUEST, newArpPacket, writeArp, ARP_LEN } from './arp.js';
import { IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, IPV4_HEADER_LEN, newIpv4Header, writeIpv4 } from './ipv4.js';
import {
  IPV6_HEADER_LEN,
  IPV6_NH_DEST_OPTS,
  IPV6_NH_FRAGMENT,
  IPV6_NH_HOP_BY_HOP,
  IPV6_NH_NONE,
  IPV6_NH_ROUTING,
  newIpv6Header,
  writeIpv6,
} from './ipv6.js';
import { TCP_HEADER_LEN, TCP_ACK, newTcpHeader, writeTcp } from './tcp.js';
import { UDP_HEADER_LEN, newUdpHeader, writeUdp } from './udp.js';
import { ICMP_HEADER_LEN, newIcmpHeader, writeIcmp } from './icmp.js';
import { VXLAN_HEADER_LEN, VXLAN_PORT, writeVxlan } from './vxlan.js';

export const DEFAULT_SRC_MAC = '02:00:00:00:00:01';
export const DEFAULT_DST_MAC = '02:00:00:00:00:02';

export interface EthOpts {
  src?: string;
  dst?: string;
  type?: number;
  vlan?: number;
  pcp?: number;
}
export interface ArpOpts {
  op?: number;
  senderMac?: string;
  senderIp: string;
  targetMac?: string;
  targetIp: string;
}
export interface Ipv4Opts {
  src: string;
  dst: string;
  ttl?: number;
  id?: number;
  flags?: number;
  fragOffset?: number;
  tos?: number;
  protocol?: number;
  options?: Uint8Array;
  /** Overrides for malformed packets. */
  totalLength?: number;
  ihl?: number;
  checksum?: number;
  version?: number;
}
export interface Ipv6Opts {
  src: string;
  dst: string;
  hopLimit?: number;
  flowLabel?: number;
  trafficClass?: number;
  nextHeader?: number;
  payloadLength?: number;
  version?: number;
}
export type Ext6Opts =
  | { type: 'hop' | 'dest' | 'routing'; len8?: number /* length in 8-octet units beyond the first */ }
  | { type: 'fragment'; offset8?: number; more?: boolean; id?: number };
export interface TcpOpts {
  sport: number;
  dport: number;
  seq?: number;
  ack?: number;
  flags?: number;
  window?: number;
  urgent?: number;
  /** A number to force, or 'bad' for a deliberately wrong checksum. */
  checksum?: number | 'bad';
  dataOffset?: number;
  options?: Uint8Array;
}
export interface UdpOpts {
  sport: number;
  dport: number;
  length?: number;
  checksum?: number | 'bad' | 'zero';
}
export interface IcmpOpts {
  type: number;
  code?: number;
  rest?: number;
  checksum?: number | 'bad';
}
export interface VxlanOpts {
  vni: number;
  flags?: number;
}

type Layer =
  | { kind: 'eth'; o: EthOpts }
  | { kind: 'arp'; o: ArpOpts }
  | { kind: 'ipv4'; o: Ipv4Opts; src: IpAddr; dst: IpAddr }
  | { kind: 'ipv6'; o: Ipv6Opts; src: IpAddr; dst: IpAddr }
  | { kind: 'ext6'; o: Ext6Opts }
  | { kind: 'tcp'; o: TcpOpts }
  | { kind: 'udp'; o: UdpOpts }
  | { kind: 'icmp'; o: IcmpOpts }
  | { kind: 'icmpv6'; o: IcmpOpts }
  | { kind: 'vxlan'; o: VxlanOpts }
  | { kind: 'payload'; data: Uint8Array };

function protoOf(l: Layer | undefined): number {
  switch (l?.kind) {
    case 'tcp':
      return IPPROTO_TCP;
    case 'udp':
      return IPPROTO_UDP;
    case 'icmp':
      return IPPROTO_ICMP;
    case 'icmpv6':
      return IPPROTO_ICMPV6;
    case 'ipv4':
      return 4;
    case 'ipv6':
      return 41;
    case 'ext6':
      return l.o.type === 'hop'
        ? IPV6_NH_HOP_BY_HOP
        : l.o.type === 'dest'
          ? IPV6_NH_DEST_OPTS
          : l.o.type === 'routing'
            ? IPV6_NH_ROUTING
            : IPV6_NH_FRAGMENT;
    default:
      return IPV6_NH_NONE;
  }
}

function etherTypeOf(l: Layer | undefined): number {
  switch (l?.kind) {
    case 'ipv4':
      return ETHERTYPE_IPV4;
    case 'ipv6':
      return ETHERTYPE_IPV6;
    case 'arp':
      return ETHERTYPE_ARP;
    default:
      return 0x88b5; // IEEE local experimental
  }
}

export class PacketBuilder {
  private readonly layers: Layer[] = [];

  eth(o: EthOpts = {}): this {
    this.layers.push({ kind: 'eth', o });
    return this;
  }
  arp(o: ArpOpts): this {
    this.layers.push({ kind: 'arp', o });
    return this;
  }
  ipv4(o: Ipv4Opts): this {
    this.layers.push({ kind: 'ipv4', o, src: ip(o.src), dst: ip(o.dst) });
    return this;
  }
  ipv6(o: Ipv6Opts): this {
    this.layers.push({ kind: 'ipv6', o, src: ip(o.src), dst: ip(o.dst) });
    return this;
  }
  /** An IPv6 extension header, placed after ipv6() and before the upper layer. */
  ext6(o: Ext6Opts): this {
    this.layers.push({ kind: 'ext6', o });
    return this;
  }
  tcp(o: TcpOpts): this {
    this.layers.push({ kind: 'tcp', o });
    return this;
  }
  udp(o: UdpOpts): this {
    this.layers.push({ kind: 'udp', o });
    return this;
  }
  icmp(o: IcmpOpts): this {
    this.layers.push({ kind: 'icmp', o });
    return this;
  }
  icmpv6(o: IcmpOpts): this {
    this.layers.push({ kind: 'icmpv6', o });
    return this;
  }
  /** VXLAN header (RFC 7348); put a udp({ dport: VXLAN_PORT }) layer before it. */
  vxlan(o: VxlanOpts): this {
    this.layers.push({ kind: 'vxlan', o });
    return this;
  }
  /** Payload bytes: a string (UTF-8), bytes, or a length of a repeating 0..255 pattern. */
  payload(p: string | Uint8Array | number): this {
    const data =
      typeof p === 'string' ? new TextEncoder().encode(p) : typeof p === 'number' ? Uint8Array.from({ length: p }, (_, i) => i & 0xff) : p;
    this.layers.push({ kind: 'payload', data });
    return this;
  }

  /** Builds the bytes, innermost layer first, so each header knows what it carries. */
  build(): Buffer {
    let inner: Uint8Array = new Uint8Array(0);
    for (let i = this.layers.length - 1; i >= 0; i--) {
      inner = this.encode(i, inner);
    }
    return Buffer.from(inner.buffer, inner.byteOffset, inner.byteLength);
  }

  /** The nearest IP layer before index i (for pseudo-headers). */
  private ipBefore(i: number): Layer | undefined {
    for (let j = i - 1; j >= 0; j--) {
      const k = this.layers[j]!.kind;
      if (k === 'ipv4' || k === 'ipv6') return this.layers[j];
      if (k === 'eth' || k === 'vxlan') return undefined;
    }
    return undefined;
  }

  private pseudo(i: number, proto: number, len: number): number {
    const l = this.ipBefore(i);
    if (l?.kind === 'ipv4') return pseudoSumV4(l.src.words[0]!, l.dst.words[0]!, proto, len);
    if (l?.kind === 'ipv6') {
      const tmp = new Uint8Array(32);
      for (let w = 0; w < 4; w++) {
        writeU16(tmp, w * 4, l.src.words[w]! >>> 16);
        writeU16(tmp, w * 4 + 2, l.src.words[w]! & 0xffff);
        writeU16(tmp, 16 + w * 4, l.dst.words[w]! >>> 16);
        writeU16(tmp, 16 + w * 4 + 2, l.dst.words[w]! & 0xffff);
      }
      return pseudoSumV6Bytes(tmp, 0, 16, proto, len);
    }
    return 0;
  }

  private encode(i: number, inner: Uint8Array): Uint8Array {
    const l = this.layers[i]!;
    const next = this.layers[i + 1];
    switch (l.kind) {
      case 'payload': {
        const out = new Uint8Array(l.data.length + inner.length);
        out.set(l.data, 0);
        out.set(inner, l.data.length);
        return out;
      }
      case 'eth': {
        const h = newEthernetHeader();
        h.dst.set(mac(l.o.dst ?? DEFAULT_DST_MAC));
        h.src.set(mac(l.o.src ?? DEFAULT_SRC_MAC));
        h.etherType = l.o.type ?? etherTypeOf(next);
        h.vlanId = l.o.vlan ?? VLAN_NONE;
        h.vlanPcp = l.o.pcp ?? 0;
        const hl = h.vlanId === VLAN_NONE ? 14 : 18;
        const out = new Uint8Array(hl + inner.length);
        writeEthernet(h, out, 0);
        out.set(inner, hl);
        return out;
      }
      case 'arp': {
        const p = newArpPacket();
        p.op = l.o.op ?? ARP_OP_REQUEST;
        p.senderMac.set(mac(l.o.senderMac ?? DEFAULT_SRC_MAC));
        p.senderIp = ip(l.o.senderIp).words[0]!;
        p.targetMac.set(mac(l.o.targetMac ?? '00:00:00:00:00:00'));
        p.targetIp = ip(l.o.targetIp).words[0]!;
        const out = new Uint8Array(ARP_LEN + inner.length);
        writeArp(p, out, 0);
        out.set(inner, ARP_LEN);
        return out;
      }
      case 'ipv4': {
        const opts = l.o.options ?? new Uint8Array(0);
        if (opts.length % 4 !== 0) throw new Error('ipv4 options must be a multiple of 4 bytes');
        const hl = IPV4_HEADER_LEN + opts.length;
        const out = new Uint8Array(hl + inner.length);
        const h = newIpv4Header();
        h.tos = l.o.tos ?? 0;
        h.totalLength = l.o.totalLength ?? out.length;
        h.id = l.o.id ?? 0x1234;
        h.flags = l.o.flags ?? 0;
        h.fragOffset = l.o.fragOffset ?? 0;
        h.ttl = l.o.ttl ?? 64;
        h.protocol = l.o.protocol ?? protoOf(next);
        h.src = l.src.words[0]!;
        h.dst = l.dst.words[0]!;
        writeIpv4(h, out, 0);
        out.set(opts, IPV4_HEADER_LEN);
        out[0] = ((l.o.version ?? 4) << 4) | ((l.o.ihl ?? hl / 4) & 0x0f);
        writeU16(out, 10, 0);
        writeU16(out, 10, l.o.checksum ?? ipv4HeaderChecksum(out, 0, Math.max(20, Math.min(hl, (out[0]! & 0x0f) * 4))));
        out.set(inner, hl);
        return out;
      }
      case 'ipv6': {
        const out = new Uint8Array(IPV6_HEADER_LEN + inner.length);
        const h = newIpv6Header();
        h.trafficClass = l.o.trafficClass ?? 0;
        h.flowLabel = l.o.flowLabel ?? 0;
        h.payloadLength = l.o.payloadLength ?? inner.length;
        h.nextHeader = l.o.nextHeader ?? protoOf(next);
        h.hopLimit = l.o.hopLimit ?? 64;
        h.src.set(l.src.words);
        h.dst.set(l.dst.words);
        writeIpv6(h, out, 0);
        if (l.o.version !== undefined) out[0] = (l.o.version << 4) | (out[0]! & 0x0f);
        out.set(inner, IPV6_HEADER_LEN);
        return out;
      }
      case 'ext6': {
        const nh = protoOf(next);
        if (l.o.type === 'fragment') {
          const out = new Uint8Array(8 + inner.length);
          out[0] = nh;
          writeU16(out, 2, ((l.o.offset8 ?? 0) << 3) | (l.o.more ? 1 : 0));
          const id = l.o.id ?? 0xabcd;
          out[4] = id >>> 24;
          out[5] = (id >>> 16) & 0xff;
          out[6] = (id >>> 8) & 0xff;
          out[7] = id & 0xff;
          out.set(inner, 8);
          return out;
        }
        const len = ((l.o.len8 ?? 0) + 1) * 8;
        const out = new Uint8Array(len + inner.length);
        out[0] = nh;
        out[1] = l.o.len8 ?? 0;
        if (l.o.type === 'routing') {
          out[2] = 0;
          out[3] = 0;
        } // type 0 with segments left 0: ignorable
        else {
          out[2] = 1;
          out[3] = len - 4;
        } // one PadN option filling the header
        out.set(inner, len);
        return out;
      }
      case 'tcp': {
        const opts = l.o.options ?? new Uint8Array(0);
        const hl = TCP_HEADER_LEN + opts.length;
        const out = new Uint8Array(hl + inner.length);
        const h = newTcpHeader();
        h.srcPort = l.o.sport;
        h.dstPort = l.o.dport;
        h.seq = l.o.seq ?? 1000;
        h.ack = l.o.ack ?? 0;
        h.flags = l.o.flags ?? TCP_ACK;
        h.window = l.o.window ?? 65535;
        h.urgent = l.o.urgent ?? 0;
        writeTcp(h, out, 0);
        out[12] = ((l.o.dataOffset ?? hl / 4) & 0x0f) << 4;
        out.set(opts, TCP_HEADER_LEN);
        out.set(inner, hl);
        const c = l4Checksum(out, 0, out.length, 16, this.pseudo(i, IPPROTO_TCP, out.length));
        writeU16(out, 16, l.o.checksum === 'bad' ? c ^ 0x5555 : (l.o.checksum ?? c));
        return out;
      }
      case 'udp': {
        const out = new Uint8Array(UDP_HEADER_LEN + inner.length);
        const h = newUdpHeader();
        h.srcPort = l.o.sport;
        h.dstPort = l.o.dport;
        h.length = l.o.length ?? out.length;
        h.checksum = 0;
        writeUdp(h, out, 0);
        out.set(inner, UDP_HEADER_LEN);
        const c = udpChecksumOnWire(l4Checksum(out, 0, out.length, 6, this.pseudo(i, IPPROTO_UDP, out.length)));
        const ck = l.o.checksum;
        writeU16(out, 6, ck === 'zero' ? 0 : ck === 'bad' ? c ^ 0x5555 : (ck ?? c));
        return out;
      }
      case 'icmp':
      case 'icmpv6': {
        const out = new Uint8Array(ICMP_HEADER_LEN + inner.length);
        const h = newIcmpHeader();
        h.type = l.o.type;
        h.code = l.o.code ?? 0;
        h.rest = l.o.rest ?? 0;
        h.checksum = 0;
        writeIcmp(h, out, 0);
        out.set(inner, ICMP_HEADER_LEN);
        const pseudo = l.kind === 'icmpv6' ? this.pseudo(i, IPPROTO_ICMPV6, out.length) : 0;
        const c = l4Checksum(out, 0, out.length, 2, pseudo);
        writeU16(out, 2, l.o.checksum === 'bad' ? c ^ 0x5555 : (l.o.checksum ?? c));
        return out;
      }
      case 'vxlan': {
        const out = new Uint8Array(VXLAN_HEADER_LEN + inner.length);
        writeVxlan({ flags: 0x08, vni: l.o.vni }, out, 0);
        if (l.o.flags !== undefined) out[0] = l.o.flags;
        out.set(inner, VXLAN_HEADER_LEN);
        return out;
      }
    }
  }
}

/** Starts a packet. */
export function pkt(): PacketBuilder {
  return new PacketBuilder();
}

export { VXLAN_PORT };
