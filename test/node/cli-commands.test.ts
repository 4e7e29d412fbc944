/**
 * The `wsp` commands a user runs day to day (functions/cli/commands/) against one real
 * self-hosted server on its own Postgres database, with e-mail to a test SMTP receiver:
 * login (token and e-mail code) saved 0600 under a temporary config folder, whoami,
 * logout; link, env, domains, open, promote and rollback in a folder found through
 * INIT_CWD; deploy run as a process from the package root under `npm run`; help and
 * exit codes. Each test works in an organization of its own.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { parseDotenv, quoteDotenv } from "../../functions/cli/dotenv";
import { COMMANDS, main } from "../../functions/cli/main";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { openPostgres } from "../../shared/db/postgres";
import { deployments, environments } from "../../shared/db/schema";
import { newId } from "../../shared/ids";
import { useCleanups } from "../support/cleanups";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";
import { type SmtpReceiver, startSmtpReceiver } from "../support/receivers";

const { tempDir } = useCleanups("ws-cli-cmd-");
const postgres = inject("pgKind") === "postgres";

let server: RunningServer;
let ownerToken: string;
let smtp: SmtpReceiver;
let own: FreshDatabase;
let db: Awaited<ReturnType<typeof openPostgres>>;
let dataDir: string;

beforeAll(async () => {
  if (!postgres) return;
  smtp = await startSmtpReceiver();
  own = await freshDatabase(inject("pgUrl"), "ws_cli_cmd", { migrate: true });
  db = await openPostgres(own.url, { migrate: false, max: 2 });
  dataDir = mkdtempSync(join(tmpdir(), "ws-cli-cmd-data-"));
  server = await startSelfHosted(
    loadNodeConfig({
      PORT: "0",
      LOG_LEVEL: "silent",
      DATA_DIR: dataDir,
      RUNNER: "off",
      DATABASE_URL: own.url,
      SHARED_DOMAIN: "apps.test",
      SMTP_URL: smtp.url,
      EMAIL_FROM: "Workspace <sign-in@workspace.test>",
    }),
    () => {},
  );
  ownerToken = readFileSync(join(dataDir, "owner-token"), "utf8").trim();
}, 120_000);

afterAll(async () => {
  await server?.close();
  await db?.close();
  await own?.drop();
  await smtp?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** The owner's call to the API, in an organization. */
