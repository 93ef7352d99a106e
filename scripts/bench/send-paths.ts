// The Node half of scripts/bench/send-paths.sh (which builds the namespaces, runs trafgen and the
// daemons, and reads the kernel's counters). Two commands, run after `npx tsc -p tsconfig.json`:
//
//   node dist/scripts/bench/send-paths.js frames --gen-mac M --router-mac M --mux-mac M --host-mac M
//        --nic-mac M [--port-mac M] [--sizes 64,1400] --out-dir DIR
//     writes DIR/client.trafgen (64-byte UDP frames to the VIP, random source port) and DIR/vxlan.trafgen
//     (the same client frame VXLAN-encapsulated from the MUX's PA to the host's PA, as a MUX sends it),
//     built with the project's packet builder (lengths and checksums right) and turned into trafgen's
//     byte syntax with drnd() where the source ports vary; for each size of --sizes the same as
//     client-SIZE.trafgen and vxlan-SIZE.trafgen (SIZE = the client frame's length), and with --port-mac
//     reply-SIZE.trafgen: the backend's reply (DIP:7 -> client, random destination port) to its gateway
//   node dist/scripts/bench/send-paths.js report --dir DIR
//     reads DIR/runs.tsv, DIR/meta.json and DIR/failures.tsv, writes DIR/results.json and DIR/results.md
//     (median, min, max packets/s per variant; ratios of medians against the baselines of the same run,
//     marked when a side was generator-limited; the process's CPU per packet; the failed runs), prints it
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pkt } from '../../shared/packet-builder.js';
import { readPcap } from '../../shared/pcap-file.js';
import { dissect } from '../../shared/dissect.js';
import { ETHERTYPE_IPV4 } from '../../shared/ethernet.js';
import {
  cpuPerPacketText,
  failuresMarkdown,
  generatorLimitedNote,
  limitNote,
  parseFailures,
  ratioKind,
  ratioText,
  type RatioKind,
} from './report-lib.js';

/** Client frame: Ethernet 14 + IPv4 20 + UDP 8 + payload 22 = 64 bytes (no FCS on a veth). */
export const CLIENT_FRAME_LEN = 64;
const CLIENT_PAYLOAD_LEN = CLIENT_FRAME_LEN - 14 - 20 - 8;
export const VIP = '203.0.113.10';
export const VIP_PORT = 7;
export const CLIENT_IP = '198.51.100.10';
export const MUX_PA = '198.18.0.11';
export const HOST_PA = '198.18.0.21';
export const VNI = 5001;

function usage(msg: string): never {
  process.stderr.write(
    `send-paths.js: ${msg}\nusage: node dist/scripts/bench/send-paths.js frames --gen-mac M --router-mac M --mux-mac M --host-mac M --nic-mac M --out-dir DIR\n       node dist/scripts/bench/send-paths.js report --dir DIR\n`,
  );
  process.exit(2);
}

function options(argv: readonly string[], names: readonly string[], optional: readonly string[] = []): Map<string, string> {
  const m = new Map<string, string>();
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i]!;
    const v = argv[i + 1];
    if (!k.startsWith('--') || !names.includes(k.slice(2))) usage(`unknown argument ${JSON.stringify(k)}`);
    if (v === undefined) usage(`${k} needs a value`);
    m.set(k.slice(2), v);
  }
  for (const n of names) if (!m.has(n) && !optional.includes(n)) usage(`--${n} is required`);
  return m;
}

/** trafgen's byte syntax for `frame`, with the bytes at the given offsets replaced by drnd() (random per packet). */
export function toTrafgen(frame: Uint8Array, random: ReadonlySet<number>, comment: string): string {
  const cells: string[] = [];
  for (let i = 0; i < frame.length; i++) cells.push(random.has(i) ? 'drnd()' : `0x${frame[i]!.toString(16).padStart(2, '0')}`);
  const rows: string[] = [];
  for (let i = 0; i < cells.length; i += 12) rows.push(`  ${cells.slice(i, i + 12).join(', ')},`);
  return `/* ${comment} */\n{\n${rows.join('\n')}\n}\n`;
}

