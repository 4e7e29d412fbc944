/**
 * Git identity forwarding (Settings `forwardGitToServer`): `wsp deploy` of a git
 * project reads the user's own credential for the repository's host with
 * `git credential fill` (whatever helper the user configured: a keychain, a
 * store, a manager) and sends it with the deployment, which clones with it.
 *
 * Never prompts: GIT_TERMINAL_PROMPT=0 and no askpass program, stdin is the
 * query only, and the whole call is bounded by a timeout (a helper that waits
 * for a person is killed). A credential is never printed, logged or written:
 * only whether one was found and for which host.
 */
import { spawn } from "node:child_process";

export interface LocalGitCredential {
  username: string;
  password: string;
}

export const CREDENTIAL_FILL_TIMEOUT_MS = 10_000;

/** The credential git's helpers hold for `cloneUrl` (http or https), or why there is none. */
export async function readGitCredential(
  cloneUrl: string,
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {},
): Promise<{ credential: LocalGitCredential } | { none: string }> {
  let url: URL;
  try {
    url = new URL(cloneUrl);
  } catch {
    return { none: "the repository URL is not valid" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return { none: `git credentials are read for http(s) remotes only, not ${url.protocol}` };
  const query = `protocol=${url.protocol.slice(0, -1)}\nhost=${url.host}\npath=${url.pathname.replace(/^\//, "")}\n\n`;
  // No askpass program and no terminal prompt: a helper without the credential fails instead of asking.
  const env: NodeJS.ProcessEnv = { ...(opts.env ?? process.env), GIT_TERMINAL_PROMPT: "0" };
  delete env.GIT_ASKPASS;
  delete env.SSH_ASKPASS;
  // credential.interactive=false: helpers that would open a window (Git Credential Manager) answer from their store only.
  const child = spawn("git", ["-c", "credential.interactive=false", "credential", "fill"], {
    env,
    cwd: opts.cwd,
    stdio: ["pipe", "pipe", "pipe"],
    detached: false,
  });
  let out = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (c: string) => {
    if (out.length < 64 * 1024) out += c;
  });
  // Git's own messages (a helper's failure) may name the host, never the secret; they are not shown either.
  child.stderr.resume();
  const timeoutMs = opts.timeoutMs ?? CREDENTIAL_FILL_TIMEOUT_MS;
  const code = await new Promise<number | "timeout" | "error">((resolve) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve("timeout");
    }, timeoutMs);
    child.on("error", () => {
      clearTimeout(timer);
      resolve("error");
    });
    child.on("close", (c) => {
      clearTimeout(timer);
      resolve(c ?? 1);
    });
    child.stdin.on("error", () => {});
    child.stdin.end(query);
  });
  if (code === "timeout") return { none: `git credential fill did not answer within ${Math.round(timeoutMs / 1000)} s` };
  if (code === "error") return { none: "git is not installed" };
  if (code !== 0) return { none: `no git credential is stored for ${url.host}` };
  const fields = new Map<string, string>();
  for (const line of out.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  const username = fields.get("username");
  const password = fields.get("password");
  if (!username || !password) return { none: `no git credential is stored for ${url.host}` };
  return { credential: { username, password } };
}
