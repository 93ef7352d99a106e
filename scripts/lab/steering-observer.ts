// The host agent's worker steering (host-agent/worker-steering.ts) on a live host of the lab, watched from
// the side: N ring sockets in a PACKET_FANOUT_CBPF group on the host's fabric interface (the fabric
// program) and N in one group per VM port (the port program), socket i of each group standing for worker
// i, all joined in index order. The groups get copies of the frames; the host agent's own sockets are not
// touched. Each frame is decoded with slbx's codecs (shared/dissect.ts) and counted by (side, worker, the
// addresses and ports of the packet the host agent handles: inside the VXLAN on the fabric). Runs until
// SIGTERM or SIGINT, then writes what it counted:
//
//   node dist/scripts/lab/steering-observer.js --fabric fab0 --ports h1vm1,h1vm2 --out FILE [--workers 2]
//        [--vxlan-port 4789] [--internal-vips 198.19.0.101,2001:db8::1]
//
// It judges nothing: scripts/scenarios/lib/host-steering.ts does (scenario 43).
import { writeFileSync } from 'node:fs';
import { ip } from '../../shared/addr.js';
import { dissect } from '../../shared/dissect.js';
import { isMain } from '../../runtime/command.js';
import { loadRingAddon, RingPort, fanoutGroupId } from '../../runtime/ring-port.js';
import { buildSteeringProgram, encodeSockFilters, STEER_FABRIC, STEER_PORT, type SteeringVips } from '../../host-agent/worker-steering.js';

const USAGE =
  'usage: node dist/scripts/lab/steering-observer.js --fabric IF --ports IF[,IF...] --out FILE [--workers 2] [--vxlan-port 4789]\n' +
  '       [--internal-vips ADDR[,ADDR...]]\n' +
  'N ring sockets per interface in PACKET_FANOUT_CBPF groups with the host agent steering programs, watching (copies) the\n' +
  "host's fabric interface and VM ports until SIGTERM; then writes per (side, worker, addresses and ports) the frames seen,\n" +
  "and each socket's kernel drops, to FILE. Root, in the host's namespace.\n";

/** What the observer writes: one record per (side, worker, 5-tuple) with its frame count. */
export interface SteeringObservation {
  workers: number;
  records: {
    side: 'fabric' | 'port';
    iface: string;
    worker: number;
    proto: number;
    src: string;
    sport: number;
    dst: string;
    dport: number;
    frames: number;
  }[];
  /** Frames without an IP packet of TCP or UDP (ARP, ND, ICMP...), per side and worker. */
  other: { side: 'fabric' | 'port'; worker: number; frames: number }[];
  kernelDrops: number;
}

function opt(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function main(): void {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(USAGE);
    return;
  }
  const fabric = opt('fabric');
  const ports = opt('ports');
  const out = opt('out');
  if (fabric === undefined || ports === undefined || out === undefined) {
    process.stderr.write(`steering-observer.js: --fabric, --ports and --out are required\n${USAGE}`);
    process.exit(2);
  }
  const workers = Number(opt('workers') ?? '2');
  const vxlanPort = Number(opt('vxlan-port') ?? '4789');
  if (!Number.isInteger(workers) || workers < 1 || workers > 16 || !Number.isInteger(vxlanPort) || vxlanPort < 1 || vxlanPort > 65535) {
    process.stderr.write(`steering-observer.js: --workers must be 1..16 and --vxlan-port 1..65535\n`);
    process.exit(2);
  }
  const vips: SteeringVips = { v4: [], v6: [] };
  for (const a of (opt('internal-vips') ?? '').split(',').filter((x) => x !== '')) {
    const p = ip(a);
    if (p.family === 4) (vips.v4 as number[]).push(p.words[0]!);
    else (vips.v6 as number[][]).push([...p.words]);
  }
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(r.error);
  const counts = new Map<string, number>();
  const other = new Map<string, number>();
  const sockets: RingPort[] = [];
  const watch = (iface: string, side: 'fabric' | 'port', group: number): void => {
    const prog = encodeSockFilters(buildSteeringProgram(side === 'fabric' ? STEER_FABRIC : STEER_PORT, vxlanPort, vips));
    for (let w = 0; w < workers; w++) {
      const p = new RingPort(iface, r.addon, { fanoutGroup: group, fanoutProgram: prog });
      p.open('', (f, len) => {
        const d = dissect(f.subarray(0, len));
        // the packet the host agent handles: the inner one on the fabric (after the VXLAN header)
        const vx = d.layers.findIndex((l) => l.layer === 'vxlan');
        if (side === 'fabric' && vx < 0) {
          other.set(`${side}|${w}`, (other.get(`${side}|${w}`) ?? 0) + 1);
          return;
        }
        const inner = d.layers.slice(vx + 1);
        const ipl = inner.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6');
        const l4 = inner.find((l) => l.layer === 'tcp' || l.layer === 'udp');
        if (
          ipl === undefined ||
          l4 === undefined ||
          (ipl.layer !== 'ipv4' && ipl.layer !== 'ipv6') ||
          (l4.layer !== 'tcp' && l4.layer !== 'udp')
        ) {
          other.set(`${side}|${w}`, (other.get(`${side}|${w}`) ?? 0) + 1);
          return;
        }
        const k = JSON.stringify([side, iface, w, l4.layer === 'tcp' ? 6 : 17, ipl.src, l4.srcPort, ipl.dst, l4.dstPort]);
        counts.set(k, (counts.get(k) ?? 0) + 1);
      });
      sockets.push(p);
    }
  };
  watch(fabric, 'fabric', fanoutGroupId(process.pid, 0));
  ports.split(',').forEach((p, i) => watch(p, 'port', fanoutGroupId(process.pid, 1 + i)));
  process.stdout.write(`steering-observer: ${workers} sockets on ${fabric} and on each of ${ports}\n`);
  const finish = (): void => {
    const kernelDrops = sockets.reduce((s, p) => s + (p.stats()?.rxKernelDrops ?? 0), 0);
    for (const s of sockets) s.close();
    const obs: SteeringObservation = {
      workers,
      records: [...counts.entries()].map(([k, frames]) => {
        const [side, iface, worker, proto, src, sport, dst, dport] = JSON.parse(k) as [
          'fabric' | 'port',
          string,
          number,
          number,
          string,
          number,
          string,
          number,
        ];
        return { side, iface, worker, proto, src, sport, dst, dport, frames };
      }),
      other: [...other.entries()].map(([k, frames]) => {
        const [side, worker] = k.split('|');
        return { side: side as 'fabric' | 'port', worker: Number(worker), frames };
      }),
      kernelDrops,
    };
    writeFileSync(out, JSON.stringify(obs));
    process.exit(0);
  };
  process.on('SIGTERM', finish);
  process.on('SIGINT', finish);
}

if (isMain(import.meta.url)) main();
