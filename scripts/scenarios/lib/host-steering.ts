// Scenario 43's verdict (scripts/scenarios/43-host-steering.sh): the host agent's worker steering on live
// traffic. Reads what scripts/lab/steering-observer.ts counted on a host (N sockets per interface in the
// steering groups) and the client's records, and checks, per TCP connection of the client (its address and
// port: the client tool's own identity of a connection, not the steering key):
//   - the host saw connections in both directions (VXLAN in on the fabric, the backend's reply on a port);
//   - every connection seen both ways was on ONE worker, both directions, every frame;
//   - every worker got connections;
//   - (almost) every connection that came in on the fabric was also seen leaving a port (a vacuous pass,
//     e.g. replies never watched, cannot look green); the kernel's drops of the observer's sockets excuse
//     the rest.
//
//   node dist/scripts/scenarios/lib/host-steering.js --obs FILE --client-prefix 198.51.100. [--min-connections N]
import { readFileSync } from 'node:fs';
import { isMain } from '../../../runtime/command.js';
import type { SteeringObservation } from '../../lab/steering-observer.js';
import { Checks } from './check.js';

function opt(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

export function verifyHostSteering(obs: SteeringObservation, clientPrefix: string, minConnections: number, c: Checks): void {
  // per client endpoint (address:port): the workers of each direction and the frames
  const fabric = new Map<string, Set<number>>();
  const port = new Map<string, Set<number>>();
  let fabricFrames = 0;
  let portFrames = 0;
  for (const r of obs.records) {
    if (r.proto !== 6) continue;
    if (r.side === 'fabric' && r.src.startsWith(clientPrefix)) {
      const k = `${r.src}:${r.sport}`;
      fabric.set(k, (fabric.get(k) ?? new Set()).add(r.worker));
      fabricFrames += r.frames;
    } else if (r.side === 'port' && r.dst.startsWith(clientPrefix)) {
      const k = `${r.dst}:${r.dport}`;
      port.set(k, (port.get(k) ?? new Set()).add(r.worker));
      portFrames += r.frames;
    }
  }
  const both = [...fabric.keys()].filter((k) => port.has(k));
  c.note(
    `observer: ${obs.workers} sockets per interface; ${fabric.size} client connections in on the fabric (${fabricFrames} frames), ` +
      `${port.size} out of a port (${portFrames} frames), ${both.length} both ways; kernel drops at the observer ${obs.kernelDrops}`,
  );
  c.check(both.length >= minConnections, `the host saw at least ${minConnections} connections in both directions`, `${both.length}`);
  const split = both.filter((k) => new Set([...fabric.get(k)!, ...port.get(k)!]).size !== 1);
  c.check(
    split.length === 0,
    'every connection seen both ways was on one worker, both directions, every frame',
    split.length === 0
      ? `${both.length} connections`
      : `${split.length} split, e.g. ${split
          .slice(0, 3)
          .map((k) => `${k} fabric [${[...fabric.get(k)!].join(',')}] port [${[...port.get(k)!].join(',')}]`)
          .join('; ')}`,
  );
  const perWorker = new Array<number>(obs.workers).fill(0);
  for (const k of both) perWorker[[...fabric.get(k)!][0]!]!++;
  c.check(
    perWorker.every((n) => n > 0),
    'every worker got connections',
    perWorker.map((n, w) => `worker ${w}: ${n}`).join(', '),
  );
  const inOnly = [...fabric.keys()].filter((k) => !port.has(k)).length;
  c.check(
    inOnly <= Math.max(obs.kernelDrops, Math.floor(fabric.size / 100)),
    'the connections that came in on the fabric were seen leaving a port too (at most 1 % or the observer kernel drops missing)',
    `${inOnly} of ${fabric.size} not seen leaving`,
  );
}

function main(): void {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(
      'usage: node dist/scripts/scenarios/lib/host-steering.js --obs FILE --client-prefix PREFIX [--min-connections N]\n',
    );
    return;
  }
  const file = opt('obs');
  const prefix = opt('client-prefix');
  if (file === undefined || prefix === undefined) {
    process.stderr.write('host-steering.js: --obs and --client-prefix are required (--help)\n');
    process.exit(2);
  }
  const c = new Checks();
  verifyHostSteering(JSON.parse(readFileSync(file, 'utf8')) as SteeringObservation, prefix, Number(opt('min-connections') ?? '100'), c);
  c.exit();
}

if (isMain(import.meta.url)) main();
