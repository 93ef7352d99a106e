// The independent Maglev oracle (scripts/oracle/maglev-oracle.ts) against the published MurmurHash3
// vectors, the golden vectors of docs/hashing.md (read from the page itself) and the code under test
// (shared/flow-hash.ts, shared/maglev.ts, shared/selection.ts): full-table equality over many random
// member sets and pools, and hash equality over many random flows.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ip } from '../shared/addr.js';
import { hashFlowV4, hashFlowV6 } from '../shared/flow-hash.js';
import { buildMaglevTable, MAGLEV_EMPTY, type MaglevMember } from '../shared/maglev.js';
import { buildPoolTable, type SelectionBackend } from '../shared/selection.js';
import {
  flowHash,
  flowKeyWords,
  murmur3,
  oraclePoolMembers,
  oracleTable,
  permutationOf,
  slotOf,
  type OracleMember,
} from '../scripts/oracle/maglev-oracle.js';
import { formatRow, measure } from '../scripts/oracle/disruption.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const ORACLE_FILE = join(ROOT, 'scripts/oracle/maglev-oracle.ts');
const HASHING_MD = readFileSync(join(ROOT, 'docs/hashing.md'), 'utf8');

/** The table of shared/maglev.ts as slot -> member id (null = empty), comparable with the oracle's. */
function sharedTable(members: readonly MaglevMember[], size: number): (string | null)[] {
  const t = buildMaglevTable(members, size);
  return Array.from(t.slots, (s) => (s === MAGLEV_EMPTY ? null : t.members[s]!));
}

/** xorshift32: reproducible random inputs. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x;
  };
}

/** The markdown tables of a section of docs/hashing.md (from a heading to the next heading of its level or above). */
function docTables(heading: string): string[][][] {
  const start = HASHING_MD.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`docs/hashing.md has no heading ${heading}`);
  const level = heading.split(' ')[0]!;
  const rest = HASHING_MD.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`\\n#{1,${level.length}} `));
  const body = end < 0 ? rest : rest.slice(0, end);
  const tables: string[][][] = [];
  let cur: string[][] | null = null;
  for (const line of body.split('\n')) {
    if (!line.startsWith('|')) {
      cur = null;
      continue;
    }
    const cells = line
      .slice(1, line.endsWith('|') ? -1 : undefined)
      .split('|')
      .map((c) => c.trim().replace(/^`|`$/g, ''));
    if (cells.every((c) => /^-+$/.test(c))) continue;
    if (cur === null) {
      cur = [];
      tables.push(cur);
    }
    cur.push(cells);
  }
  return tables;
}

const RANGE_MEMBERS: Record<string, (i: number) => number> = {
  'be-0000 .. be-0999, weight 1': () => 1,
  'be-0000 .. be-0999, weight 10 * (1 + i mod 10)': (i) => 10 * (1 + (i % 10)),
};

function parseMembers(text: string): OracleMember[] {
  const range = RANGE_MEMBERS[text];
  if (range !== undefined) return Array.from({ length: 1000 }, (_, i) => ({ id: `be-${String(i).padStart(4, '0')}`, weight: range(i) }));
  return text.split(/\s+/).map((tok) => {
    const [id, w, flag] = tok.split(':');
    if (!/^\d+$/.test(w ?? '') || (flag !== undefined && flag !== 'down')) throw new Error(`docs/hashing.md: cannot read member ${tok}`);
    return { id: id!, weight: Number(w), available: flag !== 'down' };
  });
}

interface GoldenVector {
  name: string;
  members: OracleMember[];
  size: number;
  slots: Map<number, string>;
}

function goldenVectors(): GoldenVector[] {
  const out: GoldenVector[] = [];
  for (const t of docTables('### Golden Maglev tables')) {
    const [head, ...rows] = t;
    if (head![0] !== 'vector') continue;
    const slotCols = head!.slice(2).map(Number);
    // a table whose columns are 0..M-1 is a full table of size M; the others are slots of M = 65537
    const full = slotCols.every((s, i) => s === i);
    const size = full ? slotCols.length : 65537;
    for (const r of rows) {
      out.push({ name: r[0]!, members: parseMembers(r[1]!), size, slots: new Map(slotCols.map((s, i) => [s, r[i + 2]!])) });
    }
  }
  return out;
}

