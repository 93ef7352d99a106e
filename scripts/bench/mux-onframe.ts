// The MUX daemon's onFrame, timed: the data plane plus the daemon's send step, where the per-backend
// and per-rule counters are bumped (docs/metrics.md, "How it is made, and what it costs"). The daemon
// is mux1 of examples/lab.yaml, built as slbx-mux builds it but not started: its send fails at once and
// is counted, the fastest way through the send step. UDP frames to the echo rule over FLOWS flows, sent
// round after round, so after the first pass nearly every frame is a flow-table hit.
//
//   node dist/scripts/bench/mux-onframe.js [--dist DIR] [--frames N] [--rounds N] [--flows N]
//
// --dist times another build's daemon (a dist/ folder of an older commit: alternate runs of the two to
// compare them on a busy machine). Prints one JSON line: ns per frame of each round and their median.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs, formatHelp, one, type OptionSpec } from '../../shared/args.js';
import { pkt } from '../../shared/packet-builder.js';

const LAB_YAML = fileURLToPath(new URL('../../../examples/lab.yaml', import.meta.url));
const OWN_DIST = fileURLToPath(new URL('../..', import.meta.url));

const SPECS: OptionSpec[] = [
  { name: 'dist', value: 'DIR', help: 'the build whose MUX daemon is timed (its mux/daemon.js, shared/config.js)', default: OWN_DIST },
  { name: 'frames', value: 'N', help: 'frames per round', default: '2000000' },
  { name: 'rounds', value: 'N', help: 'rounds (the median is printed)', default: '5' },
  { name: 'flows', value: 'N', help: 'distinct UDP flows the frames cycle over', default: '4096' },
];

function count(args: ReturnType<typeof parseArgs>, name: string): number {
  const v = Number(one(args, name));
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} must be a positive integer (got ${one(args, name)})`);
  return v;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(
      formatHelp('mux-onframe.js [options]', "times the MUX daemon's onFrame (data plane and send step), ns per frame", SPECS),
    );
    return;
  }
  const args = parseArgs(argv, SPECS);
  const dist = resolve(one(args, 'dist') ?? OWN_DIST);
  const frames = count(args, 'frames');
  const rounds = count(args, 'rounds');
  const flows = count(args, 'flows');
  const { MuxDaemon } = (await import(pathToFileURL(`${dist}/mux/daemon.js`).href)) as typeof import('../../mux/daemon.js');
  const { parseConfig } = (await import(pathToFileURL(`${dist}/shared/config.js`).href)) as typeof import('../../shared/config.js');
  const { configureLog } = (await import(pathToFileURL(`${dist}/runtime/log.js`).href)) as typeof import('../../runtime/log.js');
  configureLog('mux-onframe', 'error');
  const parsed = parseConfig(readFileSync(LAB_YAML, 'utf8'), LAB_YAML);
  if (!parsed.ok) throw new Error('examples/lab.yaml does not parse');
  const config = parsed.config;
  const mac = (a: number) => Uint8Array.of(0x02, 0x00, a >>> 24, (a >>> 16) & 0xff, (a >>> 8) & 0xff, a & 0xff);
  const d = new MuxDaemon({ config, name: 'mux1', iface: 'bench-no-such-if', mac: mac(config.muxes[0]!.address.words[0]!), bgp: false });
  for (const h of d.ctx.tables.hosts.values()) {
    h.mac.set(mac(h.pa4));
    h.macKnown = true;
  }
  d.ctx.nowS = 1;
  const set: Buffer[] = [];
  for (let i = 0; i < flows; i++)
    set.push(
      pkt()
        .eth({ src: '02:00:00:00:00:01', dst: '02:00:c6:12:00:0b' })
        .ipv4({ src: `198.51.100.${10 + (i % 32)}`, dst: '203.0.113.10' })
        .udp({ sport: 20000 + (i % 40000), dport: 7 })
        .payload('x'.repeat(64))
        .build(),
    );
  const ns: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < frames; i++) {
      const f = set[i % flows]!;
      d.onFrame(f, f.length);
    }
    ns.push(Number(process.hrtime.bigint() - t0) / frames);
  }
  const c = d.counters();
  const sorted = [...ns].sort((a, b) => a - b);
  process.stdout.write(
    `${JSON.stringify({
      dist,
      frames,
      rounds,
      flows,
      nsPerFrame: ns.map((x) => Math.round(x)),
      median: Math.round(sorted[Math.floor(sorted.length / 2)]!),
      // the path taken: every frame forwarded (send_error_cap: not started), flows new then hits
      counters: { rx_packets: c['rx_packets'], send_error_cap: c['send_error_cap'], flow_new: c['flow_new'], flow_hit: c['flow_hit'] },
    })}\n`,
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`mux-onframe: ${(e as Error).message}\n`);
  process.exit(1);
});
