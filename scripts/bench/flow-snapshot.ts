// The host agent's flow snapshot (host-agent/flow-snapshot.ts), timed at a given table size: the copy of
// the return path's entries in slices (total, and the longest slice: how long packets wait behind one),
// the file's bytes with its CRC-32, the write (tmp + rename), and the read at a start (decode + inserts).
//
//   node dist/scripts/bench/flow-snapshot.js [--flows 1000,100000,1000000] [--rounds 3] [--dir DIR] [--json FILE]
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { runCommand, isMain, type CommandSpec } from '../../runtime/command.js';
import { FLOW_DSR, HostFlowTable, KEY_SPACE_DSR } from '../../host-agent/flow-table.js';
import { FLOW_SNAPSHOT_SLICE_SLOTS, FlowSnapshotBuilder, restoreFlowSnapshot } from '../../host-agent/flow-snapshot.js';

const OPTIONS: OptionSpec[] = [
  { name: 'flows', value: 'N,N,...', help: 'table sizes (return-path entries)', default: '1000,100000,1000000' },
  { name: 'rounds', value: 'N', help: 'rounds per size (the median is reported, with min and max)', default: '3' },
  { name: 'dir', value: 'DIR', help: 'where the file is written (default: a new directory under the system tmp)' },
  { name: 'json', value: 'FILE', help: 'write the figures as JSON' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'flow-snapshot',
  usage: 'node dist/scripts/bench/flow-snapshot.js [--flows 1000,100000,1000000] [--rounds 3] [--dir DIR] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about: "Times the host agent's flow snapshot: the sliced copy, the file's bytes, the write and the read back, per table size.",
};

/** A host flow table of `n` return-path entries (IPv4 TCP, distinct clients and ports). */
function fill(n: number): HostFlowTable {
  const t = new HostFlowTable(n + 16);
  for (let i = 0; i < n; i++) {
    t.setKey4(5001, 0xc000020a, (0xc6336400 + (i >>> 16)) >>> 0, 6, 80, 1024 + (i & 0xffff), KEY_SPACE_DSR);
    t.insert(FLOW_DSR, 80, 1000 + (i % 240));
  }
  return t;
}

interface Row {
  flows: number;
  slots: number;
  bytes: number;
  slices: number;
  copyMs: number[];
  longestSliceMs: number[];
  finishMs: number[];
  writeMs: number[];
  readMs: number[];
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[]) => `${med(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)})`;

function main(a: ParsedArgs): number {
  const sizes = (one(a, 'flows') ?? '')
    .split(',')
    .map(Number)
    .filter((x) => Number.isInteger(x) && x > 0);
  const rounds = Number(one(a, 'rounds'));
  if (sizes.length === 0 || !Number.isInteger(rounds) || rounds < 1) {
    process.stderr.write('flow-snapshot: --flows must list whole numbers above 0 and --rounds be one or more\n');
    return 2;
  }
  const given = one(a, 'dir');
  const dir = given ?? mkdtempSync(join(tmpdir(), 'slbx-flow-snapshot-bench-'));
  const rows: Row[] = [];
  for (const n of sizes) {
    const t = fill(n);
    const row: Row = {
      flows: n,
      slots: t.table.capacity,
      bytes: 0,
      slices: 0,
      copyMs: [],
      longestSliceMs: [],
      finishMs: [],
      writeMs: [],
      readMs: [],
    };
    for (let r = 0; r < rounds; r++) {
      const b = new FlowSnapshotBuilder(t, 1, Date.now());
      let longest = 0;
      let total = 0;
      let slices = 0;
      for (;;) {
        const s0 = performance.now();
        const done = b.step(FLOW_SNAPSHOT_SLICE_SLOTS);
        const d = performance.now() - s0;
        total += d;
        longest = Math.max(longest, d);
        slices++;
        if (done) break;
      }
      const f0 = performance.now();
      const bytes = b.finish(null);
      const finish = performance.now() - f0;
      const path = join(dir, 'host-agent-bench.flows');
      const w0 = performance.now();
      writeFileSync(`${path}.tmp`, bytes);
      renameSync(`${path}.tmp`, path);
      const write = performance.now() - w0;
      const r0 = performance.now();
      const fresh = new HostFlowTable(n + 16);
      const res = restoreFlowSnapshot(readFileSync(path), { flows: fresh, nowS: 1, unixMs: Date.now(), maxLeftS: 240 });
      const read = performance.now() - r0;
      if (res.refused !== null || res.dsrRestored !== n) {
        process.stderr.write(`flow-snapshot: read back ${res.dsrRestored} of ${n} (${res.refused ?? 'not refused'})\n`);
        return 1;
      }
      row.bytes = bytes.length;
      row.slices = slices;
      row.copyMs.push(total);
      row.longestSliceMs.push(longest);
      row.finishMs.push(finish);
      row.writeMs.push(write);
      row.readMs.push(read);
    }
    rows.push(row);
    process.stdout.write(
      `${n} flows (${row.slots} slots, ${(row.bytes / 1e6).toFixed(1)} MB, ${row.slices} slices): copy ${fmt(row.copyMs)} ms, longest slice ${fmt(row.longestSliceMs)} ms, ` +
        `bytes + CRC-32 ${fmt(row.finishMs)} ms, write ${fmt(row.writeMs)} ms, read back ${fmt(row.readMs)} ms\n`,
    );
  }
  if (given === undefined) rmSync(dir, { recursive: true, force: true });
  const json = one(a, 'json');
  if (json !== undefined) writeFileSync(json, JSON.stringify({ rows }, null, 2));
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = runCommand(COMMAND, process.argv.slice(2), main);