async function api<T = Record<string, unknown>>(path: string, init: { method?: string; body?: unknown; org?: string } = {}): Promise<T> {
  const res = await fetch(`${server.url}${path}`, {
    method: init.method ?? (init.body === undefined ? "GET" : "POST"),
    headers: {
      authorization: `Bearer ${ownerToken}`,
      ...(init.org ? { "x-organization-id": init.org } : {}),
      ...(init.body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  expect(res.ok, `${path}: ${res.status} ${text}`).toBe(true);
  return (text ? JSON.parse(text) : {}) as T;
}

/** A tenant of this test's own: an organization of the owner's, and a config folder signed in to it. */
async function tenant(name: string) {
  const org = await api<{ id: string }>("/api/orgs", { body: { name } });
  const env = { XDG_CONFIG_HOME: tempDir("ws-cli-cmd-config-") };
  const login = await run(["login", "--api", server.url, "--token", ownerToken, "--org", org.id], env);
  expect(login.code, login.err).toBe(0);
  return { orgId: org.id, env };
}

async function run(argv: string[], env: Record<string, string | undefined> = {}, extra: { prompt?: (q: string) => Promise<string> } = {}) {
  let out = "";
  let err = "";
  const code = await main(argv, { out: (t) => (out += t), err: (t) => (err += t), env, tty: false, ...extra });
  return { code, out, err };
}

const suite = describe.runIf(postgres);

interface EnvVar {
  key: string;
  value: string;
  isSecret: boolean;
}
const kv = ({ key, value, isSecret }: EnvVar) => ({ key, value, isSecret });

suite("wsp login, whoami, logout", () => {
  it("a token is checked and saved 0600 in the config folder with --api and --org; later commands need no flags", async () => {
    const org = await api<{ id: string }>("/api/orgs", { body: { name: "Login by token" } });
    const config = tempDir("ws-cli-cmd-config-");
    const env = { XDG_CONFIG_HOME: config };
    const file = join(config, "wsp", "config.json");

    const refused = await run(["login", "--api", server.url, "--token", `wsp_${"x".repeat(43)}`], env);
    expect(refused).toMatchObject({ code: 1 });
    expect(existsSync(file)).toBe(false);

    const login = await run(["login", "--api", `${server.url}/api`, "--token", ownerToken, "--org", org.id, "--json"], env);
    expect(login.code, login.err).toBe(0);
    expect(JSON.parse(login.out)).toMatchObject({ api: server.url, organization: { id: org.id }, config: file });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(config, "wsp")).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, "utf8"))).toMatchObject({ api: server.url, token: ownerToken, org: org.id });

    const who = await run(["whoami", "--json"], env);
    expect(who.code, who.err).toBe(0);
    expect(JSON.parse(who.out)).toMatchObject({ api: server.url, organization: { id: org.id, name: "Login by token" } });
    // The saved token goes to its own server only.
    const elsewhere = await run(["whoami", "--api", "http://127.0.0.1:9"], env);
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.err).toMatch(/^Missing --token/);

    const out = await run(["logout"], env);
    expect(out.code, out.err).toBe(0);
    expect(out.out).toContain("the token itself stays valid");
    expect(existsSync(file)).toBe(false);
    expect((await fetch(`${server.url}/api/me`, { headers: { authorization: `Bearer ${ownerToken}` } })).status).toBe(200);
    expect((await run(["whoami"], env)).code).toBe(2);
  }, 60_000);

  it("an e-mail code signs in: the server mints a token for this machine, and logout revokes it", async () => {
    const org = await api<{ id: string }>("/api/orgs", { body: { name: "Login by e-mail" } });
    const email = `cli-${org.id.slice(-6)}@example.com`;
    const invitation = await api<{ code: string }>(`/api/orgs/${org.id}/invitations`, { body: { email, role: "member" } });
    const accepted = await fetch(`${server.url}/api/invitations/accept`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ code: invitation.code, name: "CLI user" }),
    });
    expect(accepted.status).toBe(200);
    const env = { XDG_CONFIG_HOME: tempDir("ws-cli-cmd-config-") };
    const asked: string[] = [];
    const prompt = async (question: string) => {
      asked.push(question);
      if (asked.length === 1) return email;
      for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
        const code = smtp.messages.findLast((m) => m.to.includes(email))?.subject.match(/Sign-in code: ([0-9]{6})/)?.[1];
        if (code) return code;
      }
      throw new Error("no code mailed");
    };
    const login = await run(["login", "--api", server.url], env, { prompt });
    expect(login.code, login.err).toBe(0);
    expect(asked).toEqual([`Sign in to ${server.url} with a token (wsp_…) or an e-mail address: `, "Code from the e-mail: "]);
    expect(login.out).toContain(`as ${email}`);
    const saved = JSON.parse(readFileSync(join(env.XDG_CONFIG_HOME, "wsp", "config.json"), "utf8"));
    expect(saved).toMatchObject({ api: server.url, email, tokenId: expect.stringMatching(/^tok_/) });
    const me = async () => (await fetch(`${server.url}/api/me`, { headers: { authorization: `Bearer ${saved.token}` } })).status;
    expect(await me()).toBe(200);
    // Only the token is kept: no session is left open for it.
    const sessions = await fetch(`${server.url}/api/auth/sessions`, { headers: { authorization: `Bearer ${saved.token}` } });
    expect(((await sessions.json()) as { items: unknown[] }).items).toEqual([]);

    const out = await run(["logout", "--json"], env);
    expect(JSON.parse(out.out)).toMatchObject({ signedOut: true, revoked: true });
    expect(await me()).toBe(401);
  }, 60_000);
});

