// A whole-frame decoder for captures: walks Ethernet -> ARP | IPv4 | IPv6 -> TCP | UDP | ICMP | ICMPv6,
// into VXLAN (on the given UDP ports) and into the packet quoted by an ICMP error, and verifies every
// checksum it can. Not for the hot path: it allocates one small object per layer. Scenario verifiers,
// the replay command and the golden-vector tests read captures through it.
import { formatIpv4, formatIpv6, formatMac } from './addr.js';
import { codecErrorName } from './codec-error.js';
import { verifyIpv4HeaderChecksum, verifyL4Checksum, pseudoSumV4, pseudoSumV6Bytes } from './checksum.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, newEthernetHeader, parseEthernet, VLAN_NONE } from './ethernet.js';
import { newArpPacket, parseArp } from './arp.js';
import { IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_TCP, IPPROTO_UDP, isIpv4Fragment, newIpv4Header, parseIpv4 } from './ipv4.js';
import { isIpv6Fragment, newIpv6Header, parseIpv6 } from './ipv6.js';
import { newTcpHeader, parseTcp } from './tcp.js';
import { newUdpHeader, parseUdp } from './udp.js';
import { isIcmpError, newIcmpHeader, parseIcmp } from './icmp.js';
import { isIcmpv6Error } from './icmpv6.js';
import { newVxlanHeader, parseVxlan, VXLAN_PORT } from './vxlan.js';
import { LINKTYPE_ETHERNET, LINKTYPE_RAW } from './pcap-file.js';

/** true: verified; false: wrong; null: not checkable (quoted packet cut short, UDP checksum zero, fragment). */
export type ChecksumStatus = boolean | null;

interface IcmpFields {
  off: number;
  type: number;
  code: number;
  rest: number;
  checksumOk: ChecksumStatus;
}

export type DissectedLayer =
  | { layer: 'eth'; off: number; src: string; dst: string; type: number; vlan: number }
  | { layer: 'arp'; off: number; op: number; senderMac: string; senderIp: string; targetMac: string; targetIp: string }
  | {
      layer: 'ipv4';
      off: number;
      src: string;
      dst: string;
      protocol: number;
      headerLen: number;
      totalLength: number;
      ttl: number;
      id: number;
      flags: number;
      fragOffset: number;
      tos: number;
      checksumOk: ChecksumStatus;
      quoted: boolean;
    }
  | {
      layer: 'ipv6';
      off: number;
      src: string;
      dst: string;
      nextHeader: number;
      protocol: number;
      payloadLength: number;
      hopLimit: number;
      headerLen: number;
      extCount: number;
      fragment: boolean;
      fragOffset: number;
      quoted: boolean;
    }
  | {
      layer: 'tcp';
      off: number;
      srcPort: number;
      dstPort: number;
      seq: number;
      ack: number;
      flags: number;
      headerLen: number;
      window: number;
      payloadOff: number;
      payloadLen: number;
      checksumOk: ChecksumStatus;
    }
  | {
      layer: 'udp';
      off: number;
      srcPort: number;
      dstPort: number;
      length: number;
      checksum: number;
      payloadOff: number;
      payloadLen: number;
      checksumOk: ChecksumStatus;
    }
  | ({ layer: 'icmp' } & IcmpFields)
  | ({ layer: 'icmpv6' } & IcmpFields)
  | { layer: 'vxlan'; off: number; flags: number; vni: number }
  | { layer: 'error'; off: number; at: string; reason: string };

export interface DissectOptions {
  /** UDP destination ports decoded as VXLAN (default [4789]). */
  vxlanPorts?: readonly number[];
}

export interface Dissection {
  readonly layers: DissectedLayer[];
  /** First layer of each kind, for convenience. */
  first<K extends DissectedLayer['layer']>(kind: K): Extract<DissectedLayer, { layer: K }> | undefined;
  /** Every layer of a kind, outermost first. */
  all<K extends DissectedLayer['layer']>(kind: K): Extract<DissectedLayer, { layer: K }>[];
  /** The first error, if any layer failed to parse. */
  readonly error: Extract<DissectedLayer, { layer: 'error' }> | undefined;
}

