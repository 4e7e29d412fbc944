import { availableParallelism } from "node:os";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SECRET_KEYS } from "./test/support/test-keys.ts";

// Every runtime project runs each file under test/suites/ once, on the runtime it provides
// (read by useRuntimeHarness in test/support/runtime.ts). Node-only files are in test/node/,
// workerd-only files in test/worker/.
const SUITES = "test/suites/**/*.test.ts";
const CONSOLE = "test/node/console-*.test.ts";
const timeouts = { testTimeout: 30_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    // At the root, the global setup runs once for the whole run (vitest runs a root globalSetup once
    // and merges what it provides into every project): one migrated Postgres database, one PGlite
    // dump, one S3, git and server-edge host, instead of one of each per project.
    globalSetup: ["test/setup/databases.ts", "test/setup/s3.ts", "test/setup/git.ts", "test/setup/server-edge.ts"],
    // vitest's default is one worker on 2 cores (cores - 1): no file's waits (stream re-checks, retries,
    // timeouts) would overlap another's work. Most of a shared suite's time is spent waiting, so two run at once.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        // One file at a time, alone (vitest runs a project of one worker in a sequential group after the
        // others): several Node files bound their timings (scan linearity, edge rule order, log tail
        // speed) for a loaded 2-core machine, not for sharing it with a second file.
        test: { name: "node", include: ["test/node/**/*.test.ts"], exclude: [CONSOLE], maxWorkers: 1, ...timeouts },
      },
      {
        // The console's browser files bound no timing and start no runner (RUNNER=off, so no sandbox UIDs or
        // start-up sweep to share): they run beside the shared suites rather than one by one after them.
        test: { name: "node-console", include: [CONSOLE], ...timeouts },
      },
      {
        // Shared suites open everything they use in their own harness (beforeAll/afterAll) and never mock
        // modules, so one worker runs file after file without a new process and module graph each time.
        test: { name: "node-pglite", include: [SUITES], provide: { runtime: "node-pglite" }, isolate: false, ...timeouts },
      },
      {
        test: { name: "node-postgres", include: [SUITES], provide: { runtime: "node-postgres" }, isolate: false, ...timeouts },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings: { SECRET_KEYS: TEST_SECRET_KEYS } },
          }),
        ],
        test: {
          name: "worker",
          include: [SUITES, "test/worker/**/*.test.ts"],
          provide: { runtime: "worker" },
          ...timeouts,
        },
      },
    ],
  },
});
