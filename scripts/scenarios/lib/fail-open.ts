// Verifier of scenario 32-fail-open: every backend's probe fails while the services are alive; a rule's
// allDown drop refuses new flows, spread serves them (docs/config.md, allDown). From the run's files:
//   RUN/windows.txt                         "PHASE START_US END_US" for drop, spread, flood
//   RUN/{drop,drop2,spread,spread2,flood}.json  the lab client's records (2: the second VIP)
//   RUN/counters-MUX-PHASE-{before,after}.json  each MUX's GET /counters around each phase
//   RUN/status-MUX-after.json               each MUX's /status at the end (its pool tables)
//   RUN/config-spread.yaml                  the controller's config once both rules spread
//   RUN/pcaps/NIC.pcap                      each backend's eth0 (the client addresses' TCP to 80 and 8000)
//   RUN/pcaps/client1.pcap                  the client's eth0 (its TCP to port 80)
//   RUN/nft-NIC.txt                         the probe-blocking table of each backend, with its counters
// The backend each request must reach is the independent oracle's (scripts/oracle), from the config and
// "every nic down", never the MUX's code.
// Usage: verify.js fail-open --run R --vip A --vip2 A --config FILE --nics a,b,c
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Checks, countBy, fmtCounts, flagsOf, loadCapture, loadConfig, need, type CapturedPacket } from './check.js';
import { readJson } from './bgp.js';
import { oracleRule } from '../../oracle/expected-backend.js';

const TCP_SYN = 0x02;
const TCP_ACK = 0x10;

interface Rec {
  sourceAddress: string | null;
  sourcePort: number | null;
  backend: string | null;
  ok: boolean;
  error: string | null;
}

interface Syn {
  tsUs: number;
  key: string;
  dst: string;
  dport: number;
}

/** The client SYNs (no ACK) of a capture: source address:port, destination, time. */
function synsOf(packets: readonly CapturedPacket[]): Syn[] {
  const out: Syn[] = [];
  for (const p of packets) {
    const ip = p.d.layers.find((l) => l.layer === 'ipv4' || l.layer === 'ipv6') as { src: string; dst: string } | undefined;
    const tcp = p.d.layers.find((l) => l.layer === 'tcp') as { srcPort: number; dstPort: number; flags: number } | undefined;
    if (ip === undefined || tcp === undefined) continue;
    if ((tcp.flags & TCP_SYN) === 0 || (tcp.flags & TCP_ACK) !== 0) continue;
    out.push({ tsUs: p.tsUs, key: `${ip.src}:${tcp.srcPort}`, dst: ip.dst, dport: tcp.dstPort });
  }
  return out;
}

const records = (run: string, name: string): Rec[] => (readJson(join(run, `${name}.json`)) as { records: Rec[] }).records;

