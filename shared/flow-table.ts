// A flow table (the MUX's: flow key -> backend id; the host agent's: host-agent/flow-table.ts), with per-entry idle expiry and a bounded size.
// Open addressing with linear probing and backward-shift deletion over typed arrays, so a lookup or an
// insert allocates nothing. Keys are fixed-width runs of uint32 words (4 for IPv4 5-tuples, 10 for IPv6);
// the caller writes the key into `table.key` and passes the flow hash. Time is whole seconds from the
// caller's clock; an entry is live while expiresAt > now. The table grows by doubling (a rehash pause
// proportional to its size) until maxEntries; beyond that, inserts fail and the caller falls back to
// the stateless choice.

const MIN_CAPACITY = 1024;
const MAX_LOAD = 0.75;

/** Shared by the IPv4 and IPv6 tables so that maxFlows bounds their sum. */
export interface FlowLimit {
  readonly max: number;
  count: number;
  /** Optional bounds per group of values, on top of max (the host agent's quotas per feature). */
  readonly groups?: FlowGroups;
}

/**
 * Quotas by group of values: an entry's group is groupOf[value >>> 24] (the high byte, the host flow
 * table's kind); an insert that would take a group past its max fails like one past the table's max.
 */
export interface FlowGroups {
  /** 256 entries: value's high byte -> group index. */
  readonly groupOf: Uint8Array;
  readonly max: Float64Array;
  /** Entries per group, live and not yet swept (as FlowLimit.count). */
  readonly count: Float64Array;
}

export class FlowTable {
  readonly keyWords: number;
  /** Scratch key: write the flow's words here before find/lookup/insert. */
  readonly key: Uint32Array;
  private readonly limit: FlowLimit;
  private readonly groups: FlowGroups | null;
  private cap = 0;
  private mask = 0;
  private keys = new Uint32Array(0);
  /**
   * Per slot, side by side: expiry (at 3*slot; 0 = empty slot), flow hash (3*slot+1), value (3*slot+2).
   * One array, so a probe reads the line that holds all three, not three lines of three arrays: the
   * return path's lookup over thousands of flows paid for each (issue 16, docs/performance.md).
   */
  private meta = new Uint32Array(0);
  private sweepCursor = 0;
  size = 0;

  constructor(keyWords: number, limit: FlowLimit, initialCapacity = MIN_CAPACITY) {
    this.keyWords = keyWords;
    this.key = new Uint32Array(keyWords);
    this.limit = limit;
    this.groups = limit.groups ?? null;
    this.allocate(pow2AtLeast(Math.max(MIN_CAPACITY, initialCapacity)));
  }

  get capacity(): number {
    return this.cap;
  }

  /** Bytes held by the table's arrays. */
  get bytes(): number {
    return this.keys.byteLength + this.meta.byteLength;
  }

  private allocate(cap: number): void {
    this.cap = cap;
    this.mask = cap - 1;
    this.keys = new Uint32Array(cap * this.keyWords);
    this.meta = new Uint32Array(cap * 3);
    this.sweepCursor = 0;
  }

