#!/usr/bin/env node
// Derives a lab config from a given one, by options (the variants the scenarios need):
//   --muxes N              the `muxes` list becomes mux1..muxN with provider addresses 198.18.0.11..(10+N)
//                          and 2001:db8:f::11..(10+N) (the lab's fabric)
//   --underlay ipv4|ipv6   fabric.underlay: the family VXLAN travels over between MUXes and hosts
//   --probe-interval-ms MS every probe's intervalMs
//   --max-flows N, --untrusted-max-flows N, --untrusted-timeout-s S
//                          flowTable.maxFlows, .untrustedMaxFlows, .untrustedTimeoutS
//   --east-west            east-west (docs/east-west.md): a client VM h1cl1 on the first pool member's host
//                          (in no pool) and the internal VIPs 198.19.0.100 and 2001:db8:e::100 in its
//                          network, tcp 7000 and udp 7001 to the first pool (EAST_WEST below)
//   --east-west-other-tenant  with --east-west: another tenant network (VNI 5902) and in it, on the same
//                          host, a VM h1ot1 with the client's very addresses (EAST_WEST_OTHER below)
//   --tcp-idle-timeout-s S, --udp-idle-timeout-s S
//                          flowTable.tcpIdleTimeoutS, .udpIdleTimeoutS (the MUXes' and the hosts' tables)
// Everything else, comments included, stays as it was. The result is validated like any config.
//
//   node dist/scripts/lab/derive-config.js --config examples/lab.yaml --muxes 4 --out runs/x/config.yaml
//   node dist/scripts/lab/derive-config.js --config examples/lab.yaml --underlay ipv6
import { readFileSync, writeFileSync } from 'node:fs';
import { isMap, isSeq, parseDocument, Scalar, YAMLMap, YAMLSeq, type Document } from 'yaml';
import { formatConfigErrors, MAX_MUXES_PER_CONTROLLER, parseConfig } from '../../shared/config.js';
import type { Underlay } from '../../shared/config/types.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

export const LAB_MAX_MUXES = MAX_MUXES_PER_CONTROLLER; // the lab runs as many MUXes as one controller takes

export interface LabMux {
  name: string;
  address: string;
  address6: string;
}

/** What to change in the config; an absent field leaves the config's own value. */
export interface ConfigVariant {
  readonly muxes?: number;
  readonly underlay?: Underlay;
  readonly probeIntervalMs?: number;
  readonly maxFlows?: number;
  readonly untrustedMaxFlows?: number;
  readonly untrustedTimeoutS?: number;
  readonly eastWest?: boolean;
  readonly eastWestOtherTenant?: boolean;
  readonly tcpIdleTimeoutS?: number;
  readonly udpIdleTimeoutS?: number;
}

/** What --east-west adds (the first pool, its first member's host and network). */
export const EAST_WEST = {
  clientNic: 'h1cl1',
  clientMac: '02:00:c0:00:02:14',
  // off the backends' /24 and /64: a backend answers an on-link client by ARP, and the host agent answers
  // ARP for the gateway only, so the client sits behind the gateway like the VIP
  clientAddress4: '198.19.1.20',
  clientAddress6: '2001:db8:e:1::20',
  vip4: '198.19.0.100',
  vip6: '2001:db8:e::100',
  tcpPort: 7000,
  udpPort: 7001,
} as const;

/** What --east-west-other-tenant adds: a network of its own and a VM in it with the client's addresses. */
export const EAST_WEST_OTHER = {
  network: 'ew-other',
  vni: 5902,
  nic: 'h1ot1',
  mac: '02:00:c0:00:02:15',
} as const;

/** Adds EAST_WEST_OTHER beside the client nic (same host, same addresses, the client's network's gateways); an error text or null. */
function addEastWestOther(doc: Document, source: string): string | null {
  const networks = doc.get('networks', true);
  const nics = doc.get('nics', true);
  if (!isSeq(networks) || !isSeq(nics)) return `${source}: --east-west-other-tenant needs networks and nics`;
  const client = nics.items
    .map((n) => (isMap(n) ? (n.toJSON() as { name: string; host: string; network: string; addresses: string[] }) : null))
    .find((n) => n?.name === EAST_WEST.clientNic);
  const net = networks.items
    .map((n) => (isMap(n) ? (n.toJSON() as { name: string; gateway?: string; gateway6?: string }) : null))
    .find((n) => n?.name === client?.network);
  if (client == null || net == null) return `${source}: --east-west-other-tenant needs --east-west`;
  const o = EAST_WEST_OTHER;
  networks.items.push(
    doc.createNode({
      name: o.network,
      vni: o.vni,
      ...(net.gateway !== undefined ? { gateway: net.gateway } : {}),
      ...(net.gateway6 !== undefined ? { gateway6: net.gateway6 } : {}),
    }),
  );
  nics.items.push(
    doc.createNode({ name: o.nic, host: client.host, network: o.network, port: o.nic, mac: o.mac, addresses: client.addresses }),
  );
  return null;
}

