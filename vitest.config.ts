import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { TEST_SECRET_KEYS } from "./test/support/test-keys.ts";

// Every runtime project runs each file under test/suites/ once, on the runtime it provides
// (read by useRuntimeHarness in test/support/runtime.ts). Node-only files are in test/node/,
// workerd-only files in test/worker/.
const SUITES = "test/suites/**/*.test.ts";
const globalSetup = ["test/setup/databases.ts", "test/setup/s3.ts", "test/setup/git.ts", "test/setup/server-edge.ts"];
const timeouts = { testTimeout: 30_000, hookTimeout: 60_000 };

export default defineConfig({
  test: {
    projects: [
      {
        test: { name: "node", include: ["test/node/**/*.test.ts"], globalSetup, ...timeouts },
      },
      {
        test: { name: "node-pglite", include: [SUITES], provide: { runtime: "node-pglite" }, globalSetup, ...timeouts },
      },
      {
        test: { name: "node-postgres", include: [SUITES], provide: { runtime: "node-postgres" }, globalSetup, ...timeouts },
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
          globalSetup,
          ...timeouts,
        },
      },
    ],
  },
});
