// The MUX resolves the next-hop MAC of each host's provider address itself, on its capture: ARP on an
// IPv4 underlay (RFC 826), neighbour solicitation on an IPv6 underlay (RFC 4861 7.2). The next hop is
// the provider address itself when it is on the MUX's subnet (or the MUX has no gateway: one L2
// segment), else the MUX's gateway (a routed underlay: shared/next-hop.ts). Requests go out every
// second until answered, then every 30 s to notice a changed MAC; any ARP or ND message from a next
// hop teaches us its MAC, for every host behind it.
import { formatIpv6, formatMac, type IpAddr } from '../shared/addr.js';
import { ipv6Equal } from '../shared/hot-path.js';
import { ARP_OP_REPLY, ARP_OP_REQUEST, newArpPacket, parseArp, writeArp } from '../shared/arp.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV6, newEthernetHeader, parseEthernet, writeEthernetRaw } from '../shared/ethernet.js';
import { newIpv6Header, parseIpv6 } from '../shared/ipv6.js';
import { ICMPV6_NEIGHBOR_ADVERT, ICMPV6_NEIGHBOR_SOLICIT, ND_OPT_SOURCE_LL, newNdMessage, parseNd, writeNdBody } from '../shared/icmpv6.js';
import { IPPROTO_ICMPV6 } from '../shared/ipv4.js';
import { l4Checksum, pseudoSumV6Bytes } from '../shared/checksum.js';
import { writeU16, writeU32 } from '../shared/bytes.js';
import { logInfo } from '../runtime/log.js';
import { nextHopOf, type UnderlayRoute } from '../shared/next-hop.js';
import type { MuxHost } from './tables.js';

/** Our provider addresses with their subnets and gateways, per family (shared/next-hop.ts underlayRoutesOf). */
export interface MuxRoutes {
  readonly v4: UnderlayRoute;
  readonly v6: UnderlayRoute | null;
}

function ipFromWords(w: Uint32Array): IpAddr {
  return { family: 6, text: formatIpv6(w), words: w };
}

export const NEIGHBOR_RETRY_MS = 1000;
export const NEIGHBOR_REFRESH_MS = 30_000;
const BROADCAST = new Uint8Array([255, 255, 255, 255, 255, 255]);

export class NeighborResolver {
  private readonly mac: Uint8Array;
  private readonly send: (frame: Buffer, len: number) => void;
  private readonly lastSent = new Map<string, number>();
  private readonly eth = newEthernetHeader();
  private readonly arp = newArpPacket();
  private readonly ip6 = newIpv6Header();
  private readonly nd = newNdMessage();
  private readonly frame = Buffer.alloc(14 + 40 + 32);
  /** The routes of the last resolve(): which address answers for each host. */
  private routes: MuxRoutes | null = null;

  constructor(mac: Uint8Array, send: (frame: Buffer, len: number) => void) {
    this.mac = mac;
    this.send = send;
  }

  /**
   * Sends the requests that are due. `routes`: our own provider addresses with their subnets and
   * gateways (shared/next-hop.ts): a host's provider address off our subnet is reached through the
   * gateway, so the gateway's MAC is what we ask for (one request for every host behind it).
   */
  resolve(hosts: Iterable<MuxHost>, underlay6: boolean, routes: MuxRoutes, nowMs = Date.now()): void {
    const asked = new Set<string>();
    for (const h of hosts) {
      const use6 = underlay6 && h.pa6 !== null && routes.v6 !== null;
      const hop = use6 ? nextHopOf(routes.v6!, ipFromWords(h.pa6!)) : nextHopOf(routes.v4, h.pa);
      if (asked.has(hop.text)) continue;
      const last = this.lastSent.get(hop.text) ?? 0;
      const due = h.macKnown ? nowMs - last >= NEIGHBOR_REFRESH_MS : nowMs - last >= NEIGHBOR_RETRY_MS - 50;
      if (!due) continue;
      asked.add(hop.text);
      this.lastSent.set(hop.text, nowMs);
      if (use6) this.solicit(hop.words, routes.v6!.address.words);
      else this.arpRequest(hop.words[0]!, routes.v4.address.words[0]!);
    }
    this.routes = routes;
  }

