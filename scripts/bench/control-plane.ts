// Policy propagation time, for the cp-* variant of scripts/bench/send-paths.sh: from a change at the
// controller's API to the last MUX applying it.
//
//   node dist/scripts/bench/control-plane.js --controller URL --token-file F --pool P --nic N --changes K [--json FILE]
//
// Waits until every MUX applied the controller's current generation, then K times: sets the weight of
// backend N in pool P (PATCH /v1/pools/P/backends/N, alternating between two weights, so every change
// rebuilds the pool's Maglev table on every MUX), and waits for the generation it made with
// GET /v1/generations/GEN?waitS=10&kind=mux, which answers once every MUX acked it. Per change:
//   clientMs      from just before the PATCH to that answer, measured here (an upper bound: it includes
//                 the two HTTP exchanges)
//   lastMuxAckMs  the controller's own figure: from the PATCH's arrival to the last MUX's ack
// Prints and writes (--json) both series with median, min, max and p90.
import { writeFileSync } from 'node:fs';
import { requestJson } from '../../runtime/http-json.js';
import { bearer, readToken } from '../../runtime/api-token.js';

function usage(msg: string): never {
  process.stderr.write(
    `control-plane.js: ${msg}\nusage: node dist/scripts/bench/control-plane.js --controller URL --token-file F --pool P --nic N --changes K [--json FILE]\n`,
  );
  process.exit(2);
}

interface GenReport {
  generation: number;
  complete: boolean;
  lastMuxAckMs: number | null;
  pending: string[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function summary(xs: number[]): { median: number; min: number; max: number; p90: number; n: number } {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))] ?? NaN;
  return { median: q(0.5), min: s[0] ?? NaN, max: s[s.length - 1] ?? NaN, p90: q(0.9), n: s.length };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const o = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    if (!['--controller', '--token-file', '--pool', '--nic', '--changes', '--json'].includes(k) || argv[i + 1] === undefined)
      usage(`bad argument ${JSON.stringify(k)}`);
    o.set(k.slice(2), argv[i + 1]!);
  }
  const base = o.get('controller') ?? usage('--controller is required');
  const token = readToken(o.get('token-file') ?? usage("--token-file is required (the controller's API token)"));
  if (typeof token !== 'string') usage(token.error);
  const headers = bearer(token);
  const pool = o.get('pool') ?? usage('--pool is required');
  const nic = o.get('nic') ?? usage('--nic is required');
  const changes = Number(o.get('changes') ?? 10);
  if (!Number.isInteger(changes) || changes < 1) usage('--changes must be an integer >= 1');
  const url = (p: string) => new URL(p, base);
  // every MUX on the current generation first
  const t0 = Date.now();
  for (;;) {
    const r = await requestJson(url('/v1/generations/current?waitS=5&kind=mux'), { headers, timeoutMs: 15_000 });
    const g = r.body as GenReport;
    if (r.status === 200 && g.complete) break;
    if (Date.now() - t0 > 30_000)
      throw new Error(`the MUXes did not apply the current generation in 30 s (pending: ${g.pending?.join(', ')})`);
    await sleep(200);
  }
  const clientMs: number[] = [];
  const ackMs: number[] = [];
  for (let i = 0; i < changes; i++) {
    const weight = i % 2 === 0 ? 60 : 40;
    const s = process.hrtime.bigint();
    const w = await requestJson(url(`/v1/pools/${encodeURIComponent(pool)}/backends/${encodeURIComponent(nic)}`), {
      method: 'PATCH',
      body: { weight },
      headers,
      timeoutMs: 10_000,
    });
    if (w.status !== 200) throw new Error(`PATCH answered ${w.status}: ${JSON.stringify(w.body)}`);
    const gen = (w.body as { generation: number }).generation;
    const r = await requestJson(url(`/v1/generations/${gen}?waitS=10&kind=mux`), { headers, timeoutMs: 20_000 });
    const e = process.hrtime.bigint();
    const g = r.body as GenReport;
    if (!g.complete) throw new Error(`generation ${gen}: not applied by every MUX in 10 s (pending: ${g.pending.join(', ')})`);
    clientMs.push(Number(e - s) / 1e6);
    if (g.lastMuxAckMs !== null) ackMs.push(g.lastMuxAckMs);
    await sleep(100);
  }
  const out = { changes, clientMs: summary(clientMs), lastMuxAckMs: summary(ackMs), samples: { clientMs, lastMuxAckMs: ackMs } };
  process.stdout.write(`${JSON.stringify({ changes, clientMs: out.clientMs, lastMuxAckMs: out.lastMuxAckMs })}\n`);
  const json = o.get('json');
  if (json !== undefined) writeFileSync(json, `${JSON.stringify(out, null, 2)}\n`);
}

main().catch((e) => {
  process.stderr.write(`control-plane.js: ${(e as Error).message}\n`);
  process.exit(1);
});