function clientFrame(genMac: string, routerMac: string, frameLen = CLIENT_FRAME_LEN): Uint8Array {
  return pkt()
    .eth({ src: genMac, dst: routerMac })
    .ipv4({ src: CLIENT_IP, dst: VIP, ttl: 64 })
    .udp({ sport: 40000, dport: VIP_PORT, checksum: 'zero' })
    .payload(new Uint8Array(frameLen - 14 - 20 - 8))
    .build();
}

export const DIP = '192.0.2.10';

function frames(argv: readonly string[]): void {
  const o = options(
    argv,
    ['gen-mac', 'router-mac', 'mux-mac', 'host-mac', 'nic-mac', 'port-mac', 'sizes', 'out-dir'],
    ['port-mac', 'sizes'],
  );
  const dir = o.get('out-dir')!;
  mkdirSync(dir, { recursive: true });
  const sizes = (o.get('sizes') ?? String(CLIENT_FRAME_LEN)).split(',').map(Number);
  for (const n of sizes) if (!Number.isInteger(n) || n < CLIENT_FRAME_LEN || n > 1500) usage(`--sizes: ${n} is not a frame size 64..1500`);
  for (const n of sizes) {
    const c = clientFrame(o.get('gen-mac')!, o.get('router-mac')!, n);
    writeFileSync(
      join(dir, `client-${n}.trafgen`),
      toTrafgen(c, new Set([34, 35]), `${n}-byte UDP ${CLIENT_IP}:random -> ${VIP}:${VIP_PORT}, from the generator to the router`),
    );
    const v = pkt()
      .eth({ src: o.get('mux-mac')!, dst: o.get('host-mac')! })
      .ipv4({ src: MUX_PA, dst: HOST_PA, ttl: 64 })
      .udp({ sport: 49152, dport: 4789, checksum: 'zero' })
      .vxlan({ vni: VNI })
      .eth({ src: o.get('mux-mac')!, dst: o.get('nic-mac')!, type: ETHERTYPE_IPV4 })
      .payload(c.subarray(14))
      .build();
    const inner = 14 + 20 + 8 + 8 + 14 + 20;
    writeFileSync(
      join(dir, `vxlan-${n}.trafgen`),
      toTrafgen(
        v,
        new Set([35, inner, inner + 1]),
        `${v.length}-byte VXLAN ${MUX_PA} -> ${HOST_PA}:4789, VNI ${VNI}, carrying the ${n}-byte client frame (random source port)`,
      ),
    );
    if (o.has('port-mac')) {
      const r = pkt()
        .eth({ src: o.get('nic-mac')!, dst: o.get('port-mac')! })
        .ipv4({ src: DIP, dst: CLIENT_IP, ttl: 64 })
        .udp({ sport: VIP_PORT, dport: 40000, checksum: 'zero' })
        .payload(new Uint8Array(n - 14 - 20 - 8))
        .build();
      writeFileSync(
        join(dir, `reply-${n}.trafgen`),
        toTrafgen(
          r,
          new Set([36, 37]),
          `${n}-byte UDP reply ${DIP}:${VIP_PORT} -> ${CLIENT_IP}:random, from the backend to its gateway (the host's port)`,
        ),
      );
    }
  }
  const client = clientFrame(o.get('gen-mac')!, o.get('router-mac')!);
  if (client.length !== CLIENT_FRAME_LEN) throw new Error(`client frame is ${client.length} bytes, expected ${CLIENT_FRAME_LEN}`);
  // the UDP checksum is zero (allowed over IPv4, RFC 768), so random source ports need no checksum update
  writeFileSync(
    join(dir, 'client.trafgen'),
    toTrafgen(
      client,
      new Set([34, 35]),
      `${CLIENT_FRAME_LEN}-byte UDP ${CLIENT_IP}:random -> ${VIP}:${VIP_PORT}, from the generator to the router`,
    ),
  );
  // the same client packet inside VXLAN, as the MUX would send it to the host (inner TTL untouched)
  const vx = pkt()
    .eth({ src: o.get('mux-mac')!, dst: o.get('host-mac')! })
    .ipv4({ src: MUX_PA, dst: HOST_PA, ttl: 64 })
    .udp({ sport: 49152, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: VNI })
    .eth({ src: o.get('mux-mac')!, dst: o.get('nic-mac')! })
    .ipv4({ src: CLIENT_IP, dst: VIP, ttl: 64 })
    .udp({ sport: 40000, dport: VIP_PORT, checksum: 'zero' })
    .payload(new Uint8Array(CLIENT_PAYLOAD_LEN))
    .build();
  const inner = 14 + 20 + 8 + 8 + 14 + 20;
  // outer source port 49152..49407 (low byte random), inner source port random: many flows
  writeFileSync(
    join(dir, 'vxlan.trafgen'),
    toTrafgen(
      vx,
      new Set([35, inner, inner + 1]),
      `${vx.length}-byte VXLAN ${MUX_PA} -> ${HOST_PA}:4789, VNI ${VNI}, carrying the ${CLIENT_FRAME_LEN}-byte client frame (random source port)`,
    ),
  );
}