/** Decodes one captured frame (LINKTYPE_ETHERNET) or packet (LINKTYPE_RAW). */
export function dissect(buf: Uint8Array, linkType: number = LINKTYPE_ETHERNET, opts: DissectOptions = {}): Dissection {
  const layers: DissectedLayer[] = [];
  const vx = opts.vxlanPorts ?? [VXLAN_PORT];
  if (linkType === LINKTYPE_RAW) {
    const v = buf.length > 0 ? buf[0]! >>> 4 : 0;
    if (v === 4) walkIpv4(buf, 0, buf.length, false, layers, vx);
    else if (v === 6) walkIpv6(buf, 0, buf.length, false, layers, vx);
    else layers.push({ layer: 'error', off: 0, at: 'raw', reason: 'bad_version' });
  } else if (linkType === LINKTYPE_ETHERNET) {
    walkEthernet(buf, 0, buf.length, layers, vx);
  } else {
    layers.push({ layer: 'error', off: 0, at: 'link', reason: `unsupported_linktype_${linkType}` });
  }
  return {
    layers,
    first: (k) => layers.find((l) => l.layer === k) as never,
    all: (k) => layers.filter((l) => l.layer === k) as never,
    error: layers.find((l) => l.layer === 'error') as never,
  };
}

function err(layers: DissectedLayer[], off: number, at: string, code: number): void {
  layers.push({ layer: 'error', off, at, reason: codecErrorName(code) });
}

function walkEthernet(buf: Uint8Array, off: number, end: number, layers: DissectedLayer[], vx: readonly number[]): void {
  const h = newEthernetHeader();
  const n = parseEthernet(buf.subarray(0, end), off, h);
  if (n < 0) return err(layers, off, 'eth', n);
  layers.push({
    layer: 'eth',
    off,
    src: formatMac(h.src),
    dst: formatMac(h.dst),
    type: h.etherType,
    vlan: h.vlanId === VLAN_NONE ? -1 : h.vlanId,
  });
  const p = off + n;
  if (h.etherType === ETHERTYPE_IPV4) walkIpv4(buf, p, end, false, layers, vx);
  else if (h.etherType === ETHERTYPE_IPV6) walkIpv6(buf, p, end, false, layers, vx);
  else if (h.etherType === ETHERTYPE_ARP) {
    const a = newArpPacket();
    const r = parseArp(buf.subarray(0, end), p, a);
    if (r < 0) return err(layers, p, 'arp', r);
    layers.push({
      layer: 'arp',
      off: p,
      op: a.op,
      senderMac: formatMac(a.senderMac),
      senderIp: formatIpv4(a.senderIp),
      targetMac: formatMac(a.targetMac),
      targetIp: formatIpv4(a.targetIp),
    });
  }
}

/**
 * `quoted`: the packet is the one an ICMP error carries, possibly cut short; its lengths are then
 * trusted only as far as the bytes go and checksums are reported as not checkable when incomplete.
 */
function walkIpv4(buf: Uint8Array, off: number, end: number, quoted: boolean, layers: DissectedLayer[], vx: readonly number[]): void {
  const h = newIpv4Header();
  // a quoted packet may be cut short: its total length can run past the bytes the error kept
  const n = parseIpv4(buf, off, h, end, quoted);
  const cut = quoted && off + h.totalLength > end;
  if (n < 0) return err(layers, off, 'ipv4', n);
  layers.push({
    layer: 'ipv4',
    off,
    src: formatIpv4(h.src),
    dst: formatIpv4(h.dst),
    protocol: h.protocol,
    headerLen: h.headerLen,
    totalLength: h.totalLength,
    ttl: h.ttl,
    id: h.id,
    flags: h.flags,
    fragOffset: h.fragOffset,
    tos: h.tos,
    checksumOk: verifyIpv4HeaderChecksum(buf, off, h.headerLen),
    quoted,
  });
  if (h.fragOffset !== 0) return; // later fragments carry no upper-layer header
  const l4 = off + n;
  const l4End = Math.min(off + h.totalLength, end);
  const pseudo = pseudoSumV4(h.src, h.dst, h.protocol, h.totalLength - h.headerLen);
  const complete = !cut && !isIpv4Fragment(h);
  walkL4(buf, l4, l4End, h.protocol, pseudo, complete, 4, layers, vx, h.totalLength - h.headerLen);
}

function walkIpv6(buf: Uint8Array, off: number, end: number, quoted: boolean, layers: DissectedLayer[], vx: readonly number[]): void {
  const h = newIpv6Header();
  const n = parseIpv6(buf, off, h, end, quoted);
  const cut = quoted && off + 40 + h.payloadLength > end;
  if (n < 0) return err(layers, off, 'ipv6', n);
  layers.push({
    layer: 'ipv6',
    off,
    src: formatIpv6(h.src),
    dst: formatIpv6(h.dst),
    nextHeader: h.nextHeader,
    protocol: h.protocol,
    payloadLength: h.payloadLength,
    hopLimit: h.hopLimit,
    headerLen: h.headerLen,
    extCount: h.extCount,
    fragment: isIpv6Fragment(h),
    fragOffset: h.fragOffset,
    quoted,
  });
  if (h.hasFragment && h.fragOffset !== 0) return;
  const l4 = off + n;
  const l4Len = 40 + h.payloadLength - n;
  const l4End = Math.min(off + 40 + h.payloadLength, end);
  const pseudo = pseudoSumV6Bytes(buf, off + 8, off + 24, h.protocol, l4Len);
  walkL4(buf, l4, l4End, h.protocol, pseudo, !cut && !isIpv6Fragment(h), 6, layers, vx, l4Len);
}

