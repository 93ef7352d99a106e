// The host agent's flow table (docs/design.md "One host flow table"): one table per host agent for every
// per-flow feature: east-west, the return path (DSR) and outbound NAT, each bounded by its quota.
// Key: VNI, family, protocol, source and destination address, ports (11 uint32 words, an IPv4 address in
// the first word of its four). Value: kind (high 8 bits) and action (low 24 bits), whose meaning the kind
// gives: for FLOW_TO_MUX the MUX (index into the host tables' MUX list) the flow was sent to, for
// FLOW_FASTPATH the redirect's target (index into the east-west targets). Bounded (inserts beyond the
// limit fail: the caller keeps the stateless path), idle expiry per entry, no allocation per packet.
import { FlowTable, type FlowGroups, type FlowLimit } from '../shared/flow-table.js';

export const HOST_FLOW_KEY_WORDS = 11;
/** Sent toward a MUX (east-west, before a redirect): action = the MUX's index. */
export const FLOW_TO_MUX = 1;
/** Redirected by a MUX: action = the target's index (its nic, host and MAC). */
export const FLOW_FASTPATH = 2;
/**
 * A Fastpath entry after the client's TCP FIN or RST: still the fast path (the last ACKs and any
 * retransmission), but kept only FASTPATH_CLOSING_S after its last packet.
 */
export const FLOW_FASTPATH_CLOSING = 3;
export const FASTPATH_CLOSING_S = 10;
/**
 * A load-balanced (north-south) flow delivered to a local backend (docs/design.md "Return path"): the
 * key is the reply's 5-tuple (DIP:backendPort -> client:port) in the KEY_SPACE_DSR space; action = the
 * frontend port (the VIP is the one rule of nic.outbound for that backend port). Only a backend packet
 * that finds its entry leaves from the VIP by direct server return.
 */
export const FLOW_DSR = 4;
/** A DSR entry after a TCP FIN or RST in either direction: the last segments still go out, kept DSR_CLOSING_S after the last. */
export const FLOW_DSR_CLOSING = 5;
export const DSR_CLOSING_S = FASTPATH_CLOSING_S;
/** Outbound NAT's two entries of a flow (host-agent/snat.ts): action = the engine's slot. */
export const FLOW_SNAT_OUT = 6;
export const FLOW_SNAT_IN = 7;
/** Key spaces (high bits of the protocol word): east-west keys (0) are the client's direction, DSR keys the reply's. */
export const KEY_SPACE_EW = 0;
export const KEY_SPACE_DSR = 1;
export const FLOW_KIND_NAMES: Readonly<Record<number, string>> = {
  [FLOW_TO_MUX]: 'to_mux',
  [FLOW_FASTPATH]: 'fastpath',
  [FLOW_FASTPATH_CLOSING]: 'fastpath_closing',
  [FLOW_DSR]: 'dsr',
  [FLOW_DSR_CLOSING]: 'dsr_closing',
  [FLOW_SNAT_OUT]: 'snat_out',
  [FLOW_SNAT_IN]: 'snat_in',
};
const HASH_SEED = 0x686f7374; // 'host'
const HOST_FLOW_KEY_BYTES = HOST_FLOW_KEY_WORDS * 4;

/**
 * One odd multiplier per key word (well-known odd constants: the golden ratio's, xxHash's, murmur3's, and
 * lowbias32's), no two equal or opposite modulo 2^17 (test/host-flow-table.test.ts): each word's term
 * then moves the sum differently, so that a change in two words cannot cancel out by construction.
 */
export const HOST_HASH_MUL: readonly number[] = [
  0x9e3779b1, 0x85ebca77, 0xc2b2ae3d, 0x27d4eb2f, 0x165667b1, 0xcc9e2d51, 0x1b873593, 0x85ebca6b, 0xc2b2ae35, 0x7feb352d, 0x846ca68b,
];
const MUL = Int32Array.from(HOST_HASH_MUL);
const M0 = 0x9e3779b1;
const M1 = 0x85ebca77;
const M2 = 0xc2b2ae3d;
const M3 = 0x27d4eb2f;
const M4 = 0x165667b1;
const M5 = 0xcc9e2d51;
const M6 = 0x1b873593;
const M7 = 0x85ebca6b;
const M8 = 0xc2b2ae35;
const M9 = 0x7feb352d;
const M10 = 0x846ca68b;

