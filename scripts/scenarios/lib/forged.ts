// Scenario 18: forged traffic and forged control. `gen-unknown-vxlan` writes VXLAN toward a host agent
// from provider addresses that are neither a MUX nor a host of the config; `forged` checks the run from
// snapshots taken before and after (counters, tables generations, the controller's state and stats) and
// the HTTP statuses the forgeries got.
import { readFileSync, writeFileSync } from 'node:fs';
import { pkt } from '../../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../../shared/pcap-file.js';
import { TCP_SYN } from '../../../shared/tcp.js';
import { Checks, flagsOf, loadConfig, need } from './check.js';
import { readClientRecords } from './north-south.js';
import { readClientRecordsOf } from '../../lab/client.js';

export const UNKNOWN_SOURCES = ['198.18.0.1', '198.18.0.99', '198.18.0.200'];
export const COPIES_EACH = 5;

/** --out FILE --router-mac M --host-mac M --host-pa A --nic-mac M --vip A */
export function generateUnknownVxlan(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const frames: Buffer[] = [];
  for (const src of UNKNOWN_SOURCES) {
    for (let i = 0; i < COPIES_EACH; i++) {
      frames.push(
        pkt()
          .eth({ src: need(f, 'router-mac'), dst: need(f, 'host-mac') })
          .ipv4({ src, dst: need(f, 'host-pa') })
          .udp({ sport: 50100 + i, dport: 4789, checksum: 'zero' })
          .vxlan({ vni: 5001 })
          .eth({ src: need(f, 'router-mac'), dst: need(f, 'nic-mac') })
          .ipv4({ src: '198.51.100.10', dst: need(f, 'vip') })
          .tcp({ sport: 1400 + i, dport: 80, flags: TCP_SYN })
          .build(),
      );
    }
  }
  writeFileSync(
    need(f, 'out'),
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: 1e15 + i, data: d, origLen: d.length })),
    ),
  );
}

/**
 * --host-before F --host-after F (GET /counters) [--host host1 --config examples/lab.yaml: whose counters they are] --mux-gens-before "mux1=G,mux2=G" --mux-gens-after ...
 * --state-before F --state-after F (GET /v1/state) --stats F (GET /v1/stats) --statuses "label=code,..."
 * --expect-unauthorized N --client-json F --requests N
 */
export function verifyForged(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const c = new Checks();
  const json = (k: string) => JSON.parse(readFileSync(need(f, k), 'utf8'));
  const hb = json('host-before') as Record<string, number>;
  const ha = json('host-after') as Record<string, number>;
  const n = UNKNOWN_SOURCES.length * COPIES_EACH;
  const d = (ha.drop_in_unknown_source ?? 0) - (hb.drop_in_unknown_source ?? 0);
  c.check(
    d === n,
    `VXLAN from ${UNKNOWN_SOURCES.join(', ')} (no MUX or host of the config) is dropped and counted as unknown_source`,
    `+${d} of ${n} injected`,
  );
  // the good traffic, counted by the client: each request a new connection, so its backend received at
  // least the SYN, the request and the client's FIN (or RST) through the host agent of its host
  const config = loadConfig(f.get('config') ?? 'examples/lab.yaml');
  const hostName = f.get('host') ?? 'host1';
  const hostNics = new Set(config.nics.filter((x) => x.host === hostName).map((x) => x.name));
  const answered = readClientRecords(need(f, 'client-json')).filter((r) => r.ok && r.backend !== null && hostNics.has(r.backend)).length;
  const delivered = (ha.in_delivered ?? 0) - (hb.in_delivered ?? 0);
  c.check(
    answered > 0 && delivered >= 3 * answered,
    `${hostName} kept delivering the good traffic while it dropped the forgeries: at least 3 packets for each request its backends (${[...hostNics].join(', ')}) answered`,
    `in_delivered +${delivered}, ${answered} requests answered there`,
  );
  c.check(
    (ha.drop_internal_error ?? 0) === 0,
    `${hostName} counted no internal error`,
    `drop_internal_error ${ha.drop_internal_error ?? 0}`,
  );

  const statuses = Object.fromEntries(
    need(f, 'statuses')
      .split(',')
      .map((kv) => kv.split('=') as [string, string]),
  );
  for (const [label, code] of Object.entries(statuses)) {
    const want = label.startsWith('daemon') ? ['405'] : ['401'];
    c.check(want.includes(code), `forged: ${label.replaceAll('_', ' ')} was refused`, `HTTP ${code}`);
  }
  const stats = json('stats');
  const expectUnauth = Number(need(f, 'expect-unauthorized'));
  c.check(
    stats.authentication === true && stats.refused?.unauthorized === expectUnauth,
    'the controller counted every unauthorized call',
    `refused.unauthorized ${stats.refused?.unauthorized}, expected ${expectUnauth}`,
  );

  const sb = json('state-before');
  const sa = json('state-after');
  c.check(
    sb.generation === sa.generation && JSON.stringify(sb.config) === JSON.stringify(sa.config),
    "the controller's desired state did not change",
    `generation ${sb.generation} -> ${sa.generation}`,
  );
  const gb = need(f, 'mux-gens-before');
  const ga = need(f, 'mux-gens-after');
  c.check(gb === ga, 'no MUX installed new tables (nothing in the data path changed)', `${gb} -> ${ga}`);

  const recs = readClientRecordsOf(need(f, 'client-json'), 'http');
  const ok = recs.filter((r) => r.ok).length;
  const requests = Number(need(f, 'requests'));
  c.check(recs.length === requests && ok === requests, 'good traffic all along: every request succeeded', `${ok} of ${requests}`);
  return c;
}
