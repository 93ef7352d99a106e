// PACKET_FANOUT on the ring path, checked on a real veth pair with real sockets, each in its own worker
// thread (as --workers N runs them): N ring sockets in one fanout group (hash mode) on the DUT end, the
// tester end injecting F UDP flows of K frames each, interleaved (frame k of every flow, then k + 1), each
// frame carrying its flow number and its sequence number. Run as root inside a network namespace that
// holds both ends (test/ring-fanout.test.ts sets one up):
//
//   node dist/runtime/worker-fanout-check.js --dut IF --tester IF [--workers 2] [--flows 64] [--frames 40] [--group N]
//
// --group 0 opens the sockets without a group (each then sees every frame: the check's negative case).
// Prints one JSON line: frames sent, per worker the frames and flows it got and its kernel drops, the
// flows seen by more than one worker, frames out of order within a flow, duplicates. It judges nothing:
// the test does.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { pkt } from '../shared/packet-builder.js';
import { fanoutGroupId, loadRingAddon, RingPort } from './ring-port.js';
import { readInterface } from './netif.js';

const FILTER = 'udp dst port 7';
const BASE_PORT = 20000;

interface WorkerInput {
  dut: string;
  group: number;
  index: number;
}

/** What a worker reports: per flow, the sequence numbers in arrival order. */
interface WorkerReport {
  index: number;
  frames: number;
  seqs: Record<number, number[]>;
  kernelDrops: number;
}

function runWorker(): void {
  const w = workerData as WorkerInput;
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const seqs = new Map<number, number[]>();
  let frames = 0;
  const port = new RingPort(w.dut, r.addon, { fanoutGroup: w.group });
  port.open(FILTER, (f, len) => {
    if (len < 42 + 8) return;
    const flow = f.readUInt32BE(42);
    const seq = f.readUInt32BE(46);
    frames++;
    let l = seqs.get(flow);
    if (l === undefined) seqs.set(flow, (l = []));
    l.push(seq);
  });
  parentPort!.on('message', (m: string) => {
    if (m !== 'report') return;
    const st = port.stats();
    const report: WorkerReport = { index: w.index, frames, seqs: Object.fromEntries(seqs), kernelDrops: st?.rxKernelDrops ?? 0 };
    port.close();
    parentPort!.postMessage(report);
    parentPort!.close();
  });
  parentPort!.postMessage('ready');
}

function arg(name: string, dflt?: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) {
    process.stderr.write(
      `worker-fanout-check.js: --${name} is required\nusage: node dist/runtime/worker-fanout-check.js --dut IF --tester IF [--workers 2] [--flows 64] [--frames 40] [--group N]\n`,
    );
    process.exit(2);
  }
  return v;
}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(
      'usage: node dist/runtime/worker-fanout-check.js --dut IF --tester IF [--workers 2] [--flows 64] [--frames 40] [--group N]\n' +
        'N ring sockets in one PACKET_FANOUT group on IF --dut, one per worker thread; F flows of K frames injected on\n' +
        '--tester; prints one JSON line (per worker frames and flows, flows split, frames out of order). Root, in a netns.\n',
    );
    return;
  }
  const dut = arg('dut');
  const tester = arg('tester');
  const workers = Number(arg('workers', '2'));
  const flows = Number(arg('flows', '64'));
  const per = Number(arg('frames', '40'));
  const group = Number(arg('group', String(fanoutGroupId(process.pid, 0))));
  const dutIf = readInterface(dut);
  if (dutIf === null) throw new Error(`no interface ${dut}`);
  const me = fileURLToPath(import.meta.url);
  const ws: Worker[] = [];
  const ready: Promise<void>[] = [];
  for (let i = 0; i < workers; i++) {
    const w = new Worker(me, { workerData: { dut, group, index: i } satisfies WorkerInput });
    ws.push(w);
    ready.push(
      new Promise((res, rej) => {
        w.once('message', () => res());
        w.once('error', rej);
      }),
    );
  }
  await Promise.all(ready);
  // the tester's port: a ring socket without a group (libpcap's binding `cap` cannot load in a worker
  // thread, "Module did not self-register", so nothing here imports it)
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const out = new RingPort(tester, r.addon, { fanoutGroup: 0 });
  out.open('udp dst port 9', () => {}); // nothing comes back on the tester: a filter that keeps the ring empty
  const dutMac = [...dutIf.mac].map((b) => b.toString(16).padStart(2, '0')).join(':');
  let sent = 0;
  for (let k = 0; k < per; k++) {
    for (let f = 0; f < flows; f++) {
      const body = Buffer.alloc(8);
      body.writeUInt32BE(f, 0);
      body.writeUInt32BE(k, 4);
      const frame = pkt()
        .eth({ src: '02:00:00:00:00:01', dst: dutMac })
        .ipv4({ src: `198.51.100.${10 + (f % 200)}`, dst: '203.0.113.10' })
        .udp({ sport: BASE_PORT + f, dport: 7 })
        .payload(body)
        .build();
      if (out.send(frame, 0, frame.length)) sent++;
    }
    out.flush();
    // let the receivers drain between rounds (the machine may be busy): order is what is judged, not speed
    await new Promise((r) => setTimeout(r, 5));
  }
  out.flush();
  const refused = out.deferredSendErrors();
  out.close();
  await new Promise((r) => setTimeout(r, 500));
  const reports = await Promise.all(
    ws.map(
      (w) =>
        new Promise<WorkerReport>((res, rej) => {
          w.once('message', (m: WorkerReport) => res(m));
          w.once('error', rej);
          w.postMessage('report');
        }),
    ),
  );
  const owner = new Map<number, number[]>();
  let outOfOrder = 0;
  let duplicates = 0;
  for (const r of reports) {
    for (const [flow, s] of Object.entries(r.seqs)) {
      const f = Number(flow);
      owner.set(f, [...(owner.get(f) ?? []), r.index]);
      for (let i = 1; i < s.length; i++) {
        if (s[i]! < s[i - 1]!) outOfOrder++;
        if (s[i] === s[i - 1]) duplicates++;
      }
    }
  }
  const split = [...owner.entries()].filter(([, o]) => o.length > 1).map(([f]) => f);
  process.stdout.write(
    JSON.stringify({
      group,
      sent: sent - refused,
      flows,
      framesPerFlow: per,
      received: reports.reduce((s, r) => s + r.frames, 0),
      workers: reports.map((r) => ({ index: r.index, frames: r.frames, flows: Object.keys(r.seqs).length, kernelDrops: r.kernelDrops })),
      flowsSeen: owner.size,
      flowsSplit: split.length,
      outOfOrder,
      duplicates,
    }) + '\n',
  );
}

if (isMainThread) {
  main().catch((e: unknown) => {
    process.stderr.write(`worker-fanout-check.js: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  });
} else runWorker();
