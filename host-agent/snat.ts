// Outbound NAT in the host agent (docs/outbound.md): a backend's connection that is no reply to a
// load-balanced flow leaves from a frontend IP:port of its nic's ranges (DIP:port -> frontend:port), and
// the replies, which a MUX encapsulates to this host by its stateless range table, are translated back.
//
// Per-flow state lives in the host agent's one flow table (host-agent/flow-table.ts) as two entries per
// flow, in key spaces of their own (the protocol word's high bits), each pointing at the flow's slot:
//   out: (VNI, DIP, remote, protocol, DIP port, remote port)          -> FLOW_SNAT_OUT, slot
//   in:  (0, remote, frontend IP, protocol, remote port, frontend port) -> FLOW_SNAT_IN, slot
// The slot arrays hold what a packet is rewritten with and the TCP state. A port is free toward a remote
// endpoint when no `in` entry holds (frontend IP, port, remote IP, remote port): that key is what makes
// reuse toward other remote endpoints safe (a reply is told apart by its source, the remote endpoint),
// and because the `in` key has no VNI, two tenants with the same addresses never share a
// (frontend, port, remote) either. A closed TCP flow (both FINs, or an RST) keeps both entries for
// SNAT_TIME_WAIT_S (the TIME-WAIT guard: its port is not reused toward that remote endpoint before),
// then the sweep frees them. Entries are inserted with no table expiry: the slots carry the clock,
// and only this file's sweep removes them, both at once.
// Across a restart the flows come back from the flow snapshot (exportFlows/importFlows) and, for what
// changed after it, from the flow journal: the engine hands it a record (SnatJournalSink) when a flow
// opens, becomes ESTABLISHED and ends, so that a host agent killed with SIGKILL loses none.
//
// Pure: no I/O, no timers; the caller passes whole seconds.
import { updateChecksum16, updateChecksum32, updateChecksumBytes, udpChecksumOnWire } from '../shared/checksum.js';
import {
  IPPROTO_TCP,
  IPPROTO_UDP,
  IPV4_FLAG_DF,
  IPV4_OFF_CHECKSUM,
  IPV4_OFF_DST,
  IPV4_OFF_SRC,
  newIpv4Header,
  writeIpv4,
} from '../shared/ipv4.js';
import { IPV6_HEADER_LEN, IPV6_OFF_DST, IPV6_OFF_SRC, newIpv6Header, writeIpv6 } from '../shared/ipv6.js';
import { TCP_ACK, TCP_FIN, TCP_HEADER_LEN, TCP_OFF_CHECKSUM, TCP_RST, TCP_SYN, newTcpHeader, writeTcp } from '../shared/tcp.js';
import { UDP_OFF_CHECKSUM } from '../shared/udp.js';
import { l4Checksum, pseudoSumV4, pseudoSumV6Bytes } from '../shared/checksum.js';
import { ETHERTYPE_IPV4, ETHERTYPE_IPV6, newEthernetHeader, writeEthernet } from '../shared/ethernet.js';
import { FLOW_SNAT_IN, FLOW_SNAT_OUT, hostKeyHashWords, type HostFlowTable } from './flow-table.js';
import { parseIpAddr } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';

/** Flow-table kinds of the two SNAT entries (after east-west's 1-3 and stateful DSR's 4-5; host-agent/flow-table.ts). */
export { FLOW_SNAT_IN, FLOW_SNAT_OUT };
/** Key spaces (bits 8+ of the protocol word): 0 east-west, 1 DSR, these two SNAT. */
export const KEY_SPACE_SNAT_OUT = 2;
export const KEY_SPACE_SNAT_IN = 3;
/** TIME-WAIT guard: a closed TCP flow's port stays taken toward its remote endpoint this long (2 x an MSL of 60 s). */
export const SNAT_TIME_WAIT_S = 120;
/** A TCP flow that has sent its SYN but seen no reply is kept this long. */
export const SNAT_SYN_TIMEOUT_S = 60;
const NO_EXPIRY = 0xffffffff;
const INITIAL_SLOTS = 1024;

// Results: a slot (>= 0) or one of these.
export const SNAT_ERR_EXHAUSTED = -1;
export const SNAT_ERR_NO_RANGE = -2;
export const SNAT_ERR_TABLE_FULL = -3;
export const SNAT_ERR_NOT_OURS = -4;
export const SNAT_ERR_TRUNCATED = -5;
export const SNAT_ERR_PROTOCOL = -6;
export const SNAT_ERR_FRAGMENT = -7;
/** A backend's TCP segment without SYN and no flow for it (e.g. after a host agent restart): no port is opened mid-stream. */
export const SNAT_ERR_NO_FLOW_OUT = -8;
/** A reply whose VXLAN VNI is not the VNI of the nic its flow belongs to (checked before any state changes). */
export const SNAT_ERR_WRONG_VNI = -9;
/**
 * --workers: a new flow toward a remote end whose steering share is another worker's. It reaches this
 * worker only while that one is down (the kernel's fanout spreads a missing member's frames over the
 * others until the regroup); opening it here could take a port the other worker's restored flow holds
 * toward the same remote end, so it is refused: TCP retransmits the SYN, and it opens in its own worker.
 */
export const SNAT_ERR_OTHER_WORKER = -10;
/** The counter each result is dropped under (the host agent's counters: docs/outbound.md). */
export const SNAT_DROP_REASONS: Readonly<Record<number, string>> = {
  [SNAT_ERR_EXHAUSTED]: 'drop_out_snat_exhausted',
  [SNAT_ERR_NO_RANGE]: 'drop_out_snat_no_range',
  [SNAT_ERR_TABLE_FULL]: 'drop_out_snat_table_full',
  [SNAT_ERR_NOT_OURS]: 'drop_in_snat_no_flow',
  [SNAT_ERR_TRUNCATED]: 'drop_snat_truncated',
  [SNAT_ERR_PROTOCOL]: 'drop_out_snat_protocol',
  [SNAT_ERR_FRAGMENT]: 'drop_snat_fragment',
  [SNAT_ERR_NO_FLOW_OUT]: 'drop_out_snat_no_flow',
  [SNAT_ERR_WRONG_VNI]: 'drop_in_snat_wrong_vni',
  [SNAT_ERR_OTHER_WORKER]: 'drop_out_snat_other_worker',
};

// TCP states of a slot (UDP flows stay OPEN).
export const SNAT_OPEN = 1;
export const SNAT_SYN_SENT = 2;
export const SNAT_ESTABLISHED = 3;
export const SNAT_TIME_WAIT = 4;
const FIN_OUT = 1;
const FIN_IN = 2;

/** Idle resets waiting for the daemon (takeIdleResets); beyond this many, counted in resetsLost instead. */
export const SNAT_RESET_QUEUE_MAX = 4096;
const SEQ_OUT = 1;
const SEQ_IN = 2;

/**
 * An ESTABLISHED TCP flow its idle timeout ended, under a rule with tcpResetOnIdle: the daemon sends one
 * RST to each end (snatResetToRemote, snatResetToDip). Addresses are 4 words (IPv4: the first).
 */
