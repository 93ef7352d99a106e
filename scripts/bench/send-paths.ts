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
//     reply-SIZE.trafgen: the backend's reply (DIP:7 -> client port 1024..65023, the DSR_FLOWS flows the
//     seed command records) to its gateway
//   node dist/scripts/bench/send-paths.js seed --interface IF --mux-mac M --host-mac M --nic-mac M [--rate PPS]
//     sends the client packet of each of the DSR_FLOWS flows of the replies once (client port 1024 + k,
//     VXLAN-encapsulated from the MUX's PA to the host's PA, as the host agent phase's frames), paced at
//     --rate (default 20000) packets/s: the host agent records each flow (host-agent/dsr-flows.ts), so the
//     DSR phase's replies are those of recorded flows, not unsolicited ones (drop_out_dsr_unsolicited)
//   node dist/scripts/bench/send-paths.js report --dir DIR
//     reads DIR/runs.tsv, DIR/meta.json and DIR/failures.tsv, writes DIR/results.json and DIR/results.md
//     (median, min, max packets/s per variant; ratios of medians against the baselines of the same run,
//     marked when a side was generator-limited; the process's CPU per packet; the failed runs), prints it
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { pkt } from '../../shared/packet-builder.js';
import { readPcap } from '../../shared/pcap-file.js';
import { dissect } from '../../shared/dissect.js';
import { ETHERTYPE_IPV4 } from '../../shared/ethernet.js';
import { ip } from '../../shared/addr.js';
import { loadRingAddon } from '../../runtime/ring-port.js';
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

/**
 * trafgen's byte syntax for `frame`, with the bytes at the offsets of `random` replaced by drnd() (random per
 * packet) and those of `dynamic` by the given trafgen function (e.g. dinc(4, 253, 1): a counter in a range).
 */
export function toTrafgen(
  frame: Uint8Array,
  random: ReadonlySet<number>,
  comment: string,
  dynamic: ReadonlyMap<number, string> = new Map(),
): string {
  const cells: string[] = [];
  for (let i = 0; i < frame.length; i++)
    cells.push(dynamic.get(i) ?? (random.has(i) ? 'drnd()' : `0x${frame[i]!.toString(16).padStart(2, '0')}`));
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

/**
 * The DSR phase's flows: client ports 1024..65023 (DSR_FIRST_PORT + k, k < DSR_FLOWS), the range the
 * seed command's burst() writes (port 1024 + k) and the replies' destination port covers: high byte
 * dinc(4, 253, 1) (a counter over 4..253), low byte drnd(). 64,000 flows: under the host flow table's
 * default 100,000 (flowTable.maxFastpathFlows), as many as the old random ports' 65,536.
 */
export const DSR_FLOWS = 64000;
export const DSR_FIRST_PORT = 1024;
export const DSR_PORT_HIGH = { min: DSR_FIRST_PORT >> 8, max: (DSR_FIRST_PORT + DSR_FLOWS - 1) >> 8 };
/** Where the inner IPv4 header starts in the VXLAN frame: outer Ethernet, IPv4, UDP, VXLAN, inner Ethernet. */
export const VXLAN_INNER_IP_OFFSET = 14 + 20 + 8 + 8 + 14;

/**
 * The DSR phase's replies in trafgen's syntax: the backend's `n`-byte UDP reply DIP:7 -> client to its
 * gateway (the host's port), destination port high byte dinc(4, 253, 1) and low byte drnd(): ports
 * 1024..65023, the flows dsrSeedFrame's burst() records.
 */
export function dsrReplyTrafgen(nicMac: string, portMac: string, n: number): string {
  const r = pkt()
    .eth({ src: nicMac, dst: portMac })
    .ipv4({ src: DIP, dst: CLIENT_IP, ttl: 64 })
    .udp({ sport: VIP_PORT, dport: DSR_FIRST_PORT, checksum: 'zero' })
    .payload(new Uint8Array(n - 14 - 20 - 8))
    .build();
  return toTrafgen(
    r,
    new Set([37]),
    `${n}-byte UDP reply ${DIP}:${VIP_PORT} -> ${CLIENT_IP}:${DSR_FIRST_PORT}..${DSR_FIRST_PORT + DSR_FLOWS - 1} (the seeded flows), from the backend to its gateway (the host's port)`,
    new Map([[36, `dinc(${DSR_PORT_HIGH.min}, ${DSR_PORT_HIGH.max}, 1)`]]),
  );
}

/**
 * The seed's template: the 64-byte client packet CLIENT_IP:DSR_FIRST_PORT -> VIP:7 inside VXLAN from the
 * MUX to the host; burst() writes flow k's client port (DSR_FIRST_PORT + k) at VXLAN_INNER_IP_OFFSET + 20.
 */
export function dsrSeedFrame(muxMac: string, hostMac: string, nicMac: string): Uint8Array {
  return vxlanFrame(muxMac, hostMac, nicMac, clientFrame(muxMac, nicMac));
}

/** The client frame `c` inside VXLAN, as the MUX sends it to the host (inner TTL untouched). */
export function vxlanFrame(muxMac: string, hostMac: string, nicMac: string, c: Uint8Array): Uint8Array {
  return pkt()
    .eth({ src: muxMac, dst: hostMac })
    .ipv4({ src: MUX_PA, dst: HOST_PA, ttl: 64 })
    .udp({ sport: 49152, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: VNI })
    .eth({ src: muxMac, dst: nicMac, type: ETHERTYPE_IPV4 })
    .payload(c.subarray(14))
    .build();
}

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
    const v = vxlanFrame(o.get('mux-mac')!, o.get('host-mac')!, o.get('nic-mac')!, c);
    const inner = VXLAN_INNER_IP_OFFSET + 20;
    writeFileSync(
      join(dir, `vxlan-${n}.trafgen`),
      toTrafgen(
        v,
        new Set([35, inner, inner + 1]),
        `${v.length}-byte VXLAN ${MUX_PA} -> ${HOST_PA}:4789, VNI ${VNI}, carrying the ${n}-byte client frame (random source port)`,
      ),
    );
    if (o.has('port-mac')) writeFileSync(join(dir, `reply-${n}.trafgen`), dsrReplyTrafgen(o.get('nic-mac')!, o.get('port-mac')!, n));
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
  // the DSR runs' seed (send-paths.sh dsr-seed.tsv): flows recorded, replies still dropped as unsolicited
  const seedFile = join(dir, 'dsr-seed.tsv');
  const dsrSeed = existsSync(seedFile)
    ? readFileSync(seedFile, 'utf8')
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split('\t'))
        .map(([variant, round, flows, learned, sends, unsolicited]) => ({
          variant: variant ?? '',
          round: Number(round),
          flows: Number(flows),
          learned: Number(learned),
          seedSends: Number(sends),
          unsolicitedDuringRun: Number(unsolicited),
        }))
    : [];
  writeFileSync(join(dir, 'results.json'), `${JSON.stringify({ ...meta, runs: rows, summaries, dsrSeed, failures }, null, 2)}\n`);
  const md: string[] = [];
  if (failures.length > 0) md.push(failuresMarkdown(failures));
  if (dsrSeed.length > 0) {
    md.push(
      'DSR seed (before each DSR run, every reply flow sent once through the host agent from the client side; 0 flows: the seed was off):',
      '',
      '| variant | round | flows recorded / seeded | seed sends | replies dropped as unsolicited during the run |',
      '|---|---|---|---|---|',
      ...dsrSeed.map((x) => `| ${x.variant} | ${x.round} | ${x.learned} / ${x.flows} | ${x.seedSends} | ${x.unsolicitedDuringRun} |`),
      '',
    );
  }
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

