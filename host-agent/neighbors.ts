// The host agent's fabric neighbours: the MAC each peer's provider address (every MUX's and every other
// host's, per family) resolves to, learned by ARP (RFC 826) on an IPv4 underlay and by neighbour
// solicitation (RFC 4861 7.2) on an IPv6 one. The data plane accepts VXLAN from a peer's address only
// from that MAC (HostContext.peerMacs), so a packet with a MUX's source address that a router forwarded
// in, or that another node on the segment forged, is refused (docs/security.md).
//
// What is believed, and when:
//   - only an answer to our own request: an ARP reply or a neighbour advertisement addressed to our MAC
//     (and, for ARP, to our provider address), for an address we asked about in the last
//     SOLICIT_WINDOW_MS, whose link-layer address is the frame's source MAC; gratuitous or
//     unsolicited messages, and requests, teach nothing;
//   - a round: a request opens it, the first answer's MAC is adopted ROUND_CONFIRM_MS after that answer
//     unless another MAC answered the same request (a conflict: counted and logged, the entry keeps
//     what it had, or stays unresolved); so a forger on the segment can at worst keep a MAC from being
//     adopted or changed (fail closed), not slip its own in beside the real owner;
//   - requests: every RETRY_MS while unresolved, every REFRESH_MS once resolved (a changed MAC is
//     noticed), and sooner (at most every RETRY_MS) when the data plane saw VXLAN from that address with
//     another source MAC (a MUX restarted with a new MAC heals within about RETRY_MS +
//     ROUND_CONFIRM_MS; its packets meanwhile are counted as dropped).
// On a routed underlay (this host has a gateway, shared/next-hop.ts) a peer off our subnet is resolved
// through the gateway: its VXLAN arrives with the gateway's MAC as source, so the gateway's MAC is the
// one expected from it (one request answers for every peer behind the gateway). The MAC check then
// tells only "came through our router", not which node sent it (docs/security.md, docs/lab.md).
// No per-packet work here: the daemon hands over ARP and ICMPv6 frames and calls tick() on a timer.
import { formatMac, type IpAddr } from '../shared/addr.js';
import { ipv6Equal } from '../shared/hot-path.js';
import { ARP_LEN, ARP_OP_REPLY, ARP_OP_REQUEST, newArpPacket, parseArp, writeArp } from '../shared/arp.js';
import { ETH_HEADER_LEN, ETHERTYPE_ARP, ETHERTYPE_IPV6, newEthernetHeader, parseEthernet, writeEthernetRaw } from '../shared/ethernet.js';
import { newIpv6Header, parseIpv6 } from '../shared/ipv6.js';
import { ICMPV6_NEIGHBOR_ADVERT, ICMPV6_NEIGHBOR_SOLICIT, ND_OPT_SOURCE_LL, newNdMessage, parseNd, writeNdBody } from '../shared/icmpv6.js';
import { IPPROTO_ICMPV6 } from '../shared/ipv4.js';
import { l4Checksum, pseudoSumV6Bytes } from '../shared/checksum.js';
import { writeU16, writeU32 } from '../shared/bytes.js';
import { nextHopOf, type UnderlayRoute } from '../shared/next-hop.js';
import { macKey, type FabricPeer } from './tables.js';

/** Our provider addresses with their subnets and gateways, per family (shared/next-hop.ts underlayRoutesOf). */
export interface HostRoutes {
  readonly v4: UnderlayRoute | null;
  readonly v6: UnderlayRoute | null;
}

/** Unresolved (or refused VXLAN from it): asked again this often. */
export const NEIGHBOR_RETRY_MS = 200;
export const NEIGHBOR_REFRESH_MS = 30_000;
/**
 * An answer counts only this long after our request for that address (longer than the retry interval,
 * so that an answer read late by a busy event loop still counts).
 */
export const NEIGHBOR_SOLICIT_WINDOW_MS = 2000;
/** A round's first answer is adopted this long after it arrived, if no other MAC answered meanwhile. */
export const NEIGHBOR_ROUND_CONFIRM_MS = 100;
/** The daemon calls tick() this often. */
export const NEIGHBOR_TICK_MS = 50;
/** Length of a neighbour solicitation frame (Ethernet, IPv6, NS with a source link-layer option). */
export const NS_FRAME_LEN = ETH_HEADER_LEN + 40 + 32;
export const ARP_FRAME_LEN = ETH_HEADER_LEN + ARP_LEN;

