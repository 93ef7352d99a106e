#!/usr/bin/env node
// The lab router's edge filter: an nftables ruleset, derived from an slbx config and the lab plan, that
// closes the fabric to the outside as a real edge does (BCP 38 / RFC 2827 ingress filtering, RFC 3704
// reverse-path checks; docs/security.md):
//   - from the outside (the client segment, br0), only packets to the VIP ranges (the config's
//     vipRanges, which hold every VIP) are forwarded inward;
//   - from the outside, a packet whose source is one of ours (the fabric's provider addresses, the
//     backends' (DIP) networks, the VIP ranges, the router's own addresses) is dropped before routing;
//   - the router itself answers the outside nothing but ICMP (and neighbour discovery) on its
//     client-side address: its BGP (179), BFD (3784/4784) and anything else are closed;
//   - from the fabric (fab0), strict reverse-path filtering: a source the router would not route back
//     through the fabric (a client's address forged by a node on the fabric) is dropped.
// Every drop is a named counter, read with `nft -j list counters table inet slbx_edge`.
//
// Strict reverse-path filtering does not fit the outside interface: internet sources are not routed
// through one interface (the lab router has no route back to most of them: scenario 17's spoofed SYN
// flood from 198.19.0.0/16 must still reach the VIP, as it would in the real world); the explicit
// list of our own ranges is what an edge filters there.
//
//   node dist/scripts/lab/router-filter.js --config FILE [--clients N]      prints the ruleset (nft -f)
import { readFileSync } from 'node:fs';
import { parseIpAddr, type IpAddr } from '../../shared/addr.js';
import { formatConfigErrors, parseConfig } from '../../shared/config.js';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import { buildLabPlan, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6, type LabPlan } from './plan.js';

/** The nftables table (family inet: one ruleset for IPv4 and IPv6). */
export const EDGE_TABLE = 'slbx_edge';
/** The router's interfaces (lib.sh names them so): the client segment's bridge and the fabric side. */
export const ROUTER_OUTSIDE_IF = 'br0';
export const ROUTER_FABRIC_IF = 'fab0';

/** The named counters, by what they count; each exists for IPv4 (suffix 4) and IPv6 (suffix 6). */
export const EDGE_COUNTERS = {
  /** From the outside with a source of ours (provider, DIP, VIP or router ranges): dropped. */
  spoofed: 'edge_spoofed_source',
  /** From the outside to the router itself, other than ICMP to its client-side address: dropped. */
  toRouter: 'edge_to_router',
  /** From the outside, to be forwarded, not to a VIP (the fabric, the controller, the backends): dropped. */
  notVip: 'edge_not_vip',
  /** From the outside to a VIP: accepted (the only way in). */
  toVip: 'edge_to_vip',
  /** From the fabric with a source not routed back through the fabric (strict uRPF): dropped. */
  fabricRpf: 'fabric_rpf',
} as const;
export type EdgeCounterKind = keyof typeof EDGE_COUNTERS;
export function edgeCounterName(kind: EdgeCounterKind, family: 4 | 6): string {
  return `${EDGE_COUNTERS[kind]}${family}`;
}

/** The address sets of the ruleset, as prefixes (text) per family. */
export interface EdgeSets {
  /** Our own ranges: a packet from the outside with such a source is forged. */
  own4: string[];
  own6: string[];
  /** The only destinations forwarded inward from the outside. */
  vips4: string[];
  vips6: string[];
  /** The router's client-side addresses (ICMP to them is answered). */
  router4: string;
  router6: string;
}

