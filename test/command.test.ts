// runtime/command.ts: the preamble every slbx program shares. The expected texts are written out here:
// "PROGRAM: message" on stderr with exit 2 for a bad argument, the help on stdout with exit 0.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UsageError, type OptionSpec } from '../shared/args.js';
import { runCommand, runCommandAsync, type CommandSpec } from '../runtime/command.js';
import { MUX_PROGRAM } from '../mux/main.js';
import { HOST_AGENT_PROGRAM } from '../host-agent/main.js';
import { runDaemon } from '../runtime/daemon-main.js';
import { main as controllerMain } from '../controller/main.js';

const OPTIONS: OptionSpec[] = [
  { name: 'count', value: 'N', help: 'how many', default: '3' },
  { name: 'help', help: 'show this help' },
];
const SPEC: CommandSpec = { program: 'demo', usage: 'demo --count N', about: 'A demo.', options: OPTIONS };

let out = '';
let err = '';
function capture(): void {
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += String(s);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += String(s);
    return true;
  });
}
afterEach(() => vi.restoreAllMocks());

describe('runCommand', () => {
  it('--help prints the help and returns 0 without running the body', () => {
    capture();
    const body = vi.fn(() => 7);
    expect(runCommand(SPEC, ['--help'], body)).toBe(0);
    expect(body).not.toHaveBeenCalled();
    expect(out).toBe('usage: demo --count N\n\nA demo.\n\noptions:\n  --count N  how many (default 3)\n  --help     show this help\n');
    expect(err).toBe('');
  });

  it('a bad argument is "PROGRAM: message" on stderr, exit 2', () => {
    capture();
    expect(runCommand(SPEC, ['--nope'], () => 0)).toBe(2);
    expect(err).toBe('demo: unknown option --nope (see --help)\n');
    capture();
    expect(runCommand({ ...SPEC, errorSuffix: ' (see demo --help)' }, ['--count'], () => 0)).toBe(2);
    expect(err).toBe('demo: --count needs a value: --count N (see demo --help)\n');
  });

  it('noPositional refuses a positional argument, even beside --help', () => {
    capture();
    expect(runCommand({ ...SPEC, noPositional: true }, ['--help', 'stray'], () => 0)).toBe(2);
    expect(err).toBe('demo: unexpected argument stray\n');
    expect(out).toBe('');
  });

  it('the body gets the arguments; its UsageError is refused the same way; other errors go through', () => {
    capture();
    expect(runCommand(SPEC, [], (a) => Number(a.values.get('count')![0]))).toBe(3);
    expect(
      runCommand(SPEC, [], () => {
        throw new UsageError('--count must be odd');
      }),
    ).toBe(2);
    expect(err).toBe('demo: --count must be odd\n');
    expect(() =>
      runCommand(SPEC, [], () => {
        throw new RangeError('boom');
      }),
    ).toThrow('boom');
  });

  it('runCommandAsync: the same, always as a promise', async () => {
    capture();
    await expect(runCommandAsync(SPEC, ['--help'], async () => 5)).resolves.toBe(0);
    await expect(runCommandAsync(SPEC, ['-x'], async () => 5)).resolves.toBe(2);
    expect(err).toBe('demo: unknown option -x (options are long: --name; see --help)\n');
    await expect(
      runCommandAsync(SPEC, [], async () => {
        throw new UsageError('later');
      }),
    ).resolves.toBe(2);
    expect(err).toContain('demo: later\n');
    await expect(runCommandAsync(SPEC, [], async () => 5)).resolves.toBe(5);
  });
});

describe('the daemons and the controller go through it', () => {
  it.each([
    ['slbx-mux', (a: string[]) => runDaemon(MUX_PROGRAM, a)],
    ['slbx-host-agent', (a: string[]) => runDaemon(HOST_AGENT_PROGRAM, a)],
    ['slbx-controller', (a: string[]) => controllerMain(a)],
  ])('%s: an unknown option and a missing value', async (program, run) => {
    capture();
    expect(await run(['--bogus'])).toBe(2);
    expect(err).toBe(`${program}: unknown option --bogus (see --help)\n`);
    capture();
    expect(await run(['--log-level'])).toBe(2);
    expect(err).toBe(`${program}: --log-level needs a value: --log-level LEVEL\n`);
  });

  it("the packet daemons' shared options: the same names, values and defaults in both helps", async () => {
    capture();
    await runDaemon(MUX_PROGRAM, ['--help']);
    const mux = out;
    capture();
    await runDaemon(HOST_AGENT_PROGRAM, ['--help']);
    for (const [flag, dflt] of [
      ['--interface IF', null],
      ['--capture-buffer-mb N', '(default 32)'],
      ['--io IO', '(default pcap)'],
    ] as const) {
      for (const help of [mux, out]) {
        const line = help.split('\n').find((l) => l.trimStart().startsWith(flag));
        expect(line, `${flag} in\n${help}`).toBeDefined();
        if (dflt !== null) expect(line).toContain(dflt);
      }
    }
  });
});