export interface SnatIdleReset {
  readonly family: 4 | 6;
  readonly nic: number;
  readonly vni: number;
  readonly dip: Uint32Array;
  readonly remote: Uint32Array;
  readonly fip: Uint32Array;
  readonly dipPort: number;
  readonly remotePort: number;
  readonly fport: number;
  /** The next sequence number the backend would send: the RST toward the remote carries it. */
  readonly seqOut: number;
  /** The next sequence number the remote would send: the RST toward the DIP carries it. */
  readonly seqIn: number;
}

/** Words of one flow as exportFlows writes it: family, protocol, TCP state, FINs seen, nic, VNI, DIP (4), remote (4), frontend IP (4), DIP port << 16 | remote port, frontend port, seconds left. */
export const SNAT_FLOW_RECORD_WORDS = 21;

/**
 * The flow journal's record types for outbound NAT (host-agent/flow-journal.ts names them
 * JOURNAL_SNAT_OPEN and JOURNAL_SNAT_END; defined here so that the engine needs no import of the journal).
 * OPEN: the flow as it is now (a replay keeps the last OPEN of a flow); END: the flow is gone.
 */
export const SNAT_RECORD_OPEN = 2;
export const SNAT_RECORD_END = 3;

/**
 * Where the engine reports, with one exportFlows record, each flow opened (its port taken), each TCP flow
 * that became ESTABLISHED (its time left goes from the SYN timeout to the idle timeout) and each flow
 * ended (freed: after its TIME-WAIT guard, by idle expiry, a policy or a smaller table). Closing (a FIN,
 * both FINs or an RST: TIME_WAIT) is not reported: a restart then restores the flow as ESTABLISHED with
 * its idle time left (4 minutes at least, longer than the 120 s guard), so its port stays taken toward
 * that remote endpoint at least as long as the guard asks. The daemon hands it the flow journal's buffer
 * (appends to memory; written at the end of the event-loop turn).
 */
export interface SnatJournalSink {
  addSnat(type: number, record: Uint32Array): void;
}

/** What importFlows did with the records it was given. */
export interface SnatImportResult {
  restored: number;
  /** No time left once the time since the export is taken off. */
  expired: number;
  /** Malformed, a port or DIP:port already taken here, or no room (maxFlows, a full table). */
  skipped: number;
}

/** One range of a nic: frontend IP (1 word for IPv4, 4 for IPv6) and ports first..last. */
export interface SnatPortRange {
  readonly ip: Uint32Array;
  readonly first: number;
  readonly last: number;
}

/** What the policy says of one nic: its outbound rule's settings and its host's ranges. */
export interface SnatNicPolicy {
  readonly vni: number;
  readonly idleS: number;
  readonly tcpResetOnIdle: boolean;
  readonly tcp: boolean;
  readonly udp: boolean;
  readonly ranges4: readonly SnatPortRange[];
  readonly ranges6: readonly SnatPortRange[];
}

interface NicState {
  policy: SnatNicPolicy;
  /** Where the next port search starts, per family (a running index over the nic's ports). */
  cursor4: number;
  cursor6: number;
  ports4: number;
  ports6: number;
  inUse4: number;
  inUse6: number;
  exhausted: number;
  exhausted4: number;
  exhausted6: number;
}

export interface SnatNicStatus {
  readonly nic: number;
  readonly ports4: number;
  readonly ports6: number;
  readonly inUse4: number;
  readonly inUse6: number;
  readonly exhausted: number;
  readonly exhausted4: number;
  readonly exhausted6: number;
}

export class SnatEngine {
  /** The host agent's one flow table (ctx.ew.flows); rehome moves the entries when the daemon replaces it. */
  private flows: HostFlowTable;
  private readonly nics = new Map<number, NicState>();
  private cap = 0;
  // slot arrays
  private fam = new Uint8Array(0);
  private proto = new Uint8Array(0);
  private state = new Uint8Array(0);
  private fins = new Uint8Array(0);
  private nicOf = new Uint16Array(0);
  private vni = new Uint32Array(0);
  private dip = new Uint32Array(0); // 4 words a slot
  private remote = new Uint32Array(0); // 4 words a slot
  private fip = new Uint32Array(0); // 4 words a slot
  private ports = new Uint32Array(0); // dport << 16 | rport
  private fport = new Uint16Array(0);
  private expires = new Uint32Array(0); // 0 = free slot
  // tcpResetOnIdle: the next sequence number each side sends (the highest segment end seen each way)
  private nxtOut = new Uint32Array(0);
  private nxtIn = new Uint32Array(0);
  private seqOk = new Uint8Array(0); // SEQ_OUT | SEQ_IN: which of the two is known
  private resets: SnatIdleReset[] = [];
  /** Idle resets not queued because SNAT_RESET_QUEUE_MAX were waiting. */
  resetsLost = 0;
  private free: number[] = [];
  private next = 0;
  private sweepCursor = 0;
  /** Flows at most (flowTable.snatMaxFlows); the table's SNAT quota holds their two entries each. */
  maxFlows: number;
  private readonly scratch = new Uint8Array(16);
  private readonly w = new Uint32Array(4);
  /** The flow journal (null: none, or not yet: flows imported at the start are not journaled again). */
  journal: SnatJournalSink | null = null;
  /**
   * --workers: whether this worker opens flows toward a remote end (address words as read from the
   * packet, port): its steering share (host-agent/worker.ts). null: one thread, every remote end.
   */
  opensTo: ((family: 4 | 6, remote: Uint32Array, port: number) => boolean) | null = null;
  /** The record handed to the journal (copied by it): no allocation per flow. */
  private readonly rec = new Uint32Array(SNAT_FLOW_RECORD_WORDS);
  live = 0;

  constructor(flows: HostFlowTable, maxFlows: number) {
    this.flows = flows;
    this.maxFlows = maxFlows;
    this.grow(Math.min(INITIAL_SLOTS, maxFlows));
  }

  /** The flow table the engine's entries are in. */
  get table(): HostFlowTable {
    return this.flows;
  }

  /**
   * Makes `table` the engine's flow table and inserts every flow's two entries into it (the daemon's new
   * host flow table: host-agent/east-west-io.ts carryEwState). The entries are rebuilt from the slots, as
   * release() finds them. A flow whose entries do not fit (a smaller bound or quota) ends; returns how
   * many ended. The old table is left as it was (the caller drops it).
   */
  rehome(table: HostFlowTable): number {
    if (table === this.flows) return 0;
    this.flows = table;
    const t = table.table;
    let ended = 0;
    for (let s = 0; s < this.next; s++) {
      if (this.expires[s] === 0) continue;
      const inHash = this.writeInKey(s);
      if (!t.insert(inHash, ((FLOW_SNAT_IN << 24) | s) >>> 0, NO_EXPIRY)) {
        this.dropSlot(s);
        ended++;
        continue;
      }
      if (!t.insert(this.writeOutKey(s), ((FLOW_SNAT_OUT << 24) | s) >>> 0, NO_EXPIRY)) {
        this.writeInKey(s);
        t.remove(inHash);
        this.dropSlot(s);
        ended++;
      }
    }
    return ended;
  }