/**
 * murmur3's finalizer (fmix32) after the length, as shared/flow-hash.ts's murmur3Finish, but returning the
 * hash as an int32 (`| 0`, not `>>> 0`): a hash from 2^31 up is no int32, and a function not inlined
 * returns such a value as a heap number, allocated per call (a loop over hostKeyHash6 took 19.6 ns a call
 * with `>>> 0`, 10.4 with `| 0`). The table reads it as unsigned itself (FlowTable: `hash >>> 0`).
 */
function fmix32(h: number): number {
  h ^= HOST_FLOW_KEY_BYTES;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h | 0;
}

/**
 * The host flow table's hash of its 11 key words (docs/performance.md, "The third round"): each word
 * folded (w ^ w >>> 16: its high half reaches the low bits) and multiplied by its own odd constant, the
 * eleven terms summed with the seed, then murmur3's finalizer (fmix32, full avalanche: the table indexes by
 * the low bits). The terms are independent of each other, so the CPU computes them side by side; murmur3's
 * eleven rounds were one chain that the return path's and the inbound path's lookups waited on
 * (micro-pair.js against it: host inbound -11 to -20 %, the DSR replies -8 to -23 %, outbound NAT level).
 * Not the MUX's flow hash: it only has to spread one host's keys (tested against a random function's
 * spread on structured key sets), and nothing outside this process computes it (the snapshot and the
 * journal store keys; entries are hashed again on load). A word changed alone always changes the hash
 * (the fold, an odd multiply and the finalizer are bijections). The reference: every specialised form
 * below must return exactly its value. An int32 (fmix32).
 */
export function hostKeyHashWords(words: ArrayLike<number>, off = 0): number {
  let h = HASH_SEED;
  for (let i = 0; i < HOST_FLOW_KEY_WORDS; i++) {
    const w = words[off + i]! >>> 0;
    h = (h + Math.imul(w ^ (w >>> 16), MUL[i]!)) | 0;
  }
  return fmix32(h);
}

/** hostKeyHashWords of the IPv4 key [w0, src, 0, 0, 0, dst, 0, 0, 0, w9, w10]: a zero word's term is 0. */
export function hostKeyHash4(w0: number, src: number, dst: number, w9: number, w10: number): number {
  const a =
    (((Math.imul(w0 ^ (w0 >>> 16), M0) + Math.imul(src ^ (src >>> 16), M1)) | 0) + ((Math.imul(dst ^ (dst >>> 16), M5) + HASH_SEED) | 0)) |
    0;
  const h = (a + ((Math.imul(w9 ^ (w9 >>> 16), M9) + Math.imul(w10 ^ (w10 >>> 16), M10)) | 0)) | 0;
  return fmix32(h);
}

/** HOST_HASH_MUL's terms of the source (words 1-4) and destination (words 5-8) addresses. */
const MUL_SRC = Int32Array.of(M1, M2, M3, M4);
const MUL_DST = Int32Array.of(M5, M6, M7, M8);

/**
 * hostKeyHashWords of the IPv6 key [w0, src0..3, dst0..3, w9, w10], from the arguments. The addresses'
 * terms in a loop: written out, the function's bytecode (442 bytes) fit V8's inlining limit (460) but not
 * the budget left in its callers (dsrAllowed6, dsrLearn6: 920 bytes in all), and was called.
 */