function netText(a: IpAddr, len: number): string {
  const w = Uint32Array.from(a.words);
  let left = len;
  for (let i = 0; i < w.length; i++) {
    const bits = Math.max(0, Math.min(32, left));
    const mask = bits === 0 ? 0 : bits === 32 ? 0xffffffff : ~(0xffffffff >>> bits) >>> 0;
    w[i] = (w[i]! & mask) >>> 0;
    left -= 32;
  }
  const text =
    a.family === 4
      ? [w[0]! >>> 24, (w[0]! >>> 16) & 0xff, (w[0]! >>> 8) & 0xff, w[0]! & 0xff].join('.')
      : parseIpAddr(
          Array.from(w)
            .flatMap((x) => [(x >>> 16).toString(16), (x & 0xffff).toString(16)])
            .join(':'),
        )!.text;
  return `${text}/${len}`;
}

/** The sets, from the plan: the fabric's subnets, each nic's network, each VIP, the router's addresses. */
export function edgeSets(plan: LabPlan): EdgeSets {
  const own4 = new Set<string>();
  const own6 = new Set<string>();
  const add = (text: string | null, len4: number, len6: number) => {
    if (text === null) return;
    const a = parseIpAddr(text);
    if (a === null) return;
    if (a.family === 4) own4.add(netText(a, len4));
    else own6.add(netText(a, len6));
  };
  // provider addresses: the fabric segment (every MUX, host, the controller and the router's fabric side)
  add(plan.router.fab4, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
  add(plan.router.fab6, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
  for (const n of [...plan.muxes, ...plan.hosts]) {
    add(n.addr4, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
    add(n.addr6, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
  }
  // the backends' networks (DIPs and their gateways), as the lab numbers them (/24, /64)
  for (const n of plan.nics) {
    add(n.addr4, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
    add(n.addr6, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
    add(n.gw4, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
    add(n.gw6, LAB_PREFIX_LEN_V4, LAB_PREFIX_LEN_V6);
  }
  // the prefixes delegated to the load balancer (vipRanges: every VIP is inside one, and a VIP created
  // later through the API is reachable at once) and the router's own client-side addresses
  const vips4: string[] = [];
  const vips6: string[] = [];
  for (const r of plan.vipRanges) {
    const [addr, len] = r.split('/');
    const a = parseIpAddr(addr!)!;
    const p = netText(a, Number(len));
    (a.family === 4 ? vips4 : vips6).push(p);
    (a.family === 4 ? own4 : own6).add(p);
  }
  add(plan.router.client4, 32, 128);
  add(plan.router.client6, 32, 128);
  return {
    own4: [...own4],
    own6: [...own6],
    vips4: [...new Set(vips4)],
    vips6: [...new Set(vips6)],
    router4: plan.router.client4,
    router6: plan.router.client6,
  };
}

/** The ruleset text for `nft -f`: replaces the table if it exists. */
export function edgeRuleset(plan: LabPlan, source = 'the slbx config'): string {
  const s = edgeSets(plan);
  const out = ROUTER_OUTSIDE_IF;
  const fab = ROUTER_FABRIC_IF;
  const c = edgeCounterName;
  const set = (name: string, type: string, elements: readonly string[]) =>
    elements.length === 0
      ? `  set ${name} { type ${type}; flags interval; }`
      : `  set ${name} { type ${type}; flags interval; elements = { ${elements.join(', ')} }; }`;
  const L: string[] = [];
  L.push(`# The slbx lab router's edge filter, generated by scripts/lab/router-filter.ts from ${source}.`);
  L.push('# Do not edit: lab_up writes it again. See docs/security.md.');
  L.push(`table inet ${EDGE_TABLE}`);
  L.push(`delete table inet ${EDGE_TABLE}`);
  L.push(`table inet ${EDGE_TABLE} {`);
  for (const kind of Object.keys(EDGE_COUNTERS) as EdgeCounterKind[]) {
    for (const fam of [4, 6] as const) L.push(`  counter ${c(kind, fam)} { }`);
  }
  L.push(set('own4', 'ipv4_addr', s.own4));
  L.push(set('own6', 'ipv6_addr', s.own6));
  L.push(set('vips4', 'ipv4_addr', s.vips4));
  L.push(set('vips6', 'ipv6_addr', s.vips6));
  L.push('');
  L.push('  # before routing: forged sources from the outside (BCP 38), and strict uRPF on the fabric side');
  L.push('  chain prerouting {');
  L.push('    type filter hook prerouting priority raw; policy accept;');
  L.push(`    iifname "${out}" ip saddr @own4 counter name "${c('spoofed', 4)}" drop`);
  L.push(`    iifname "${out}" ip6 saddr @own6 counter name "${c('spoofed', 6)}" drop`);
  L.push('    # neighbour discovery may come from the unspecified address, which no route leads back to');
  L.push(`    iifname "${fab}" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept`);
  L.push(`    iifname "${fab}" meta nfproto ipv4 fib saddr . iif oif missing counter name "${c('fabricRpf', 4)}" drop`);
  L.push(`    iifname "${fab}" meta nfproto ipv6 fib saddr . iif oif missing counter name "${c('fabricRpf', 6)}" drop`);
  L.push('  }');
  L.push('');
  L.push('  # to the router itself from the outside: ICMP to its client-side address and neighbour discovery only');
  L.push('  chain input {');
  L.push('    type filter hook input priority filter; policy accept;');
  L.push(`    iifname "${out}" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept`);
  L.push(`    iifname "${out}" ip daddr ${s.router4} ip protocol icmp accept`);
  L.push(`    iifname "${out}" ip6 daddr ${s.router6} meta l4proto ipv6-icmp accept`);
  L.push(`    iifname "${out}" meta nfproto ipv4 counter name "${c('toRouter', 4)}" drop`);
  L.push(`    iifname "${out}" meta nfproto ipv6 counter name "${c('toRouter', 6)}" drop`);
  L.push('  }');
  L.push('');
  L.push('  # through the router from the outside: to a VIP only');
  L.push('  chain forward {');
  L.push('    type filter hook forward priority filter; policy accept;');
  L.push(`    iifname "${out}" ip daddr @vips4 counter name "${c('toVip', 4)}" accept`);
  L.push(`    iifname "${out}" ip6 daddr @vips6 counter name "${c('toVip', 6)}" accept`);
  L.push(`    iifname "${out}" meta nfproto ipv4 counter name "${c('notVip', 4)}" drop`);
  L.push(`    iifname "${out}" meta nfproto ipv6 counter name "${c('notVip', 6)}" drop`);
  L.push('  }');
  L.push('}');
  return `${L.join('\n')}\n`;
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'config', value: 'FILE', help: 'the slbx config (YAML or JSON)' },
  { name: 'clients', value: 'N', help: 'client namespaces (as for the plan)', default: '1' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'router-filter',
  usage: 'node dist/scripts/lab/router-filter.js --config FILE [--clients N]',
  options: OPTIONS,
  noPositional: true,
  about:
    "Prints the lab router's nftables edge filter (table inet slbx_edge) for a config: only VIPs are reachable from the outside, forged sources of ours are dropped, strict reverse-path filtering on the fabric side; every drop is a named counter.",
};

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const file = one(args, 'config');
  if (file === undefined) {
    process.stderr.write('router-filter: --config is required (e.g. --config examples/lab.yaml)\n');
    return 2;
  }
  const clientsText = one(args, 'clients')!;
  if (!/^\d+$/.test(clientsText)) {
    process.stderr.write(`router-filter: --clients must be a number, got ${clientsText}\n`);
    return 2;
  }
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    process.stderr.write(`router-filter: cannot read ${file}: ${(e as Error).message}\n`);
    return 1;
  }
  const r = parseConfig(text, file);
  if (!r.ok) {
    process.stderr.write(`${formatConfigErrors(r.errors, file)}\n`);
    return 1;
  }
  const p = buildLabPlan(r.config, Number(clientsText));
  if (!p.ok) {
    process.stderr.write(`${p.errors.map((e) => `${file}: lab: ${e}`).join('\n')}\n`);
    return 1;
  }
  process.stdout.write(edgeRuleset(p.plan, file));
  return 0;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
