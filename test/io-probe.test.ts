// The I/O probe (scripts/bench/io-probe/: the per-core path's experiments, issue 19) builds, and each of
// its methods sends back every frame it receives, byte for byte except the two MAC addresses, which it
// swaps. On a veth pair between two namespaces of the test's own (slbx-hP-t<random>-gen and -dut): the
// probe forwards on d0; the probe's echo client sends frames built here with the project's packet builder
// on g0 one at a time and writes what came back; the expected echo is the frame with its MACs swapped,
// made here. Needs root (namespaces, packet sockets) and cc; the AF_XDP mode also libxdp-dev and
// libbpf-dev (not project dependencies: without them the build leaves the mode out, and the test checks
// that the mode then refuses to run and says why).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pkt } from '../shared/packet-builder.js';
import { expectFrame } from './helpers/frames.js';
import { unmet } from './helpers/prerequisite.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PREFIX = `slbx-hP-t${Math.floor(Math.random() * 0xffffff)
  .toString(16)
  .padStart(6, '0')}`;
const GEN = `${PREFIX}-gen`;
const DUT = `${PREFIX}-dut`;

function whyCannotRun(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'not root';
  if (spawnSync('ip', ['netns', 'list'], { stdio: 'ignore' }).status !== 0) return '`ip netns` is not available';
  if (spawnSync('cc', ['--version'], { stdio: 'ignore' }).status !== 0) return 'no C compiler (cc)';
  return null;
}

function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** The frames sent: IPv4 UDP of several sizes, IPv6 TCP, ARP; each different after the MACs. */
function testFrames(): Buffer[] {
  const eth = { src: '02:00:00:00:00:01', dst: '02:00:00:00:00:02' };
  const frames: Buffer[] = [];
  for (const size of [0, 1, 18, 200, 1000, 1458])
    frames.push(
      pkt()
        .eth(eth)
        .ipv4({ src: '198.18.0.1', dst: '198.18.0.99' })
        .udp({ sport: 40000 + size, dport: 7 })
        .payload(Buffer.alloc(size, size & 0xff))
        .build(),
    );
  frames.push(pkt().eth(eth).ipv6({ src: '2001:db8::1', dst: '2001:db8::99' }).tcp({ sport: 1234, dport: 80, flags: 0x02 }).build());
  frames.push(
    pkt()
      .eth({ src: '02:00:00:00:00:03', dst: 'ff:ff:ff:ff:ff:ff' })
      .arp({ op: 1, senderMac: '02:00:00:00:00:03', senderIp: '198.18.0.1', targetIp: '198.18.0.99' })
      .build(),
  );
  return frames;
}

function swappedMacs(f: Buffer): Buffer {
  const e = Buffer.from(f);
  f.copy(e, 0, 6, 12);
  f.copy(e, 6, 0, 6);
  return e;
}

describe.skipIf(unmet(whyCannotRun(), 'the I/O probe namespace test'))('the I/O probe sends back every frame (MACs swapped)', () => {
  let dir = '';
  let bin = '';
  let hasXdp = false;
  let probe: ChildProcess | null = null;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'slbx-io-probe-'));
    bin = join(dir, 'io-probe');
    const built = sh('bash', [join(ROOT, 'scripts/bench/io-probe/build.sh'), bin]);
    // build.sh names the modes it built; without AF_XDP its line says 'no AF_XDP: apt-get install libxdp-dev ...'
    hasXdp = built.includes('modes mmsg, txring, xdp');
    sh('ip', ['netns', 'add', GEN]);
    sh('ip', ['netns', 'add', DUT]);
    sh('ip', ['link', 'add', 'g0', 'netns', GEN, 'type', 'veth', 'peer', 'name', 'd0', 'netns', DUT]);
    for (const [ns, dev] of [
      [GEN, 'g0'],
      [DUT, 'd0'],
    ] as const) {
      sh('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1', `net.ipv6.conf.${dev}.disable_ipv6=1`]);
      sh('ip', ['-n', ns, 'link', 'set', dev, 'up']);
    }
  }, 120_000);

  afterAll(() => {
    if (probe !== null && probe.exitCode === null) probe.kill('SIGTERM');
    spawnSync('ip', ['netns', 'del', GEN]);
    spawnSync('ip', ['netns', 'del', DUT]);
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  async function startProbe(mode: string): Promise<ChildProcess> {
    const args = ['netns', 'exec', DUT, 'sh', '-c', 'mount -t bpf bpf /sys/fs/bpf 2>/dev/null; exec "$@"', 'sh'];
    const p = spawn('ip', [...args, bin, 'forward', '--iface', 'd0', '--mode', mode], { stdio: ['ignore', 'pipe', 'pipe'] });
    let said = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        said += d.toString();
        if (/^ready$/m.test(said)) resolve();
      };
      p.stdout.on('data', onData);
      p.stderr.on('data', (d: Buffer) => (said += d.toString()));
      p.on('exit', (code) => reject(new Error(`the probe (${mode}) exited ${code}: ${said}`)));
    });
    return p;
  }

  async function stopProbe(p: ChildProcess): Promise<string> {
    let out = '';
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const done = new Promise<void>((resolve) => p.on('exit', () => resolve()));
    p.kill('SIGTERM');
    await done;
    return out;
  }

  for (const mode of ['mmsg', 'txring', 'xdp']) {
    it(`--mode ${mode}`, async () => {
      if (mode === 'xdp' && !hasXdp) {
        // built without libxdp-dev/libbpf-dev (not a project dependency): the mode refuses, saying why
        const r = spawnSync(bin, ['forward', '--iface', 'lo', '--mode', 'xdp'], { encoding: 'utf8' });
        expect(r.status).toBe(3);
        expect(r.stderr).toContain('built without AF_XDP');
        return;
      }
      probe = await startProbe(mode);
      const frames = testFrames();
      const inFile = join(dir, `${mode}-in.hex`);
      const outFile = join(dir, `${mode}-out.hex`);
      writeFileSync(inFile, frames.map((f) => f.toString('hex')).join('\n') + '\n');
      // generous: the machine may be busy; a frame that never comes back shows as '-'
      const r = spawnSync(
        'ip',
        ['netns', 'exec', GEN, bin, 'echo', '--iface', 'g0', '--frames', inFile, '--out', outFile, '--timeout-ms', '3000'],
        { encoding: 'utf8', timeout: 120_000 },
      );
      const counters = await stopProbe(probe);
      probe = null;
      expect(r.status, r.stderr).toBe(0);
      expect(existsSync(outFile)).toBe(true);
      const echoes = readFileSync(outFile, 'utf8').trim().split('\n');
      expect(echoes.length).toBe(frames.length);
      frames.forEach((f, i) => {
        const line = echoes[i] ?? '-';
        if (line === '-') expect.fail(`frame ${i} (${f.length} bytes) never came back (probe: ${counters.trim()})`);
        expectFrame(Buffer.from(line, 'hex'), swappedMacs(f));
      });
      // the probe's own counters: everything it read, it sent, nothing refused
      const m = /rx (\d+) tx (\d+) tx_errors (\d+)/.exec(counters);
      expect(m, counters).not.toBeNull();
      expect(Number(m?.[2])).toBe(Number(m?.[1]));
      expect(Number(m?.[3])).toBe(0);
      expect(Number(m?.[1])).toBeGreaterThanOrEqual(frames.length);
    }, 180_000);
  }
});