suite("wsp in a linked folder", () => {
  it("link, then env ls/set/pull/push/rm act on the folder's project, found through INIT_CWD; secrets never reach the file", async () => {
    const { orgId, env: config } = await tenant("Env tenant");
    const project = await api<{ id: string; slug: string }>("/api/projects", { body: { name: "Env app" }, org: orgId });
    const folder = tempDir("ws-cli-cmd-app-");
    const env = { ...config, INIT_CWD: folder, npm_lifecycle_event: "wsp" };

    const linked = await run(["link", project.slug], env);
    expect(linked.code, linked.err).toBe(0);
    expect(JSON.parse(readFileSync(join(folder, ".wsp/project.json"), "utf8"))).toEqual({ projectId: project.id, orgId, api: server.url });

    expect((await run(["env", "set", "GREETING=hello world", 'QUOTED=say "hi"\nbye'], env)).code).toBe(0);
    const secret = await run(["env", "set", "API_KEY=cli-canary-secret", "--secret"], env);
    expect(secret.code, secret.err).toBe(0);
    const ls = await run(["env", "ls", "--json"], env);
    expect(JSON.parse(ls.out).items.map(kv)).toEqual([
      { key: "API_KEY", value: "••••••••", isSecret: true },
      { key: "GREETING", value: "hello world", isSecret: false },
      { key: "QUOTED", value: 'say "hi"\nbye', isSecret: false },
    ]);

    const pull = await run(["env", "pull"], env);
    expect(pull.code, pull.err).toBe(0);
    const file = join(folder, ".env");
    const text = readFileSync(file, "utf8");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(text).not.toContain("cli-canary-secret");
    expect(text).not.toContain("••••••••");
    expect(text).toContain("# API_KEY is secret: its value cannot be read back\n");
    expect(parseDotenv(text)).toEqual({
      entries: [
        { key: "GREETING", value: "hello world" },
        { key: "QUOTED", value: 'say "hi"\nbye' },
      ],
      errors: [],
    });

    writeFileSync(file, `${text}export ADDED='single $quoted'\nGREETING=changed # a comment\nAPI_KEY=••••••••\n`);
    const push = await run(["env", "push", ".env"], env);
    expect(push.code, push.err).toBe(0);
    const after = await api<{ items: EnvVar[] }>(`/api/projects/${project.id}/env`, { org: orgId });
    expect(after.items.map(kv)).toEqual([
      { key: "ADDED", value: "single $quoted", isSecret: false },
      { key: "API_KEY", value: "••••••••", isSecret: true },
      { key: "GREETING", value: "changed", isSecret: false },
      { key: "QUOTED", value: 'say "hi"\nbye', isSecret: false },
    ]);

    expect((await run(["env", "rm", "ADDED"], env)).code).toBe(0);
    const missing = await run(["env", "rm", "NOT_SET"], env);
    expect(missing.code).toBe(1);
    expect(missing.out).toContain("not set: NOT_SET");
    // Another environment is another set of variables.
    expect((await run(["env", "ls", "--env", "nope"], env)).code).toBe(1);
  }, 60_000);

  it("domains ls/add/rm and open print the project's addresses", async () => {
    const { orgId, env: config } = await tenant("Domains tenant");
    const project = await api<{ id: string; slug: string }>("/api/projects", { body: { name: "Domains app" }, org: orgId });
    const folder = tempDir("ws-cli-cmd-app-");
    const env = { ...config, INIT_CWD: folder, npm_lifecycle_event: "wsp" };
    expect((await run(["link", project.id], env)).code).toBe(0);

    const add = await run(["domains", "add", `${project.slug}.example.com`], env);
    expect(add.code, add.err).toBe(0);
    const ls = await run(["domains", "ls", "--json"], env);
    expect(JSON.parse(ls.out)).toMatchObject({
      free: { hostname: `${project.slug}.apps.test` },
      items: [{ hostname: `${project.slug}.example.com`, primary: true }],
    });
    expect((await run(["domains", "ls"], env)).out).toContain(`${project.slug}.example.com  primary`);
    expect((await run(["domains", "rm", `${project.slug}.example.com`], env)).code).toBe(0);
    expect(JSON.parse((await run(["domains", "ls", "--json"], env)).out).items).toEqual([]);
    const again = await run(["domains", "rm", `${project.slug}.example.com`], env);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^Error: DELETE .* 404/);

    const open = await run(["open"], env);
    expect(open).toMatchObject({ code: 0, out: `http://${project.slug}.apps.test:${new URL(server.url).port}\n` });
    expect(JSON.parse((await run(["open", project.slug, "--json"], config)).out)).toEqual({ project: project.id, url: open.out.trim() });
  }, 60_000);

  it("rollback promotes the ready deployment before the current one; promote makes one current; a current one is refused", async () => {
    const { orgId, env: config } = await tenant("Rollback tenant");
    const project = await api<{ id: string }>("/api/projects", { body: { name: "Rollback app" }, org: orgId });
    const [production] = await db.db
      .select()
      .from(environments)
      .where(and(eq(environments.projectId, project.id), eq(environments.name, "production")));
    const ready = async (current: boolean, createdAt: Date) =>
      (
        await db.db
          .insert(deployments)
          .values({ id: newId("dpl"), orgId, projectId: project.id, environmentId: production!.id, status: "ready", branch: "main", current, createdAt })
          .returning()
      )[0]!;
    const older = await ready(false, new Date(Date.now() - 60_000));
    const newer = await ready(true, new Date());
    const env = { ...config, INIT_CWD: tempDir("ws-cli-cmd-app-"), npm_lifecycle_event: "wsp" };
    expect((await run(["link", project.id], env)).code).toBe(0);

    const back = await run(["rollback", "--json"], env);
    expect(back.code, back.err).toBe(0);
    expect(JSON.parse(back.out)).toMatchObject({ id: older.id, current: true, previous: newer.id });
    expect((await run(["rollback"], env)).err).toMatch(/no ready deployment in production older than the current one/);

    const forward = await run(["promote", newer.id], env);
    expect(forward).toMatchObject({ code: 0, out: `Deployment ${newer.id} is now current in production\n` });
    const refused = await run(["promote", newer.id], env);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/409/);
  }, 60_000);
});

