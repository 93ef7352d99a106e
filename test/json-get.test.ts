// The lab's JSON reader for bash (scripts/lab/json-get.ts): paths through objects and arrays, the type
// check, JSON-lines logs with other lines among them, and the messages that say what is missing.
import { describe, expect, it } from 'vitest';
import { commandHelp } from '../runtime/command.js';
import { COMMAND, formatValue, getJson, parseWhere, pickDocument, queryJson, splitPath } from '../scripts/lab/json-get.js';

// the shape of a daemon's GET /status (abridged, written out here)
const status = {
  ready: true,
  io: 'ring',
  generation: 7,
  counters: { rx_packets: 12, tx_packets: 0 },
  pools: [{ table: 'web', slots: null }],
};

describe('getJson', () => {
  it('walks keys and array indexes', () => {
    expect(getJson(status, 'ready')).toEqual({ ok: true, value: true });
    expect(getJson(status, 'counters.rx_packets', 'number')).toEqual({ ok: true, value: 12 });
    expect(getJson(status, 'pools.0.table', 'string')).toEqual({ ok: true, value: 'web' });
    expect(getJson(status, 'pools.0.slots', 'null')).toEqual({ ok: true, value: null });
    expect(getJson(status, '.')).toEqual({ ok: true, value: status });
    expect(splitPath('a.b.0')).toEqual(['a', 'b', '0']);
  });
  it('checks the type: a string "true" is not a boolean, an array is not an object', () => {
    expect(getJson({ ready: 'true' }, 'ready', 'boolean')).toEqual({ ok: false, error: 'ready: a string, not a boolean' });
    expect(getJson(status, 'pools', 'object')).toEqual({ ok: false, error: 'pools: an array, not an object' });
    expect(getJson(status, 'counters', 'object').ok).toBe(true);
    expect(getJson(status, 'generation', 'string').ok).toBe(false);
    expect(getJson(status, 'generation', 'any')).toEqual({ ok: true, value: 7 });
  });
  it('says what is missing', () => {
    expect(getJson(status, 'counters.drop_x')).toEqual({ ok: false, error: 'counters.drop_x: no key drop_x in counters' });
    expect(getJson(status, 'pools.1.table')).toEqual({ ok: false, error: 'pools.1.table: pools is an array of 1, no index 1' });
    expect(getJson(status, 'io.x')).toEqual({ ok: false, error: 'io.x: io is a string, not an object or array' });
    expect(getJson(status, 'toString').ok).toBe(false); // own keys only
  });
});

describe('pickDocument', () => {
  const log =
    'node: warning\n{"event":"listening","port":80}\n{"event":"ready","ports":[80,8000]}\n{"event":"ready","ports":[1]}\n{"event":"re';
  it('reads the first JSON line meeting --where, passing over other lines', () => {
    const r = pickDocument(log, true, parseWhere('event=ready'));
    expect(r).toEqual({ ok: true, value: { event: 'ready', ports: [80, 8000] } });
    expect(pickDocument(log, true, undefined)).toEqual({ ok: true, value: { event: 'listening', port: 80 } });
    expect(pickDocument(log, true, parseWhere('ports.1=8000')).ok).toBe(true);
  });
  it('fails when no line meets it, or the document is no JSON', () => {
    expect(pickDocument(log, true, parseWhere('event=stopped'))).toEqual({ ok: false, error: 'no JSON line with event=stopped' });
    expect(pickDocument('', true, undefined)).toEqual({ ok: false, error: 'no JSON line' });
    const r = pickDocument('{"ready": tru', false, undefined);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(/^not JSON: /);
    expect(pickDocument('{"a":1}', false, parseWhere('a=2'))).toEqual({ ok: false, error: 'the document does not have a=2' });
  });
  it('--where needs PATH=VALUE', () => {
    expect(() => parseWhere('event')).toThrow(/--where must be PATH=VALUE/);
    expect(parseWhere('a.b=x=y')).toEqual({ path: 'a.b', value: 'x=y' });
  });
});

describe('queryJson (what the program prints per input)', () => {
  const q = { paths: ['ready', 'io'], type: 'any' as const, lines: false };
  it('prints each path; --default for a missing one only', () => {
    expect(queryJson(JSON.stringify(status), q)).toEqual({ ok: true, lines: ['true', 'ring'] });
    expect(queryJson('{"ready":false}', { ...q, default: '-' })).toEqual({ ok: true, lines: ['false', '-'] });
    expect(queryJson('{"ready":false}', q)).toEqual({ ok: false, error: 'io: no key io in (the document)' });
  });
  it('a wrong type is an error even with --default', () => {
    expect(queryJson('{"ready":"yes"}', { ...q, paths: ['ready'], type: 'boolean', default: 'false' })).toEqual({
      ok: false,
      error: 'ready: a string, not a boolean',
    });
  });
  it('a --file being written (no JSON yet, no ready line yet) gives the default; stdin that is no JSON does not', () => {
    const ready = { paths: ['ready'], type: 'boolean' as const, lines: false, default: 'false' };
    expect(queryJson('{"ready": tr', { ...ready, fromFile: true })).toEqual({ ok: true, lines: ['false'] });
    expect(queryJson('{"ready": tr', ready).ok).toBe(false);
    const log = { paths: ['event'], type: 'any' as const, lines: true, where: parseWhere('event=ready'), default: '-' };
    expect(queryJson('{"event":"listening"}\n', log)).toEqual({ ok: true, lines: ['-'] });
    expect(queryJson('{"event":"listening"}\n{"event":"ready"}\n', log)).toEqual({ ok: true, lines: ['ready'] });
  });
});

describe('formatValue and --help', () => {
  it('prints a string as it is, everything else as JSON', () => {
    expect([formatValue('ring'), formatValue(7), formatValue(true), formatValue(null), formatValue({ a: [1] })]).toEqual([
      'ring',
      '7',
      'true',
      'null',
      '{"a":[1]}',
    ]);
  });
  it('documents each option', () => {
    const help = commandHelp(COMMAND);
    for (const o of ['file', 'lines', 'where', 'type', 'default']) expect(help).toMatch(new RegExp(`\\n  --${o}[ \\n]`));
  });
});
