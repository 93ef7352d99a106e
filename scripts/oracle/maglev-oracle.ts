#!/usr/bin/env node
// An independent Maglev oracle: the flow hash, the pool's Maglev members and the lookup table, written a
// second time from the published descriptions only, so that tests and scenario verifiers can name "the
// backend Maglev chooses" without asking the code under test. It shares no code with the project: it
// imports nothing but Node built-ins (test/maglev-oracle.test.ts fails if that changes).
//   - MurmurHash3_x86_32: Austin Appleby's reference (SMHasher, MurmurHash3.cpp), byte by byte, with the
//     32-bit products done in 16-bit halves rather than Math.imul;
//   - the lookup table: the Maglev paper (Eisenbud et al., NSDI 2016), section 3.4, Pseudocode 1
//     (permutation[i][j] = (offset + j * skip) mod M, next[i], entry[c]), with the weights and the
//     availability phase of docs/hashing.md section 2;
//   - the flow key words and the pool's members: docs/hashing.md sections 1 and 3.
// Clarity over speed: it builds a 65537-slot table for 1000 members in tens of milliseconds, enough for
// tests and verifiers, not for a data plane.
//
//   node dist/scripts/oracle/maglev-oracle.js --help
import { pathToFileURL } from 'node:url';

// ---------------------------------------------------------------------------------------------
// MurmurHash3_x86_32 (reference: MurmurHash3.cpp, MurmurHash3_x86_32)

/** (a * b) mod 2^32 for uint32 a and b, from 16-bit halves (the low product stays below 2^53). */
function mul32(a: number, b: number): number {
  const aLo = a & 0xffff;
  const aHi = a >>> 16;
  return (aLo * b + ((aHi * b) & 0xffff) * 0x10000) % 0x100000000;
}

function rotl32(x: number, r: number): number {
  return ((x << r) | (x >>> (32 - r))) >>> 0;
}