  private arpRequest(target: number, pa4: number): void {
    const a = newArpPacket();
    a.op = ARP_OP_REQUEST;
    a.senderMac.set(this.mac);
    a.senderIp = pa4;
    a.targetIp = target;
    writeEthernetRaw(BROADCAST, this.mac, ETHERTYPE_ARP, this.frame, 0);
    writeArp(a, this.frame, 14);
    this.send(this.frame, 42);
  }

  /** RFC 4861 4.3 and 7.2.2: to the target's solicited-node multicast address, with our MAC as source option. */
  private solicit(target: Uint32Array, pa6: Uint32Array): void {
    const f = this.frame;
    const low24 = target[3]! & 0xffffff;
    const dmac = Uint8Array.of(0x33, 0x33, 0xff, (low24 >>> 16) & 0xff, (low24 >>> 8) & 0xff, low24 & 0xff);
    writeEthernetRaw(dmac, this.mac, ETHERTYPE_IPV6, f, 0);
    writeU32(f, 14, 0x60000000);
    writeU16(f, 18, 32);
    f[20] = IPPROTO_ICMPV6;
    f[21] = 255;
    for (let i = 0; i < 4; i++) writeU32(f, 22 + i * 4, pa6[i]!);
    writeU32(f, 38, 0xff020000);
    writeU32(f, 42, 0);
    writeU32(f, 46, 1);
    writeU32(f, 50, (0xff000000 | low24) >>> 0);
    const icmp = 54;
    f[icmp] = ICMPV6_NEIGHBOR_SOLICIT;
    f[icmp + 1] = 0;
    writeU16(f, icmp + 2, 0);
    writeU32(f, icmp + 4, 0);
    writeNdBody(target, ND_OPT_SOURCE_LL, this.mac, f, icmp);
    writeU16(f, icmp + 2, l4Checksum(f, icmp, 32, 2, pseudoSumV6Bytes(f, 22, 38, IPPROTO_ICMPV6, 32)));
    this.send(f, 14 + 40 + 32);
  }

  /** A frame the data plane handed to the control plane (ARP, ND): learn what it says about a host's next hop. */
  learn(frame: Buffer, len: number, hosts: Iterable<MuxHost>): void {
    const l3 = parseEthernet(frame, 0, this.eth, len);
    if (l3 < 0) return;
    const routes = this.routes;
    if (this.eth.etherType === ETHERTYPE_ARP) {
      if (parseArp(frame, l3, this.arp, len) < 0) return;
      const a = this.arp;
      if (a.op !== ARP_OP_REPLY && a.op !== ARP_OP_REQUEST) return;
      for (const h of hosts) {
        const hop = routes === null ? h.pa4 : nextHopOf(routes.v4, h.pa).words[0];
        if (hop === a.senderIp) this.set(h, a.senderMac);
      }
      return;
    }
    if (this.eth.etherType !== ETHERTYPE_IPV6) return;
    const ip = this.ip6;
    const hl = parseIpv6(frame, l3, ip, len);
    if (hl < 0 || ip.protocol !== IPPROTO_ICMPV6) return;
    const l4 = l3 + hl;
    const type = frame[l4];
    if (type !== ICMPV6_NEIGHBOR_ADVERT && type !== ICMPV6_NEIGHBOR_SOLICIT) return;
    if (parseNd(frame, l4, this.nd, l3 + 40 + ip.payloadLength) < 0) return;
    // an advertisement speaks for its target; a solicitation for its (non-unspecified) source
    const who = type === ICMPV6_NEIGHBOR_ADVERT ? this.nd.target : ip.src;
    const mac = this.nd.hasLinkAddr ? this.nd.linkAddr : this.eth.src;
    for (const h of hosts) {
      const p = h.pa6;
      if (p === null) continue;
      const hop = routes === null || routes.v6 === null ? p : nextHopOf(routes.v6, ipFromWords(p)).words;
      if (ipv6Equal(hop, who)) this.set(h, mac);
    }
  }

  private set(h: MuxHost, mac: Uint8Array): void {
    let changed = !h.macKnown;
    for (let i = 0; i < 6; i++) if (h.mac[i] !== mac[i]) changed = true;
    if (!changed) return;
    h.mac.set(mac);
    h.macKnown = true;
    logInfo('neighbor_learned', { host: h.name, pa: h.pa.text, mac: formatMac(h.mac) });
  }
}