/** Adds EAST_WEST's client nic and internal VIPs to the document; an error text or null. */
function addEastWest(doc: Document, source: string): string | null {
  const pools = doc.get('pools', true);
  const nics = doc.get('nics', true);
  const vips = doc.get('vips', true);
  if (!isSeq(pools) || !isMap(pools.items[0]) || !isSeq(nics) || !isSeq(vips)) return `${source}: --east-west needs pools, nics and vips`;
  const pool = pools.items[0];
  const first = (pool.toJSON() as { name: string; backends: { nic: string }[] }).backends[0]?.nic;
  const member = nics.items
    .map((n) => (isMap(n) ? (n.toJSON() as { name: string; host: string; network: string }) : null))
    .find((n) => n?.name === first);
  if (member == null) return `${source}: --east-west: the first pool has no member nic`;
  const e = EAST_WEST;
  nics.items.push(
    doc.createNode({
      name: e.clientNic,
      host: member.host,
      network: member.network,
      port: e.clientNic,
      mac: e.clientMac,
      addresses: [e.clientAddress4, e.clientAddress6],
    }),
  );
  const poolName = (pool.toJSON() as { name: string }).name;
  const rules = [
    { name: 'ew-tcp', protocol: 'tcp', frontendPort: e.tcpPort, backendPort: e.tcpPort, pool: poolName },
    { name: 'ew-udp', protocol: 'udp', frontendPort: e.udpPort, backendPort: e.udpPort, pool: poolName },
  ];
  vips.items.push(doc.createNode({ address: e.vip4, scope: 'internal', network: member.network, rules }));
  vips.items.push(
    doc.createNode({
      address: e.vip6,
      scope: 'internal',
      network: member.network,
      rules: rules.map((r) => ({ ...r, name: `${r.name}6` })),
    }),
  );
  return null;
}

/** mux1..muxN on the lab fabric. */
export function labMuxes(n: number): LabMux[] {
  if (!Number.isInteger(n) || n < 1 || n > LAB_MAX_MUXES) throw new RangeError(`--muxes must be an integer 1..${LAB_MAX_MUXES}, got ${n}`);
  return Array.from({ length: n }, (_, i) => ({ name: `mux${i + 1}`, address: `198.18.0.${11 + i}`, address6: `2001:db8:f::${11 + i}` }));
}

/** The section KEY of the document as a map, created (at the end) when the config leaves it out. */
function sectionOf(doc: Document, key: string): YAMLMap {
  const m = doc.get(key, true);
  if (isMap(m)) return m;
  const created = new YAMLMap();
  doc.set(key, created);
  return created;
}

/** The variant in words, for the derived file's first comment ("muxes replaced by mux1..mux4, ..."). */
export function describeVariant(v: ConfigVariant): string {
  const parts: string[] = [];
  if (v.muxes !== undefined) parts.push(`muxes replaced by mux1..mux${v.muxes}`);
  if (v.underlay !== undefined) parts.push(`fabric.underlay ${v.underlay}`);
  if (v.probeIntervalMs !== undefined) parts.push(`every probe's intervalMs ${v.probeIntervalMs}`);
  if (v.maxFlows !== undefined) parts.push(`flowTable.maxFlows ${v.maxFlows}`);
  if (v.untrustedMaxFlows !== undefined) parts.push(`flowTable.untrustedMaxFlows ${v.untrustedMaxFlows}`);
  if (v.untrustedTimeoutS !== undefined) parts.push(`flowTable.untrustedTimeoutS ${v.untrustedTimeoutS}`);
  if (v.eastWest === true)
    parts.push(`east-west: client nic ${EAST_WEST.clientNic}, internal VIPs ${EAST_WEST.vip4} and ${EAST_WEST.vip6}`);
  if (v.eastWestOtherTenant === true)
    parts.push(
      `another tenant: network ${EAST_WEST_OTHER.network} (VNI ${EAST_WEST_OTHER.vni}), nic ${EAST_WEST_OTHER.nic} with the client's addresses`,
    );
  if (v.tcpIdleTimeoutS !== undefined) parts.push(`flowTable.tcpIdleTimeoutS ${v.tcpIdleTimeoutS}`);
  if (v.udpIdleTimeoutS !== undefined) parts.push(`flowTable.udpIdleTimeoutS ${v.udpIdleTimeoutS}`);
  return parts.length > 0 ? parts.join(', ') : 'unchanged';
}

