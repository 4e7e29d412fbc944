/**
 * The documentation holds together: the README links every reference file under docs/, every
 * relative link in README.md and docs/*.md reaches a file (and a heading, when it names one), and
 * docs/configuration.md's table has a row for every variable the self-hosted config reads (the
 * names of EnvSchema in functions/self-hosted/config.ts), each row naming variables the code reads.
 * Read as text: no server needed.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

const root = process.cwd();
const read = (path: string) => readFileSync(join(root, path), "utf8");
const docs = readdirSync(join(root, "docs"))
  .filter((f) => f.endsWith(".md"))
  .map((f) => `docs/${f}`);

/** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");

/** The headings of a Markdown text outside fenced blocks (a `# example:` line in a block is no heading). */
function headings(markdown: string): string[] {
  let fenced = false;
  const out: string[] = [];
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    else if (!fenced && /^#+ /.test(line)) out.push(line.replace(/^#+ /, ""));
  }
  return out;
}

/** Every file under functions/ and shared/ as one text, to find where a variable is read. */
function sources(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(`${dir}/${e.name}`) : /\.(ts|mjs|js)$/.test(e.name) ? [read(`${dir}/${e.name}`)] : [],
  );
}

describe("documentation", () => {
  it("the README links every file under docs/", () => {
    const readme = read("README.md");
    for (const doc of docs) expect(readme, `README.md does not link ${doc}`).toContain(`](${doc}`);
  });

  it("every relative link reaches its file and heading", () => {
    const broken: string[] = [];
    for (const file of ["README.md", ...docs]) {
      for (const [, href] of read(file).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(href!)) continue;
        const [path, hash] = href!.split("#");
        const target = path ? join(dirname(file), path) : file;
        if (!existsSync(join(root, target))) broken.push(`${file}: ${href} (no such file)`);
        else if (hash && target.endsWith(".md") && !headings(read(target)).map(anchorOf).includes(hash)) broken.push(`${file}: ${href} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("docs/configuration.md has a row for every variable the self-hosted config reads, and reads every row", () => {
    const config = read("functions/self-hosted/config.ts");
    const start = config.indexOf("const EnvSchema = z.object({");
    expect(start, "EnvSchema in functions/self-hosted/config.ts").toBeGreaterThan(0);
    const schema = config.slice(start, config.indexOf("\n});", start));
    const configured = [...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]*):/gm)].map((m) => m[1]!);
    expect(configured.length).toBeGreaterThan(20);

    const rows = [...read("docs/configuration.md").matchAll(/^\| (.*?) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((v) => v[1]!));
    expect(configured.filter((name) => !rows.includes(name))).toEqual([]);
    const code = [...sources("functions"), ...sources("shared")].join("\n");
    expect(rows.filter((name) => !new RegExp(`\\b${name}\\b`).test(code))).toEqual([]);
  });
});
