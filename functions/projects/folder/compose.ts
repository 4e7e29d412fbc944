/**
 * Compose files → the project's services. Reads the parts a deploy needs (image,
 * build, command, ports, depends_on, environment) of `services:`, merging the
 * override file over the main one the way `docker compose` does for these keys.
 *
 * Environment values are the secrets of a compose folder: the parse returns them
 * separately (`captured`) so the caller can encrypt them; the services themselves
 * carry only keys, and every value reads back as MASK.
 */
import { isMap as isYamlMap, isScalar, isSeq, parseDocument } from "yaml";
import type { ServiceSpec } from "../../../shared/db/schema";
import { isUnsafeText, UNSAFE_TEXT_DETAIL } from "../../../shared/http/safe-text";
import { MASK } from "../env-store";

export { MASK };

export interface ParsedService extends ServiceSpec {
  name: string;
  envKeys: string[];
}

/** service name → variable → real value. */
export type CapturedValues = Record<string, Record<string, string>>;

export class ComposeError extends Error {}

/**
 * `fileBytes`: the YAML parser is linear but costly (several µs a byte, more on
 * hostile input), and the scan runs on the request's thread: compose files are
 * kept small (real ones are a few KiB; large stacks about 25 KiB).
 */
export const LIMITS = { fileBytes: 64 * 1024, services: 100, variables: 500, valueLength: 32 * 1024, commandLength: 4096, ports: 100 } as const;
export const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;
export const ENV_KEY = /^[^=\s\p{Cc}\p{Cs}]{1,256}$/u;
/** A value that is nothing but bullets is a masked read, not a real value. */
export const isMasked = (value: string) => /^•+$/.test(value);

/** Control characters, and lone surrogates (a YAML "\ud800" escape), which Postgres cannot store. */
const CONTROL = /[\p{Cc}\p{Cs}]/u;
type Yaml = Record<string, unknown>;
const isMap = (v: unknown): v is Yaml => typeof v === "object" && v !== null && !Array.isArray(v);
const scalar = (v: unknown) => (typeof v === "string" || typeof v === "number" || typeof v === "boolean" ? String(v) : null);

function fail(file: string, detail: string): never {
  throw new ComposeError(`${file}: ${detail}`);
}

const utf8 = new TextEncoder();

/** A key repeated in one mapping (docker compose refuses them), found with a Set per mapping and no recursion. */
function duplicateKey(root: unknown): string | null {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (isYamlMap(node)) {
      const seen = new Set<string>();
      for (const pair of node.items) {
        if (isScalar(pair.key)) {
          const key = String(pair.key.value);
          if (seen.has(key)) return key;
          seen.add(key);
        }
        stack.push(pair.value);
      }
    } else if (isSeq(node)) {
      for (const item of node.items) stack.push(item);
    }
  }
  return null;
}

function load(text: string, file: string): Yaml {
  const bytes = utf8.encode(text).length;
  if (bytes > LIMITS.fileBytes) fail(file, `is ${Math.ceil(bytes / 1024)} KiB; compose files over ${LIMITS.fileBytes / 1024} KiB are refused`);
  let doc: unknown;
  try {
    // The parser's own unique-key check compares every pair of keys (quadratic): keys are checked below instead.
    // logLevel "error": warnings about hostile input are not printed to the server's console.
    const parsed = parseDocument(text, { uniqueKeys: false, prettyErrors: false, logLevel: "error" });
    if (parsed.errors.length > 0) throw parsed.errors[0];
    const repeated = duplicateKey(parsed.contents);
    if (repeated !== null) fail(file, `not valid YAML (the key ${JSON.stringify(repeated.slice(0, 100))} is repeated in one mapping)`);
    // maxAliasCount keeps "billion laughs" aliases out.
    doc = parsed.toJS({ maxAliasCount: 100 });
  } catch (e) {
    if (e instanceof ComposeError) throw e;
    fail(file, `not valid YAML (${(e instanceof Error ? e.message : String(e)).split("\n")[0]!.slice(0, 200)})`);
  }
  if (!isMap(doc)) fail(file, "must be a YAML mapping with a `services` key");
  return doc;
}

function environmentOf(raw: unknown, where: string, file: string): Map<string, string> {
  const env = new Map<string, string>();
  if (raw === undefined || raw === null) return env;
  const set = (key: string, value: string) => {
    if (!ENV_KEY.test(key)) fail(file, `${where}: environment variable name ${JSON.stringify(key.slice(0, 100))} is not valid`);
    if (value.length > LIMITS.valueLength) fail(file, `${where}: the value of ${key} is longer than ${LIMITS.valueLength} characters`);
    env.set(key, value);
  };
  if (Array.isArray(raw)) {
    for (const item of raw) {
      const entry = scalar(item);
      if (entry === null) fail(file, `${where}: environment entries must be KEY=value strings`);
      const eq = entry.indexOf("=");
      // `- KEY` without a value takes it from the shell in compose; here there is none.
      set(eq === -1 ? entry : entry.slice(0, eq), eq === -1 ? "" : entry.slice(eq + 1));
    }
  } else if (isMap(raw)) {
    for (const [key, value] of Object.entries(raw)) {
      const text = value === null ? "" : scalar(value);
      if (text === null) fail(file, `${where}: the value of ${key} must be a string, number or boolean`);
      set(key, text);
    }
  } else {
    fail(file, `${where}: environment must be a list or a mapping`);
  }
  if (env.size > LIMITS.variables) fail(file, `${where}: more than ${LIMITS.variables} environment variables`);
  return env;
}

