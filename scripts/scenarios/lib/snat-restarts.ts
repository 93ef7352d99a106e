#!/usr/bin/env node
// Scenario 39 (snat-exhaustion-and-restarts, issue 15): exhaustion, ports on demand, a controller restart
// and a host agent restart under live outbound connections.
//
//   node dist/scripts/scenarios/lib/snat-restarts.js config --from FILE --out FILE
//     the lab's outbound example with h1vm1 in a rule of its own: frontend 203.0.113.201 and
//     2001:db8:ff::201, at most SMALL_CAP ports, SMALL_PREALLOC preallocated; the other nics keep theirs
//   node dist/scripts/scenarios/lib/snat-restarts.js verify --run DIR --connections N --restart-connections M --kill-connections K
//     reads DIR/{exhaust.json, snat-before.json, snat-after-demand.json, snat-ctl-before.json,
//     snat-ctl-after.json, host1-snat.json, restart.json, after-restart.json, snat-server.json,
//     counters-host1-{before,after}.json, kill.json, snapshot-{before,after}-kill.json}. Passes when: h1vm1's N connections (more than its cap) ended
//     with exactly the cap completed and the rest failed to connect, none reset (the live ones went on);
//     the host counted drop_out_snat_exhausted; the controller had granted h1vm1 ports up to its cap on
//     demand (measured: from a demand to its ports in the engine); the server saw h1vm1's connections from
//     203.0.113.201 only, each on its own port; GET /v1/snat is the same before and after the controller's
//     restart; after the host agent's restart, new connections all complete. Reports how many of the M
//     connections live across the host agent's restart completed. SIGKILL: the agent's only flow snapshot
//     before it was its start's (older than the K connections), the next process restored at least K
//     outbound flows from the flow journal, and all K connections completed, none reset or failed.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { Checks, flagsOf, need } from './check.js';
import type { SnatClientReport } from '../../lab/snat-client.js';
import type { SnatServerRecords } from '../../lab/snat-server.js';

export const SMALL_NIC = 'h1vm1';
export const SMALL_FRONTEND = '203.0.113.201';
export const SMALL_FRONTEND6 = '2001:db8:ff::201';
export const SMALL_CAP = 64;
export const SMALL_PREALLOC = 16;

export function makeConfig(argv: readonly string[]): void {
  const f = flagsOf(argv);
  const raw = parseYaml(readFileSync(need(f, 'from'), 'utf8')) as {
    outbound: Record<string, unknown>[];
    pools: { name: string; backends: { nic: string }[] }[];
  };
  const main = raw.outbound[0]!;
  const pool = raw.pools.find((p) => p.name === main['pool']);
  if (pool === undefined) throw new Error(`the example's outbound rule names no pool (${JSON.stringify(main)})`);
  const others = pool.backends.map((b) => b.nic).filter((n) => n !== SMALL_NIC);
  delete main['pool'];
  main['nics'] = others;
  raw.outbound.push({
    name: 'small',
    frontendIps: [SMALL_FRONTEND, SMALL_FRONTEND6],
    nics: [SMALL_NIC],
    protocol: 'tcp',
    portsPerNic: SMALL_CAP,
    preallocatedPorts: SMALL_PREALLOC,
  });
  writeFileSync(need(f, 'out'), stringifyYaml(raw));
}

interface SnatView {
  generation: number;
  nics: { nic: string; host: string; ports4: number; ports6: number; portsPerNic: number }[];
  ranges: { ip: string; first: number; last: number; host: string; nic: string }[];
}

const read = <T>(run: string, f: string): T => JSON.parse(readFileSync(join(run, f), 'utf8')) as T;

