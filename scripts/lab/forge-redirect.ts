#!/usr/bin/env node
// Forges Fastpath redirects (docs/east-west.md, "The redirect: wire format") as whole Ethernet frames in a
// pcap file, for `client.js inject` to send into the lab's fabric: the refusals of a host agent are tested
// with them (scenario 26). The body is laid out by shared/redirect.ts (writeRedirect) and signed by
// runtime/redirect-mac.ts under the lab's API token, then, with --bad-signature, one bit of the HMAC is
// flipped. With --count N, N frames for the client ports PORT..PORT+N-1.
//
//   node dist/scripts/lab/forge-redirect.js --token-file runs/lab/X/api-token --src-mac 02:.. --dst-mac 02:.. \
//     --src-pa 198.18.0.11 --dst-pa 198.18.0.21 --vni 5001 --protocol tcp --client 198.19.1.20:40000 \
//     --vip 198.19.0.100:7000 --dip 192.0.2.12 --dip-host-pa 198.18.0.22 --dip-mac 02:00:c0:00:02:0c --out forged.pcap
import { writeFileSync } from 'node:fs';
import { formatMac, mac, parseIpAddr, parseMac, writeIpAddr, type IpAddr } from '../../shared/addr.js';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { pkt } from '../../shared/packet-builder.js';
import { buildPcap, LINKTYPE_ETHERNET } from '../../shared/pcap-file.js';
import { newRedirect, REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, REDIRECT_VALID_S, writeRedirect } from '../../shared/redirect.js';
import { readToken } from '../../runtime/api-token.js';
import { redirectMacFor } from '../../runtime/redirect-mac.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'token-file', value: 'FILE', help: "the policy key: the controller's API token file (the lab's RUN/api-token)" },
  { name: 'src-mac', value: 'MAC', help: "outer Ethernet source (a MUX's fab0 MAC: the host agent checks it against the PA's)" },
  { name: 'dst-mac', value: 'MAC', help: "outer Ethernet destination (the host's fab0 MAC)" },
  { name: 'src-pa', value: 'IPV4', help: "outer IPv4 source (a MUX's provider address; another address shows the source check)" },
  { name: 'dst-pa', value: 'IPV4', help: "outer IPv4 destination: the source host's provider address" },
  { name: 'vni', value: 'N', help: "the tenant network's VNI" },
  { name: 'protocol', value: 'tcp|udp', help: 'the flow protocol' },
  { name: 'client', value: 'ADDR:PORT', help: 'the flow source (the VM), IPv4 A.B.C.D:PORT or [IPv6]:PORT' },
  { name: 'vip', value: 'ADDR:PORT', help: 'the flow destination (the internal VIP and its frontend port)' },
  { name: 'dip', value: 'ADDR', help: "the DIP the redirect names (a nic's address)" },
  { name: 'dip-host-pa', value: 'IPV4', help: "the DIP host's provider address" },
  { name: 'dip-mac', value: 'MAC', help: "the DIP nic's MAC" },
  { name: 'count', value: 'N', help: 'frames, for the client ports PORT..PORT+N-1 (default 1)' },
  { name: 'bad-signature', help: 'flip one bit of the HMAC (a redirect signed with another key)' },
  { name: 'out', value: 'FILE', help: 'the pcap file to write (required)' },
  { name: 'help', help: 'this help' },
];

export const COMMAND: CommandSpec = {
  program: 'forge-redirect',
  usage:
    'node dist/scripts/lab/forge-redirect.js --token-file FILE --src-mac MAC --dst-mac MAC --src-pa IPV4 --dst-pa IPV4 --vni N --protocol tcp|udp --client ADDR:PORT --vip ADDR:PORT --dip ADDR --dip-host-pa IPV4 --dip-mac MAC [--count N] [--bad-signature] --out FILE',
  options: OPTIONS,
  noPositional: true,
  about:
    'Writes forged Fastpath redirects (UDP 4799 from a MUX PA to a host PA, 124-byte body signed with the policy key) as Ethernet frames ' +
    "in a pcap file; send them with client.js inject from a namespace on the fabric. The expiry is now + 30 s (the MUX's own).",
  extraHelp:
    'example (scenario 26):\n' +
    '  node dist/scripts/lab/forge-redirect.js --token-file runs/lab/L/api-token --src-mac 02:00:00:00:00:11 --dst-mac 02:00:00:00:00:21 \\\n' +
    '    --src-pa 198.18.0.11 --dst-pa 198.18.0.21 --vni 5001 --protocol tcp --client 198.19.1.20:1 --vip 198.19.0.100:7000 \\\n' +
    '    --dip 192.0.2.12 --dip-host-pa 198.18.0.22 --dip-mac 02:00:c0:00:02:0c --count 5 --out runs/forged.pcap',
};