  /**
   * Slot of the entry for `key`, or -1 (expired entries are found too; see lookup). The key comparison
   * is written out here, not a helper's call: inside the data planes' large functions V8 had no inlining
   * budget left for such a helper, and its call was 8-16 % of a path's profile.
   */
  find(hash: number): number {
    const h = hash >>> 0;
    const mask = this.mask;
    const meta = this.meta;
    let i = h & mask;
    for (;;) {
      const m = i * 3;
      if (meta[m] === 0) return -1;
      if (meta[m + 1] === h) {
        const kw = this.keyWords;
        const k = this.key;
        const keys = this.keys;
        const base = i * kw;
        if (kw === 11) {
          // the host flow table's width (host-agent/flow-table.ts), written out: the loop's bounds and
          // counter cost about 120 instructions a lookup on the return path (callgrind, host-out udp4 reply)
          if (
            keys[base] === k[0] &&
            keys[base + 1] === k[1] &&
            keys[base + 2] === k[2] &&
            keys[base + 3] === k[3] &&
            keys[base + 4] === k[4] &&
            keys[base + 5] === k[5] &&
            keys[base + 6] === k[6] &&
            keys[base + 7] === k[7] &&
            keys[base + 8] === k[8] &&
            keys[base + 9] === k[9] &&
            keys[base + 10] === k[10]
          )
            return i;
        } else if (kw === 10) {
          // the MUX's IPv6 key (ports word first: the words most likely to differ), written out as above
          if (
            keys[base + 9] === k[9] &&
            keys[base + 3] === k[3] &&
            keys[base] === k[0] &&
            keys[base + 1] === k[1] &&
            keys[base + 2] === k[2] &&
            keys[base + 4] === k[4] &&
            keys[base + 5] === k[5] &&
            keys[base + 6] === k[6] &&
            keys[base + 7] === k[7] &&
            keys[base + 8] === k[8]
          )
            return i;
        } else if (kw === 4) {
          // the MUX's IPv4 key
          if (keys[base + 3] === k[3] && keys[base] === k[0] && keys[base + 1] === k[1] && keys[base + 2] === k[2]) return i;
        } else {
          let j = 0;
          while (j < kw && keys[base + j] === k[j]) j++;
          if (j === kw) return i;
        }
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * The value for `key` if live, refreshing its expiry to `expiresAt`; -1 when absent or expired
   * (an expired entry is removed on the spot).
   */
  lookup(hash: number, now: number, expiresAt: number): number {
    return this.lookupAt(this.find(hash), now, expiresAt);
  }

  /** The value for `key` if live, without refreshing it (for packets that are not flow activity); -1 otherwise. */
  peek(hash: number, now: number): number {
    return this.peekAt(this.find(hash), now);
  }

  /** lookup() of the entry found at `slot` (find, findSparse4; -1: none). */
  lookupAt(slot: number, now: number, expiresAt: number): number {
    if (slot < 0) return -1;
    const m = slot * 3;
    const meta = this.meta;
    if (meta[m]! <= now) {
      this.removeSlot(slot);
      return -1;
    }
    meta[m] = expiresAt;
    return meta[m + 2]!;
  }

  /** peek() of the entry found at `slot` (-1: none). */
  peekAt(slot: number, now: number): number {
    return slot < 0 || this.meta[slot * 3]! <= now ? -1 : this.meta[slot * 3 + 2]!;
  }

  /**
   * find() for the host flow table's IPv4 keys (11 words, host-agent/flow-table.ts), from the key's
   * five words that are not zero (0, 1, 5, 9 and 10; every writer of an IPv4 key leaves words 2-4 and
   * 6-8 zero, and word 0 holds the family), as int32, without the scratch key: a lookup that finds its
   * entry writes no key and compares five words, not eleven (callgrind, host-out udp4 reply).
   */
  findSparse4(hash: number, w0: number, w1: number, w5: number, w9: number, w10: number): number {
    const h = hash >>> 0;
    const mask = this.mask;
    const meta = this.meta;
    const keys = this.keys;
    let i = h & mask;
    for (;;) {
      const m = i * 3;
      if (meta[m] === 0) return -1;
      if (meta[m + 1] === h) {
        const b = i * 11;
        if (
          (keys[b]! | 0) === w0 &&
          (keys[b + 1]! | 0) === w1 &&
          (keys[b + 5]! | 0) === w5 &&
          (keys[b + 9]! | 0) === w9 &&
          (keys[b + 10]! | 0) === w10
        )
          return i;
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * find() for the host flow table's IPv6 keys (11 words: w0, the source's four, the destination's four,
   * w9, w10) from the words themselves, without the scratch key (as findSparse4 for IPv4).
   */
  findWords6(hash: number, w0: number, src: Uint32Array, dst: Uint32Array, w9: number, w10: number): number {
    const h = hash >>> 0;
    const mask = this.mask;
    const meta = this.meta;
    const keys = this.keys;
    let i = h & mask;
    for (;;) {
      const m = i * 3;
      if (meta[m] === 0) return -1;
      if (meta[m + 1] === h) {
        const b = i * 11;
        if (
          (keys[b + 10]! | 0) === w10 &&
          keys[b + 4] === src[3] &&
          keys[b + 8] === dst[3] &&
          (keys[b]! | 0) === w0 &&
          keys[b + 1] === src[0] &&
          keys[b + 2] === src[1] &&
          keys[b + 3] === src[2] &&
          keys[b + 5] === dst[0] &&
          keys[b + 6] === dst[1] &&
          keys[b + 7] === dst[2] &&
          (keys[b + 9]! | 0) === w9
        )
          return i;
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * findWords6 with the destination as four int32 words (HostFlowTable.lookup6Part: the client's address
   * read from the frame into locals, not stored to be loaded again).
   */
  findWords6Dst(
    hash: number,
    w0: number,
    src: Uint32Array,
    d0: number,
    d1: number,
    d2: number,
    d3: number,
    w9: number,
    w10: number,
  ): number {
    const h = hash >>> 0;
    const mask = this.mask;
    const meta = this.meta;
    const keys = this.keys;
    let i = h & mask;
    for (;;) {
      const m = i * 3;
      if (meta[m] === 0) return -1;
      if (meta[m + 1] === h) {
        const b = i * 11;
        if (
          (keys[b + 10]! | 0) === w10 &&
          (keys[b + 8]! | 0) === d3 &&
          keys[b + 4] === src[3] &&
          (keys[b]! | 0) === w0 &&
          keys[b + 1] === src[0] &&
          keys[b + 2] === src[1] &&
          keys[b + 3] === src[2] &&
          (keys[b + 5]! | 0) === d0 &&
          (keys[b + 6]! | 0) === d1 &&
          (keys[b + 7]! | 0) === d2 &&
          (keys[b + 9]! | 0) === w9
        )
          return i;
      }
      i = (i + 1) & mask;
    }
  }

  /** Inserts or replaces the entry for `key`. False when the table is at its limit. */
  insert(hash: number, value: number, expiresAt: number): boolean {
    const h = hash >>> 0;
    const s = this.find(h);
    const g = this.groups;
    if (s >= 0) {
      if (g !== null) {
        // a value of another group moves the entry to that group's quota
        const from = g.groupOf[this.meta[s * 3 + 2]! >>> 24]!;
        const to = g.groupOf[value >>> 24]!;
        if (from !== to) {
          if (g.count[to]! >= g.max[to]!) return false;
          g.count[from]!--;
          g.count[to]!++;
        }
      }
      this.meta[s * 3 + 2] = value;
      this.meta[s * 3] = expiresAt;
      return true;
    }
    if (this.limit.count >= this.limit.max) return false;
    if (g !== null) {
      const to = g.groupOf[value >>> 24]!;
      if (g.count[to]! >= g.max[to]!) return false;
      g.count[to]!++;
    }
    if (this.size + 1 > this.cap * MAX_LOAD) this.grow();
    const meta = this.meta;
    let i = h & this.mask;
    while (meta[i * 3] !== 0) i = (i + 1) & this.mask;
    this.keys.set(this.key, i * this.keyWords);
    meta[i * 3 + 1] = h;
    meta[i * 3 + 2] = value;
    meta[i * 3] = expiresAt > 0 ? expiresAt : 1;
    this.size++;
    this.limit.count++;
    return true;
  }

  /** Removes the entry for `key`; true if there was one. */
  remove(hash: number): boolean {
    const s = this.find(hash);
    if (s < 0) return false;
    this.removeSlot(s);
    return true;
  }

  private removeSlot(slot: number): void {
    const g = this.groups;
    const meta = this.meta;
    if (g !== null) g.count[g.groupOf[meta[slot * 3 + 2]! >>> 24]!]!--;
    // backward-shift deletion: pull later entries of the probe run into the hole
    const kw = this.keyWords;
    let hole = slot;
    let i = (slot + 1) & this.mask;
    while (meta[i * 3] !== 0) {
      const home = meta[i * 3 + 1]! & this.mask;
      // move entry i into the hole unless its home lies cyclically in (hole, i]
      const inRange = hole <= i ? home > hole && home <= i : home > hole || home <= i;
      if (!inRange) {
        this.keys.copyWithin(hole * kw, i * kw, i * kw + kw);
        meta[hole * 3] = meta[i * 3]!;
        meta[hole * 3 + 1] = meta[i * 3 + 1]!;
        meta[hole * 3 + 2] = meta[i * 3 + 2]!;
        hole = i;
      }
      i = (i + 1) & this.mask;
    }
    meta[hole * 3] = 0;
    this.size--;
    this.limit.count--;
  }

  private grow(): void {
    const oldCap = this.cap;
    const kw = this.keyWords;
    const oldKeys = this.keys;
    const old = this.meta;
    this.allocate(oldCap * 2);
    const meta = this.meta;
    for (let s = 0; s < oldCap; s++) {
      if (old[s * 3] === 0) continue;
      let i = old[s * 3 + 1]! & this.mask;
      while (meta[i * 3] !== 0) i = (i + 1) & this.mask;
      this.keys.set(oldKeys.subarray(s * kw, s * kw + kw), i * kw);
      meta[i * 3] = old[s * 3]!;
      meta[i * 3 + 1] = old[s * 3 + 1]!;
      meta[i * 3 + 2] = old[s * 3 + 2]!;
    }
  }

  /**
   * Removes expired entries among the next `maxSlots` slots; returns how many were removed. A removal
   * may pull a later entry into the slot just looked at, so the slot is looked at again; that does not
   * use up the budget (at most `size` extra looks).
   */
  sweep(now: number, maxSlots: number): number {
    let removed = 0;
    const n = Math.min(maxSlots, this.cap);
    for (let steps = 0; steps < n;) {
      const s = this.sweepCursor;
      const e = this.meta[s * 3]!;
      if (e !== 0 && e <= now) {
        this.removeSlot(s);
        removed++;
        continue;
      }
      this.sweepCursor = (s + 1) & this.mask;
      steps++;
    }
    return removed;
  }

  /** Removes everything. */
  clear(): void {
    const g = this.groups;
    const meta = this.meta;
    if (g !== null) for (let s = 0; s < this.cap; s++) if (meta[s * 3] !== 0) g.count[g.groupOf[meta[s * 3 + 2]! >>> 24]!]!--;
    this.limit.count -= this.size;
    this.size = 0;
    meta.fill(0);
  }

  /**
   * Copies the live entries of slots [from, to) whose value's high byte is in [kindLo, kindHi] into `out` at
   * `off`, each as its key words, its value and its time left (expiresAt - now); returns the offset after
   * the last one, or -1 when `out` has no room (the caller grows it and copies the same slots again).
   * Allocates nothing: host-agent/flow-snapshot.ts copies a big table this way, in slices.
   */
  copyLive(from: number, to: number, now: number, kindLo: number, kindHi: number, out: Uint32Array, off: number): number {
    const kw = this.keyWords;
    const keys = this.keys;
    const meta = this.meta;
    const end = Math.min(to, this.cap);
    let o = off;
    for (let s = Math.max(0, from); s < end; s++) {
      const e = meta[s * 3]!;
      if (e === 0 || e <= now) continue;
      const v = meta[s * 3 + 2]!;
      const kind = v >>> 24;
      if (kind < kindLo || kind > kindHi) continue;
      if (o + kw + 2 > out.length) return -1;
      for (let i = 0, b = s * kw; i < kw; i++) out[o + i] = keys[b + i]!;
      out[o + kw] = v;
      out[o + kw + 1] = e - now;
      o += kw + 2;
    }
    return o;
  }

  /** Grows the table (at most to its limit) so that `entries` fit without a rehash on the way (before a bulk insert). */
  reserve(entries: number): void {
    const n = Math.min(entries, this.limit.max);
    while (n > this.cap * MAX_LOAD) this.grow();
  }

  /** Adds the live entries, by their value's high byte, into `out` (256 counters); allocates nothing (status at any size). */
  countByHighByte(now: number, out: Float64Array): void {
    const meta = this.meta;
    for (let s = 0; s < this.cap; s++) {
      const e = meta[s * 3]!;
      if (e !== 0 && e > now) out[meta[s * 3 + 2]! >>> 24]!++;
    }
  }

  /** Calls fn for every live entry (for status output; allocates). */
  forEach(now: number, fn: (key: Uint32Array, value: number, expiresAt: number) => void): void {
    const kw = this.keyWords;
    for (let s = 0; s < this.cap; s++) {
      const e = this.meta[s * 3]!;
      if (e !== 0 && e > now) fn(this.keys.slice(s * kw, s * kw + kw), this.meta[s * 3 + 2]!, e);
    }
  }
}

function pow2AtLeast(n: number): number {
  let c = 1;
  while (c < n) c *= 2;
  return c;
}
