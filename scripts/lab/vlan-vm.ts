#!/usr/bin/env node
// The VLAN subinterface of a lab VM, in user space (docs/lab.md, 'The VLAN lab'). The lab's kernel has
// no 802.1Q module (no 'ip link add ... type vlan', no tc vlan action), so a nic of a vlan network gets
// this relay in its namespace instead, between two interfaces:
//   --trunk eth0      the veth to the host's port (an 802.1Q trunk): frames tagged --vlan come in here
//   --inner vlanNp    one end of a veth pair whose other end, eth0.VLAN, holds the VM's addresses
// A frame from the VM's stack (on --inner, from --mac) leaves on the trunk tagged --vlan (written by
// shared/ethernet.ts' writeEthernet); a frame on the trunk tagged --vlan goes to the stack untagged;
// anything else on the trunk (untagged, another VLAN) is dropped and counted, as a VLAN subinterface
// would. Prints {"event":"ready",...} when both captures are open, and its counters on SIGTERM.
//
//   node dist/scripts/lab/vlan-vm.js --trunk eth0 --inner vlan100p --vlan 100 --mac 02:00:c6:13:64:0a
import { formatMac, parseMac } from '../../shared/addr.js';
import { one, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { newEthernetHeader, parseEthernet, writeEthernet, VLAN_NONE } from '../../shared/ethernet.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import { PcapPort } from '../../runtime/pcap-port.js';

const OPTIONS: readonly OptionSpec[] = [
  { name: 'trunk', value: 'IFACE', help: 'the interface to the host (802.1Q trunk)', default: 'eth0' },
  { name: 'inner', value: 'IFACE', help: "the relay's end of the veth pair to the VM's eth0.VLAN" },
  { name: 'vlan', value: 'ID', help: 'the VLAN id, 1..4094' },
  { name: 'mac', value: 'MAC', help: "the VM's MAC (the source of its frames on --inner)" },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'vlan-vm',
  usage: 'node dist/scripts/lab/vlan-vm.js --inner IFACE --vlan ID --mac MAC [--trunk IFACE]',
  options: OPTIONS,
  noPositional: true,
  about:
    "A lab VM's VLAN subinterface in user space: tags the VM's frames toward the host's trunk port, untags the VLAN's frames toward the VM.",
};

function log(event: string, fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ ts: new Date().toISOString(), event, ...fields })}\n`);
}

function runParsed(args: ParsedArgs): number {
  const trunk = one(args, 'trunk')!;
  const inner = one(args, 'inner');
  const vlanText = one(args, 'vlan');
  const macText = one(args, 'mac');
  const vid = Number(vlanText);
  const mac = macText === undefined ? null : parseMac(macText);
  if (inner === undefined || !/^\d+$/.test(vlanText ?? '') || vid < 1 || vid > 4094 || mac === null) {
    process.stderr.write('vlan-vm: --inner IFACE, --vlan 1..4094 and --mac MAC are required (see --help)\n');
    return 2;
  }
  const counts = { toTrunk: 0, toVm: 0, dropUntagged: 0, dropOtherVlan: 0, dropBad: 0, sendErrors: 0 };
  const h = newEthernetHeader();
  const out = Buffer.alloc(65536 + 4);
  const t = new PcapPort(trunk);
  const i = new PcapPort(inner);
  const macS = formatMac(mac);
  // the VM's frames: tagged toward the host
  i.open(`ether src ${macS}`, (f, len) => {
    const n = parseEthernet(f, 0, h, len);
    if (n < 0 || h.vlanId !== VLAN_NONE) return void counts.dropBad++;
    h.vlanId = vid;
    h.vlanPcp = 0;
    const w = writeEthernet(h, out, 0);
    f.copy(out, w, n, len);
    if (t.send(out, 0, w + len - n)) counts.toTrunk++;
    else counts.sendErrors++;
  });
  // the host's frames: the VLAN's, untagged toward the VM; the rest dropped
  t.open(`not ether src ${macS}`, (f, len) => {
    const n = parseEthernet(f, 0, h, len);
    if (n < 0) return void counts.dropBad++;
    if (h.vlanId === VLAN_NONE) return void counts.dropUntagged++;
    if (h.vlanId !== vid) return void counts.dropOtherVlan++;
    h.vlanId = VLAN_NONE;
    const w = writeEthernet(h, out, 0);
    f.copy(out, w, n, len);
    if (i.send(out, 0, w + len - n)) counts.toVm++;
    else counts.sendErrors++;
  });
  log('ready', { kind: 'vlan-vm', trunk, inner, vlan: vid, mac: macS, pid: process.pid });
  const stop = () => {
    log('stopped', counts);
    t.close();
    i.close();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return 0;
}

const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);
if (isMain(import.meta.url)) {
  const rc = main(process.argv.slice(2));
  if (rc !== 0) process.exitCode = rc;
}