export function hostKeyHash6(w0: number, src: ArrayLike<number>, dst: ArrayLike<number>, w9: number, w10: number): number {
  let h = (Math.imul(w0 ^ (w0 >>> 16), M0) + Math.imul(w9 ^ (w9 >>> 16), M9) + (Math.imul(w10 ^ (w10 >>> 16), M10) + HASH_SEED)) | 0;
  for (let i = 0; i < 4; i++) {
    const s = src[i]!;
    const d = dst[i]!;
    h = (h + Math.imul(s ^ (s >>> 16), MUL_SRC[i]!) + Math.imul(d ^ (d >>> 16), MUL_DST[i]!)) | 0;
  }
  return fmix32(h);
}

/**
 * hostKeyHash6 in two parts, for a key of which a rule fixes all but the destination and the ports: a DSR
 * key from inboundIpv6 (w0: the VNI, the source: the DIP, w9: the protocol and key space; NatRule.dsrKeyPart).
 * hostKeyPart6 sums the seed and those words' terms once per rule; hostKeyHash6Dst adds the destination's
 * four words and w10 per packet and finishes. The sum is modulo 2^32, so the two equal hostKeyHashWords
 * exactly. Per packet that is five terms, not eleven, and small enough for V8 to inline where
 * hostKeyHash6 was a call (inboundIpv6 has no inlining budget left for it).
 */
export function hostKeyPart6(w0: number, src: ArrayLike<number>, w9: number): number {
  let h = (Math.imul(w0 ^ (w0 >>> 16), M0) + Math.imul(w9 ^ (w9 >>> 16), M9) + HASH_SEED) | 0;
  for (let i = 0; i < 4; i++) {
    const s = src[i]!;
    h = (h + Math.imul(s ^ (s >>> 16), MUL_SRC[i]!)) | 0;
  }
  return h;
}

/** hostKeyHashWords from hostKeyPart6's sum, the destination's four words and w10. An int32. */
export function hostKeyHash6Dst(part: number, d0: number, d1: number, d2: number, d3: number, w10: number): number {
  const a = (Math.imul(d0 ^ (d0 >>> 16), M5) + Math.imul(d1 ^ (d1 >>> 16), M6)) | 0;
  const b = (Math.imul(d2 ^ (d2 >>> 16), M7) + Math.imul(d3 ^ (d3 >>> 16), M8)) | 0;
  return fmix32((part + a + ((b + Math.imul(w10 ^ (w10 >>> 16), M10)) | 0)) | 0);
}

/**
 * The features sharing the table, each bounded by its quota so that one cannot starve another
 * (flowTable.maxFastpathFlows, snatMaxFlows and the rest of hostMaxFlows: docs/config.md).
 */
export const FLOW_FEATURES = ['eastWest', 'dsr', 'snat'] as const;
export type FlowFeature = (typeof FLOW_FEATURES)[number];
const GROUP_OTHER = 0;
const GROUP_OF_FEATURE: Readonly<Record<FlowFeature, number>> = { eastWest: 1, dsr: 2, snat: 3 };
const FEATURE_OF_KIND: Readonly<Record<number, FlowFeature>> = {
  [FLOW_TO_MUX]: 'eastWest',
  [FLOW_FASTPATH]: 'eastWest',
  [FLOW_FASTPATH_CLOSING]: 'eastWest',
  [FLOW_DSR]: 'dsr',
  [FLOW_DSR_CLOSING]: 'dsr',
  [FLOW_SNAT_OUT]: 'snat',
  [FLOW_SNAT_IN]: 'snat',
};

/** Entries each feature may hold at most (an outbound NAT flow holds two). */
export type HostFlowQuotas = Readonly<Record<FlowFeature, number>>;

/** Each feature's quota and its entries now (live and not yet swept), for status. */
export type HostFlowQuotaUse = Record<FlowFeature, { max: number; used: number }>;

export class HostFlowTable {
  readonly table: FlowTable;
  readonly limit: FlowLimit;
  /** The hash of the key last written by setKey4/setKey6. */
  hash = 0;

  /** The quota of each feature, in entries (no quotas given: each may take the whole table). */
  readonly quotas: HostFlowQuotas;
  private readonly groups: FlowGroups;
  private readonly byKind = new Float64Array(256);

