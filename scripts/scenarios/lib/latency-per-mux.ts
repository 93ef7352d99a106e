// Scenario 29 (latency-per-mux): two MUXes that see the same backends at different distances each send
// new flows to its own fastest, as each Front Door environment measures and routes for itself (issue 17).
// The distances are the lab's delay links (docs/lab.md, "Delay links"): the expected choice of each MUX
// comes from the delays file alone (the backends on the hosts nearest to that MUX), never from the MUX.
//
//   node dist/scripts/scenarios/lib/latency-per-mux.js config --in examples/lab.yaml --out FILE
//       the lab config with pool web measured by every MUX (a latency section, sensitivity 0)
//   node dist/scripts/scenarios/lib/latency-per-mux.js candidates POOLTABLE < STATUS.json
//       the candidates of one pool table in a MUX's GET /status, sorted, comma-joined
//   node dist/scripts/scenarios/lib/verify.js latency-per-mux --run RUNDIR --phase NAME --delays FILE --records F
//       checks one phase from the MUXes' captures (pcaps/MUX-NAME.pcap) and the client's records
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseDocument, isMap, isSeq } from 'yaml';
import { parseConfig, formatConfigErrors, type SlbxConfig } from '../../../shared/config.js';
import { formatMac } from '../../../shared/addr.js';
import { isMain } from '../../../runtime/command.js';
import type { UdpRecord } from '../../lab/client.js';
import { delayNodesFromPlan, parseDelays } from '../../lab/delay-config.js';
import { Checks, countBy, flagsOf, fmtCounts, loadCapture, loadConfig, need, tsharkFields } from './check.js';

/** The pool the scenario measures, and its latency settings (fast, so the scenario waits little). */
export const POOL = 'web';
/**
 * A median of 9 samples and a 50 ms flap guard: on this loaded 2-core machine (load average 60) single
 * echoes took up to 700 ms and a median of 3 flapped the band 48 times in a run; the scenario is about
 * each MUX choosing by its own distances, not about the measurement's noise (scenario 28 is).
 */
export const LATENCY_SECTION = { intervalMs: 200, samples: 9, hysteresisMs: 50 };

/** The lab config with pool POOL under latency routing at sensitivity 0 (every other line as it was). */
export function latencyConfigText(text: string, source: string): string {
  const doc = parseDocument(text, { uniqueKeys: true });
  const pools = doc.get('pools', true);
  if (!isSeq(pools)) throw new Error(`${source}: no pools list`);
  const pool = pools.items.find((p) => isMap(p) && p.get('name') === POOL);
  if (!isMap(pool)) throw new Error(`${source}: no pool ${POOL}`);
  pool.set('latencySensitivityMs', 0);
  pool.set('latency', doc.createNode(LATENCY_SECTION));
  const out = `# scenario 29: ${source} with pool ${POOL} measured by every MUX (latency routing, sensitivity 0)\n${doc.toString({ lineWidth: 0 })}`;
  const r = parseConfig(out, 'scenario 29 config');
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'scenario 29 config'));
  return out;
}

/** For each MUX, the pool's backends on the host(s) at the smallest delay from it (from the delays file). */
export function expectedFastest(config: SlbxConfig, delaysText: string, planText: string): Map<string, string[]> {
  const nodes = delayNodesFromPlan(planText);
  const r = parseDelays(delaysText, nodes);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  const pool = config.pools.find((p) => p.name === POOL)!;
  const hostOf = new Map(config.nics.map((n) => [n.name, n.host]));
  const out = new Map<string, string[]>();
  for (const m of config.muxes) {
    const delayTo = (nic: string): number => {
      const host = hostOf.get(nic)!;
      // a nic's own pairs count too: (mux, nic) and (nic, host) add to (mux, host)
      let ms = 0;
      for (const p of r.settings.pairs) {
        const pair = new Set([p.owner, p.peer]);
        if (pair.has(m.name) && (pair.has(host) || pair.has(nic))) ms += p.ms;
        if (pair.has(nic) && pair.has(host)) ms += p.ms;
      }
      return ms;
    };
    const nics = pool.backends.map((b) => b.nic);
    const best = Math.min(...nics.map(delayTo));
    out.set(
      m.name,
      nics.filter((n) => delayTo(n) === best),
    );
  }
  return out;
}

/** The flows of a lab client udp run (client.js udp --json FILE: a list, { records }, or JSON lines). */
function readUdpRecords(path: string): UdpRecord[] {
  const text = readFileSync(path, 'utf8').trim();
  if (text.startsWith('[')) return JSON.parse(text) as UdpRecord[];
  if (text.startsWith('{') && !text.includes('\n{')) return ((JSON.parse(text) as { records?: UdpRecord[] }).records ?? []) as UdpRecord[];
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as UdpRecord);
}

