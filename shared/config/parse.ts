// Entry points: YAML text or a parsed object in, a validated config or every error out.
import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import { Checker, formatValue, oneLine, toConfigError } from './check.js';
import { locate } from './position.js';
import type { ConfigError, ConfigResult, SlbxConfig } from './types.js';
import { validateRoot } from './validate.js';

/** Parses YAML (or JSON) text and validates it. `source` names the text in messages (a file name). */
export function parseConfig(text: string, source = 'config'): ConfigResult {
  if (typeof text !== 'string') {
    return { ok: false, errors: [{ path: '', value: text, message: 'the config text must be a string' }] };
  }
  const lineCounter = new LineCounter();
  let docs: Document.Parsed[];
  try {
    docs = [...parseAllDocuments(text, { lineCounter, prettyErrors: false, uniqueKeys: true, strict: true, logLevel: 'silent' })];
  } catch (e) {
    return { ok: false, errors: [{ path: '', value: undefined, message: `YAML parser failed: ${oneLine(String(e))}` }] };
  }
  if (docs.length === 0) return validateConfig(null, source);
  if (docs.length > 1) {
    const p = lineCounter.linePos(docs[1]!.range[0]);
    const message = `the text holds ${docs.length} YAML documents (the second starts at line ${p.line}); a config is one document: remove the extra '---' separators`;
    return { ok: false, errors: [{ path: '', value: undefined, message, line: p.line, column: p.col }] };
  }
  const doc = docs[0]!;
  const yamlErrors = [...doc.errors, ...doc.warnings];
  if (yamlErrors.length > 0) {
    const errors = yamlErrors.map((e): ConfigError => {
      const p = lineCounter.linePos(e.pos[0]);
      return {
        path: '',
        value: undefined,
        message: `YAML syntax error at line ${p.line}, column ${p.col}: ${oneLine(e.message)}`,
        line: p.line,
        column: p.col,
      };
    });
    return { ok: false, errors };
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: 1000 });
  } catch (e) {
    return { ok: false, errors: [{ path: '', value: undefined, message: `YAML could not be read: ${oneLine(String(e))}` }] };
  }
  const c = new Checker();
  const config = runValidation(c, raw);
  if (config !== null && c.issues.length === 0) return { ok: true, config };
  const errors = c.issues.map((i) => {
    const off = locate(doc, i.path, i.onKey);
    const e = toConfigError(i);
    if (off === undefined) return e;
    const p = lineCounter.linePos(off);
    return { ...e, line: p.line, column: p.col };
  });
  // file order; errors without a position (none in practice) first; sort is stable
  errors.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
  return { ok: false, errors };
}

/** Validates an already parsed object (for example JSON from the controller's API). */
export function validateConfig(raw: unknown, source = 'config'): ConfigResult {
  void source;
  const c = new Checker();
  const config = runValidation(c, raw);
  if (config !== null && c.issues.length === 0) return { ok: true, config };
  return { ok: false, errors: c.issues.map(toConfigError) };
}

/** One line per error: `source[:line:column]: path: message (got VALUE)`. */
export function formatConfigErrors(errors: readonly ConfigError[], source: string): string {
  return errors
    .map((e) => {
      const pos = e.line !== undefined ? `:${e.line}${e.column !== undefined ? `:${e.column}` : ''}` : '';
      const path = e.path === '' ? '' : `${e.path}: `;
      const got = e.value === undefined ? '' : ` (got ${formatValue(e.value)})`;
      return `${source}${pos}: ${path}${oneLine(e.message)}${got}`;
    })
    .join('\n');
}

function runValidation(c: Checker, raw: unknown): SlbxConfig | null {
  try {
    return validateRoot(c, raw);
  } catch (e) {
    // a bug here must not take a daemon down: report it as an error
    c.add([], undefined, `internal error in config validation: ${oneLine(String(e))}`);
    return null;
  }
}