/** The config text with the variant applied; { error } when the result is not a valid config. */
export function deriveConfig(text: string, v: ConfigVariant, source = 'config'): { text: string } | { error: string } {
  const doc = parseDocument(text, { uniqueKeys: true });
  if (doc.errors.length > 0) return { error: `${source}: ${doc.errors[0]!.message}` };
  if (v.muxes !== undefined) {
    const seq = doc.createNode(labMuxes(v.muxes)) as YAMLSeq;
    const old = doc.get('muxes', true);
    if (isSeq(old)) seq.commentBefore = old.commentBefore;
    doc.set('muxes', seq);
  }
  if (v.underlay !== undefined) sectionOf(doc, 'fabric').set('underlay', v.underlay);
  if (v.probeIntervalMs !== undefined) {
    const probes = doc.get('probes', true);
    if (!isSeq(probes) || probes.items.length === 0) return { error: `${source}: --probe-interval-ms needs a config with probes` };
    for (const p of probes.items) if (isMap(p)) p.set('intervalMs', new Scalar(v.probeIntervalMs)); // a new node: the old value's comment goes
  }
  const flowTable: [string, number | undefined][] = [
    ['maxFlows', v.maxFlows],
    ['untrustedMaxFlows', v.untrustedMaxFlows],
    ['untrustedTimeoutS', v.untrustedTimeoutS],
    ['tcpIdleTimeoutS', v.tcpIdleTimeoutS],
    ['udpIdleTimeoutS', v.udpIdleTimeoutS],
  ];
  for (const [key, value] of flowTable) if (value !== undefined) sectionOf(doc, 'flowTable').set(key, value);
  if (v.eastWest === true) {
    const err = addEastWest(doc, source);
    if (err !== null) return { error: err };
  }
  if (v.eastWestOtherTenant === true) {
    const err = addEastWestOther(doc, source);
    if (err !== null) return { error: err };
  }
  const what = describeVariant(v);
  const out = doc.toString({ lineWidth: 0 });
  const r = parseConfig(out, `${source} with ${what}`);
  if (!r.ok) return { error: formatConfigErrors(r.errors, `${source} with ${what}`) };
  return { text: `# derived by scripts/lab/derive-config.ts from ${source}: ${what}\n${out}` };
}

/** The config text with its muxes replaced (deriveConfig with --muxes alone). */
export function deriveConfigText(text: string, muxes: number, source = 'config'): { text: string } | { error: string } {
  return deriveConfig(text, { muxes }, source);
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'the slbx config to start from (required)' },
  { name: 'muxes', value: 'N', help: `the muxes become mux1..muxN, N in 1..${LAB_MAX_MUXES} (198.18.0.11.., 2001:db8:f::11..)` },
  { name: 'underlay', value: 'ipv4|ipv6', help: 'fabric.underlay: VXLAN between the address (ipv4) or address6 (ipv6) of MUXes and hosts' },
  {
    name: 'probe-interval-ms',
    value: 'MS',
    help: "every probe's intervalMs (e.g. 5000, the product's default, instead of the lab's 1000)",
  },
  { name: 'max-flows', value: 'N', help: 'flowTable.maxFlows: flows in the main table' },
  { name: 'untrusted-max-flows', value: 'N', help: 'flowTable.untrustedMaxFlows: flows seen once (a SYN) in the untrusted table' },
  { name: 'untrusted-timeout-s', value: 'S', help: 'flowTable.untrustedTimeoutS: how long a flow seen once is kept' },
  {
    name: 'east-west',
    help: `east-west (docs/east-west.md): a client VM ${EAST_WEST.clientNic} (in no pool) on the first pool member's host, internal VIPs ${EAST_WEST.vip4} and ${EAST_WEST.vip6} (tcp ${EAST_WEST.tcpPort}, udp ${EAST_WEST.udpPort}) to the first pool`,
  },
  {
    name: 'east-west-other-tenant',
    help: `with --east-west: another tenant network ${EAST_WEST_OTHER.network} (VNI ${EAST_WEST_OTHER.vni}) and its VM ${EAST_WEST_OTHER.nic} on the client's host with the client's addresses`,
  },
  { name: 'tcp-idle-timeout-s', value: 'S', help: 'flowTable.tcpIdleTimeoutS: how long an idle TCP flow is kept (MUXes and host agents)' },
  { name: 'udp-idle-timeout-s', value: 'S', help: 'flowTable.udpIdleTimeoutS: how long an idle UDP flow is kept (MUXes and host agents)' },
  { name: 'out', value: 'FILE', help: 'where to write the derived config (default: stdout)' },
  { name: 'help', help: 'this help' },
];