interface RunRow {
  phase: string;
  variant: string;
  round: number;
  seconds: number;
  delivered: number;
  deliveredPps: number;
  offered: number;
  offeredPps: number;
  /** CPU use in the measured interval, % of the interval: user, system, softirq, idle, steal. */
  generatorCpu: Record<string, number>;
  dutCpu: Record<string, number>;
  /** CPU time of the process under test, % of one CPU (0 for the kernel baselines). */
  dutProcessCpuPct: number;
  /** The 1-minute load average right after the run (the machine may be shared: read the rates with it). */
  loadavg1m?: number;
  /** From the daemon's /status after the run: how it sent or received, its errors and non-zero drop counters. */
  daemon?: Record<string, unknown>;
}

function daemonSummary(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  try {
    const s = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const counters = (s.counters ?? {}) as Record<string, number>;
    const drops: Record<string, number> = {};
    for (const [k, v] of Object.entries(counters)) if (k.startsWith('drop_') && v > 0) drops[k] = v;
    const pick = (...names: string[]) => Object.fromEntries(names.filter((n) => counters[n] !== undefined).map((n) => [n, counters[n]]));
    return {
      ...(s.send !== undefined ? { send: s.send } : {}),
      ...(s.receive !== undefined ? { receive: s.receive } : {}),
      sendErrors: s.sendErrors,
      internalErrors: s.internalErrors,
      counters: pick('rx_packets', 'tx_packets', 'flow_new', 'flow_hit', 'in_packets', 'in_delivered'),
      drops,
    };
  } catch {
    return undefined;
  }
}

interface VariantInfo {
  variant: string;
  phase: string;
  what: string;
  baseline: boolean;
}

interface Meta {
  variants: VariantInfo[];
  /** Per phase, the baseline variants ratios are computed against. */
  baselines: Record<string, string[]>;
  [k: string]: unknown;
}

/** What a variant put on the wire: the first packets at the receiving interface, decoded. */
function wireSummary(file: string): Record<string, unknown> | undefined {
  if (!existsSync(file)) return undefined;
  const r = readPcap(readFileSync(file));
  if (typeof r === 'number') return { error: `not a pcap file (${r})` };
  const outerSrc = new Set<string>();
  const outerDst = new Set<string>();
  const outerSport = new Set<number>();
  const vnis = new Set<number>();
  const innerMac = new Set<string>();
  const innerDst = new Set<string>();
  const innerSport = new Set<number>();
  let vxlan = 0;
  let plain = 0;
  let other = 0;
  let badIpChecksum = 0;
  for (const p of r.packets) {
    const d = dissect(p.data);
    const ips = d.all('ipv4');
    const udps = d.all('udp');
    const eths = d.all('eth');
    if (ips.some((x) => x.checksumOk === false)) badIpChecksum++;
    const vx = d.first('vxlan');
    if (vx !== undefined && ips.length >= 2 && udps.length >= 2 && eths.length >= 2) {
      vxlan++;
      outerSrc.add(ips[0]!.src);
      outerDst.add(`${ips[0]!.dst}:${udps[0]!.dstPort}`);
      outerSport.add(udps[0]!.srcPort);
      vnis.add(vx.vni);
      innerMac.add(eths[1]!.dst);
      innerDst.add(`${ips[1]!.dst}:${udps[1]!.dstPort}`);
      innerSport.add(udps[1]!.srcPort);
    } else if (ips.length === 1 && udps.length === 1) {
      plain++;
      innerMac.add(eths[0]!.dst);
      innerDst.add(`${ips[0]!.dst}:${udps[0]!.dstPort}`);
      innerSport.add(udps[0]!.srcPort);
    } else {
      other++;
    }
  }
  return {
    packets: r.packets.length,
    vxlan,
    plainUdp: plain,
    other,
    ipv4ChecksumErrors: badIpChecksum,
    ...(vxlan > 0
      ? { outerSources: [...outerSrc], outerDestinations: [...outerDst], outerSourcePorts: outerSport.size, vnis: [...vnis] }
      : {}),
    innerDestinationMacs: [...innerMac],
    innerDestinations: [...innerDst],
    innerSourcePorts: innerSport.size,
  };
}

