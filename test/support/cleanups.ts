/**
 * Per-test cleanups for the Node-only tests that start servers and make
 * folders: whatever a test registers runs after it, last registered first.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";

export type Cleanup = () => Promise<void> | void;

export function useCleanups(prefix: string) {
  const cleanups: Cleanup[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  /** A new folder under the system temp dir, removed after the test. */
  const tempDir = (dirPrefix = prefix): string => {
    const dir = mkdtempSync(join(tmpdir(), dirPrefix));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };
  return { cleanups, tempDir };
}
