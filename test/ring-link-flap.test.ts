// The ring port after a socket error: `ip link set dev X down; up` under an open RingPort. af_packet sets
// the socket's error (ENETDOWN) when its interface goes down, so the socket reports POLLERR; libuv then
// STOPS the poll and calls back with UV_EBADF (uv__poll_io). The addon must clear the error, count it and
// start the poll again, or the port never receives again (the daemon runs on, deaf: without the restart
// the kernel counted the frames sent after the flap into the ring and the port never read them).
// A veth pair in a namespace this test makes and removes (slbxring-<pid>-<random>); one RingPort on each end
// (runtime/ring-port.ts from dist), the tester's sending UDP frames to the dut's. Checked: every frame before
// and after the flap arrives; the error is counted (rxErrors, rxLastError); the process stays idle after the
// flap (no busy loop on the error); ten flaps back to back (the retry-later path) and the interface deleted
// under the port change neither. Against the addon without the restart the frames after the flap never
// arrived; against one restarting without clearing the error, the CPU check failed too. Without root or namespaces it is skipped, under CI it fails.
// The addon under test: SLBX_RING_ADDON when set (the child inherits the environment), else the built one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { canNetns, notRunHere } from './helpers/prerequisite.js';
import { makeVethNs } from './helpers/veth-ns.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = process.env.SLBX_RING_ADDON || `${ROOT}native/build/Release/slbx_ring.node`;
const RING_PORT_JS = `${ROOT}dist/runtime/ring-port.js`;

interface PortStats {
  rxPackets: number;
  rxKernelPackets: number;
  rxErrors: number;
  rxLastError: string | null;
}

/** What the child (inside the namespace) reports: frames received per phase, CPU time per idle window, stats. */
interface FlapResult {
  sent: number;
  before: number;
  afterFlap: number;
  afterFlaps: number;
  /** process CPU (ms) over `idleMs` after the first flap, and over `goneMs` after the interface was deleted */
  cpuAfterFlapMs: number;
  idleMs: number;
  cpuAfterDeleteMs: number;
  goneMs: number;
  statsAfterFlap: PortStats;
  statsAfterFlaps: PortStats;
  statsAfterDelete: PortStats;
}

// Runs as an ES module inside the namespace, so that the ports open on its interfaces.
const CHILD = `
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
const { loadRingAddon, RingPort } = await import(${JSON.stringify(RING_PORT_JS)});
const r = loadRingAddon();
if (!('addon' in r)) throw new Error(r.error);
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
const N = 20;
const DPORT = 9999;
const IP = 14;
function frame(seq) {
  const f = Buffer.alloc(IP + 20 + 8 + 4);
  Buffer.from('020000000011020000000001', 'hex').copy(f, 0);
  f.writeUInt16BE(0x0800, 12);
  f[IP] = 0x45;
  f.writeUInt16BE(20 + 8 + 4, IP + 2);
  f[IP + 8] = 64;
  f[IP + 9] = 17;
  Buffer.from([198, 18, 0, 1, 198, 18, 0, 2]).copy(f, IP + 12);
  let s = 0;
  for (let i = 0; i < 20; i += 2) s += f.readUInt16BE(IP + i);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  f.writeUInt16BE(~s & 0xffff, IP + 10);
  f.writeUInt16BE(40000, IP + 20);
  f.writeUInt16BE(DPORT, IP + 22);
  f.writeUInt16BE(12, IP + 24);
  f.writeUInt32BE(seq, IP + 28);
  return f;
}
const got = new Set();
const rx = new RingPort('dut', r.addon, { spinUs: 0, batch: 64 });
rx.open('udp dst port ' + DPORT, (buf) => got.add(buf.readUInt32BE(IP + 28)), 1 << 20);
const tx = new RingPort('tester', r.addon, { spinUs: 0, batch: 8 });
tx.open('udp dst port 1', () => {}, 1 << 20);
const up = (d) => readFileSync('/sys/class/net/' + d + '/operstate', 'utf8').trim() === 'up';
async function flap() {
  execFileSync('ip', ['link', 'set', 'dev', 'dut', 'down']);
  await sleep(30);
  execFileSync('ip', ['link', 'set', 'dev', 'dut', 'up']);
  for (let i = 0; i < 200 && !(up('dut') && up('tester')); i++) await sleep(10);
}
async function phase(base) {
  for (let i = 0; i < N; i++) tx.send(frame(base + i), 0, IP + 32);
  tx.flush();
  for (let t = 0; t < 50; t++) {
    let n = 0;
    for (let i = 0; i < N; i++) if (got.has(base + i)) n++;
    if (n === N || t === 49) return n;
    await sleep(10);
  }
}
async function cpuOver(ms) {
  const c0 = process.cpuUsage();
  await sleep(ms);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000;
}
const pick = (s) => ({ rxPackets: s.rxPackets, rxKernelPackets: s.rxKernelPackets, rxErrors: s.rxErrors, rxLastError: s.rxLastError });
const out = { sent: N, idleMs: 1000, goneMs: 500 };
out.before = await phase(1000);
await flap();
out.cpuAfterFlapMs = await cpuOver(out.idleMs);
out.afterFlap = await phase(2000);
out.statsAfterFlap = pick(rx.stats());
for (let k = 0; k < 10; k++) await flap();
await sleep(250); // past the retry delay (100 ms) of errors back to back
out.afterFlaps = await phase(3000);
out.statsAfterFlaps = pick(rx.stats());
execFileSync('ip', ['link', 'del', 'dev', 'dut']);
out.cpuAfterDeleteMs = await cpuOver(out.goneMs);
out.statsAfterDelete = pick(rx.stats());
rx.close();
tx.close();
console.log(JSON.stringify(out));
`;

