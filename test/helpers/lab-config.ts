// The default lab config (examples/lab.yaml), optionally edited as a plain object before validation.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { formatConfigErrors, parseConfig, validateConfig, type SlbxConfig } from '../../shared/config.js';

export const LAB_YAML_PATH = fileURLToPath(new URL('../../examples/lab.yaml', import.meta.url));

export function labConfig(edit?: (raw: any) => void): SlbxConfig {
  const text = readFileSync(LAB_YAML_PATH, 'utf8');
  if (edit === undefined) {
    const r = parseConfig(text, 'lab.yaml');
    if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'lab.yaml'));
    return r.config;
  }
  const raw = parseYaml(text);
  edit(raw);
  const r = validateConfig(raw, 'lab.yaml (edited)');
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'lab.yaml (edited)'));
  return r.config;
}
