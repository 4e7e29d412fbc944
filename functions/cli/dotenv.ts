/**
 * Dotenv files for `wsp env pull` and `push`: `KEY=value` lines, `export ` allowed,
 * `#` comments, values bare, 'single-quoted' (as written) or "double-quoted" (with
 * \n, \r, \t, \" and \\ escapes). Written values are always double-quoted.
 */
export interface DotenvEntry {
  key: string;
  value: string;
}

const LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/;
const ESCAPES: Record<string, string> = { n: "\n", r: "\r", t: "\t", '"': '"', "\\": "\\" };

/** A "quoted" value's text with its escapes read, and what follows the closing quote; null: no closing quote. */
function readQuoted(s: string): { value: string; rest: string } | null {
  let value = "";
  for (let j = 1; j < s.length; j++) {
    const c = s[j]!;
    if (c === "\\" && j + 1 < s.length) {
      const next = s[++j]!;
      value += ESCAPES[next] ?? `\\${next}`;
    } else if (c === '"') return { value, rest: s.slice(j + 1) };
    else value += c;
  }
  return null;
}

/** The entries in order (a key set twice: the last wins), and the lines that are not `KEY=value`, numbered. */
export function parseDotenv(text: string): { entries: DotenvEntry[]; errors: string[] } {
  const byKey = new Map<string, string>();
  const errors: string[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^\s*(#.*)?$/.test(line)) continue;
    const m = LINE.exec(line);
    if (!m) {
      errors.push(`line ${i + 1}: not KEY=value`);
      continue;
    }
    let raw = m[2]!;
    let value: string;
    if (raw.startsWith('"')) {
      // A double-quoted value may span lines up to its closing quote.
      let quoted = readQuoted(raw);
      while (!quoted && i + 1 < lines.length) {
        raw += `\n${lines[++i]}`;
        quoted = readQuoted(raw);
      }
      if (!quoted || !/^\s*(#.*)?$/.test(quoted.rest)) {
        errors.push(`line ${i + 1}: unterminated or malformed "quoted" value`);
        continue;
      }
      value = quoted.value;
    } else if (raw.startsWith("'")) {
      const end = /^'([^']*)'\s*(#.*)?$/.exec(raw);
      if (!end) {
        errors.push(`line ${i + 1}: unterminated 'quoted' value`);
        continue;
      }
      value = end[1]!;
    } else {
      raw = raw.replace(/\s+#.*$/, "");
      value = raw.trim();
    }
    byKey.delete(m[1]!);
    byKey.set(m[1]!, value);
  }
  return { entries: [...byKey].map(([key, value]) => ({ key, value })), errors };
}

export const quoteDotenv = (value: string) =>
  `"${value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n").replace(/\r/g, "\\r").replace(/\t/g, "\\t")}"`;