/**
 * The DSR phase's seed: the client packet of each of its DSR_FLOWS flows, once, VXLAN-encapsulated to the
 * host as a MUX sends it, from a packet socket on --interface (the ring addon's burst(): flow k gets client
 * port DSR_FIRST_PORT + k), paced in 1 ms steps at --rate packets/s so the host agent's capture keeps up.
 * Prints what it sent; the caller checks what the host agent recorded (its dsr_flows_learned counter).
 */
function seed(argv: readonly string[]): void {
  const o = options(argv, ['interface', 'mux-mac', 'host-mac', 'nic-mac', 'rate'], ['rate']);
  const rate = Number(o.get('rate') ?? 20000);
  if (!Number.isInteger(rate) || rate < 1) usage('--rate must be an integer >= 1 (packets per second)');
  const r = loadRingAddon();
  if ('error' in r) {
    process.stderr.write(`send-paths.js seed: ${r.error}\n`);
    process.exit(1);
  }
  const addon = r.addon;
  const frame = dsrSeedFrame(o.get('mux-mac')!, o.get('host-mac')!, o.get('nic-mac')!);
  // a send socket: the receive side never matches (an ethertype nobody uses) and has a small ring
  const h = addon.openPacket(
    o.get('interface')!,
    'ether proto 0x88b5',
    1 << 20,
    2048,
    1,
    1024,
    true,
    Buffer.alloc(2048 + 4),
    new Uint32Array(2),
    () => {},
  );
  const srcBase = ip(CLIENT_IP).words[0]!;
  const t0 = process.hrtime.bigint();
  let sent = 0;
  const step = (): void => {
    const el = Number(process.hrtime.bigint() - t0) / 1e9;
    const n = Math.min(DSR_FLOWS, Math.floor(rate * el) + 1) - sent;
    // burst() writes port 1024 + k % DSR_FLOWS and source CLIENT_IP + k / DSR_FLOWS (= CLIENT_IP for k < DSR_FLOWS)
    if (n > 0) sent += addon.burst(h, frame, frame.length, n, sent, VXLAN_INNER_IP_OFFSET, DSR_FLOWS, srcBase);
    const st = addon.stats(h);
    if (sent >= DSR_FLOWS || st.txErrors > 0) {
      addon.close(h);
      process.stdout.write(
        `${JSON.stringify({ flows: DSR_FLOWS, sent, seconds: Number(el.toFixed(3)), txErrors: st.txErrors, lastError: st.txLastError })}\n`,
      );
      process.exitCode = sent >= DSR_FLOWS ? 0 : 1;
      return;
    }
    setTimeout(step, 1);
  };
  step();
}

function main(): void {
  const [cmd, ...rest] = process.argv.slice(2);
  if (cmd === 'frames') frames(rest);
  else if (cmd === 'seed') seed(rest);
  else if (cmd === 'report') report(rest);
  else usage(cmd === undefined ? 'a command is required' : `unknown command ${JSON.stringify(cmd)}`);
}

// a command when run, a library when imported (test/bench-dsr-seed.test.ts)
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