function cpuShare(text: string | undefined): Record<string, number> {
  const [user, system, softirq, idle, steal] = (text ?? '').split('/').map(Number);
  return { user: user ?? 0, system: system ?? 0, softirq: softirq ?? 0, idle: idle ?? 0, steal: steal ?? 0 };
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const kpps = (x: number) => `${(x / 1000).toFixed(0)}k`;

/** The daemon's largest drop counter summed over a variant's runs (its /status after each run), if it dropped any. */
function topDrop(rows: readonly RunRow[]): { counter: string; count: number } | undefined {
  const sum = new Map<string, number>();
  for (const r of rows) {
    const drops = (r.daemon?.drops ?? {}) as Record<string, number>;
    for (const [k, v] of Object.entries(drops)) sum.set(k, (sum.get(k) ?? 0) + v);
  }
  const top = [...sum].sort((a, b) => b[1] - a[1])[0];
  return top === undefined ? undefined : { counter: top[0], count: top[1] };
}

function report(argv: readonly string[]): void {
  const dir = options(argv, ['dir']).get('dir')!;
  const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8')) as Meta;
  const lines = readFileSync(join(dir, 'runs.tsv'), 'utf8').trim().split('\n');
  const head = lines.shift()!.split('\t');
  const rows: RunRow[] = lines
    .filter((l) => l.trim() !== '')
    .map((l) => {
      const c = l.split('\t');
      const get = (k: string) => c[head.indexOf(k)]!;
      return {
        phase: get('phase'),
        variant: get('variant'),
        round: Number(get('round')),
        seconds: Number(get('seconds')),
        delivered: Number(get('delivered')),
        deliveredPps: Number(get('delivered_pps')),
        offered: Number(get('offered')),
        offeredPps: Number(get('offered_pps')),
        generatorCpu: cpuShare(get('gen_cpu_usr_sys_sirq_idle_steal')),
        dutCpu: cpuShare(get('dut_cpu_usr_sys_sirq_idle_steal')),
        dutProcessCpuPct: Number(get('dut_process_cpu_pct') ?? 0),
        ...(head.includes('loadavg_1m') ? { loadavg1m: Number(get('loadavg_1m')) } : {}),
      };
    });
  for (const r of rows) {
    const d = daemonSummary(join(dir, 'status', `${r.variant}-r${r.round}.json`));
    if (d !== undefined) r.daemon = d;
  }
  const summaries = meta.variants
    .filter((v) => rows.some((r) => r.variant === v.variant))
    .map((v) => {
      const mine = rows.filter((r) => r.variant === v.variant);
      const pps = mine.map((r) => r.deliveredPps);
      return {
        ...v,
        wire: wireSummary(join(dir, 'wire', `${v.variant}.pcap`)),
        runs: mine.length,
        deliveredPps: {
          median: Math.round(median(pps)),
          min: Math.round(Math.min(...pps)),
          max: Math.round(Math.max(...pps)),
          all: pps.map(Math.round),
        },
        offeredPps: { median: Math.round(median(mine.map((r) => r.offeredPps))) },
        /** Median over the runs of delivered / offered. */
        deliveredShare: Number(median(mine.map((r) => (r.offered > 0 ? r.delivered / r.offered : 0))).toFixed(3)),
        ratios: {} as Record<string, number>,
        ratioKinds: {} as Record<string, RatioKind>,
        /** CPU time of the process under test per delivered packet, µs, median of the runs (daemons only). */
        processUsPerPacket: v.baseline
          ? undefined
          : ((xs) => (xs.length > 0 ? Number(median(xs).toFixed(3)) : undefined))(
              mine
                .filter((r) => r.deliveredPps > 0 && r.dutProcessCpuPct > 0)
                .map((r) => ((r.dutProcessCpuPct / 100) * 1e6) / r.deliveredPps),
            ),
        generatorLimited: null as string | null,
        topDrop: topDrop(mine),
      };
    });
  for (const s of summaries) {
    s.generatorLimited = generatorLimitedNote(s);
    for (const b of meta.baselines[s.phase] ?? []) {
      const base = summaries.find((x) => x.variant === b);
      if (base !== undefined && base.deliveredPps.median > 0) {
        s.ratios[b] = Number((s.deliveredPps.median / base.deliveredPps.median).toFixed(3));
        s.ratioKinds[b] = ratioKind(s, base);
      }
    }
  }
  const failures = existsSync(join(dir, 'failures.tsv')) ? parseFailures(readFileSync(join(dir, 'failures.tsv'), 'utf8')) : [];
  writeFileSync(join(dir, 'results.json'), `${JSON.stringify({ ...meta, runs: rows, summaries, failures }, null, 2)}\n`);
  const md: string[] = [];
  if (failures.length > 0) md.push(failuresMarkdown(failures));
  for (const phase of [...new Set(summaries.map((s) => s.phase))]) {
    const bases = meta.baselines[phase] ?? [];
    md.push(`### ${phase}`, '');
    md.push(
      `| variant | what | delivered pps, median (min-max) | offered pps, median | delivered / offered | ${bases.map((b) => `vs ${b}`).join(' | ')} | process CPU µs per packet | limit |`,
    );
    md.push(`|---|---|---|---|---|${bases.map(() => '---|').join('')}---|---|`);
    for (const s of summaries.filter((x) => x.phase === phase)) {
      const ratio = (b: string) => (s.ratios[b] !== undefined ? ratioText(s.ratios[b]!, s.ratioKinds[b] ?? 'measured') : '-');
      md.push(
        `| ${s.variant} | ${s.what} | ${kpps(s.deliveredPps.median)} (${kpps(s.deliveredPps.min)}-${kpps(s.deliveredPps.max)}) | ${kpps(s.offeredPps.median)} | ${(s.deliveredShare * 100).toFixed(0)} % | ${bases.map(ratio).join(' | ')} | ${cpuPerPacketText(s)} | ${limitNote(s)} |`,
      );
    }
    md.push('');
    md.push('What arrived (round 1 warm-up sample at the receiving interface, decoded by shared/dissect.ts):', '');
    md.push(
      '| variant | packets | outer source -> destination | distinct outer source ports | VNI | inner dst MAC | inner destination | distinct inner source ports | bad IPv4 checksums |',
    );
    md.push('|---|---|---|---|---|---|---|---|---|');
    for (const s of summaries.filter((x) => x.phase === phase)) {
      const w = s.wire as Record<string, any> | undefined;
      if (w === undefined || w.error !== undefined) {
        md.push(`| ${s.variant} | ${w?.error ?? 'no sample'} |||||||`);
        continue;
      }
      const list = (x: unknown) =>
        Array.isArray(x) ? (x.length > 4 ? `${x.slice(0, 3).join(', ')}, ... (${x.length} in all)` : x.join(', ')) : '-';
      md.push(
        `| ${s.variant} | ${w.packets} | ${w.vxlan > 0 ? `${list(w.outerSources)} -> ${list(w.outerDestinations)}` : '(not encapsulated)'} | ${w.outerSourcePorts ?? '-'} | ${list(w.vnis)} | ${list(w.innerDestinationMacs)} | ${list(w.innerDestinations)} | ${w.innerSourcePorts} | ${w.ipv4ChecksumErrors} |`,
      );
    }
    md.push('');
  }
  const text = md.join('\n');
  writeFileSync(join(dir, 'results.md'), `# send paths, ${String(meta.started ?? '')}\n\n${String(meta.setup ?? '')}\n\n${text}`);
  process.stdout.write(`${text}\n`);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === 'frames') frames(rest);
else if (cmd === 'report') report(rest);
else usage(cmd === undefined ? 'a command is required' : `unknown command ${JSON.stringify(cmd)}`);