function commandOf(raw: unknown, where: string, file: string): string | null {
  if (raw === undefined || raw === null) return null;
  const quote = (part: string) => (/^[\w@%+=:,./-]+$/.test(part) ? part : `'${part.replace(/'/g, `'\\''`)}'`);
  const text = Array.isArray(raw) ? raw.map((p) => quote(scalar(p) ?? fail(file, `${where}: command items must be strings`))).join(" ") : scalar(raw);
  if (text === null) fail(file, `${where}: command must be a string or a list`);
  if (text.length > LIMITS.commandLength) fail(file, `${where}: command is longer than ${LIMITS.commandLength} characters`);
  if (isUnsafeText(text)) fail(file, `${where}: command ${UNSAFE_TEXT_DETAIL}`);
  return text.trim() || null;
}

function portsOf(raw: unknown, where: string, file: string): string[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) fail(file, `${where}: ports must be a list`);
  if (raw.length > LIMITS.ports) fail(file, `${where}: more than ${LIMITS.ports} ports`);
  return raw.map((p) => {
    const port = isMap(p)
      ? `${p.published !== undefined ? `${scalar(p.published)}:` : ""}${scalar(p.target)}${p.protocol && p.protocol !== "tcp" ? `/${scalar(p.protocol)}` : ""}`
      : scalar(p);
    if (!port || port.length > 100 || CONTROL.test(port)) fail(file, `${where}: a port entry is not valid`);
    return port;
  });
}

function buildOf(raw: unknown, where: string, file: string): ServiceSpec["build"] {
  if (raw === undefined || raw === null) return null;
  const context = isMap(raw) ? (raw.context === undefined ? "." : scalar(raw.context)) : scalar(raw);
  const dockerfile = isMap(raw) && raw.dockerfile !== undefined ? scalar(raw.dockerfile) : null;
  if (!context || context.length > 1024 || CONTROL.test(context) || (dockerfile !== null && (dockerfile.length > 1024 || CONTROL.test(dockerfile)))) {
    fail(file, `${where}: build must be a path or {context, dockerfile}`);
  }
  return { context, dockerfile };
}

/** Service definitions by name: the override's keys replace the main file's; environments are merged (later wins). */
function merged(files: Array<{ file: string; doc: Yaml }>): Map<string, { def: Yaml; environments: unknown[] }> {
  const out = new Map<string, { def: Yaml; environments: unknown[] }>();
  for (const { file, doc } of files) {
    const services = doc.services;
    if (services === undefined || services === null) continue;
    if (!isMap(services)) fail(file, "`services` must be a mapping");
    for (const [name, def] of Object.entries(services)) {
      if (!isMap(def) && def !== null) fail(file, `service ${JSON.stringify(name.slice(0, 100))} must be a mapping`);
      const prev = out.get(name) ?? { def: {}, environments: [] };
      out.set(name, {
        def: { ...prev.def, ...(def ?? {}) },
        environments: def?.environment === undefined ? prev.environments : [...prev.environments, def.environment],
      });
    }
  }
  return out;
}

export function parseCompose(
  main: { file: string; text: string },
  override?: { file: string; text: string },
): { services: ParsedService[]; captured: CapturedValues } {
  const files = [main, ...(override ? [override] : [])].map(({ file, text }) => ({ file, doc: load(text, file) }));
  const definitions = merged(files);
  if (definitions.size === 0) fail(main.file, "defines no services");
  if (definitions.size > LIMITS.services) fail(main.file, `more than ${LIMITS.services} services`);

  const services: ParsedService[] = [];
  const captured: CapturedValues = {};
  for (const [name, { def, environments }] of definitions) {
    const where = `service ${JSON.stringify(name.slice(0, 100))}`;
    if (!SERVICE_NAME.test(name)) fail(main.file, `${where}: service names may contain only letters, digits, '.', '_' and '-'`);
    const env = new Map(environments.flatMap((raw) => [...environmentOf(raw, where, main.file)]));
    if (env.size > LIMITS.variables) fail(main.file, `${where}: more than ${LIMITS.variables} environment variables`);
    const image = def.image === undefined || def.image === null ? null : scalar(def.image);
    if (image !== null && (image.length === 0 || image.length > 512 || CONTROL.test(image))) fail(main.file, `${where}: image is not valid`);
    const dependsRaw = def.depends_on;
    const dependsOn =
      dependsRaw === undefined || dependsRaw === null
        ? []
        : Array.isArray(dependsRaw)
          ? dependsRaw.map((d) => scalar(d) ?? "")
          : isMap(dependsRaw)
            ? Object.keys(dependsRaw)
            : null;
    if (!dependsOn || dependsOn.some((d) => !definitions.has(d))) fail(main.file, `${where}: depends_on must name services of this file`);
    services.push({
      name,
      image,
      build: buildOf(def.build, where, main.file),
      command: commandOf(def.command, where, main.file),
      ports: portsOf(def.ports, where, main.file),
      dependsOn,
      envKeys: [...env.keys()],
    });
    captured[name] = Object.fromEntries(env);
  }
  return { services, captured };
}