export const COMMAND: CommandSpec = {
  program: 'derive-config',
  usage:
    'node dist/scripts/lab/derive-config.js --config FILE [--muxes N] [--underlay ipv4|ipv6] [--probe-interval-ms MS] [--max-flows N] [--untrusted-max-flows N] [--untrusted-timeout-s S] [--east-west [--east-west-other-tenant]] [--tcp-idle-timeout-s S] [--udp-idle-timeout-s S] [--out FILE]',
  options: OPTIONS,
  noPositional: true,
  about:
    'Writes the config with the given changes (at least one), comments and everything else kept; the result is validated like any config ' +
    '(the config checker names a field it refuses). The first line of the output says what was changed.',
  extraHelp:
    'examples:\n' +
    '  node dist/scripts/lab/derive-config.js --config examples/lab.yaml --muxes 4 --out runs/lab4.yaml\n' +
    '  node dist/scripts/lab/derive-config.js --config examples/lab.yaml --underlay ipv6\n' +
    '  node dist/scripts/lab/derive-config.js --config examples/lab.yaml --east-west --out runs/ew.yaml\n' +
    '  node dist/scripts/lab/derive-config.js --config examples/lab.yaml --east-west --east-west-other-tenant --udp-idle-timeout-s 5\n' +
    '  node dist/scripts/lab/derive-config.js --config examples/lab.yaml --probe-interval-ms 5000 --max-flows 20000 --untrusted-max-flows 10000 --untrusted-timeout-s 5',
};

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

/** A positive integer option (at most max), or undefined when not given; UsageError naming the option otherwise. */
function intOption(args: ParsedArgs, name: string, max = 2 ** 31 - 1): number | undefined {
  const s = one(args, name);
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s) || Number(s) < 1 || Number(s) > max) throw new UsageError(`--${name} must be an integer 1..${max}, got ${s}`);
  return Number(s);
}

/** The variant the options ask for. */
export function variantOf(args: ParsedArgs): ConfigVariant {
  const underlay = one(args, 'underlay');
  if (underlay !== undefined && underlay !== 'ipv4' && underlay !== 'ipv6')
    throw new UsageError(`--underlay must be ipv4 or ipv6, got ${underlay}`);
  return {
    muxes: intOption(args, 'muxes', LAB_MAX_MUXES),
    underlay,
    probeIntervalMs: intOption(args, 'probe-interval-ms'),
    maxFlows: intOption(args, 'max-flows'),
    untrustedMaxFlows: intOption(args, 'untrusted-max-flows'),
    untrustedTimeoutS: intOption(args, 'untrusted-timeout-s'),
    eastWest: args.flags.has('east-west') ? true : undefined,
    eastWestOtherTenant: args.flags.has('east-west-other-tenant') ? true : undefined,
    tcpIdleTimeoutS: intOption(args, 'tcp-idle-timeout-s'),
    udpIdleTimeoutS: intOption(args, 'udp-idle-timeout-s'),
  };
}

function runParsed(args: ParsedArgs): number {
  const file = one(args, 'config');
  if (file === undefined) throw new UsageError('--config is required');
  const v = variantOf(args);
  if (Object.values(v).every((x) => x === undefined)) {
    throw new UsageError(
      'nothing to change: give --muxes, --underlay, --probe-interval-ms, --max-flows, --untrusted-max-flows, --untrusted-timeout-s, --east-west, --tcp-idle-timeout-s or --udp-idle-timeout-s',
    );
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    process.stderr.write(`derive-config: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const r = deriveConfig(text, v, file);
  if ('error' in r) {
    process.stderr.write(`${r.error}\n`);
    return 1;
  }
  const out = one(args, 'out');
  if (out === undefined) process.stdout.write(r.text);
  else writeFileSync(out, r.text);
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