function walkL4(
  buf: Uint8Array,
  off: number,
  end: number,
  proto: number,
  pseudo: number,
  complete: boolean,
  family: 4 | 6,
  layers: DissectedLayer[],
  vx: readonly number[],
  fullLen: number,
): void {
  const view = buf.subarray(0, end);
  const canSum = complete && end - off === fullLen;
  if (proto === IPPROTO_TCP) {
    const t = newTcpHeader();
    const n = parseTcp(view, off, t);
    if (n < 0) {
      // an ICMP error may quote only the first 8 bytes of TCP: ports, sequence number
      if (!complete && end - off >= 8) {
        layers.push({
          layer: 'tcp',
          off,
          srcPort: (buf[off]! << 8) | buf[off + 1]!,
          dstPort: (buf[off + 2]! << 8) | buf[off + 3]!,
          seq: 0,
          ack: 0,
          flags: 0,
          headerLen: 0,
          window: 0,
          payloadOff: end,
          payloadLen: 0,
          checksumOk: null,
        });
        return;
      }
      return err(layers, off, 'tcp', n);
    }
    layers.push({
      layer: 'tcp',
      off,
      srcPort: t.srcPort,
      dstPort: t.dstPort,
      seq: t.seq,
      ack: t.ack,
      flags: t.flags,
      headerLen: t.headerLen,
      window: t.window,
      payloadOff: off + n,
      payloadLen: end - off - n,
      checksumOk: canSum ? verifyL4Checksum(buf, off, fullLen, pseudo) : null,
    });
  } else if (proto === IPPROTO_UDP) {
    const u = newUdpHeader();
    let n = parseUdp(view, off, u);
    if (n < 0 && !complete && end - off >= 8) {
      u.srcPort = (buf[off]! << 8) | buf[off + 1]!;
      u.dstPort = (buf[off + 2]! << 8) | buf[off + 3]!;
      u.length = (buf[off + 4]! << 8) | buf[off + 5]!;
      u.checksum = (buf[off + 6]! << 8) | buf[off + 7]!;
      n = 8;
    }
    if (n < 0) return err(layers, off, 'udp', n);
    const ok = !canSum ? null : u.checksum === 0 ? (family === 4 ? null : false) : verifyL4Checksum(buf, off, u.length, pseudo);
    layers.push({
      layer: 'udp',
      off,
      srcPort: u.srcPort,
      dstPort: u.dstPort,
      length: u.length,
      checksum: u.checksum,
      payloadOff: off + 8,
      payloadLen: Math.min(u.length, end - off) - 8,
      checksumOk: ok,
    });
    if (vx.includes(u.dstPort)) {
      const v = newVxlanHeader();
      const r = parseVxlan(view, off + 8, v);
      if (r < 0) return err(layers, off + 8, 'vxlan', r);
      layers.push({ layer: 'vxlan', off: off + 8, flags: v.flags, vni: v.vni });
      walkEthernet(buf, off + 16, Math.min(off + u.length, end), layers, vx);
    }
  } else if (proto === IPPROTO_ICMP || proto === IPPROTO_ICMPV6) {
    const c = newIcmpHeader();
    const n = parseIcmp(view, off, c);
    if (n < 0) return err(layers, off, proto === IPPROTO_ICMP ? 'icmp' : 'icmpv6', n);
    const sum = canSum ? verifyL4Checksum(buf, off, fullLen, proto === IPPROTO_ICMP ? 0 : pseudo) : null;
    const f: IcmpFields = { off, type: c.type, code: c.code, rest: c.rest, checksumOk: sum };
    layers.push(proto === IPPROTO_ICMP ? { layer: 'icmp', ...f } : { layer: 'icmpv6', ...f });
    const isErr = proto === IPPROTO_ICMP ? isIcmpError(c.type) : isIcmpv6Error(c.type);
    if (isErr && end - off > 8) {
      const q = off + 8;
      const v = buf[q]! >>> 4;
      if (v === 4) walkIpv4(buf, q, end, true, layers, vx);
      else if (v === 6) walkIpv6(buf, q, end, true, layers, vx);
    }
  }
}