  /** Bytes held by the slot arrays (the flow table's two entries a flow come on top). */
  get bytes(): number {
    return this.cap * (1 + 1 + 1 + 1 + 2 + 4 + 16 + 16 + 16 + 4 + 2 + 4 + 4 + 4 + 1);
  }

  private grow(cap: number): void {
    const g8 = (a: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> => copy(new Uint8Array(cap), a);
    this.fam = g8(this.fam);
    this.proto = g8(this.proto);
    this.state = g8(this.state);
    this.fins = g8(this.fins);
    this.nicOf = copy(new Uint16Array(cap), this.nicOf);
    this.vni = copy(new Uint32Array(cap), this.vni);
    this.dip = copy(new Uint32Array(cap * 4), this.dip);
    this.remote = copy(new Uint32Array(cap * 4), this.remote);
    this.fip = copy(new Uint32Array(cap * 4), this.fip);
    this.ports = copy(new Uint32Array(cap), this.ports);
    this.fport = copy(new Uint16Array(cap), this.fport);
    this.expires = copy(new Uint32Array(cap), this.expires);
    this.nxtOut = copy(new Uint32Array(cap), this.nxtOut);
    this.nxtIn = copy(new Uint32Array(cap), this.nxtIn);
    this.seqOk = g8(this.seqOk);
    this.cap = cap;
  }

  /** Sets (or with null removes) a nic's policy. Its live flows stay until they end. */
  setNic(nic: number, policy: SnatNicPolicy | null): void {
    if (policy === null) {
      this.nics.delete(nic);
      return;
    }
    const count = (rs: readonly SnatPortRange[]): number => rs.reduce((n, r) => n + r.last - r.first + 1, 0);
    const old = this.nics.get(nic);
    this.nics.set(nic, {
      policy,
      cursor4: old?.cursor4 ?? 0,
      cursor6: old?.cursor6 ?? 0,
      ports4: count(policy.ranges4),
      ports6: count(policy.ranges6),
      inUse4: old?.inUse4 ?? 0,
      inUse6: old?.inUse6 ?? 0,
      exhausted: old?.exhausted ?? 0,
      exhausted4: old?.exhausted4 ?? 0,
      exhausted6: old?.exhausted6 ?? 0,
    });
  }

  status(): SnatNicStatus[] {
    return [...this.nics].map(([nic, s]) => ({
      nic,
      ports4: s.ports4,
      ports6: s.ports6,
      inUse4: s.inUse4,
      inUse6: s.inUse6,
      exhausted: s.exhausted,
      exhausted4: s.exhausted4,
      exhausted6: s.exhausted6,
    }));
  }

  /** Calls `f` for every live flow (TIME-WAIT included): its nic, family, frontend IP (4 words) and port. Not per packet. */
  forEachFlow(f: (nic: number, family: number, fip: Uint32Array, fport: number) => void): void {
    for (let s = 0; s < this.next; s++) {
      if (this.expires[s] === 0) continue;
      f(this.nicOf[s]!, this.fam[s]!, this.fip.subarray(s * 4, s * 4 + 4), this.fport[s]!);
    }
  }

  /** Whether outbound NAT serves the nic (an outbound rule's nic, with or without ranges yet). */
  serves(nic: number): boolean {
    return this.nics.has(nic);
  }

  /**
   * Installs one policy generation: `policies` by the new nic indexes, `renumber` old index -> new index
   * (a nic kept under another index). A live flow stays while its nic stays, with the same VNI, and its
   * frontend port is still inside one of the nic's ranges; any other flow ends (both entries freed).
   * Returns how many flows ended. Cursors and exhaustion counts carry over by nic.
   */
  applyPolicies(policies: ReadonlyMap<number, SnatNicPolicy>, renumber: ReadonlyMap<number, number>): number {
    let ended = 0;
    const n = this.next;
    for (let s = 0; s < n; s++) {
      if (this.expires[s] === 0) continue;
      const to = renumber.get(this.nicOf[s]!);
      const p = to === undefined ? undefined : policies.get(to);
      if (p === undefined || p.vni !== this.vni[s] || !this.inRanges(s, p)) {
        this.release(s);
        ended++;
      }
    }
    const old = this.nics;
    const byNew = new Map<number, NicState>();
    for (const [from, to] of renumber) {
      const st = old.get(from);
      if (st !== undefined) byNew.set(to, st);
    }
    for (let s = 0; s < n; s++) if (this.expires[s] !== 0) this.nicOf[s] = renumber.get(this.nicOf[s]!)!;
    this.nics.clear();
    for (const [nic, p] of policies) {
      const st = byNew.get(nic);
      this.setNic(nic, p);
      const now = this.nics.get(nic)!;
      now.cursor4 = st?.cursor4 ?? 0;
      now.cursor6 = st?.cursor6 ?? 0;
      now.exhausted = st?.exhausted ?? 0;
      now.exhausted4 = st?.exhausted4 ?? 0;
      now.exhausted6 = st?.exhausted6 ?? 0;
      now.inUse4 = 0;
      now.inUse6 = 0;
    }
    for (let s = 0; s < n; s++) {
      if (this.expires[s] === 0) continue;
      const st = this.nics.get(this.nicOf[s]!);
      if (st === undefined) continue;
      if (this.fam[s] === 4) st.inUse4++;
      else st.inUse6++;
    }
    return ended;
  }

  private inRanges(s: number, p: SnatNicPolicy): boolean {
    const fam = this.fam[s]!;
    const port = this.fport[s]!;
    for (const r of fam === 4 ? p.ranges4 : p.ranges6) {
      if (port < r.first || port > r.last) continue;
      let same = true;
      for (let i = 0; i < r.ip.length; i++) if (r.ip[i] !== this.fip[s * 4 + i]) same = false;
      if (same) return true;
    }
    return false;
  }

  /** The nic (its index) and VNI a slot delivers to. */
  slotNic(slot: number): number {
    return this.nicOf[slot]!;
  }

  slotVni(slot: number): number {
    return this.vni[slot]!;
  }

  slotState(slot: number): number {
    return this.state[slot]!;
  }

  /** A slot's frontend IP (4 words; IPv4: the first), port and expiry (0: free), for listings. */
  slotFrontend(slot: number): { family: number; fip: Uint32Array; fport: number; expiresAt: number } {
    return {
      family: this.fam[slot]!,
      fip: this.fip.subarray(slot * 4, slot * 4 + 4),
      fport: this.fport[slot]!,
      expiresAt: this.expires[slot]!,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Out: a backend's packet at l3 (IPv4 or IPv6 header) on `nic`, rewritten in place to leave from frontend:port.

  out4(frame: Uint8Array, l3: number, len: number, nic: number, now: number): number {
    if (l3 + 20 > len) return SNAT_ERR_TRUNCATED;
    const ihl = (frame[l3]! & 0x0f) * 4;
    if (ihl < 20 || l3 + ihl + 8 > len) return SNAT_ERR_TRUNCATED;
    if ((((frame[l3 + 6]! << 8) | frame[l3 + 7]!) & 0x3fff) !== 0) return SNAT_ERR_FRAGMENT;
    const src = rd32(frame, l3 + IPV4_OFF_SRC);
    const dst = rd32(frame, l3 + IPV4_OFF_DST);
    return this.out(frame, l3, l3 + ihl, len, 4, frame[l3 + 9]!, src, dst, nic, now);
  }

  out6(frame: Uint8Array, l3: number, len: number, nic: number, now: number): number {
    if (l3 + IPV6_HEADER_LEN + 8 > len) return SNAT_ERR_TRUNCATED;
    const proto = frame[l3 + 6]!; // no extension headers: a backend's TCP or UDP follows the fixed header
    return this.out(frame, l3, l3 + IPV6_HEADER_LEN, len, 6, proto, 0, 0, nic, now);
  }

  private out(
    frame: Uint8Array,
    l3: number,
    l4: number,
    len: number,
    family: 4 | 6,
    proto: number,
    src4: number,
    dst4: number,
    nic: number,
    now: number,
  ): number {
    const ns = this.nics.get(nic);
    if (ns === undefined) return SNAT_ERR_NO_RANGE;
    if (!((proto === IPPROTO_TCP && ns.policy.tcp) || (proto === IPPROTO_UDP && ns.policy.udp))) return SNAT_ERR_PROTOCOL;
    if (proto === IPPROTO_TCP && l4 + 20 > len) return SNAT_ERR_TRUNCATED;
    const sport = (frame[l4]! << 8) | frame[l4 + 1]!;
    const dport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
    const flags = proto === IPPROTO_TCP ? frame[l4 + 13]! : 0;
    const vni = ns.policy.vni;
    this.keyOut(family, vni, frame, l3, src4, dst4, proto, sport, dport);
    let slot = this.flowsSlot(now);
    if (slot >= 0 && this.state[slot] === SNAT_TIME_WAIT && (flags & (TCP_SYN | TCP_ACK)) === TCP_SYN) {
      // a new connection on the same 5-tuple inside the guard: it takes the same port again
      this.state[slot] = SNAT_SYN_SENT;
      this.fins[slot] = 0;
      this.seqOk[slot] = 0;
    }
    if (slot < 0) {
      // only a SYN opens a TCP flow: no state for a mid-stream segment, nor a SYN-ACK or RST of no flow
      if (proto === IPPROTO_TCP && (flags & (TCP_SYN | TCP_ACK | TCP_RST)) !== TCP_SYN) return SNAT_ERR_NO_FLOW_OUT;
      this.keyOut(family, vni, frame, l3, src4, dst4, proto, sport, dport); // flowsSlot may have freed an expired flow
      slot = this.open(ns, family, vni, proto, frame, l3, src4, dst4, sport, dport, nic, now);
      if (slot < 0) return slot;
    }
    // advance the state and the clock
    if (proto === IPPROTO_TCP) {
      this.trackSeq(this.nxtOut, SEQ_OUT, slot, frame, l3, l4, family, flags);
      this.tcpEvent(slot, flags, FIN_OUT, ns.policy.idleS, now);
    } else this.expires[slot] = now + ns.policy.idleS;
    // rewrite the source: address (IPv4 header checksum too) and port, RFC 1624
    const csumOff = l4 + (proto === IPPROTO_TCP ? TCP_OFF_CHECKSUM : UDP_OFF_CHECKSUM);
    let l4sum = (frame[csumOff]! << 8) | frame[csumOff + 1]!;
    const udpNone = proto === IPPROTO_UDP && l4sum === 0 && family === 4;
    const fport = this.fport[slot]!;
    if (family === 4) {
      const fip = this.fip[slot * 4]!;
      const ipsum = (frame[l3 + IPV4_OFF_CHECKSUM]! << 8) | frame[l3 + IPV4_OFF_CHECKSUM + 1]!;
      wr16(frame, l3 + IPV4_OFF_CHECKSUM, updateChecksum32(ipsum, src4, fip));
      if (!udpNone) l4sum = updateChecksum32(l4sum, src4, fip);
      wr32(frame, l3 + IPV4_OFF_SRC, fip);
    } else {
      const b = this.scratch;
      for (let i = 0; i < 4; i++) wr32(b, i * 4, this.fip[slot * 4 + i]!);
      l4sum = updateChecksumBytes(l4sum, frame, l3 + IPV6_OFF_SRC, b, 0, 16);
      frame.set(b, l3 + IPV6_OFF_SRC);
    }
    if (!udpNone) {
      l4sum = updateChecksum16(l4sum, sport, fport);
      wr16(frame, csumOff, proto === IPPROTO_UDP ? udpChecksumOnWire(l4sum) : l4sum);
    }
    wr16(frame, l4, fport);
    return slot;
  }

  // ---------------------------------------------------------------------------------------------
  // In: a reply (decapsulated) to frontend:port, rewritten in place to DIP:port; the slot says the nic.

  // `vni`: the VXLAN header's VNI the reply came with (the flow's nic's, or SNAT_ERR_WRONG_VNI), or -1: not checked.

  in4(frame: Uint8Array, l3: number, len: number, now: number, vni = -1): number {
    if (l3 + 20 > len) return SNAT_ERR_TRUNCATED;
    const ihl = (frame[l3]! & 0x0f) * 4;
    if (ihl < 20 || l3 + ihl + 8 > len) return SNAT_ERR_TRUNCATED;
    if ((((frame[l3 + 6]! << 8) | frame[l3 + 7]!) & 0x3fff) !== 0) return SNAT_ERR_FRAGMENT;
    return this.in(frame, l3, l3 + ihl, len, 4, frame[l3 + 9]!, now, vni);
  }

  in6(frame: Uint8Array, l3: number, len: number, now: number, vni = -1): number {
    if (l3 + IPV6_HEADER_LEN + 8 > len) return SNAT_ERR_TRUNCATED;
    return this.in(frame, l3, l3 + IPV6_HEADER_LEN, len, 6, frame[l3 + 6]!, now, vni);
  }

  private in(frame: Uint8Array, l3: number, l4: number, len: number, family: 4 | 6, proto: number, now: number, vni: number): number {
    if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return SNAT_ERR_PROTOCOL;
    if (proto === IPPROTO_TCP && l4 + 20 > len) return SNAT_ERR_TRUNCATED;
    const rport = (frame[l4]! << 8) | frame[l4 + 1]!;
    const fport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
    const k = this.flows.table.key;
    k[0] = family;
    if (family === 4) {
      k[1] = rd32(frame, l3 + IPV4_OFF_SRC);
      k[2] = k[3] = k[4] = 0;
      k[5] = rd32(frame, l3 + IPV4_OFF_DST);
      k[6] = k[7] = k[8] = 0;
    } else {
      for (let i = 0; i < 4; i++) {
        k[1 + i] = rd32(frame, l3 + IPV6_OFF_SRC + i * 4);
        k[5 + i] = rd32(frame, l3 + IPV6_OFF_DST + i * 4);
      }
    }
    k[9] = proto | (KEY_SPACE_SNAT_IN << 8);
    k[10] = ((rport << 16) | fport) >>> 0;
    const slot = this.flowsSlot(now);
    if (slot < 0) return SNAT_ERR_NOT_OURS;
    if (vni >= 0 && this.vni[slot] !== vni) return SNAT_ERR_WRONG_VNI;
    const ns = this.nics.get(this.nicOf[slot]!);
    const idleS = ns?.policy.idleS ?? SNAT_SYN_TIMEOUT_S;
    if (proto === IPPROTO_TCP) {
      this.trackSeq(this.nxtIn, SEQ_IN, slot, frame, l3, l4, family, frame[l4 + 13]!);
      const was = this.state[slot];
      this.tcpEvent(slot, frame[l4 + 13]!, FIN_IN, idleS, now);
      // ESTABLISHED: the journal hears of it (its idle timeout from now on, no longer the SYN timeout)
      if (was === SNAT_SYN_SENT && this.state[slot] === SNAT_ESTABLISHED && this.journal !== null)
        this.journalSlot(SNAT_RECORD_OPEN, slot, now);
    } else this.expires[slot] = now + idleS;
    // rewrite the destination to DIP:port
    const dport = this.ports[slot]! >>> 16;
    const csumOff = l4 + (proto === IPPROTO_TCP ? TCP_OFF_CHECKSUM : UDP_OFF_CHECKSUM);
    let l4sum = (frame[csumOff]! << 8) | frame[csumOff + 1]!;
    const udpNone = proto === IPPROTO_UDP && l4sum === 0 && family === 4;
    if (family === 4) {
      const old = rd32(frame, l3 + IPV4_OFF_DST);
      const dip = this.dip[slot * 4]!;
      const ipsum = (frame[l3 + IPV4_OFF_CHECKSUM]! << 8) | frame[l3 + IPV4_OFF_CHECKSUM + 1]!;
      wr16(frame, l3 + IPV4_OFF_CHECKSUM, updateChecksum32(ipsum, old, dip));
      if (!udpNone) l4sum = updateChecksum32(l4sum, old, dip);
      wr32(frame, l3 + IPV4_OFF_DST, dip);
    } else {
      const b = this.scratch;
      for (let i = 0; i < 4; i++) wr32(b, i * 4, this.dip[slot * 4 + i]!);
      l4sum = updateChecksumBytes(l4sum, frame, l3 + IPV6_OFF_DST, b, 0, 16);
      frame.set(b, l3 + IPV6_OFF_DST);
    }
    if (!udpNone) {
      l4sum = updateChecksum16(l4sum, fport, dport);
      wr16(frame, csumOff, proto === IPPROTO_UDP ? udpChecksumOnWire(l4sum) : l4sum);
    }
    wr16(frame, l4 + 2, dport);
    return slot;
  }

  // ---------------------------------------------------------------------------------------------

  private tcpEvent(slot: number, flags: number, finBit: number, idleS: number, now: number): void {
    const st = this.state[slot]!;
    if (st === SNAT_TIME_WAIT) return; // the guard runs from the close, not from the last segment
    if ((flags & TCP_RST) !== 0) {
      this.state[slot] = SNAT_TIME_WAIT;
      this.expires[slot] = now + SNAT_TIME_WAIT_S;
      return;
    }
    if ((flags & TCP_FIN) !== 0) this.fins[slot] = this.fins[slot]! | finBit;
    if (this.fins[slot] === (FIN_OUT | FIN_IN)) {
      this.state[slot] = SNAT_TIME_WAIT;
      this.expires[slot] = now + SNAT_TIME_WAIT_S;
      return;
    }
    if (st === SNAT_SYN_SENT && finBit === FIN_IN) this.state[slot] = SNAT_ESTABLISHED;
    this.expires[slot] = now + (this.state[slot] === SNAT_SYN_SENT ? SNAT_SYN_TIMEOUT_S : idleS);
  }

  /** Hands slot s's record (as exportFlows writes it) to the journal. */
  private journalSlot(type: number, s: number, now: number): void {
    this.writeRecord(this.rec, 0, s, now);
    this.journal!.addSnat(type, this.rec);
  }

  /** Slot s as SNAT_FLOW_RECORD_WORDS words at out[o] (exportFlows' layout); seconds left from `now` (0 if none). */
  private writeRecord(out: Uint32Array, o: number, s: number, now: number): void {
    const e = this.expires[s]!;
    out[o] = this.fam[s]!;
    out[o + 1] = this.proto[s]!;
    out[o + 2] = this.state[s]!;
    out[o + 3] = this.fins[s]!;
    out[o + 4] = this.nicOf[s]!;
    out[o + 5] = this.vni[s]!;
    for (let i = 0; i < 4; i++) {
      out[o + 6 + i] = this.dip[s * 4 + i]!;
      out[o + 10 + i] = this.remote[s * 4 + i]!;
      out[o + 14 + i] = this.fip[s * 4 + i]!;
    }
    out[o + 18] = this.ports[s]!;
    out[o + 19] = this.fport[s]!;
    out[o + 20] = e > now ? e - now : 0;
  }

  /**
   * The end of this segment in sequence space (seq + payload, +1 for SYN and for FIN) is the next number
   * its sender sends: kept when it is past the one known (a retransmission does not move it back).
   */
  private trackSeq(
    nxt: Uint32Array,
    bit: number,
    slot: number,
    frame: Uint8Array,
    l3: number,
    l4: number,
    family: 4 | 6,
    flags: number,
  ): void {
    const l3Len = family === 4 ? (frame[l3 + 2]! << 8) | frame[l3 + 3]! : IPV6_HEADER_LEN + ((frame[l3 + 4]! << 8) | frame[l3 + 5]!);
    const payload = l3Len - (l4 - l3) - (frame[l4 + 12]! >>> 4) * 4;
    if (payload < 0) return;
    const end = (rd32(frame, l4 + 4) + payload + (flags & TCP_SYN ? 1 : 0) + (flags & TCP_FIN ? 1 : 0)) >>> 0;
    if ((this.seqOk[slot]! & bit) === 0 || ((end - nxt[slot]!) | 0) > 0) nxt[slot] = end;
    this.seqOk[slot] = this.seqOk[slot]! | bit;
  }

  /** An expired flow ends: an ESTABLISHED TCP flow of a rule with tcpResetOnIdle is queued for its two RSTs first. */
  private expire(s: number): void {
    if (this.proto[s] === IPPROTO_TCP && this.state[s] === SNAT_ESTABLISHED && this.seqOk[s] === (SEQ_OUT | SEQ_IN)) {
      const ns = this.nics.get(this.nicOf[s]!);
      if (ns !== undefined && ns.policy.tcpResetOnIdle) {
        if (this.resets.length >= SNAT_RESET_QUEUE_MAX) this.resetsLost++;
        else
          this.resets.push({
            family: this.fam[s] === 6 ? 6 : 4,
            nic: this.nicOf[s]!,
            vni: this.vni[s]!,
            dip: this.dip.slice(s * 4, s * 4 + 4),
            remote: this.remote.slice(s * 4, s * 4 + 4),
            fip: this.fip.slice(s * 4, s * 4 + 4),
            dipPort: this.ports[s]! >>> 16,
            remotePort: this.ports[s]! & 0xffff,
            fport: this.fport[s]!,
            seqOut: this.nxtOut[s]!,
            seqIn: this.nxtIn[s]!,
          });
      }
    }
    this.release(s);
  }

  /** Idle resets queued since the last call (by the sweep, or by a packet that found its flow expired). */
  takeIdleResets(): SnatIdleReset[] {
    if (this.resets.length === 0) return NO_RESETS;
    const r = this.resets;
    this.resets = [];
    return r;
  }

  /** The slot the table holds for the key set last (a live one), or -1. */
  private flowsSlot(now: number): number {
    const t = this.flows.table;
    const v = t.peek(hostKeyHashWords(t.key), now);
    if (v < 0) return -1;
    const slot = v & 0xffffff;
    if (this.expires[slot]! > now) return slot;
    this.expire(slot); // expired, not swept yet: freed now, so that its entries never name a reused slot
    return -1;
  }

  private keyOut(
    family: 4 | 6,
    vni: number,
    frame: Uint8Array,
    l3: number,
    src4: number,
    dst4: number,
    proto: number,
    sport: number,
    dport: number,
  ): void {
    const k = this.flows.table.key;
    k[0] = ((vni << 8) | family) >>> 0;
    if (family === 4) {
      k[1] = src4;
      k[2] = k[3] = k[4] = 0;
      k[5] = dst4;
      k[6] = k[7] = k[8] = 0;
    } else {
      for (let i = 0; i < 4; i++) {
        k[1 + i] = rd32(frame, l3 + IPV6_OFF_SRC + i * 4);
        k[5 + i] = rd32(frame, l3 + IPV6_OFF_DST + i * 4);
      }
    }
    k[9] = proto | (KEY_SPACE_SNAT_OUT << 8);
    k[10] = ((sport << 16) | dport) >>> 0;
  }

  /** A new flow: a port free toward this remote endpoint from the nic's ranges, a slot, both entries. */
  private open(
    ns: NicState,
    family: 4 | 6,
    vni: number,
    proto: number,
    frame: Uint8Array,
    l3: number,
    src4: number,
    dst4: number,
    sport: number,
    dport: number,
    nic: number,
    now: number,
  ): number {
    const ranges = family === 4 ? ns.policy.ranges4 : ns.policy.ranges6;
    const total = family === 4 ? ns.ports4 : ns.ports6;
    if (total === 0) return SNAT_ERR_NO_RANGE;
    if (this.live >= this.maxFlows) return SNAT_ERR_TABLE_FULL;
    // the out key is in table.key now: keep it, and try ports with the in key
    const t = this.flows.table;
    const outKey = Uint32Array.from(t.key); // one small copy per new flow (not per packet)
    const outHash = hostKeyHashWords(outKey);
    const k = t.key;
    const remote = this.w;
    if (family === 4) {
      remote[0] = dst4;
      remote[1] = remote[2] = remote[3] = 0;
    } else for (let i = 0; i < 4; i++) remote[i] = rd32(frame, l3 + IPV6_OFF_DST + i * 4);
    if (this.opensTo !== null && !this.opensTo(family, remote, dport)) return SNAT_ERR_OTHER_WORKER;
    let cursor = family === 4 ? ns.cursor4 : ns.cursor6;
    for (let tries = 0; tries < total; tries++, cursor++) {
      // the cursor-th port of the nic's ranges
      let idx = cursor % total;
      let r = ranges[0]!;
      for (const x of ranges) {
        const n = x.last - x.first + 1;
        if (idx < n) {
          r = x;
          break;
        }
        idx -= n;
      }
      const fport = r.first + idx;
      k[0] = family;
      for (let i = 0; i < 4; i++) {
        k[1 + i] = remote[i]!;
        k[5 + i] = i < r.ip.length ? r.ip[i]! : 0;
      }
      k[9] = proto | (KEY_SPACE_SNAT_IN << 8);
      k[10] = ((dport << 16) | fport) >>> 0;
      const inHash = hostKeyHashWords(k);
      if (t.peek(inHash, now) >= 0) continue; // taken toward this remote endpoint (live or in its TIME-WAIT guard)
      const slot = this.allocSlot();
      if (slot < 0) return SNAT_ERR_TABLE_FULL;
      if (!t.insert(inHash, ((FLOW_SNAT_IN << 24) | slot) >>> 0, NO_EXPIRY)) {
        this.free.push(slot);
        return SNAT_ERR_TABLE_FULL;
      }
      t.key.set(outKey);
      if (!t.insert(outHash, ((FLOW_SNAT_OUT << 24) | slot) >>> 0, NO_EXPIRY)) {
        this.removeIn(family, remote, r.ip, proto, dport, fport);
        this.free.push(slot);
        return SNAT_ERR_TABLE_FULL;
      }
      this.fam[slot] = family;
      this.proto[slot] = proto;
      this.state[slot] = proto === IPPROTO_TCP ? SNAT_SYN_SENT : SNAT_OPEN;
      this.fins[slot] = 0;
      this.seqOk[slot] = 0;
      this.nicOf[slot] = nic;
      this.vni[slot] = vni;
      for (let i = 0; i < 4; i++) {
        this.dip[slot * 4 + i] = family === 4 ? (i === 0 ? src4 : 0) : rd32(frame, l3 + IPV6_OFF_SRC + i * 4);
        this.remote[slot * 4 + i] = remote[i]!;
        this.fip[slot * 4 + i] = i < r.ip.length ? r.ip[i]! : 0;
      }
      this.ports[slot] = ((sport << 16) | dport) >>> 0;
      this.fport[slot] = fport;
      // the time a SYN or a datagram gives it (out() sets the same right after): the journal's record has it
      this.expires[slot] = now + (proto === IPPROTO_TCP ? SNAT_SYN_TIMEOUT_S : ns.policy.idleS);
      if (family === 4) {
        ns.cursor4 = cursor + 1;
        ns.inUse4++;
      } else {
        ns.cursor6 = cursor + 1;
        ns.inUse6++;
      }
      this.live++;
      if (this.journal !== null) this.journalSlot(SNAT_RECORD_OPEN, slot, now);
      return slot;
    }
    ns.exhausted++;
    if (family === 4) ns.exhausted4++;
    else ns.exhausted6++;
    return SNAT_ERR_EXHAUSTED;
  }

  private allocSlot(): number {
    const f = this.free.pop();
    if (f !== undefined) return f;
    if (this.next >= this.cap) {
      if (this.cap >= this.maxFlows) return -1;
      this.grow(Math.min(this.cap * 2, this.maxFlows));
    }
    return this.next++;
  }

  private removeIn(family: number, remote: ArrayLike<number>, fip: ArrayLike<number>, proto: number, rport: number, fport: number): void {
    const k = this.flows.table.key;
    k[0] = family;
    for (let i = 0; i < 4; i++) {
      k[1 + i] = remote[i] ?? 0;
      k[5 + i] = fip[i] ?? 0;
    }
    k[9] = proto | (KEY_SPACE_SNAT_IN << 8);
    k[10] = ((rport << 16) | fport) >>> 0;
    this.flows.table.remove(hostKeyHashWords(k));
  }

  /** Frees up to `budget` slots' worth of expired flows (both entries); returns how many were freed. */
  sweep(now: number, budget: number): number {
    let freed = 0;
    const n = this.next;
    if (n === 0) return 0;
    for (let i = 0; i < budget && i < n; i++) {
      const s = this.sweepCursor;
      this.sweepCursor = (s + 1) % n;
      const e = this.expires[s]!;
      if (e === 0 || e > now) continue;
      this.expire(s);
      freed++;
    }
    return freed;
  }

  /**
   * The live flows (expiry after `now`) as SNAT_FLOW_RECORD_WORDS words each, for a snapshot that
   * survives a host agent restart (host-agent/flow-snapshot.ts). The last word of a record is the
   * seconds it has left; importFlows gives them back to a fresh engine.
   */
  exportFlows(now: number): Uint32Array {
    const R = SNAT_FLOW_RECORD_WORDS;
    let n = 0;
    for (let s = 0; s < this.next; s++) if (this.expires[s]! > now) n++;
    const out = new Uint32Array(n * R);
    let o = 0;
    for (let s = 0; s < this.next; s++) {
      if (this.expires[s]! <= now) continue;
      this.writeRecord(out, o, s, now);
      o += R;
    }
    return out;
  }

  /**
   * Puts exported flows (exportFlows' records) back: each with its slot and both entries, its seconds
   * left less `elapsedS` (the time between the export and now; none left: not restored). A record that
   * does not parse, or whose port toward its remote endpoint or whose DIP:port is already taken here, is
   * skipped; so are records beyond maxFlows or a full table. Call it after setNic (the per-nic counts of
   * ports in use count the flows of nics known then).
   */
  importFlows(words: Uint32Array, now: number, elapsedS: number): SnatImportResult {
    const R = SNAT_FLOW_RECORD_WORDS;
    const r = { restored: 0, expired: 0, skipped: 0 };
    const t = this.flows.table;
    const k = t.key;
    for (let o = 0; o + R <= words.length; o += R) {
      const family = words[o]!;
      const proto = words[o + 1]!;
      const state = words[o + 2]!;
      const left = words[o + 20]!;
      const ports = words[o + 18]!;
      const fport = words[o + 19]!;
      if (
        (family !== 4 && family !== 6) ||
        (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) ||
        state < SNAT_OPEN ||
        state > SNAT_TIME_WAIT ||
        words[o + 3]! > (FIN_OUT | FIN_IN) ||
        words[o + 4]! > 0xffff ||
        words[o + 5]! > 0xffffff ||
        fport > 0xffff
      ) {
        r.skipped++;
        continue;
      }
      if (left <= elapsedS) {
        r.expired++;
        continue;
      }
      if (this.live >= this.maxFlows) {
        r.skipped++;
        continue;
      }
      // in: (family, remote, frontend IP, proto, remote port, frontend port)
      k[0] = family;
      for (let i = 0; i < 4; i++) {
        k[1 + i] = words[o + 10 + i]!;
        k[5 + i] = words[o + 14 + i]!;
      }
      k[9] = proto | (KEY_SPACE_SNAT_IN << 8);
      k[10] = (((ports & 0xffff) << 16) | fport) >>> 0;
      const inKey = Uint32Array.from(k);
      const inHash = hostKeyHashWords(k);
      // out: (VNI << 8 | family, DIP, remote, proto, DIP port, remote port)
      k[0] = ((words[o + 5]! << 8) | family) >>> 0;
      for (let i = 0; i < 4; i++) {
        k[1 + i] = words[o + 6 + i]!;
        k[5 + i] = words[o + 10 + i]!;
      }
      k[9] = proto | (KEY_SPACE_SNAT_OUT << 8);
      k[10] = ports;
      const outHash = hostKeyHashWords(k);
      if (t.peek(outHash, now) >= 0) {
        r.skipped++;
        continue;
      }
      const outKey = Uint32Array.from(k);
      k.set(inKey);
      if (t.peek(inHash, now) >= 0) {
        r.skipped++;
        continue;
      }
      const slot = this.allocSlot();
      if (slot < 0 || !t.insert(inHash, ((FLOW_SNAT_IN << 24) | slot) >>> 0, NO_EXPIRY)) {
        if (slot >= 0) this.free.push(slot);
        r.skipped++;
        continue;
      }
      k.set(outKey);
      if (!t.insert(outHash, ((FLOW_SNAT_OUT << 24) | slot) >>> 0, NO_EXPIRY)) {
        k.set(inKey);
        t.remove(inHash);
        this.free.push(slot);
        r.skipped++;
        continue;
      }
      this.fam[slot] = family;
      this.proto[slot] = proto;
      this.state[slot] = state;
      this.fins[slot] = words[o + 3]!;
      this.seqOk[slot] = 0; // records carry no sequence numbers: an imported flow ends without RSTs
      this.nicOf[slot] = words[o + 4]!;
      this.vni[slot] = words[o + 5]!;
      for (let i = 0; i < 4; i++) {
        this.dip[slot * 4 + i] = words[o + 6 + i]!;
        this.remote[slot * 4 + i] = words[o + 10 + i]!;
        this.fip[slot * 4 + i] = words[o + 14 + i]!;
      }
      this.ports[slot] = ports;
      this.fport[slot] = fport;
      this.expires[slot] = now + left - elapsedS;
      this.live++;
      const ns = this.nics.get(words[o + 4]!);
      if (ns !== undefined) {
        if (family === 4) ns.inUse4++;
        else ns.inUse6++;
      }
      r.restored++;
    }
    return r;
  }

  /** Writes slot s's in key (remote, frontend IP, protocol, remote port, frontend port) into the table's key; returns its hash. */
  private writeInKey(s: number): number {
    const k = this.flows.table.key;
    k[0] = this.fam[s]!;
    for (let i = 0; i < 4; i++) {
      k[1 + i] = this.remote[s * 4 + i]!;
      k[5 + i] = this.fip[s * 4 + i]!;
    }
    k[9] = this.proto[s]! | (KEY_SPACE_SNAT_IN << 8);
    k[10] = (((this.ports[s]! & 0xffff) << 16) | this.fport[s]!) >>> 0;
    return hostKeyHashWords(k);
  }

  /** Writes slot s's out key (VNI, DIP, remote, protocol, DIP port, remote port) into the table's key; returns its hash. */
  private writeOutKey(s: number): number {
    const k = this.flows.table.key;
    k[0] = ((this.vni[s]! << 8) | this.fam[s]!) >>> 0;
    for (let i = 0; i < 4; i++) {
      k[1 + i] = this.dip[s * 4 + i]!;
      k[5 + i] = this.remote[s * 4 + i]!;
    }
    k[9] = this.proto[s]! | (KEY_SPACE_SNAT_OUT << 8);
    k[10] = this.ports[s]!;
    return hostKeyHashWords(k);
  }

  private release(s: number): void {
    this.flows.table.remove(this.writeInKey(s));
    this.flows.table.remove(this.writeOutKey(s));
    this.dropSlot(s);
  }

  /** Frees slot s (its entries already gone or never in this table); the journal hears of its end. */
  private dropSlot(s: number): void {
    const family = this.fam[s]!;
    if (this.journal !== null) this.journalSlot(SNAT_RECORD_END, s, this.expires[s]!); // identity only: no time left
    this.expires[s] = 0;
    this.free.push(s);
    this.live--;
    const ns = this.nics.get(this.nicOf[s]!);
    if (ns !== undefined) {
      if (family === 4) ns.inUse4--;
      else ns.inUse6--;
    }
  }
}

const NO_RESETS: SnatIdleReset[] = [];

/**
 * The RST toward the remote end of an idle-reset flow: an IP packet from frontend IP:port to
 * remote:port, seq = the backend side's next sequence number (RFC 5961 3.2: an RST whose sequence number
 * is exactly the next expected is accepted), sent like a DSR reply (toward the router).
 */
export function snatResetToRemote(r: SnatIdleReset): Uint8Array {
  return resetPacket(r.family, r.fip, r.fport, r.remote, r.remotePort, r.seqOut, null, null, -1);
}

/**
 * The RST toward the DIP: an Ethernet frame (to the nic's MAC from its port's MAC, 802.1Q-tagged with
 * `vlanId` unless VLAN_NONE) carrying remote:port -> DIP:port, seq = the remote side's next sequence
 * number, delivered on the nic's port as an inbound SNAT reply is.
 */
export function snatResetToDip(r: SnatIdleReset, nicMac: Uint8Array, portMac: Uint8Array, vlanId: number): Uint8Array {
  return resetPacket(r.family, r.remote, r.remotePort, r.dip, r.dipPort, r.seqIn, nicMac, portMac, vlanId);
}

function resetPacket(
  family: 4 | 6,
  src: Uint32Array,
  sport: number,
  dst: Uint32Array,
  dport: number,
  seq: number,
  dstMac: Uint8Array | null,
  srcMac: Uint8Array | null,
  vlanId: number,
): Uint8Array {
  let eth = 0;
  const e = newEthernetHeader();
  if (dstMac !== null && srcMac !== null) {
    e.dst.set(dstMac);
    e.src.set(srcMac);
    e.etherType = family === 4 ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6;
    e.vlanId = vlanId;
    eth = vlanId >= 0 ? 18 : 14;
  }
  const ipLen = family === 4 ? 20 : IPV6_HEADER_LEN;
  const out = new Uint8Array(eth + ipLen + TCP_HEADER_LEN);
  if (eth > 0) writeEthernet(e, out, 0);
  const l4 = eth + ipLen;
  const t = newTcpHeader();
  t.srcPort = sport;
  t.dstPort = dport;
  t.seq = seq >>> 0;
  t.flags = TCP_RST;
  writeTcp(t, out, l4);
  let pseudo: number;
  if (family === 4) {
    const h = newIpv4Header();
    h.totalLength = ipLen + TCP_HEADER_LEN;
    h.flags = IPV4_FLAG_DF;
    h.protocol = IPPROTO_TCP;
    h.src = src[0]!;
    h.dst = dst[0]!;
    writeIpv4(h, out, eth);
    pseudo = pseudoSumV4(h.src, h.dst, IPPROTO_TCP, TCP_HEADER_LEN);
  } else {
    const h = newIpv6Header();
    h.payloadLength = TCP_HEADER_LEN;
    h.nextHeader = IPPROTO_TCP;
    h.src.set(src);
    h.dst.set(dst);
    writeIpv6(h, out, eth);
    pseudo = pseudoSumV6Bytes(out, eth + IPV6_OFF_SRC, eth + IPV6_OFF_DST, IPPROTO_TCP, TCP_HEADER_LEN);
  }
  wr16(out, l4 + TCP_OFF_CHECKSUM, l4Checksum(out, l4, TCP_HEADER_LEN, TCP_OFF_CHECKSUM, pseudo));
  return out;
}

function copy<T extends Uint8Array<ArrayBuffer> | Uint16Array<ArrayBuffer> | Uint32Array<ArrayBuffer>>(to: T, from: T): T {
  to.set(from.subarray(0, Math.min(from.length, to.length)));
  return to;
}

function rd32(b: Uint8Array, o: number): number {
  return ((b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!) >>> 0;
}

function wr32(b: Uint8Array, o: number, v: number): void {
  b[o] = v >>> 24;
  b[o + 1] = (v >>> 16) & 0xff;
  b[o + 2] = (v >>> 8) & 0xff;
  b[o + 3] = v & 0xff;
}

function wr16(b: Uint8Array, o: number, v: number): void {
  b[o] = (v >>> 8) & 0xff;
  b[o + 1] = v & 0xff;
}

/** A range as the policy carries it (controller/snat-alloc.ts SnatRange). */
export interface PolicySnatRange {
  readonly ip: string;
  readonly first: number;
  readonly last: number;
  readonly host: string;
  readonly nic: string;
}

/**
 * The engine's per-nic policies of one host, from the config and the policy's ranges: each nic of an
 * outbound rule on `host` gets its rule's settings, its network's VNI and its own ranges by family.
 * Ranges of other hosts, of unknown nics, or with an address that does not parse are left out.
 */
export function snatPoliciesFor(config: SlbxConfig, ranges: readonly PolicySnatRange[], host: string): Map<string, SnatNicPolicy> {
  const out = new Map<string, SnatNicPolicy>();
  const vniOf = new Map(config.networks.map((n) => [n.name, n.vni]));
  for (const rule of config.outbound) {
    for (const name of rule.nics) {
      const nic = config.nics.find((n) => n.name === name);
      if (nic === undefined || nic.host !== host) continue;
      const ranges4: SnatPortRange[] = [];
      const ranges6: SnatPortRange[] = [];
      for (const r of ranges) {
        if (r.nic !== name || r.host !== host) continue;
        const a = parseIpAddr(r.ip);
        if (a === null) continue;
        (a.family === 4 ? ranges4 : ranges6).push({ ip: a.words, first: r.first, last: r.last });
      }
      out.set(name, {
        vni: vniOf.get(nic.network) ?? 0,
        idleS: rule.idleTimeoutMin * 60,
        tcpResetOnIdle: rule.tcpResetOnIdle,
        tcp: rule.protocols.includes(6),
        udp: rule.protocols.includes(17),
        ranges4,
        ranges6,
      });
    }
  }
  return out;
}