const BROADCAST = new Uint8Array([255, 255, 255, 255, 255, 255]);

/** One line of `GET /status` "neighbors". */
export interface NeighborState {
  peer: string;
  kind: 'mux' | 'host';
  address: string;
  /** The gateway the peer is reached through (its MAC is the one expected), or null on our subnet. */
  via: string | null;
  mac: string | null;
  learnedAgoS: number | null;
  conflicts: number;
  changes: number;
}

interface Entry {
  readonly peer: FabricPeer;
  /** What we ask for: the peer's address on our subnet, else our gateway. */
  readonly target: IpAddr;
  /** macKey of the resolved MAC, or -1. */
  mac: number;
  macText: string | null;
  learnedAtMs: number;
  lastSentMs: number;
  /** The data plane saw this address with another (or no resolved) MAC: ask again soon. */
  urgent: boolean;
  /** The open round: the first answer (macKey, -1 for none), when, and whether another MAC answered. */
  answer: number;
  answerText: string;
  answerAtMs: number;
  conflict: boolean;
  conflictText: string | undefined;
  conflicts: number;
  changes: number;
}

/** What happened, for the daemon's log (JSON lines, state changes only). */
export type NeighborEvent =
  | { event: 'neighbor_learned'; peer: string; address: string; mac: string; previous: string | null }
  | { event: 'neighbor_conflict'; peer: string; address: string; macs: [string, string]; kept: string | null };

export interface NeighborCounters {
  solicitations: number;
  answers: number;
  /** ARP or ND messages about a peer that were not an answer to our request (ignored). */
  ignored: number;
  conflicts: number;
  changes: number;
}

export class FabricNeighbors {
  private entries: Entry[] = [];
  private readonly byText = new Map<string, Entry>();
  private readonly eth = newEthernetHeader();
  private readonly arp = newArpPacket();
  private readonly ip6 = newIpv6Header();
  private readonly nd = newNdMessage();
  readonly counters: NeighborCounters = { solicitations: 0, answers: 0, ignored: 0, conflicts: 0, changes: 0 };

  /**
   * `mac`: our fabric interface's MAC; `pa4`/`pa6`: our provider addresses (the requests' sources and
   * the addresses answers must be sent to).
   */
  constructor(
    private readonly mac: Uint8Array,
    private readonly pa4: number,
    private readonly pa6: Uint32Array | null,
    private routes: HostRoutes = { v4: null, v6: null },
  ) {}

  private targetOf(p: FabricPeer): IpAddr {
    const r = p.address.family === 4 ? this.routes.v4 : this.routes.v6;
    return r === null ? p.address : nextHopOf(r, p.address);
  }

  /** Follows a new peer list (a new policy): entries of addresses still present keep what they learned. */
  setPeers(peers: readonly FabricPeer[], routes?: HostRoutes): void {
    if (routes !== undefined) this.routes = routes;
    const next: Entry[] = [];
    const byText = new Map<string, Entry>();
    for (const p of peers) {
      const old = this.byText.get(p.address.text);
      const target = this.targetOf(p);
      const e: Entry =
        old !== undefined && old.target.text === target.text
          ? { ...old, peer: p }
          : {
              peer: p,
              target,
              mac: -1,
              macText: null,
              learnedAtMs: 0,
              lastSentMs: -Infinity,
              urgent: false,
              answer: -1,
              answerText: '',
              answerAtMs: 0,
              conflict: false,
              conflictText: undefined,
              conflicts: 0,
              changes: 0,
            };
      next.push(e);
      byText.set(p.address.text, e);
    }
    this.entries = next;
    this.byText.clear();
    for (const [k, v] of byText) this.byText.set(k, v);
  }

  /** Writes every peer's MAC (or -1) into the data plane's table, by peer index. */
  fill(peerMacs: Float64Array): void {
    peerMacs.fill(-1);
    for (const e of this.entries) if (e.peer.index < peerMacs.length) peerMacs[e.peer.index] = e.mac;
  }

