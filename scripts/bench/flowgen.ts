// A paced generator of new flows, for the newflows-* variants of scripts/bench/send-paths.sh:
//
//   node dist/scripts/bench/flowgen.js --interface IF --src-mac M --dst-mac M --rate PPS --seconds S
//        [--packets-per-flow 1|2] [--lag N] [--bytes 64] [--vip 203.0.113.10] [--port 7]
//
// Sends 64-byte UDP frames to VIP:port at PPS packets per second in new flows: flow k has source port
// 1024 + k % 64000 and source address 198.19.0.0 + k / 64000 (198.18.0.0/15, the benchmark range), so
// 4 billion flows pass before a 5-tuple repeats. With --packets-per-flow 2 (the default) every flow
// gets a second packet --lag packets later (default 256, well under a millisecond): the MUX records a
// flow seen once as untrusted and promotes it on its second packet (Ananta 5.2), so this is the load
// of real new connections, PPS / 2 new flows per second; --packets-per-flow 1 is a flood of single
// packets (the untrusted table's limit then decides). The frames are built with the
// project's packet builder; the inner loop (copy, rewrite, IPv4 checksum, sendmmsg) is the ring addon's
// burst() (native/slbx_ring.c), paced in 1 ms steps from an event-loop loop. trafgen cannot pace at
// these rates (its rate option sleeps per packet). Offered packets are counted by the caller from the
// interface's tx_packets; this prints what it sent and how far behind the schedule it fell.
import { pkt } from '../../shared/packet-builder.js';
import { ip } from '../../shared/addr.js';
import { loadRingAddon } from '../../runtime/ring-port.js';

function usage(msg: string): never {
  process.stderr.write(
    `flowgen.js: ${msg}\nusage: flowgen.js --interface IF --src-mac M --dst-mac M --rate PPS --seconds S [--bytes 64] [--vip A] [--port P]\n`,
  );
  process.exit(2);
}

const FLOW_PORTS = 64000;
const SRC_BASE = '198.19.0.0';
const MAX_BURST = 4096;

function main(): void {
  const argv = process.argv.slice(2);
  const o = new Map<string, string>();
  const known = ['interface', 'src-mac', 'dst-mac', 'rate', 'seconds', 'bytes', 'vip', 'port', 'packets-per-flow', 'lag'];
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    if (!k.startsWith('--') || !known.includes(k.slice(2)) || argv[i + 1] === undefined) usage(`bad argument ${JSON.stringify(k)}`);
    o.set(k.slice(2), argv[i + 1]!);
  }
  for (const k of ['interface', 'src-mac', 'dst-mac', 'rate', 'seconds']) if (!o.has(k)) usage(`--${k} is required`);
  const rate = Number(o.get('rate'));
  const seconds = Number(o.get('seconds'));
  const bytes = Number(o.get('bytes') ?? 64);
  const ppf = Number(o.get('packets-per-flow') ?? 2);
  const lag = Number(o.get('lag') ?? 256);
  if (ppf !== 1 && ppf !== 2) usage('--packets-per-flow must be 1 or 2');
  if (!Number.isInteger(lag) || lag < 1) usage('--lag must be an integer >= 1');
  if (!(rate > 0) || !(seconds > 0) || !Number.isInteger(bytes) || bytes < 64 || bytes > 1500)
    usage('--rate and --seconds > 0, --bytes 64..1500');
  const r = loadRingAddon();
  if ('error' in r) {
    process.stderr.write(`flowgen.js: ${r.error}\n`);
    process.exit(1);
  }
  const addon = r.addon;
  const frame = pkt()
    .eth({ src: o.get('src-mac')!, dst: o.get('dst-mac')! })
    .ipv4({ src: SRC_BASE, dst: o.get('vip') ?? '203.0.113.10', ttl: 64 })
    .udp({ sport: 1024, dport: Number(o.get('port') ?? 7), checksum: 'zero' })
    .payload(new Uint8Array(bytes - 42))
    .build();
  // a send socket: the receive side never matches (an ethertype nobody uses) and has a small ring
  const slot = 2048 + 4;
  const h = addon.openPacket(
    o.get('interface')!,
    'ether proto 0x88b5',
    1 << 20,
    2048,
    1,
    1024,
    true,
    Buffer.alloc(slot),
    new Uint32Array(2),
    () => {},
  );
  const srcBase = ip(SRC_BASE).words[0]!;
  const t0 = process.hrtime.bigint();
  let sent = 0;
  let maxLag = 0;
  let newFlows = 0; // flows started (their first packet sent)
  let repeated = 0; // flows that got their second packet
  const step = (): void => {
    const el = Number(process.hrtime.bigint() - t0) / 1e9;
    if (el >= seconds) {
      const st = addon.stats(h);
      addon.close(h);
      process.stdout.write(
        `${JSON.stringify({ rate, seconds, sent, newFlows, repeated, achievedPps: Math.round(sent / el), maxLagPackets: maxLag, txErrors: st.txErrors, lastError: st.txLastError })}\n`,
      );
      return;
    }
    const due = Math.floor(rate * el);
    let n = due - sent;
    if (n > maxLag) maxLag = n;
    if (n > MAX_BURST) n = MAX_BURST;
    if (n > 0 && ppf === 1) {
      const k = addon.burst(h, frame, frame.length, n, newFlows, 14, FLOW_PORTS, srcBase);
      sent += k;
      newFlows += k;
    } else if (n > 0) {
      // second packets of the flows that started at least `lag` packets ago first, then new flows
      let budget = n;
      const due2 = Math.min(budget, Math.max(0, newFlows - lag - repeated));
      if (due2 > 0) {
        const k2 = addon.burst(h, frame, frame.length, due2, repeated, 14, FLOW_PORTS, srcBase);
        repeated += k2;
        sent += k2;
        budget -= k2;
      }
      if (budget > 0) {
        const k1 = addon.burst(h, frame, frame.length, budget, newFlows, 14, FLOW_PORTS, srcBase);
        newFlows += k1;
        sent += k1;
      }
    }
    setImmediate(step);
  };
  process.on('SIGTERM', () => {
    process.stdout.write(`${JSON.stringify({ rate, sent, stopped: true })}\n`);
    process.exit(0);
  });
  step();
}

main();
