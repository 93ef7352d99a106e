// The two capture/injection implementations (--io pcap and --io ring, runtime/frame-port.ts):
//   - without namespaces: the --io option (refused when bad, before the config is read), the fallback to
//     pcap with its reason when the ring addon is missing, and the addon's own argument checks;
//   - in a network namespace (root): the same packet fixtures through both paths on a veth pair
//     (scripts/bench/port-check.ts): the MUX's and the host agent's data planes on frames each path
//     captured, what each path sent, byte for byte against the data planes run offline, in order,
//     802.1Q tag, IPv6, a 1400-byte frame, a filtered-out frame and bursts of up to 1000 frames included.
//     Without root or namespaces this part is skipped, under CI it fails.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { MUX_PROGRAM } from '../mux/main.js';
import { HOST_AGENT_PROGRAM } from '../host-agent/main.js';
import { runDaemon } from '../runtime/daemon-main.js';
import { PcapPort } from '../runtime/pcap-port.js';
import { LAB_YAML_PATH } from './helpers/lab-config.js';
import { canNetns, notRunHere, unmet } from './helpers/prerequisite.js';
import { makeVethNs } from './helpers/veth-ns.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = `${ROOT}native/build/Release/slbx_ring.node`;
const isRoot = process.getuid?.() === 0;

async function run(program: typeof MUX_PROGRAM, argv: string[]): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    stderr += String(s);
    return true;
  });
  const o = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  try {
    return { code: await runDaemon(program, argv), stderr };
  } finally {
    e.mockRestore();
    o.mockRestore();
  }
}

describe('--io: the option and the fallback', () => {
  afterEach(() => {
    delete process.env.SLBX_RING_ADDON;
    vi.resetModules();
  });

  it('refuses a bad --io before reading the config, naming the option and the allowed values', async () => {
    for (const p of [MUX_PROGRAM, HOST_AGENT_PROGRAM]) {
      const r = await run(p, ['--config', '/nonexistent.yaml', '--name', 'x', '--io', 'dpdk']);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('--io must be one of pcap, ring (got "dpdk")');
    }
  });

  it('lists --io in --help with pcap as the default', async () => {
    let out = '';
    const o = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
      out += String(s);
      return true;
    });
    try {
      expect(await runDaemon(MUX_PROGRAM, ['--help'])).toBe(0);
    } finally {
      o.mockRestore();
    }
    expect(out).toMatch(/--io IO\s+capture and injection: pcap \(libpcap\) or ring/);
    expect(out).toMatch(/--io IO .*\(default pcap\)/);
  });

  it('falls back to pcap, with the reason, when the addon is missing', async () => {
    process.env.SLBX_RING_ADDON = '/nonexistent/slbx_ring.node';
    vi.resetModules();
    const fp = await import('../runtime/frame-port.js');
    const r = fp.resolveIo('ring');
    expect(r.io).toBe('pcap');
    expect(r.fallbackReason).toContain('/nonexistent/slbx_ring.node is not built (npm run build:native');
    expect(fp.resolveIo('pcap')).toEqual({ io: 'pcap', fallbackReason: null });
    // what the daemons then build: the pcap implementations
    const port = fp.createFramePort(r.io, 'lo');
    expect(port.constructor.name).toBe(PcapPort.name);
    expect(port.isOpen).toBe(false);
  });

  it('says why a broken addon cannot load', async () => {
    process.env.SLBX_RING_ADDON = LAB_YAML_PATH; // exists, but is not a shared object
    vi.resetModules();
    const rp = await import('../runtime/ring-port.js');
    const r = rp.loadRingAddon();
    expect('error' in r && r.error).toContain(LAB_YAML_PATH);
  });
});

