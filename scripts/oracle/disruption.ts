#!/usr/bin/env node
// Reproduces the disruption table of docs/hashing.md section 2 ("Adding or deleting a backend in
// config") with the independent Maglev oracle: at M = 65537 with equal weights, for N = 10, 100 and 1000
// members named backend-0 .. backend-(N-1):
//   deleting one   each of the N members (N <= 100), or 100 members spread over the list (N = 1000):
//                  the share of slots it owned, and the share of other slots that change owner
//   adding one     20 different new ids (backend-N, then added-1 .. added-19): the share of all slots
//                  that change owner (ideal 1/(N+1)), and of those the share that moves between old members
// The output is committed as docs/hashing-disruption.txt; it is deterministic (no random input).
//   node dist/scripts/oracle/disruption.js [--size M] [--n 10,100,1000]
import { pathToFileURL } from 'node:url';
import { oracleTable, type OracleMember } from './maglev-oracle.js';

const HELP = `disruption.js: Maglev disruption on member deletion and addition, measured with the independent oracle

usage: node dist/scripts/oracle/disruption.js [--size M] [--n N,N,...]
  --size M   table size, a prime (default 65537)
  --n LIST   member counts (default 10,100,1000)
prints a markdown table (the one in docs/hashing.md) and the per-case detail
`;

const pct = (x: number) => `${(100 * x).toFixed(2)} %`;
const num = (x: number) => (100 * x).toFixed(2);

export interface Row {
  n: number;
  own: number[];
  other: number[];
  added: number[];
  between: number[];
}

export function measure(n: number, size: number, log: (s: string) => void = () => {}): Row {
  const members: OracleMember[] = Array.from({ length: n }, (_, i) => ({ id: `backend-${i}`, weight: 1 }));
  const base = oracleTable(members, size);
  const row: Row = { n, own: [], other: [], added: [], between: [] };
  const deletions = n <= 100 ? members.map((_, i) => i) : Array.from({ length: 100 }, (_, k) => Math.floor((k * n) / 100) + 3);
  for (const del of deletions) {
    const id = `backend-${del}`;
    const t = oracleTable(
      members.filter((m) => m.id !== id),
      size,
    );
    let own = 0;
    let other = 0;
    for (let s = 0; s < size; s++) {
      if (base[s] === id) own++;
      else if (t[s] !== base[s]) other++;
    }
    row.own.push(own / size);
    row.other.push(other / size);
  }
  log(
    `N=${n}: deleted ${deletions.length} members, one at a time (${deletions.length <= 10 ? deletions.map((d) => `backend-${d}`).join(', ') : `backend-${deletions[0]}, backend-${deletions[1]}, ... backend-${deletions[deletions.length - 1]}`})`,
  );
  const newIds = [`backend-${n}`, ...Array.from({ length: 19 }, (_, k) => `added-${k + 1}`)];
  for (const id of newIds) {
    const t = oracleTable([...members, { id, weight: 1 }], size);
    let moved = 0;
    let between = 0;
    for (let s = 0; s < size; s++) {
      if (t[s] === base[s]) continue;
      moved++;
      if (t[s] !== id) between++;
    }
    row.added.push(moved / size);
    row.between.push(between / size);
  }
  log(`N=${n}: added ${newIds.length} different ids, one at a time (${newIds[0]}, ${newIds[1]} .. ${newIds[newIds.length - 1]})`);
  return row;
}

const range = (xs: number[]) => `${num(Math.min(...xs))}-${pct(Math.max(...xs))}`;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** One row of the table, as docs/hashing.md prints it. */
export function formatRow(r: Row): string {
  return `| ${r.n} | ${pct(mean(r.own))} | ${range(r.other)} (mean ${pct(mean(r.other))}) | ${range(r.added)} (${pct(1 / (r.n + 1))}) | ${range(r.between)} |`;
}

function main(argv: string[]): number {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(HELP);
    return 0;
  }
  let size = 65537;
  let ns = [10, 100, 1000];
  for (let i = 0; i < argv.length; i += 2) {
    const v = argv[i + 1];
    if (argv[i] === '--size' && v !== undefined) size = Number(v);
    else if (argv[i] === '--n' && v !== undefined) ns = v.split(',').map(Number);
    else {
      process.stderr.write(`disruption: unknown argument ${argv[i]}\n${HELP}`);
      return 2;
    }
  }
  if (ns.some((n) => !Number.isInteger(n) || n < 2)) {
    process.stderr.write('disruption: --n takes integers >= 2\n');
    return 2;
  }
  const lines: string[] = [];
  const rows = ns.map((n) => measure(n, size, (s) => lines.push(s)));
  const out: string[] = [];
  out.push(`Maglev disruption at M = ${size}, equal weights, members backend-0 .. backend-(N-1); computed by scripts/oracle/disruption.ts`);
  out.push(
    'with the independent oracle (scripts/oracle/maglev-oracle.ts, equal to shared/maglev.ts slot for slot: test/maglev-oracle.test.ts).',
  );
  out.push('');
  out.push(
    '| N | deleting one: its own slots | deleting one: other slots that move | adding one: all slots that move (ideal 1/(N+1)) | adding one: of which between old members |',
  );
  out.push('|---|---|---|---|---|');
  for (const r of rows) out.push(formatRow(r));
  out.push('');
  out.push(...lines);
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`disruption: ${(e as Error).message}\n`);
    process.exitCode = 2;
  }
}
