/** The schema and the committed migrations must not drift apart. */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { expect, it } from "vitest";

it("drizzle-kit generates nothing new from shared/db/schema/", () => {
  const dir = mkdtempSync(join(tmpdir(), "ws-drift-"));
  try {
    cpSync("migrations", dir, { recursive: true });
    const before = readdirSync(dir).sort();
    // drizzle-kit prefixes "./" to --out, so pass it relative to the working directory.
    const out = execFileSync(
      process.execPath,
      [
        "node_modules/drizzle-kit/bin.cjs",
        "generate",
        "--dialect",
        "postgresql",
        "--schema",
        "shared/db/schema/index.ts",
        "--out",
        relative(process.cwd(), dir),
      ],
      { encoding: "utf8" },
    );
    expect(readdirSync(dir).sort(), `schema changed without a migration; run npm run db:generate\n${out}`).toEqual(before);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
