/** The runner's sandbox settings and secret files, as an operator writes them: each mistake refused at start, naming the setting. */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { buildEnvPassthrough, loadNodeConfig, parseUidRange } from "../../functions/self-hosted/config";
import { TEST_SECRET_KEYS } from "../support/test-keys";

const dir = mkdtempSync(join(tmpdir(), "ws-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("runner settings", () => {
  it("defaults: sandbox on, uids 200000-299999, 256 processes, 4096 files, 1000 lines/s", () => {
    const { runner } = loadNodeConfig({});
    expect(runner.sandbox).toEqual({ enabled: true, uidRange: { first: 200000, last: 299999 }, pidsMax: 256, nofile: 4096 });
    expect(runner.logRate).toBe(1000);
    expect(loadNodeConfig({ RUNNER_SANDBOX: "off" }).runner.sandbox.enabled).toBe(false);
  });

  it("DATA_DIR is made absolute (the default ./data included): the sandbox binds paths under it, and bubblewrap refuses relative ones", () => {
    expect(loadNodeConfig({}).dataDir).toBe(join(process.cwd(), "data"));
    expect(loadNodeConfig({ DATA_DIR: "some/where" }).dataDir).toBe(join(process.cwd(), "some", "where"));
    expect(loadNodeConfig({ DATA_DIR: dir }).dataDir).toBe(dir);
  });

  it("refuses a uid range holding 0, a system uid or the server's own uid", () => {
    expect(() => loadNodeConfig({ RUNNER_UID_RANGE: "0-100" })).toThrow("RUNNER_UID_RANGE");
    expect(() => loadNodeConfig({ RUNNER_UID_RANGE: "5000-4000" })).toThrow("RUNNER_UID_RANGE");
    expect(() => loadNodeConfig({ RUNNER_UID_RANGE: "abc" })).toThrow("RUNNER_UID_RANGE");
    expect(() => parseUidRange("1000-2000", 1500)).toThrow("holds the server's own uid 1500");
    expect(parseUidRange("300000-300009", 0)).toEqual({ first: 300000, last: 300009 });
  });

  it("BUILD_ENV_PASSTHROUGH: the default proxy/CA/registry names with the server's values; secrets of the server cannot be listed", () => {
    expect(buildEnvPassthrough(undefined, { HTTPS_PROXY: "http://proxy:3128", NODE_EXTRA_CA_CERTS: "/etc/ca.pem", SECRET_KEYS: "k", PATH: "/x" })).toEqual({
      HTTPS_PROXY: "http://proxy:3128",
      NODE_EXTRA_CA_CERTS: "/etc/ca.pem",
    });
    expect(buildEnvPassthrough("FOO, BAR", { FOO: "1", BAR: "" })).toEqual({ FOO: "1" });
    for (const secret of ["SECRET_KEYS", "DATABASE_URL", "WORKSPACE_OWNER_TOKEN", "CLOUD_TOKEN", "S3_SECRET_ACCESS_KEY"]) {
      expect(() => loadNodeConfig({ BUILD_ENV_PASSTHROUGH: `HTTP_PROXY,${secret}` })).toThrow(`BUILD_ENV_PASSTHROUGH: ${secret} is a secret`);
    }
    expect(() => loadNodeConfig({ BUILD_ENV_PASSTHROUGH: "A-B" })).toThrow("not a variable name");
  });

  it("SECRET_KEYS_FILE: read from a private file; refused when others can read it, when missing, or with SECRET_KEYS too", () => {
    const file = join(dir, "keys");
    writeFileSync(file, `${TEST_SECRET_KEYS}\n`, { mode: 0o600 });
    expect(loadNodeConfig({ SECRET_KEYS_FILE: file }).secretKeys).toBe(TEST_SECRET_KEYS);
    expect(() => loadNodeConfig({ SECRET_KEYS_FILE: file, SECRET_KEYS: TEST_SECRET_KEYS })).toThrow("not both");
    chmodSync(file, 0o644);
    expect(() => loadNodeConfig({ SECRET_KEYS_FILE: file })).toThrow("readable by group or others");
    expect(() => loadNodeConfig({ SECRET_KEYS_FILE: join(dir, "none") })).toThrow("does not exist");
  });
});