describe('the oracle shares no code with the project', () => {
  it('imports nothing but Node built-ins', () => {
    const src = readFileSync(ORACLE_FILE, 'utf8');
    const specifiers = [
      ...src.matchAll(/\bfrom\s+['"]([^'"]+)['"]/g),
      ...src.matchAll(/\bimport\s*\(?\s*['"]([^'"]+)['"]/g),
      ...src.matchAll(/\brequire\s*\(\s*['"]([^'"]+)['"]/g),
    ].map((m) => m[1]!);
    expect(specifiers.length).toBeGreaterThan(0); // the regexes do see its one import (node:url)
    expect(specifiers.filter((s) => !s.startsWith('node:'))).toEqual([]);
  });
});

describe('oracle: MurmurHash3_x86_32 against published vectors', () => {
  const enc = new TextEncoder();
  it.each([
    ['', 0, 0x00000000],
    ['', 1, 0x514e28b7],
    ['', 0xffffffff, 0x81f16f39],
    ['test', 0, 0xba6bd213],
    ['Hello, world!', 1234, 0xfaf6cdb3],
    ['The quick brown fox jumps over the lazy dog', 0, 0x2e4ff723],
  ])('%j seed %d', (s, seed, want) => {
    expect(murmur3(enc.encode(s), seed)).toBe(want);
  });
  it('the four-byte tails of the reference (1, 2 and 3 bytes)', () => {
    // from the SMHasher reference: 0x21436587 seed 0 = 0xf55b516b; tails of it
    expect(murmur3(Uint8Array.of(0x21, 0x43, 0x65, 0x87), 0)).toBe(0xf55b516b);
    expect(murmur3(Uint8Array.of(0x21, 0x43, 0x65), 0)).toBe(0x7e4a8634);
    expect(murmur3(Uint8Array.of(0x21, 0x43), 0)).toBe(0xa0f7b07a);
    expect(murmur3(Uint8Array.of(0x21), 0)).toBe(0x72661cf4);
  });
});

describe('oracle: the flow hash golden vectors of docs/hashing.md section 1', () => {
  const section = HASHING_MD.slice(HASHING_MD.indexOf('\n### Golden vectors\n'));
  const wordsAfter = (label: string) =>
    [
      ...section
        .slice(section.indexOf(label))
        .split(/\n\n|\nIPv/)[0]!
        .matchAll(/0x[0-9a-f]{8}/g),
    ].map((m) => Number(m[0]));
  const rows = docTables('### Golden vectors')[0]!.slice(1);
  it('the page lists the key words the oracle builds', () => {
    expect(flowKeyWords('198.51.100.10', '203.0.113.10', 6, 40000, 80, 5)).toEqual(wordsAfter('IPv4 flow:'));
    expect(flowKeyWords('2001:db8:c::10', '2001:db8:ff::1', 17, 5353, 53, 5)).toEqual(wordsAfter('IPv6 flow:'));
  });
  it('has six rows (two seeds, three modes)', () => expect(rows.length).toBe(6));
  it.each(rows.map((r) => [r[0]!, r[1]!, r]))('seed %s mode %s: hash, VXLAN source port and slot', (_s, _m, r) => {
    const seed = Number(r[0]);
    const mode = Number(r[1]);
    const sport = (h: number) => 49152 + (((h >>> 16) ^ (h & 0xffff)) & 0x3fff);
    const h4 = flowHash('198.51.100.10', '203.0.113.10', 6, 40000, 80, mode, seed);
    const h6 = flowHash('2001:db8:c::10', '2001:db8:ff::1', 17, 5353, 53, mode, seed);
    expect([h4, sport(h4), slotOf(h4, 65537), h6, sport(h6), slotOf(h6, 65537)]).toEqual([2, 3, 4, 5, 6, 7].map((i) => Number(r[i])));
  });
});

describe('oracle == shared/flow-hash.ts on random flows', () => {
  it('IPv4 and IPv6, modes 5, 3 and 2, random seeds', () => {
    const r = rng(0x51b0c0de);
    const v4 = (x: number) => `${x >>> 24}.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`;
    const v6 = (w: number[]) =>
      w
        .flatMap((x) => [x >>> 16, x & 0xffff])
        .map((g) => g.toString(16))
        .join(':');
    for (let i = 0; i < 3000; i++) {
      const mode = [5, 3, 2][i % 3]!;
      const seed = i % 7 === 0 ? 0x736c6278 : r();
      const proto = [6, 17, 1, 58][i % 4]!;
      const sp = r() & 0xffff;
      const dp = r() & 0xffff;
      const s4 = r();
      const d4 = r();
      expect(flowHash(v4(s4), v4(d4), proto, sp, dp, mode, seed)).toBe(hashFlowV4(s4, d4, proto, sp, dp, mode, seed));
      const s6 = [r(), r(), r(), r()];
      const d6 = [r(), r(), r(), r()];
      const got = flowHash(v6(s6), v6(d6), proto, sp, dp, mode, seed);
      expect(got).toBe(hashFlowV6(ip(v6(s6)).words, 0, ip(v6(d6)).words, 0, proto, sp, dp, mode, seed));
    }
  });
});

describe('golden Maglev tables of docs/hashing.md: shared/maglev.ts == page == oracle', () => {
  const vectors = goldenVectors();
  it('the page has the full M = 13 tables and the M = 65537 slots for 3 and 1000 members', () => {
    expect(vectors.filter((v) => v.size === 13 && v.slots.size === 13).length).toBeGreaterThanOrEqual(3);
    expect(vectors.filter((v) => v.size === 65537 && v.members.length === 3).length).toBeGreaterThanOrEqual(2);
    expect(vectors.filter((v) => v.size === 65537 && v.members.length === 1000).length).toBeGreaterThanOrEqual(2);
    expect(vectors.some((v) => v.members.some((m) => m.available === false))).toBe(true);
    expect(vectors.some((v) => new Set(v.members.map((m) => m.weight)).size > 1)).toBe(true);
  });
  it.each(vectors.map((v) => [v.name, v]))('%s', (_n, v) => {
    const want = [...v.slots];
    const shared = sharedTable(v.members, v.size);
    const orc = oracleTable(v.members, v.size);
    expect(want.map(([s]) => [s, shared[s]])).toEqual(want);
    expect(want.map(([s]) => [s, orc[s]])).toEqual(want);
    expect(shared).toEqual(orc);
  });
  it("the permutations the page lists (offset, skip, walk) are the oracle's", () => {
    const perms = docTables('### Golden Maglev tables')
      .find((t) => t[0]![0] === 'member')!
      .slice(1);
    expect(perms.length).toBe(4);
    for (const [id, offset, skip, walk] of perms) {
      const p = permutationOf(id!, 13);
      expect([p.offset, p.skip]).toEqual([Number(offset), Number(skip)]);
      expect(walk!.split(' ').map(Number)).toEqual(Array.from({ length: 13 }, (_, j) => (p.offset + j * p.skip) % 13));
    }
  });
});

describe('oracle == shared/maglev.ts: full tables over random member sets', () => {
  const r = rng(0x0ac1e);
  const randomMembers = (n: number, weighted: boolean, downShare: number): MaglevMember[] => {
    const ids = new Set<string>();
    while (ids.size < n) ids.add(`${['h', 'vm', 'be-', 'Z', 'é'][r() % 5]}${r() % 100000}`);
    return [...ids].map((id) => ({ id, weight: weighted ? 1 + (r() % 1000) : 50, available: (r() % 1000) / 1000 >= downShare }));
  };
  it('300 sets at small primes (1-60 members; equal and weighted; 0-60 % unavailable)', () => {
    for (let i = 0; i < 300; i++) {
      const size = [13, 17, 101, 251, 1009, 4093][i % 6]!;
      const m = randomMembers(1 + (r() % 60), i % 2 === 0, [0, 0.1, 0.6][i % 3]!);
      expect(sharedTable(m, size)).toEqual(oracleTable(m, size));
    }
  });
  it('12 sets at M = 65537 (3, 100 and 1000 members)', () => {
    for (let i = 0; i < 12; i++) {
      const m = randomMembers([3, 100, 1000][i % 3]!, i % 2 === 1, i % 4 < 2 ? 0 : 0.1);
      expect(sharedTable(m, 65537)).toEqual(oracleTable(m, 65537));
    }
  });
  it('no member available: every slot empty, in both', () => {
    const m = randomMembers(5, true, 1.1);
    expect(oracleTable(m, 13)).toEqual(new Array(13).fill(null));
    expect(sharedTable(m, 13)).toEqual(new Array(13).fill(null));
  });
});

describe("oracle == shared/selection.ts: a pool's members and table (docs/hashing.md section 3)", () => {
  it('400 random pools: priority levels, disabled, unhealthy, drained, latency bands', () => {
    const r = rng(0x9001);
    for (let i = 0; i < 400; i++) {
      const n = 1 + (r() % 12);
      const backends: SelectionBackend[] = Array.from({ length: n }, (_, k) => ({
        id: `vm${k}`,
        enabled: r() % 5 !== 0,
        healthy: r() % 4 !== 0,
        drained: r() % 6 === 0,
        priority: 1 + (r() % 3),
        weight: 1 + (r() % 100),
        ...(r() % 3 === 0 ? {} : { latencyMs: r() % 50 }),
      }));
      const sensitivity = [0, 5, 20, 100][i % 4]!;
      const pt = buildPoolTable(backends, { latencySensitivityMs: sensitivity, size: 101 });
      const shared = Array.from(pt.table.slots, (s) => (s === MAGLEV_EMPTY ? null : pt.table.members[s]!));
      const o = oraclePoolMembers(backends, sensitivity);
      expect(o.level).toBe(pt.level);
      expect(shared).toEqual(oracleTable(o.members, 101));
    }
  });
});

describe('the disruption table of docs/hashing.md section 2 is the committed output of scripts/oracle/disruption.ts', () => {
  const rowsOf = (text: string) => text.split('\n').filter((l) => /^\| \d+ \|/.test(l));
  const page = rowsOf(HASHING_MD.slice(HASHING_MD.indexOf('\n## 2. Maglev tables')));
  const committed = rowsOf(readFileSync(join(ROOT, 'docs/hashing-disruption.txt'), 'utf8'));
  it('the page shows the committed rows N = 10, 100, 1000', () => {
    expect(committed.map((r) => r.split('|')[1]!.trim())).toEqual(['10', '100', '1000']);
    expect(page.filter((r) => committed.includes(r))).toEqual(committed);
  });
  it('the N = 10 row, recomputed now', () => {
    expect(formatRow(measure(10, 65537))).toBe(committed[0]);
  });
});