describe.skipIf(unmet(existsSync(ADDON) ? null : 'the ring addon is not built (npm run build:native)', 'the ring addon'))(
  'the ring addon: argument checks (no namespaces)',
  () => {
    it('loads, and refuses bad arguments with a message instead of crashing', async () => {
      const { loadRingAddon } = await import('../runtime/ring-port.js');
      const r = loadRingAddon();
      if (!('addon' in r)) throw new Error(r.error);
      const a = r.addon;
      expect(() => a.openRaw(5 as 4, '192.0.2.1', 16, 2048)).toThrow(/openRaw\(family 4\|6/);
      expect(() => a.openRaw(4, 'not an address', 16, 2048)).toThrow(/not an IPv4 address/);
      expect(() =>
        a.openPacket('x'.repeat(40), 'udp', 1 << 20, 2048, 8, 8, true, Buffer.alloc(8 * 2052), new Uint32Array(16), () => {}),
      ).toThrow(/bad interface name/);
      expect(() => a.openPacket('lo', 'udp', 1 << 20, 2048, 8, 8, true, Buffer.alloc(10), new Uint32Array(16), () => {})).toThrow(
        /rx must hold/,
      );
      expect(() => a.send({}, Buffer.alloc(1), 0, 1)).toThrow(/not a slbx_ring handle/);
    });

    it.skipIf(unmet(isRoot ? null : 'not root', 'a raw sender'))(
      'a closed sender refuses sends (EBADF) and keeps its counters',
      async () => {
        const { loadRingAddon, RingRawSender } = await import('../runtime/ring-port.js');
        const r = loadRingAddon();
        if (!('addon' in r)) throw new Error(r.error);
        const s = new RingRawSender(r.addon, 4, '127.0.0.1');
        s.close();
        expect(s.send(Buffer.alloc(40), 0, 40)).toBe(false);
        expect(s.sent).toBe(0);
        expect(s.sendErrors).toBe(0);
      },
    );
  },
);

describe('both io paths on a veth pair: the same fixtures, the same bytes', () => {
  const ready = canNetns() && existsSync(ADDON) && existsSync(`${ROOT}dist/scripts/bench/port-check.js`);
  if (!ready) {
    const why = !canNetns()
      ? 'needs root and network namespaces'
      : !existsSync(ADDON)
        ? 'the ring addon is not built (npm run build:native)'
        : 'dist is not built (npx tsc -p tsconfig.json)';
    notRunHere(why, 'both io paths on a veth pair');
    return;
  }

  it('pcap and ring forward, deliver and return exactly what the data planes produce offline', () => {
    const ns = `slbx-bench-${randomBytes(3).toString('hex')}-ports`;
    const ip = (...a: string[]) => execFileSync('ip', a, { stdio: 'pipe' });
    try {
      makeVethNs(ns, 1600);
      ip('-n', ns, 'addr', 'add', '198.18.0.21/24', 'dev', 'dut');
      ip('-n', ns, 'neigh', 'add', '198.18.0.2', 'lladdr', '02:00:00:00:00:01', 'dev', 'dut', 'nud', 'permanent');
      const outs: Record<string, { ok: boolean; results: { part: string; expected: number; received: number; mismatches: string[] }[] }> =
        {};
      for (const io of ['pcap', 'ring']) {
        const r = spawnSync(
          'ip',
          [
            'netns',
            'exec',
            ns,
            process.execPath,
            `${ROOT}dist/scripts/bench/port-check.js`,
            '--io',
            io,
            '--dut',
            'dut',
            '--tester',
            'tester',
            '--via',
            '198.18.0.2',
          ],
          { encoding: 'utf8', timeout: 60_000 },
        );
        const line = r.stdout.trim().split('\n').pop() ?? '';
        expect(line, `port-check --io ${io}: exit ${r.status}\n${r.stderr}`).toMatch(/^\{/);
        outs[io] = JSON.parse(line);
      }
      for (const io of ['pcap', 'ring']) {
        const o = outs[io]!;
        expect(o.results.map((x) => x.part)).toEqual(['mux', 'host-in', 'dsr']);
        for (const x of o.results) {
          expect(x.mismatches, `${io} ${x.part}`).toEqual([]);
          expect(x.received, `${io} ${x.part}`).toBe(x.expected);
        }
        expect(o.ok).toBe(true);
      }
      // the fixtures really exercised something on both: bursts, all three parts
      expect(outs.ring!.results.map((x) => x.expected)).toEqual(outs.pcap!.results.map((x) => x.expected));
      expect(outs.ring!.results[0]!.expected).toBeGreaterThan(1000);
    } finally {
      spawnSync('ip', ['netns', 'del', ns]);
    }
  });
});