  constructor(maxFlows: number, quotas?: HostFlowQuotas) {
    this.quotas = quotas ?? { eastWest: maxFlows, dsr: maxFlows, snat: maxFlows };
    const groupOf = new Uint8Array(256).fill(GROUP_OTHER);
    for (const [kind, f] of Object.entries(FEATURE_OF_KIND)) groupOf[Number(kind)] = GROUP_OF_FEATURE[f];
    const max = new Float64Array(FLOW_FEATURES.length + 1).fill(maxFlows);
    for (const f of FLOW_FEATURES) max[GROUP_OF_FEATURE[f]] = this.quotas[f];
    this.groups = { groupOf, max, count: new Float64Array(FLOW_FEATURES.length + 1) };
    this.limit = { max: maxFlows, count: 0, groups: this.groups };
    this.table = new FlowTable(HOST_FLOW_KEY_WORDS, this.limit);
  }

  /** True when no entry of `feature` can be inserted (its quota, or the whole table, is used up). */
  fullFor(feature: FlowFeature): boolean {
    const g = GROUP_OF_FEATURE[feature];
    return this.full || this.groups.count[g]! >= this.groups.max[g]!;
  }

  /** Each feature's quota and entries (counted on insert and removal: no scan). */
  quotaUse(): HostFlowQuotaUse {
    const u = (f: FlowFeature) => ({ max: this.quotas[f], used: this.groups.count[GROUP_OF_FEATURE[f]]! });
    return { eastWest: u('eastWest'), dsr: u('dsr'), snat: u('snat') };
  }

  /** Whether this table has this bound and these quotas (carryEwState keeps a table when they did not change). */
  sameBounds(maxFlows: number, quotas: HostFlowQuotas): boolean {
    return this.limit.max === maxFlows && FLOW_FEATURES.every((f) => this.quotas[f] === quotas[f]);
  }

  get size(): number {
    return this.table.size;
  }

  setKey4(vni: number, src: number, dst: number, proto: number, sport: number, dport: number, space = KEY_SPACE_EW): void {
    const k = this.table.key;
    const w0 = (vni << 8) | 4;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    k[0] = w0;
    k[1] = src;
    k[2] = 0;
    k[3] = 0;
    k[4] = 0;
    k[5] = dst;
    k[6] = 0;
    k[7] = 0;
    k[8] = 0;
    k[9] = w9;
    k[10] = w10;
    this.hash = hostKeyHash4(w0, src, dst, w9, w10);
  }

  setKey6(
    vni: number,
    src: ArrayLike<number>,
    dst: ArrayLike<number>,
    proto: number,
    sport: number,
    dport: number,
    space = KEY_SPACE_EW,
  ): void {
    const k = this.table.key;
    const w0 = (vni << 8) | 6;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    k[0] = w0;
    k[1] = src[0]!;
    k[2] = src[1]!;
    k[3] = src[2]!;
    k[4] = src[3]!;
    k[5] = dst[0]!;
    k[6] = dst[1]!;
    k[7] = dst[2]!;
    k[8] = dst[3]!;
    k[9] = w9;
    k[10] = w10;
    this.hash = hostKeyHash6(w0, src, dst, w9, w10);
  }

  /**
   * lookup() of the IPv4 key setKey4 would write, without writing it (FlowTable.findSparse4); the hash is
   * kept, but an insert after it needs setKey4 first.
   */
  lookup4(
    vni: number,
    src: number,
    dst: number,
    proto: number,
    sport: number,
    dport: number,
    space: number,
    now: number,
    expiresAt: number,
  ): number {
    const w0 = (vni << 8) | 4;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    const h = hostKeyHash4(w0, src, dst, w9, w10);
    this.hash = h;
    return this.table.lookupAt(this.table.findSparse4(h, w0, src | 0, dst | 0, w9, w10), now, expiresAt);
  }