export function verifyFailOpen(argv: readonly string[]): Checks {
  const f = flagsOf(argv);
  const run = need(f, 'run');
  const vip = need(f, 'vip');
  const vip2 = need(f, 'vip2');
  const config = loadConfig(need(f, 'config'));
  const nics = need(f, 'nics').split(',');
  const c = new Checks();
  const muxes = config.muxes.map((m) => m.name);

  const windows = new Map<string, [number, number]>();
  for (const l of readFileSync(join(run, 'windows.txt'), 'utf8').split('\n')) {
    const [name, a, b] = l.trim().split(/\s+/);
    if (name !== undefined && name !== '') windows.set(name, [Number(a), Number(b)]);
  }
  const win = (phase: string): [number, number] => {
    const w = windows.get(phase);
    if (w === undefined) throw new Error(`no ${phase} window in windows.txt`);
    return w;
  };
  /** Sum over the MUXes of a counter's change during a phase. */
  const delta = (phase: string, name: string): number =>
    muxes.reduce((s, m) => {
      const before = readJson(join(run, `counters-${m}-${phase}-before.json`)) as Record<string, number>;
      const after = readJson(join(run, `counters-${m}-${phase}-after.json`)) as Record<string, number>;
      if (!(name in after)) throw new Error(`${m}'s /counters has no ${name}`);
      return s + (after[name] ?? 0) - (before[name] ?? 0);
    }, 0);

  // the backends' captures: the client SYNs each one received
  const backendSyns = new Map<string, Syn[]>();
  for (const n of nics) backendSyns.set(n, synsOf(loadCapture(join(run, 'pcaps', `${n}.pcap`))));
  const clientSyns = synsOf(loadCapture(join(run, 'pcaps', 'client1.pcap')));
  const inWin = (s: Syn, [a, b]: [number, number]) => s.tsUs >= a && s.tsUs <= b;

  // the probes really failed: each backend's nftables rule dropped probe SYNs
  for (const n of nics) {
    const p = join(run, `nft-${n}.txt`);
    const drops = existsSync(p) ? [...readFileSync(p, 'utf8').matchAll(/counter packets (\d+)/g)].reduce((s, m) => s + Number(m[1]), 0) : 0;
    c.check(drops > 0, `${n}: its probes were dropped in its namespace (the services stayed up)`, `${drops} probe packets dropped`);
  }

  // --- drop ---
  {
    const w = win('drop');
    const r1 = records(run, 'drop');
    const r2 = records(run, 'drop2');
    c.check(
      r1.length > 0 && r1.every((r) => !r.ok && r.backend === null),
      `drop: every new connection to ${vip}:80 was refused, none answered`,
      `${r1.filter((r) => !r.ok).length}/${r1.length} failed; errors ${fmtCounts(countBy(r1, (r) => r.error ?? 'none'))}`,
    );
    const reached = nics.flatMap((n) =>
      backendSyns
        .get(n)!
        .filter((s) => inWin(s, w))
        .map((s) => `${n} ${s.key}->${s.dst}:${s.dport}`),
    );
    c.check(reached.length === 0, 'drop: no client SYN reached any backend', reached.length === 0 ? '0' : reached.slice(0, 5).join(', '));
    const dropped = delta('drop', 'drop_no_backend');
    const synsToVip = clientSyns.filter((s) => inWin(s, w) && s.dst === vip).length;
    c.check(
      dropped >= r1.length && dropped <= synsToVip,
      `drop: the MUXes counted each refused SYN as drop_no_backend`,
      `+${dropped}; ${r1.length} connections, ${synsToVip} SYNs (retransmissions included) the client sent to ${vip}`,
    );
    c.check(
      delta('drop', 'flow_fail_open') === 0,
      'drop: nothing was placed by fail-open',
      `flow_fail_open +${delta('drop', 'flow_fail_open')}`,
    );
    c.check(
      r2.length > 0 && r2.every((r) => !r.ok),
      `drop: ${vip2} (one rule, every backend down) was withdrawn: no connection to it`,
      `${r2.filter((r) => !r.ok).length}/${r2.length} failed; errors ${fmtCounts(countBy(r2, (r) => r.error ?? 'none'))}`,
    );
  }

  // --- spread, and spread under the flood ---
  const down = { down: nics };
  const o1 = oracleRule(config, vip, 6, 80, down);
  const o2 = oracleRule(config, vip2, 6, 80, down);
  c.check(
    o1.members.filter((m) => m.available).length === nics.length && o1.level !== null,
    `the oracle: ${vip}:80 spreads over every enabled backend with all of them down`,
    o1.members.map((m) => `${m.id}${m.available ? '' : ' (out)'}`).join(', '),
  );
  const served = (phase: string, name: string, o: typeof o1, target: string, dport: number): void => {
    const w = win(phase);
    const rs = records(run, name);
    c.check(
      rs.length > 0 && rs.every((r) => r.ok),
      `${phase}: every new connection to ${target}:80 was served`,
      `${rs.filter((r) => r.ok).length}/${rs.length}; errors ${fmtCounts(countBy(rs, (r) => r.error ?? 'none'))}`,
    );
    const wrong = rs.filter((r) => r.ok && r.backend !== o.choose(r.sourceAddress!, r.sourcePort!));
    c.check(
      wrong.length === 0,
      `${phase}: each answered by the backend the oracle names for the fail-open table`,
      wrong.length === 0
        ? fmtCounts(countBy(rs, (r) => r.backend ?? 'none'))
        : wrong
            .slice(0, 5)
            .map((r) => `${r.sourceAddress}:${r.sourcePort} ${r.backend} != ${o.choose(r.sourceAddress!, r.sourcePort!)}`)
            .join(', '),
    );
    // the captures: each connection's SYN at its backend (the backend port), and at no other
    const at = new Map<string, string[]>();
    for (const n of nics)
      for (const s of backendSyns.get(n)!) if (inWin(s, w) && s.dport === dport) at.set(s.key, [...(at.get(s.key) ?? []), n]);
    const bad = rs.filter((r) => {
      if (!r.ok) return false; // counted above
      const seen = [...new Set(at.get(`${r.sourceAddress}:${r.sourcePort}`) ?? [])];
      return !(seen.length === 1 && seen[0] === r.backend);
    });
    c.check(
      bad.length === 0,
      `${phase}: each connection's SYN was captured at its backend (port ${dport}) and at no other`,
      bad.length === 0
        ? `${rs.length} connections`
        : bad
            .slice(0, 5)
            .map(
              (r) =>
                `${r.sourceAddress}:${r.sourcePort} answered by ${r.backend}, SYN at [${at.get(`${r.sourceAddress}:${r.sourcePort}`) ?? ''}]`,
            )
            .join(', '),
    );
  };

  served('spread', 'spread', o1, vip, 80);
  served('spread', 'spread2', o2, vip2, 8000);
  {
    const w = win('spread');
    const n = records(run, 'spread').length + records(run, 'spread2').length;
    const syns = clientSyns.filter((s) => inWin(s, w) && (s.dst === vip || s.dst === vip2)).length;
    const open = delta('spread', 'flow_fail_open');
    c.check(
      open >= n && open <= syns,
      'spread: the MUXes counted every new flow they placed by fail-open',
      `flow_fail_open +${open}; ${n} connections, ${syns} client SYNs`,
    );
    c.check(
      delta('spread', 'drop_no_backend') === 0,
      'spread: no SYN dropped for want of a backend',
      `drop_no_backend +${delta('spread', 'drop_no_backend')}`,
    );
    const answered = new Set(records(run, 'spread').map((r) => r.backend));
    c.check(
      nics.every((x) => answered.has(x)),
      `spread: all ${nics.length} backends answered`,
      [...answered].sort().join(', '),
    );
  }

  served('flood', 'flood', o1, vip, 80);
  {
    const good = records(run, 'flood').length;
    const open = delta('flood', 'flow_fail_open');
    c.check(
      open > good,
      'flood: the flood SYNs too were placed by the fail-open table (the flood was on)',
      `flow_fail_open +${open} for ${good} good connections; flow_untrusted_full +${delta('flood', 'flow_untrusted_full')}, rx_packets +${delta('flood', 'rx_packets')}`,
    );
    for (const h of config.hosts.map((x) => x.name)) {
      const before = readJson(join(run, `counters-${h}-flood-before.json`)) as Record<string, number>;
      const after = readJson(join(run, `counters-${h}-flood-after.json`)) as Record<string, number>;
      const drops = Object.keys(after)
        .filter((k) => k.startsWith('drop_') && (after[k] ?? 0) !== (before[k] ?? 0))
        .map((k) => `${k} +${(after[k] ?? 0) - (before[k] ?? 0)}`);
      c.note(
        `${h} during the flood: in_delivered +${(after['in_delivered'] ?? 0) - (before['in_delivered'] ?? 0)}, out_dsr +${(after['out_dsr'] ?? 0) - (before['out_dsr'] ?? 0)}${drops.length > 0 ? `, ${drops.join(', ')}` : ', no drops'}`,
      );
    }
    c.check(
      delta('flood', 'drop_no_backend') === 0,
      'flood: no SYN dropped for want of a backend',
      `drop_no_backend +${delta('flood', 'drop_no_backend')}`,
    );
    for (const m of muxes) {
      const st = readJson(join(run, `status-${m}-after.json`)) as { pools: { table: string; candidates: string[]; failOpen?: boolean }[] };
      const open2 = st.pools.find((p) => p.table === 'web/http80#fail-open');
      const base = st.pools.find((p) => p.table === 'web/http80');
      c.check(
        open2?.failOpen === true && base !== undefined && base.candidates.length === 0,
        `${m} at the end: every backend still looks down, and the rules still fail open`,
        `web/http80 candidates [${base?.candidates ?? ''}], web/http80#fail-open [${open2?.candidates ?? ''}]`,
      );
    }
  }
  return c;
}