  /** True when every peer's MAC is known. */
  get allResolved(): boolean {
    return this.entries.every((e) => e.mac >= 0);
  }

  /** The data plane refused VXLAN from this peer (another MAC, or not resolved yet): ask again soon. */
  expedite(peerIndex: number): void {
    const e = this.entries.find((x) => x.peer.index === peerIndex);
    if (e !== undefined) e.urgent = true;
  }

  /**
   * Closes rounds that are due (returns what changed) and writes the requests that are due with `send`
   * (the frame buffer is reused: send it before returning).
   */
  tick(nowMs: number, send: (frame: Buffer, len: number) => void): NeighborEvent[] {
    const events: NeighborEvent[] = [];
    const frame = Buffer.alloc(NS_FRAME_LEN);
    const asked = new Set<string>();
    for (const e of this.entries) {
      if (e.answer >= 0 && nowMs - e.answerAtMs >= NEIGHBOR_ROUND_CONFIRM_MS) {
        if (e.conflict) {
          e.conflicts++;
          this.counters.conflicts++;
          events.push({
            event: 'neighbor_conflict',
            peer: e.peer.name,
            address: e.peer.address.text,
            macs: [e.answerText, e.conflictText ?? '?'],
            kept: e.macText,
          });
        } else if (e.answer !== e.mac) {
          const previous = e.macText;
          if (e.mac >= 0) {
            e.changes++;
            this.counters.changes++;
          }
          e.mac = e.answer;
          e.macText = e.answerText;
          e.learnedAtMs = nowMs;
          e.urgent = false;
          events.push({ event: 'neighbor_learned', peer: e.peer.name, address: e.peer.address.text, mac: e.answerText, previous });
        } else {
          e.learnedAtMs = nowMs;
          e.urgent = false;
        }
        e.answer = -1;
        e.conflict = false;
        e.conflictText = undefined;
      }
      if (e.answer >= 0) continue; // a round is open
      const since = nowMs - e.lastSentMs;
      const due = e.mac < 0 || e.urgent ? since >= NEIGHBOR_RETRY_MS : since >= NEIGHBOR_REFRESH_MS;
      if (!due) continue;
      e.lastSentMs = nowMs;
      // peers behind one gateway: one request this tick answers for all of them
      if (asked.has(e.target.text)) continue;
      asked.add(e.target.text);
      this.counters.solicitations++;
      if (e.target.family === 4) {
        writeArpRequest(frame, this.mac, this.pa4, e.target.words[0]!);
        send(frame, ARP_FRAME_LEN);
      } else if (this.pa6 !== null) {
        writeNeighborSolicit(frame, this.mac, this.pa6, e.target.words);
        send(frame, NS_FRAME_LEN);
      }
    }
    return events;
  }

  /**
   * An ARP or ICMPv6 frame from the fabric: if it answers one of our requests, it joins that round.
   * Returns true when the frame was ARP or neighbour discovery (whether believed or not).
   */
  learn(frame: Uint8Array, len: number, nowMs: number): boolean {
    const l3 = parseEthernet(frame, 0, this.eth, len);
    if (l3 < 0) return false;
    const eth = this.eth;
    const src = macKey(eth.src, 0);
    const toUs = macKey(eth.dst, 0) === macKey(this.mac, 0);
    if (eth.etherType === ETHERTYPE_ARP) {
      if (parseArp(frame, l3, this.arp, len) < 0) return true;
      const a = this.arp;
      const es = this.entriesOf4(a.senderIp);
      if (es.length === 0) return true;
      // RFC 826: a reply to our request names us as target; its sender hardware address is the frame's
      if (a.op !== ARP_OP_REPLY || !toUs || a.targetIp !== this.pa4 || macKey(a.senderMac, 0) !== src) {
        this.counters.ignored++;
        return true;
      }
      this.answerAll(es, src, eth.src, nowMs);
      return true;
    }
    if (eth.etherType !== ETHERTYPE_IPV6) return false;
    const ip = this.ip6;
    const hl = parseIpv6(frame, l3, ip, len);
    if (hl < 0 || ip.protocol !== IPPROTO_ICMPV6) return false;
    const l4 = l3 + hl;
    const type = frame[l4];
    if (type !== ICMPV6_NEIGHBOR_ADVERT) return type === ICMPV6_NEIGHBOR_SOLICIT;
    if (parseNd(frame, l4, this.nd, Math.min(len, l3 + 40 + ip.payloadLength)) < 0) return true;
    const es = this.entriesOf6(this.nd.target);
    if (es.length === 0) return true;
    // RFC 4861 7.2.5: a solicited advertisement, unicast to us; its target link-layer address is the frame's source
    const linkOk = !this.nd.hasLinkAddr || macKey(this.nd.linkAddr, 0) === src;
    const pa6 = this.pa6;
    const dstOk = pa6 !== null && ipv6Equal(ip.dst, pa6);
    if (!toUs || !dstOk || !linkOk) {
      this.counters.ignored++;
      return true;
    }
    this.answerAll(es, src, eth.src, nowMs);
    return true;
  }