describe('the ring port after its interface went down and up (POLLERR): receives again, counts the error, stays idle', () => {
  const ready = canNetns() && existsSync(ADDON) && existsSync(RING_PORT_JS);
  if (!ready) {
    const why = !canNetns()
      ? 'needs root and network namespaces'
      : !existsSync(ADDON)
        ? 'the ring addon is not built (npm run build:native)'
        : 'dist is not built (npx tsc -p tsconfig.json)';
    notRunHere(why, 'the ring port across a link flap');
    return;
  }

  const ns = `slbxring-${process.pid}-${randomBytes(2).toString('hex')}`;
  let res: FlapResult;
  let made = false;

  beforeAll(() => {
    made = true; // set first: a half-made namespace is deleted too
    makeVethNs(ns);
    const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '--input-type=module', '-e', CHILD], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    const line = r.stdout.trim().split('\n').pop() ?? '';
    if (!line.startsWith('{')) throw new Error(`the flap check: exit ${r.status} ${r.signal ?? ''}\n${r.stderr}`);
    res = JSON.parse(line) as FlapResult;
  });

  afterAll(() => {
    if (made) spawnSync('ip', ['netns', 'del', ns]);
  });

  it('receives every frame before and after `ip link set down; up`, with the error counted', () => {
    const s = res.statsAfterFlap;
    expect(res.before).toBe(res.sent);
    expect(res.afterFlap, `after the flap: the kernel counted ${s.rxKernelPackets} frames, the port read ${s.rxPackets}`).toBe(res.sent);
    expect(s.rxErrors).toBeGreaterThanOrEqual(1);
    expect(s.rxLastError).toBe('Network is down');
  });

  it('stays idle after the error (no busy loop on POLLERR)', () => {
    // idle is 1-2 ms; an addon that restarted the poll without clearing the error took 424 ms of the 1000
    expect(res.cpuAfterFlapMs).toBeLessThan(res.idleMs * 0.15);
  });

  it('ten flaps back to back (restarted later, not at once) and a deleted interface: still receiving, then idle', () => {
    const s = res.statsAfterFlaps;
    expect(res.afterFlaps, `after 10 flaps: the kernel counted ${s.rxKernelPackets} frames, the port read ${s.rxPackets}`).toBe(res.sent);
    expect(s.rxErrors).toBeGreaterThanOrEqual(res.statsAfterFlap.rxErrors + 8);
    expect(res.statsAfterDelete.rxErrors).toBeGreaterThan(s.rxErrors);
    expect(res.cpuAfterDeleteMs).toBeLessThan(res.goneMs * 0.15);
  });
});