suite("wsp as a process", () => {
  it("`npm run wsp -- deploy` from an app's folder deploys that folder (INIT_CWD), with the saved sign-in", async () => {
    const { env: config } = await tenant("Process tenant");
    const app = tempDir("ws-cli-cmd-app-");
    writeFileSync(join(app, "index.html"), "<p>hi</p>");
    // npm runs the script from the package root and says where it was run in INIT_CWD.
    const child = spawn(process.execPath, [join(process.cwd(), "functions/cli/wsp.mjs"), "deploy", "--no-wait", "--json"], {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH, ...config, INIT_CWD: app, npm_lifecycle_event: "wsp" },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, err).toBe(0);
    expect(err).toMatch(/Packed 1 file into/);
    expect(JSON.parse(out)).toMatchObject({ name: basename(app), deployment: { status: "queued" } });
    expect(existsSync(join(app, ".wsp/project.json"))).toBe(true);
    expect(existsSync(join(process.cwd(), ".wsp"))).toBe(false);

    // Started by another npm script (`"deploy": "cd site && wsp deploy"`), INIT_CWD is that script's folder, not where wsp runs.
    const site = tempDir("ws-cli-cmd-site-");
    writeFileSync(join(site, "index.html"), "<p>site</p>");
    const nested = spawn(process.execPath, [join(process.cwd(), "functions/cli/wsp.mjs"), "deploy", "--no-wait", "--json"], {
      cwd: site,
      env: { PATH: process.env.PATH, ...config, INIT_CWD: app, npm_lifecycle_event: "deploy" },
    });
    let nestedOut = "";
    nested.stdout.on("data", (d) => (nestedOut += d));
    expect(await new Promise<number | null>((resolve) => nested.on("close", resolve))).toBe(0);
    expect(JSON.parse(nestedOut)).toMatchObject({ name: basename(site) });
    expect(existsSync(join(site, ".wsp/project.json"))).toBe(true);
  }, 90_000);
});

describe("wsp help and exit codes", () => {
  it("every command has its help (exit 0); a mistake is exit 2 with the way to its help", async () => {
    expect((await run(["--help"])).code).toBe(0);
    for (const c of COMMANDS) {
      for (const argv of [
        [c.name, "--help"],
        ["help", c.name],
      ]) {
        const help = await run(argv);
        expect(help.code).toBe(0);
        expect(help.out).toMatch(new RegExp(`^Usage: wsp ${c.name}`));
        expect(help.out).toContain("Global options:");
      }
    }
    expect(await run(["env"])).toMatchObject({ code: 2, err: expect.stringContaining("Run wsp env --help") });
    expect((await run(["env", "bogus"])).code).toBe(2);
    expect((await run(["deploy", "--bogus"])).code).toBe(2);
    expect((await run(["deploy", "--prod", "--env", "staging"])).code).toBe(2);
    expect((await run(["frobnicate"])).code).toBe(2);
    expect((await run(["promote"])).code).toBe(2);
    // Not signed in (no config folder, no --api): a usage mistake.
    expect(await run(["whoami"])).toMatchObject({ code: 2, err: expect.stringMatching(/^Missing --api .*wsp login/) });
  });

  it("dotenv values survive a write and a read", () => {
    const values = ["plain", "two words", 'a "quote"', "back\\slash", "multi\nline\r\n", "tab\tthere", "#not a comment", "", "••••••••"];
    const text = values.map((v, i) => `K${i}=${quoteDotenv(v)}`).join("\n");
    expect(parseDotenv(text).entries.map((e) => e.value)).toEqual(values);
    expect(parseDotenv("A=1\nnot a line\nB='open").errors).toEqual(["line 2: not KEY=value", "line 3: unterminated 'quoted' value"]);
  });
});
