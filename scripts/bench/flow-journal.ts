// The host agent's flow journal (host-agent/flow-journal.ts), timed: what the data plane pays per new or
// changed flow (addDsr: an append to memory), and what one event-loop turn pays at its end (the records'
// times and CRC-32s, and one write(2) to the journal file) for a turn with 1 to 1,000 records. From
// those, the cost per second at a rate of new flows: each turn that made a flow writes once, so the
// worst case is one record per turn (rate x the 1-record flush), the batched case `rate / 1000` records
// per 1 ms turn. Bytes per flow: one 64-byte record (a flow that closes writes one or two more).
//
//   node dist/scripts/bench/flow-journal.js [--records 1,10,50,100,1000] [--rates 1000,50000] [--rounds 5] [--dir DIR] [--json FILE]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { runCommand, isMain, type CommandSpec } from '../../runtime/command.js';
import { FLOW_DSR, HostFlowTable, KEY_SPACE_DSR } from '../../host-agent/flow-table.js';
import { FlowJournal, JOURNAL_DSR_RECORD_WORDS } from '../../host-agent/flow-journal.js';

const OPTIONS: OptionSpec[] = [
  { name: 'records', value: 'N,N,...', help: 'records per turn to time the flush at', default: '1,10,50,100,1000' },
  { name: 'rates', value: 'N,N,...', help: 'new flows per second to work the cost out at', default: '1000,50000' },
  { name: 'rounds', value: 'N', help: 'rounds (the median is reported, with min and max)', default: '5' },
  { name: 'dir', value: 'DIR', help: 'where the journal is written (default: a new directory under the system tmp)' },
  { name: 'json', value: 'FILE', help: 'write the figures as JSON' },
  { name: 'help', help: 'show this help' },
];

const COMMAND: CommandSpec = {
  program: 'flow-journal',
  usage: 'node dist/scripts/bench/flow-journal.js [--records 1,10,50,100,1000] [--rates 1000,50000] [--rounds 5] [--dir DIR] [--json FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Times the host agent's flow journal: the append per flow, the flush per event-loop turn, and the cost per second at a rate of new flows.",
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function list(a: ParsedArgs, name: string): number[] {
  const out = one(a, name)!.split(',').map(Number);
  if (out.some((n) => !Number.isInteger(n) || n < 1 || n > 10_000_000))
    throw new Error(`--${name}: whole numbers from 1 to 10,000,000, e.g. ${OPTIONS.find((o) => o.name === name)!.default}`);
  return out;
}

function main(a: ParsedArgs): number {
  const perTurn = list(a, 'records');
  const rates = list(a, 'rates');
  const rounds = Number(one(a, 'rounds'));
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1000) throw new Error('--rounds: a whole number from 1 to 1000, e.g. 5');
  const dir = one(a, 'dir') ?? mkdtempSync(join(tmpdir(), 'slbx-flow-journal-bench-'));
  const j = new FlowJournal({ dir, name: 'bench', log: () => undefined });
  j.rotate(1, 1000);
  const t = new HostFlowTable(16);
  t.setKey4(5001, 0xc000020a, 0xc6336400, 6, 80, 1024, KEY_SPACE_DSR);
  const key = t.table.key;
  // the append alone (the data plane's part), 1,000,000 records flushed every 1,000 (no timing of the flush here)
  const appendNs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let ns = 0;
    for (let b = 0; b < 1000; b++) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < 1000; i++) j.buffer.addDsr(key, (FLOW_DSR << 24) | 80, 1240 + i);
      ns += Number(process.hrtime.bigint() - t0);
      j.flush(1000);
    }
    appendNs.push(ns / 1_000_000);
  }
  const flushMs = new Map<number, { med: number; min: number; max: number }>();
  for (const n of perTurn) {
    const turns = Math.max(20, Math.min(5000, Math.floor(200_000 / n)));
    const per: number[] = [];
    for (let r = 0; r < rounds; r++) {
      let ms = 0;
      for (let k = 0; k < turns; k++) {
        for (let i = 0; i < n; i++) j.buffer.addDsr(key, (FLOW_DSR << 24) | 80, 1240 + i);
        const t0 = performance.now();
        j.flush(1000);
        ms += performance.now() - t0;
      }
      per.push(ms / turns);
    }
    flushMs.set(n, { med: median(per), min: Math.min(...per), max: Math.max(...per) });
  }
  const one1 = flushMs.get(1)?.med;
  const rows: Record<string, unknown>[] = [];
  let load = 'load n/a';
  try {
    load = `load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`;
  } catch {
    /* not Linux */
  }
  console.log(`flow journal: ${JOURNAL_DSR_RECORD_WORDS * 4} bytes per return-path record; ${rounds} rounds, median (min-max); ${load}`);
  console.log(
    `  append (data plane): ${median(appendNs).toFixed(1)} ns per record (${Math.min(...appendNs).toFixed(1)}-${Math.max(...appendNs).toFixed(1)})`,
  );
  for (const [n, f] of flushMs) {
    console.log(
      `  flush of a turn with ${n} record(s): ${f.med.toFixed(4)} ms (${f.min.toFixed(4)}-${f.max.toFixed(4)}), ${((f.med * 1e6) / n).toFixed(0)} ns per record`,
    );
    rows.push({ recordsPerTurn: n, flushMs: f });
  }
  const est: Record<string, unknown>[] = [];
  for (const rate of rates) {
    const batch = Math.max(1, Math.round(rate / 1000));
    const nearest = [...flushMs.keys()].reduce((p, c) => (Math.abs(c - batch) < Math.abs(p - batch) ? c : p));
    const worst = one1 === undefined ? null : rate * one1;
    const batched = (rate / nearest) * flushMs.get(nearest)!.med;
    console.log(
      `  at ${rate} new flows/s: ${((rate * JOURNAL_DSR_RECORD_WORDS * 4) / 1e6).toFixed(2)} MB/s to the page cache; ` +
        `${worst === null ? '-' : `${worst.toFixed(1)} ms per second (one record per turn, the worst case)`}; ` +
        `${batched.toFixed(1)} ms per second with ${nearest} records per turn`,
    );
    est.push({ rate, bytesPerS: rate * JOURNAL_DSR_RECORD_WORDS * 4, worstMsPerS: worst, batchedMsPerS: batched, recordsPerTurn: nearest });
  }
  const json = one(a, 'json');
  if (json !== undefined)
    writeFileSync(
      json,
      JSON.stringify({ recordBytes: JOURNAL_DSR_RECORD_WORDS * 4, appendNs: median(appendNs), flush: rows, rates: est }, null, 2),
    );
  j.close(1000);
  if (one(a, 'dir') === undefined) rmSync(dir, { recursive: true, force: true });
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = runCommand(COMMAND, process.argv.slice(2), main);