  /** peek() of the IPv4 key setKey4 would write, without writing it (as lookup4). */
  peek4(vni: number, src: number, dst: number, proto: number, sport: number, dport: number, space: number, now: number): number {
    const w0 = (vni << 8) | 4;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    const h = hostKeyHash4(w0, src, dst, w9, w10);
    this.hash = h;
    return this.table.peekAt(this.table.findSparse4(h, w0, src | 0, dst | 0, w9, w10), now);
  }

  /** lookup() of the IPv6 key setKey6 would write, without writing it (FlowTable.findWords6; as lookup4). */
  lookup6(
    vni: number,
    src: Uint32Array,
    dst: Uint32Array,
    proto: number,
    sport: number,
    dport: number,
    space: number,
    now: number,
    expiresAt: number,
  ): number {
    const w0 = (vni << 8) | 6;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    const h = hostKeyHash6(w0, src, dst, w9, w10);
    this.hash = h;
    return this.table.lookupAt(this.table.findWords6(h, w0, src, dst, w9, w10), now, expiresAt);
  }

  /**
   * lookup6 of a key whose seed, w0, source and w9 terms come summed in `part` (hostKeyPart6: a rule's DSR
   * key, NatRule.dsrKeyPart), the destination as four int32 words (read from the frame, not stored).
   */
  lookup6Part(
    part: number,
    w0: number,
    src: Uint32Array,
    d0: number,
    d1: number,
    d2: number,
    d3: number,
    w9: number,
    w10: number,
    now: number,
    expiresAt: number,
  ): number {
    const h = hostKeyHash6Dst(part, d0, d1, d2, d3, w10);
    this.hash = h;
    return this.table.lookupAt(this.table.findWords6Dst(h, w0, src, d0, d1, d2, d3, w9, w10), now, expiresAt);
  }

  /** peek() of the IPv6 key setKey6 would write, without writing it (as lookup6). */
  peek6(vni: number, src: Uint32Array, dst: Uint32Array, proto: number, sport: number, dport: number, space: number, now: number): number {
    const w0 = (vni << 8) | 6;
    const w9 = proto | (space << 8);
    const w10 = (sport << 16) | dport;
    const h = hostKeyHash6(w0, src, dst, w9, w10);
    this.hash = h;
    return this.table.peekAt(this.table.findWords6(h, w0, src, dst, w9, w10), now);
  }

  /** Sets the key from its words as another host flow table holds them (copying entries between tables). */
  setKeyWords(words: Uint32Array): void {
    this.table.key.set(words);
    this.hash = hostKeyHashWords(this.table.key);
  }

  /** The entry's value (kind << 24 | action) for the key set last, refreshing its expiry; -1 when none. */
  lookup(now: number, expiresAt: number): number {
    return this.table.lookup(this.hash, now, expiresAt);
  }

  peek(now: number): number {
    return this.table.peek(this.hash, now);
  }

  /** False when the table is full (counted by the caller). */
  insert(kind: number, action: number, expiresAt: number): boolean {
    return this.table.insert(this.hash, ((kind << 24) | (action & 0xffffff)) >>> 0, expiresAt);
  }

  /** True when no insert can succeed (the count of live and not yet swept entries is at the limit). */
  get full(): boolean {
    return this.limit.count >= this.limit.max;
  }

  remove(): boolean {
    return this.table.remove(this.hash);
  }

  sweep(now: number, budget: number): number {
    return this.table.sweep(now, budget);
  }

  clear(): void {
    this.table.clear();
  }

  /** Live entries by kind name (for status; one pass over the slots, no allocation per entry). */
  countByKind(now: number): Record<string, number> {
    const by = this.byKind;
    by.fill(0);
    this.table.countByHighByte(now, by);
    const out: Record<string, number> = {};
    for (let kind = 0; kind < 256; kind++) if (by[kind]! > 0) out[FLOW_KIND_NAMES[kind] ?? `kind_${kind}`] = by[kind]!;
    return out;
  }
}

export function flowKind(value: number): number {
  return value >>> 24;
}

export function flowAction(value: number): number {
  return value & 0xffffff;
}