  /** One answer for a target: it joins the round of every peer resolved through that target that asked. */
  private answerAll(es: Entry[], mac: number, macBytes: Uint8Array, nowMs: number): void {
    let asked = false;
    for (const e of es) if (this.answer(e, mac, macBytes, nowMs)) asked = true;
    if (asked) this.counters.answers++;
    else this.counters.ignored++; // we did not ask
  }

  private answer(e: Entry, mac: number, macBytes: Uint8Array, nowMs: number): boolean {
    if (nowMs - e.lastSentMs > NEIGHBOR_SOLICIT_WINDOW_MS) return false;
    if (e.answer < 0) {
      e.answer = mac;
      e.answerText = formatMac(macBytes);
      e.answerAtMs = nowMs;
    } else if (e.answer !== mac) {
      e.conflict = true;
      e.conflictText = formatMac(macBytes);
    }
    return true;
  }

  private entriesOf4(a: number): Entry[] {
    return this.entries.filter((e) => e.target.family === 4 && e.target.words[0] === a);
  }

  private entriesOf6(a: Uint32Array): Entry[] {
    return this.entries.filter((e) => e.target.family === 6 && ipv6Equal(e.target.words, a));
  }

  status(nowMs: number): NeighborState[] {
    return this.entries.map((e) => ({
      peer: e.peer.name,
      kind: e.peer.kind,
      address: e.peer.address.text,
      via: e.target.text === e.peer.address.text ? null : e.target.text,
      mac: e.macText,
      learnedAgoS: e.mac >= 0 ? Math.round((nowMs - e.learnedAtMs) / 100) / 10 : null,
      conflicts: e.conflicts,
      changes: e.changes,
    }));
  }
}

/** An ARP request (RFC 826) from our MAC and provider address for `target`, broadcast. */
export function writeArpRequest(buf: Uint8Array, mac: Uint8Array, pa4: number, target: number): number {
  const a = newArpPacket();
  a.op = ARP_OP_REQUEST;
  a.senderMac.set(mac);
  a.senderIp = pa4;
  a.targetIp = target;
  writeEthernetRaw(BROADCAST, mac, ETHERTYPE_ARP, buf, 0);
  writeArp(a, buf, ETH_HEADER_LEN);
  return ARP_FRAME_LEN;
}

/** RFC 4861 4.3 and 7.2.2: a solicitation to the target's solicited-node multicast address, with our MAC as source option. */
export function writeNeighborSolicit(f: Uint8Array, mac: Uint8Array, pa6: Uint32Array, target: ArrayLike<number>): number {
  const low24 = target[3]! & 0xffffff;
  const dmac = Uint8Array.of(0x33, 0x33, 0xff, (low24 >>> 16) & 0xff, (low24 >>> 8) & 0xff, low24 & 0xff);
  writeEthernetRaw(dmac, mac, ETHERTYPE_IPV6, f, 0);
  writeU32(f, 14, 0x60000000);
  writeU16(f, 18, 32);
  f[20] = IPPROTO_ICMPV6;
  f[21] = 255; // RFC 4861 7.1.1: hop limit 255
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
  writeNdBody(Uint32Array.from(target), ND_OPT_SOURCE_LL, mac, f, icmp);
  writeU16(f, icmp + 2, l4Checksum(f, icmp, 32, 2, pseudoSumV6Bytes(f, 22, 38, IPPROTO_ICMPV6, 32)));
  return NS_FRAME_LEN;
}