function fmix32(h: number): number {
  h = (h ^ (h >>> 16)) >>> 0;
  h = mul32(h, 0x85ebca6b);
  h = (h ^ (h >>> 13)) >>> 0;
  h = mul32(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** MurmurHash3_x86_32(data, data.length, seed) of the reference, as an unsigned 32-bit integer. */
export function murmur3(data: Uint8Array, seed: number): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  const len = data.length;
  const nblocks = Math.floor(len / 4);
  let h1 = seed >>> 0;
  for (let i = 0; i < nblocks; i++) {
    // getblock32: the reference reads its blocks little-endian (on x86)
    let k1 = (data[4 * i]! | (data[4 * i + 1]! << 8) | (data[4 * i + 2]! << 16) | (data[4 * i + 3]! << 24)) >>> 0;
    k1 = mul32(k1, c1);
    k1 = rotl32(k1, 15);
    k1 = mul32(k1, c2);
    h1 = (h1 ^ k1) >>> 0;
    h1 = rotl32(h1, 13);
    h1 = (mul32(h1, 5) + 0xe6546b64) % 0x100000000;
  }
  const tail = 4 * nblocks;
  let k1 = 0;
  const rem = len & 3; // the reference's switch, whose cases fall through
  if (rem >= 3) k1 ^= data[tail + 2]! << 16;
  if (rem >= 2) k1 ^= data[tail + 1]! << 8;
  if (rem >= 1) {
    k1 ^= data[tail]!;
    k1 = mul32(k1 >>> 0, c1);
    k1 = rotl32(k1, 15);
    k1 = mul32(k1, c2);
    h1 = (h1 ^ k1) >>> 0;
  }
  h1 = (h1 ^ len) >>> 0;
  return fmix32(h1);
}

/** A four-character ASCII seed read big-endian ('mgl1' -> 0x6d676c31), as docs/hashing.md names them. */
export function asciiSeed(s: string): number {
  if (s.length !== 4) throw new RangeError(`a seed name has 4 characters, got ${JSON.stringify(s)}`);
  let v = 0;
  for (let i = 0; i < 4; i++) v = v * 256 + s.charCodeAt(i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// The flow hash (docs/hashing.md section 1)

/** An IPv4 or IPv6 address in text form -> its 16-bit groups (2 for IPv4, 8 for IPv6). */
export function parseAddress(text: string): { family: 4 | 6; bytes: number[] } {
  const v4 = (s: string): number[] | null => {
    const parts = s.split('.');
    if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return null;
    return parts.map(Number);
  };
  const b4 = v4(text);
  if (b4 !== null) return { family: 4, bytes: b4 };
  const bad = () => new RangeError(`not an IPv4 or IPv6 address: ${JSON.stringify(text)}`);
  const halves = text.split('::');
  if (halves.length > 2) throw bad();
  const groups = (s: string): number[] => {
    if (s === '') return [];
    const out: number[] = [];
    const parts = s.split(':');
    parts.forEach((p, i) => {
      if (i === parts.length - 1 && p.includes('.')) {
        const q = v4(p);
        if (q === null) throw bad();
        out.push(q[0]! * 256 + q[1]!, q[2]! * 256 + q[3]!);
      } else {
        if (!/^[0-9a-fA-F]{1,4}$/.test(p)) throw bad();
        out.push(parseInt(p, 16));
      }
    });
    return out;
  };
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  const fill = 8 - head.length - tail.length;
  if ((halves.length === 1 && fill !== 0) || (halves.length === 2 && fill < 1)) throw bad();
  const all = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail];
  return { family: 6, bytes: all.flatMap((g) => [g >> 8, g & 0xff]) };
}

/** The key words of a flow (each a uint32 read big-endian from network-order bytes), by mode 5, 3 or 2. */
export function flowKeyWords(src: string, dst: string, protocol: number, srcPort: number, dstPort: number, mode: number): number[] {
  const s = parseAddress(src);
  const d = parseAddress(dst);
  if (s.family !== d.family) throw new RangeError(`source ${src} and destination ${dst} are not of one family`);
  const wordsOf = (b: number[]) => {
    const w: number[] = [];
    for (let i = 0; i < b.length; i += 4) w.push(((b[i]! * 256 + b[i + 1]!) * 256 + b[i + 2]!) * 256 + b[i + 3]!);
    return w;
  };
  const words = [...wordsOf(s.bytes), ...wordsOf(d.bytes)];
  if (mode === 2) return words;
  words.push(protocol & 0xff);
  if (mode === 3) return words;
  words.push((srcPort & 0xffff) * 0x10000 + (dstPort & 0xffff)); // any other mode hashes the 5-tuple
  return words;
}

/** The flow hash: MurmurHash3_x86_32 of the key words serialized little-endian, with the config's seed. */
export function flowHash(src: string, dst: string, protocol: number, srcPort: number, dstPort: number, mode: number, seed: number): number {
  const words = flowKeyWords(src, dst, protocol, srcPort, dstPort, mode);
  const bytes = new Uint8Array(4 * words.length);
  words.forEach((w, i) => {
    bytes[4 * i] = w & 0xff;
    bytes[4 * i + 1] = (w >>> 8) & 0xff;
    bytes[4 * i + 2] = (w >>> 16) & 0xff;
    bytes[4 * i + 3] = (w >>> 24) & 0xff;
  });
  return murmur3(bytes, seed);
}

// ---------------------------------------------------------------------------------------------
// The Maglev lookup table (paper section 3.4; docs/hashing.md section 2)

export interface OracleMember {
  readonly id: string;
  /** 1..1000 */
  readonly weight: number;
  /** Defaults to true. */
  readonly available?: boolean;
}

/** A member's preference list: offset and skip (the paper's h1 and h2 of its name). */
export function permutationOf(id: string, size: number): { offset: number; skip: number } {
  const key = new TextEncoder().encode(id);
  return {
    offset: murmur3(key, asciiSeed('mgl1')) % size,
    skip: (murmur3(key, asciiSeed('mgl2')) % (size - 1)) + 1,
  };
}

function checkPrime(m: number): void {
  let prime = Number.isSafeInteger(m) && m >= 3;
  for (let d = 2; prime && d * d <= m; d++) if (m % d === 0) prime = false;
  if (!prime) throw new RangeError(`the table size must be a prime >= 3, got ${String(m)}`);
}

/**
 * The lookup table: slot -> member id, or null when no member is available. Members are taken in id
 * order (JavaScript string `<`). Phase 1 populates over every member; phase 2 frees the slots of the
 * unavailable ones and the available ones refill them, each from the start of its permutation. In each
 * phase, every round visits the members of the phase in id order; a member adds its weight to its
 * counter and, when the counter reaches the largest weight of the phase, subtracts it and claims its next
 * free slot (Pseudocode 1 with that condition around the claim).
 */
export function oracleTable(members: readonly OracleMember[], size: number): (string | null)[] {
  checkPrime(size);
  const sorted = [...members].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (let i = 1; i < sorted.length; i++)
    if (sorted[i]!.id === sorted[i - 1]!.id) throw new RangeError(`member ${sorted[i]!.id} appears twice`);
  for (const m of sorted) {
    if (!Number.isInteger(m.weight) || m.weight < 1 || m.weight > 1000)
      throw new RangeError(`member ${m.id}: weight must be an integer 1..1000`);
  }
  const entry: (number | null)[] = new Array<number | null>(size).fill(null); // member index in `sorted`
  if (!sorted.some((m) => m.available !== false)) return entry.map(() => null);
  const perm = sorted.map((m) => permutationOf(m.id, size));
  const permutation = (i: number, j: number) => (perm[i]!.offset + j * perm[i]!.skip) % size;

  const populate = (who: number[], toFill: number) => {
    const next = new Map<number, number>(who.map((i) => [i, 0]));
    const counter = new Map<number, number>(who.map((i) => [i, 0]));
    const maxWeight = Math.max(...who.map((i) => sorted[i]!.weight));
    let n = 0;
    while (n < toFill) {
      for (const i of who) {
        counter.set(i, counter.get(i)! + sorted[i]!.weight);
        if (counter.get(i)! < maxWeight) continue;
        counter.set(i, counter.get(i)! - maxWeight);
        let c = permutation(i, next.get(i)!);
        while (entry[c] !== null) {
          next.set(i, next.get(i)! + 1);
          c = permutation(i, next.get(i)!);
        }
        entry[c] = i;
        next.set(i, next.get(i)! + 1);
        n++;
        if (n === toFill) return;
      }
    }
  };

  populate(
    sorted.map((_, i) => i),
    size,
  );
  const down = new Set(sorted.flatMap((m, i) => (m.available === false ? [i] : [])));
  if (down.size > 0) {
    let freed = 0;
    for (let c = 0; c < size; c++) {
      if (down.has(entry[c]!)) {
        entry[c] = null;
        freed++;
      }
    }
    populate(
      sorted.flatMap((_, i) => (down.has(i) ? [] : [i])),
      freed,
    );
  }
  return entry.map((i) => sorted[i!]!.id);
}

// ---------------------------------------------------------------------------------------------
// A pool's members (docs/hashing.md section 3)

export interface OracleBackend {
  readonly id: string;
  readonly enabled: boolean;
  readonly drained: boolean;
  /** Defaults to true (a rule without a probe, or a probe that passes). */
  readonly healthy?: boolean;
  /** 1 (best) .. 5 */
  readonly priority: number;
  readonly weight: number;
  /** Measured latency; undefined = none, kept in the band. */
  readonly latencyMs?: number;
}

/**
 * The Maglev members of a pool: every backend of the best priority level that has an enabled, healthy,
 * not drained backend; available = that, and within latencySensitivityMs of the level's fastest
 * measured backend. No such level: no members (every slot empty).
 */
export function oraclePoolMembers(
  backends: readonly OracleBackend[],
  latencySensitivityMs = 0,
  allDown: 'drop' | 'spread' = 'drop',
): { level: number | null; members: OracleMember[]; failOpen?: true } {
  const eligible = (b: OracleBackend) => b.enabled && b.healthy !== false && !b.drained;
  const levels = backends.filter(eligible).map((b) => b.priority);
  if (levels.length === 0) {
    // fail-open (a rule's allDown: spread): every enabled, undrained backend with a weight, any
    // priority, health ignored; the table's members are all the pool's backends
    const open = (b: OracleBackend) => b.enabled && !b.drained && b.weight > 0;
    const openLevels = backends.filter(open).map((b) => b.priority);
    if (allDown === 'drop' || openLevels.length === 0) return { level: null, members: [] };
    return {
      level: Math.min(...openLevels),
      members: backends.map((b) => ({ id: b.id, weight: b.weight, available: open(b) })),
      failOpen: true,
    };
  }
  const level = Math.min(...levels);
  const measured = backends.filter((b) => eligible(b) && b.priority === level && b.latencyMs !== undefined).map((b) => b.latencyMs!);
  const fastest = measured.length === 0 ? Infinity : Math.min(...measured);
  const inBand = (b: OracleBackend) => b.latencyMs === undefined || b.latencyMs <= fastest + latencySensitivityMs;
  return {
    level,
    members: backends.filter((b) => b.priority === level).map((b) => ({ id: b.id, weight: b.weight, available: eligible(b) && inBand(b) })),
  };
}

/** Slot of a flow hash in a table of `size` slots. */
export function slotOf(hash: number, size: number): number {
  return (hash >>> 0) % size;
}

// ---------------------------------------------------------------------------------------------
// Command line: print a table, or a flow's hash, slot and backend

const HELP = `maglev-oracle: an independent Maglev oracle (shares no code with slbx's shared/)

usage:
  maglev-oracle.js table --size M --member ID[:WEIGHT][:down] ...
      print every slot of the lookup table (slot, member); weight defaults to 1
  maglev-oracle.js perm --size M --member ID ...
      print each member's offset, skip and first permutation entries
  maglev-oracle.js flow --src A --dst B --protocol N --sport N --dport N [--mode 5|3|2] [--seed N]
      [--size M --member ID[:WEIGHT][:down] ...]
      print the flow's key words, hash (seed defaults to 0x736c6278) and, with members, its slot and backend
`;

function parseMembers(values: string[]): OracleMember[] {
  return values.map((v) => {
    const [id, ...rest] = v.split(':');
    const weight = rest.find((r) => /^\d+$/.test(r));
    return { id: id!, weight: weight === undefined ? 1 : Number(weight), available: !rest.includes('down') };
  });
}

function main(argv: string[]): number {
  if (argv.length === 0 || argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(HELP);
    return argv.length === 0 ? 2 : 0;
  }
  const [cmd, ...rest] = argv;
  const opts = new Map<string, string[]>();
  for (let i = 0; i < rest.length; i++) {
    const k = rest[i]!;
    if (!k.startsWith('--') || i + 1 >= rest.length) {
      process.stderr.write(`maglev-oracle: expected --name value, got ${k}\n${HELP}`);
      return 2;
    }
    opts.set(k.slice(2), [...(opts.get(k.slice(2)) ?? []), rest[++i]!]);
  }
  const one = (k: string, dflt?: string) => {
    const v = opts.get(k)?.[0] ?? dflt;
    if (v === undefined) throw new RangeError(`--${k} is required`);
    return v;
  };
  const members = parseMembers(opts.get('member') ?? []);
  if (cmd === 'table') {
    const size = Number(one('size'));
    oracleTable(members, size).forEach((id, s) => process.stdout.write(`${s} ${id ?? '-'}\n`));
    return 0;
  }
  if (cmd === 'perm') {
    const size = Number(one('size'));
    for (const m of members) {
      const p = permutationOf(m.id, size);
      const first = Array.from({ length: Math.min(size, 13) }, (_, j) => (p.offset + j * p.skip) % size);
      process.stdout.write(`${m.id} offset ${p.offset} skip ${p.skip} permutation ${first.join(' ')}${size > 13 ? ' ...' : ''}\n`);
    }
    return 0;
  }
  if (cmd === 'flow') {
    const args = [
      one('src'),
      one('dst'),
      Number(one('protocol')),
      Number(one('sport', '0')),
      Number(one('dport', '0')),
      Number(one('mode', '5')),
    ] as const;
    const seed = Number(one('seed', String(asciiSeed('slbx'))));
    const h = flowHash(...args, seed);
    const words = flowKeyWords(...args).map((w) => `0x${w.toString(16).padStart(8, '0')}`);
    process.stdout.write(`words ${words.join(' ')}\nhash 0x${h.toString(16).padStart(8, '0')}\n`);
    if (members.length > 0) {
      const size = Number(one('size'));
      const s = slotOf(h, size);
      process.stdout.write(`slot ${s}\nbackend ${oracleTable(members, size)[s] ?? '-'}\n`);
    }
    return 0;
  }
  process.stderr.write(`maglev-oracle: unknown command ${String(cmd)}\n${HELP}`);
  return 2;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`maglev-oracle: ${(e as Error).message}\n`);
    process.exitCode = 2;
  }
}