export function verifyLatencyPerMux(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const phase = need(f, 'phase');
  const config = loadConfig(join(run, 'config.yaml'));
  const c = new Checks();
  const expected = expectedFastest(config, readFileSync(need(f, 'delays'), 'utf8'), readFileSync(join(run, 'plan.txt'), 'utf8'));
  const vni = config.networks[0]!.vni;
  const nicByMac = new Map(config.nics.map((n) => [formatMac(n.mac), n.name]));
  const hostByPa = new Map(config.hosts.map((h) => [h.address.text, h.name]));
  const records = readUdpRecords(need(f, 'records'));
  const ok = records.filter((r) => r.ok);
  c.check(
    records.length > 0 && ok.length === records.length,
    `${phase}: every UDP flow through the VIP was answered`,
    `${ok.length} of ${records.length}`,
  );

  // the MUXes' VXLAN data frames (VNI of the tenant; the latency echoes are VNI 0): flow -> MUX, nic
  const placed = new Map<string, { mux: string; nic: string }>();
  let total = 0;
  for (const m of config.muxes) {
    const file = join(run, 'pcaps', `${m.name}-${phase}.pcap`);
    const frames: { nic: string; host: string; flow: string }[] = [];
    for (const p of loadCapture(file)) {
      const vx = p.d.first('vxlan');
      if (vx === undefined || vx.vni !== vni) continue;
      const outer = p.d.first('ipv4') ?? p.d.first('ipv6');
      const inner = p.d.all('eth')[1];
      const innerIp = [...p.d.all('ipv4'), ...p.d.all('ipv6')].sort((x, y) => x.off - y.off)[1];
      const udp = p.d.all('udp')[1];
      if (outer === undefined || inner === undefined || innerIp === undefined) continue;
      if (outer.src !== m.address.text && outer.src !== m.address6?.text) continue; // sent by this MUX
      const nic = nicByMac.get(inner.dst) ?? `unknown MAC ${inner.dst}`;
      // the client's datagram names its flow ('flow {i}', client.js udp): one 5-tuple may be reused by
      // a later flow, which ECMP may send to the other MUX (and so to another backend: by design)
      const flow = udp !== undefined ? Buffer.from(p.data.subarray(udp.payloadOff, udp.payloadOff + udp.payloadLen)).toString() : '';
      frames.push({ nic, host: hostByPa.get(outer.dst) ?? outer.dst, flow });
    }
    total += frames.length;
    const want = expected.get(m.name)!;
    const byNic = countBy(frames, (x) => x.nic);
    const wrong = frames.filter((x) => !want.includes(x.nic)).length;
    c.check(
      frames.length > 0 && wrong === 0,
      `${phase}: ${m.name} sends every new flow to its own fastest (${want.join(', ')}, the nearest by the delay links)`,
      `${frames.length} VXLAN frames: ${fmtCounts(byNic)}`,
    );
    for (const x of frames) if (x.flow !== '') placed.set(x.flow, { mux: m.name, nic: x.nic });
    // tshark recounts this MUX's tenant frames per outer destination
    const ts = tsharkFields(file, ['ip.dst'], `vxlan.vni == ${vni} && ip.src == ${m.address.text}`);
    if (ts !== null) {
      const ours = countBy(frames, (x) => config.hosts.find((h) => h.name === x.host)?.address.text ?? x.host);
      const theirs = countBy(ts, (r) => r[0]!.split(',')[0]!);
      c.check(fmtCounts(ours) === fmtCounts(theirs), `${phase}: tshark counts ${m.name}'s frames per host the same`, fmtCounts(theirs));
    }
  }
  // both MUXes decided (ECMP gave each a share), and the records agree with the captures flow by flow
  const perMux = countBy([...placed.values()], (x) => x.mux);
  for (const m of config.muxes) {
    const n = perMux.get(m.name) ?? 0;
    c.check(n >= records.length * 0.1, `${phase}: ${m.name} placed at least 10 % of the flows`, `${n} of ${records.length}`);
  }
  // what each MUX measured (its GET /status, saved by the scenario): measured, not asserted
  for (const m of config.muxes) {
    const file = join(run, `status-${m.name}-${phase}.json`);
    if (!existsSync(file)) continue;
    const st = JSON.parse(readFileSync(file, 'utf8')) as { latency?: { hosts?: { host: string; medianRttMs?: number; rttMs?: number }[] } };
    const hosts = (st.latency?.hosts ?? []).map((h) => `${h.host} ${h.medianRttMs ?? h.rttMs ?? '-'} ms`).join(', ');
    c.note(`${phase}: ${m.name} measured (median echo round trip): ${hosts || 'nothing in its status'}`);
  }
  const disagree = ok.filter((r) => {
    const p = placed.get(`flow ${r.i}`);
    return p === undefined || p.nic !== r.backend?.trim();
  }).length;
  c.check(
    disagree === 0,
    `${phase}: each flow was answered by the backend its MUX sent it to`,
    `${disagree} of ${ok.length} disagree; ${total} frames`,
  );
  return c;
}

function main(argv: readonly string[]): number {
  const [cmd, ...rest] = argv;
  if (cmd === 'config') {
    const f = flagsOf(rest);
    const inFile = need(f, 'in');
    writeFileSync(need(f, 'out'), latencyConfigText(readFileSync(inFile, 'utf8'), inFile));
    return 0;
  }
  if (cmd === 'candidates') {
    const table = rest[0];
    const s = JSON.parse(readFileSync(0, 'utf8')) as { pools?: { table: string; candidates: string[] }[] };
    const t = (s.pools ?? []).find((p) => p.table === table);
    if (t === undefined) return 1;
    process.stdout.write(`${[...t.candidates].sort().join(',')}\n`);
    return 0;
  }
  process.stderr.write(
    'usage: latency-per-mux.js config --in FILE --out FILE | candidates POOLTABLE < STATUS.json\n(the checks: verify.js latency-per-mux --run RUNDIR --phase NAME --delays FILE --records FILE)\n',
  );
  return cmd === '--help' || cmd === '-h' ? 0 : 2;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