function req(args: ParsedArgs, name: string): string {
  const v = one(args, name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  return v;
}

function addrOpt(args: ParsedArgs, name: string, family?: 4 | 6): IpAddr {
  const s = req(args, name);
  const a = parseIpAddr(s);
  if (a === null || (family !== undefined && a.family !== family))
    throw new UsageError(`--${name} must be an IPv${family ?? '4 or 6'} address, got ${s}`);
  return a;
}

function macOpt(args: ParsedArgs, name: string): Uint8Array {
  const s = req(args, name);
  if (parseMac(s) === null) throw new UsageError(`--${name} must be a MAC like 02:00:c0:00:02:0c, got ${s}`);
  return mac(s);
}

function intOpt(args: ParsedArgs, name: string, min: number, max: number, dflt?: number): number {
  const s = one(args, name);
  if (s === undefined && dflt !== undefined) return dflt;
  if (s === undefined) throw new UsageError(`--${name} is required`);
  if (!/^\d+$/.test(s) || Number(s) < min || Number(s) > max) throw new UsageError(`--${name} must be an integer ${min}..${max}, got ${s}`);
  return Number(s);
}

/** ADDR:PORT or [ADDR6]:PORT. */
function endpoint(args: ParsedArgs, name: string): { addr: IpAddr; port: number } {
  const s = req(args, name);
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(s) ?? /^([^:]+):(\d+)$/.exec(s);
  const a = m === null ? null : parseIpAddr(m[1]!);
  const port = m === null ? NaN : Number(m[2]);
  if (a === null || !(port >= 0 && port <= 65535)) throw new UsageError(`--${name} must be A.B.C.D:PORT or [IPV6]:PORT, got ${s}`);
  return { addr: a, port };
}

/** The frames the options ask for. */
export function forgeRedirects(args: ParsedArgs, nowS = Math.floor(Date.now() / 1000)): Buffer[] {
  const tok = readToken(req(args, 'token-file'));
  if (typeof tok !== 'string') throw new UsageError(`--token-file: ${tok.error}`);
  const proto = req(args, 'protocol');
  if (proto !== 'tcp' && proto !== 'udp') throw new UsageError(`--protocol must be tcp or udp, got ${proto}`);
  const client = endpoint(args, 'client');
  const vip = endpoint(args, 'vip');
  if (client.addr.family !== vip.addr.family) throw new UsageError('--client and --vip must be of one family');
  const dip = addrOpt(args, 'dip', client.addr.family);
  const count = intOpt(args, 'count', 1, 10000, 1);
  if (client.port + count - 1 > 65535) throw new UsageError(`--count ${count} from client port ${client.port} passes 65535`);
  const macFn = redirectMacFor(tok);
  const r = newRedirect();
  r.family = client.addr.family;
  r.protocol = proto === 'tcp' ? 6 : 17;
  r.vni = intOpt(args, 'vni', 1, 0xffffff);
  r.expiresS = nowS + REDIRECT_VALID_S;
  writeIpAddr(client.addr, r.src, 0);
  writeIpAddr(vip.addr, r.dst, 0);
  r.dstPort = vip.port;
  writeIpAddr(dip, r.dip, 0);
  writeIpAddr(addrOpt(args, 'dip-host-pa', 4), r.dipHostPa, 0);
  r.dipMac.set(macOpt(args, 'dip-mac'));
  const srcMac = macOpt(args, 'src-mac');
  const dstMac = macOpt(args, 'dst-mac');
  const srcPa = addrOpt(args, 'src-pa', 4).text;
  const dstPa = addrOpt(args, 'dst-pa', 4).text;
  const bad = args.flags.has('bad-signature');
  const frames: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    r.srcPort = client.port + i;
    const body = new Uint8Array(REDIRECT_LEN);
    writeRedirect(r, body, 0);
    macFn(body, 0, REDIRECT_SIGNED_LEN, body, REDIRECT_SIGNED_LEN);
    if (bad) body[REDIRECT_SIGNED_LEN] = body[REDIRECT_SIGNED_LEN]! ^ 0x01;
    frames.push(
      pkt()
        .eth({ src: formatMac(srcMac), dst: formatMac(dstMac) })
        .ipv4({ src: srcPa, dst: dstPa })
        .udp({ sport: REDIRECT_PORT, dport: REDIRECT_PORT })
        .payload(body)
        .build(),
    );
  }
  return frames;
}

function runParsed(args: ParsedArgs): number {
  const out = req(args, 'out');
  const frames = forgeRedirects(args);
  writeFileSync(
    out,
    buildPcap(
      LINKTYPE_ETHERNET,
      frames.map((d, i) => ({ tsUs: Date.now() * 1000 + i, data: d, origLen: d.length })),
    ),
  );
  process.stdout.write(
    `forge-redirect: ${frames.length} frame(s)${args.flags.has('bad-signature') ? ' (bad signature)' : ''} written to ${out}\n`,
  );
  return 0;
}

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