export function verify(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const n = Number(need(f, 'connections'));
  const m = Number(need(f, 'restart-connections'));
  const k = Number(need(f, 'kill-connections'));
  const c = new Checks();

  // exhaustion: exactly the cap connected, the rest refused, none broken
  const ex = read<SnatClientReport>(run, 'exhaust.json');
  c.check(
    ex.tcp.opened === n && ex.tcp.ok === SMALL_CAP && ex.tcp.failed === n - SMALL_CAP && ex.tcp.reset === 0,
    `${SMALL_NIC}: ${n} connections against a cap of ${SMALL_CAP} ports: ${SMALL_CAP} completed, ${n - SMALL_CAP} never connected, none reset`,
    `ok ${ex.tcp.ok}, failed ${ex.tcp.failed}, reset ${ex.tcp.reset} of ${ex.tcp.opened}`,
  );
  const seen = new Set(ex.tcpRecords.filter((r) => r.result === 'ok').map((r) => r.seenSrc));
  c.check(seen.size === 1 && seen.has(SMALL_FRONTEND), `the completed ones left from ${SMALL_FRONTEND}`, [...seen].join(', '));
  const before = read<Record<string, number>>(run, 'counters-host1-before.json');
  const after = read<Record<string, number>>(run, 'counters-host1-after.json');
  const moved = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  c.check(
    moved('drop_out_snat_exhausted') > 0,
    'host1 counted the refused ones: drop_out_snat_exhausted',
    `+${moved('drop_out_snat_exhausted')}`,
  );
  const srv = read<SnatServerRecords>(run, 'snat-server.json');
  const small = srv.tcp.filter((r) => r.src === SMALL_FRONTEND);
  c.check(small.length === SMALL_CAP, `the server saw ${SMALL_CAP} connections from ${SMALL_FRONTEND}`, `${small.length}`);
  c.check(
    new Set(small.map((r) => r.sport)).size === small.length,
    `each on its own frontend port`,
    `${new Set(small.map((r) => r.sport)).size}`,
  );

  // on demand: from the preallocation to the cap
  const held = (v: SnatView) => v.nics.find((x) => x.nic === SMALL_NIC)?.ports4 ?? -1;
  const s0 = read<SnatView>(run, 'snat-before.json');
  const s1 = read<SnatView>(run, 'snat-after-demand.json');
  c.check(
    held(s0) === SMALL_PREALLOC && held(s1) === SMALL_CAP,
    `the controller granted ${SMALL_NIC} ports on demand up to its cap`,
    `${held(s0)} -> ${held(s1)} IPv4 ports`,
  );
  const hs = read<{
    demands: { nic: string; asked: number; granted: number | null; usableAfterMs: number | null }[];
    requests: Record<string, number>;
  }>(run, 'host1-snat.json');
  const mine = hs.demands.filter((d) => d.nic === SMALL_NIC && (d.granted ?? 0) > 0);
  const times = mine.map((d) => d.usableAfterMs).filter((x): x is number => x !== null);
  c.check(
    mine.length > 0 && times.length === mine.length,
    `host1's demands for ${SMALL_NIC} were granted and their ports installed`,
    `${mine.length} granted`,
  );
  c.note(
    `demands: ${mine.map((d) => `asked ${d.asked}, granted ${d.granted}, usable after ${d.usableAfterMs} ms`).join('; ')} (requests ${JSON.stringify(hs.requests)})`,
  );

  // the controller's restart loses no allocation
  const a = read<SnatView>(run, 'snat-ctl-before.json');
  const b = read<SnatView>(run, 'snat-ctl-after.json');
  const key = (v: SnatView) => JSON.stringify({ nics: v.nics, ranges: v.ranges });
  c.check(
    key(a) === key(b) && a.ranges.length > 0,
    'GET /v1/snat is the same before and after the controller restart',
    `${a.ranges.length} ranges, ${a.nics.length} nics`,
  );

  // the host agent's restart under M live connections: reported, not judged (docs/outbound.md)
  const rs = read<SnatClientReport>(run, 'restart.json');
  c.note(`host agent restart under ${m} live outbound connections: ${rs.tcp.ok} completed, ${rs.tcp.reset} reset, ${rs.tcp.failed} failed`);
  c.check(rs.tcp.opened === m, `the ${m} connections were open across the restart`, `${rs.tcp.opened}`);
  const ar = read<SnatClientReport>(run, 'after-restart.json');
  c.check(
    ar.tcp.ok === ar.tcp.opened && ar.tcp.opened > 0,
    'after the host agent restart, new connections all complete',
    `${ar.tcp.ok} of ${ar.tcp.opened}`,
  );

  // SIGKILL under K connections opened after the agent's last flow snapshot: the flow journal has them
  const sb = read<{ written: number; lastAgeMs: number | null }>(run, 'snapshot-before-kill.json');
  c.check(
    sb.written === 1,
    `before the SIGKILL the agent's only flow snapshot was its start's, older than the ${k} connections`,
    `${sb.written} written, the last ${sb.lastAgeMs} ms before the kill`,
  );
  const sa = read<{ loaded: { snat: { restored: number } | null; journal: { snatRestored: number; snatOpened: number } } | null }>(
    run,
    'snapshot-after-kill.json',
  );
  const fromJournal = sa.loaded?.journal.snatRestored ?? -1;
  c.check(
    fromJournal >= k,
    `after the SIGKILL the new process restored the ${k} connections' outbound flows from the flow journal`,
    `${fromJournal} from the journal (${sa.loaded?.journal.snatOpened ?? '?'} open records), ${(sa.loaded?.snat?.restored ?? 0) - fromJournal} from the snapshot`,
  );
  const kr = read<SnatClientReport>(run, 'kill.json');
  c.check(
    kr.tcp.opened === k && kr.tcp.ok === k && kr.tcp.reset === 0 && kr.tcp.failed === 0,
    `the ${k} connections live across the SIGKILL all completed, none reset or failed`,
    `${kr.tcp.ok} ok, ${kr.tcp.reset} reset, ${kr.tcp.failed} failed of ${kr.tcp.opened}`,
  );
  return c;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [cmd, ...rest] = process.argv.slice(2);
  try {
    if (cmd === 'config') makeConfig(rest);
    else if (cmd === 'verify') verify(rest).exit();
    else {
      process.stdout.write(
        'usage: snat-restarts.js config --from FILE --out FILE\n' +
          '       snat-restarts.js verify --run DIR --connections N --restart-connections M --kill-connections K\n',
      );
      process.exit(cmd === '--help' || cmd === '-h' ? 0 : 2);
    }
  } catch (e) {
    process.stderr.write(`snat-restarts ${cmd}: ${(e as Error).message}\n`);
    process.exit(2);
  }
}
