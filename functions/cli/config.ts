/**
 * The saved sign-in (`wsp login`): `$XDG_CONFIG_HOME/wsp/config.json`, else
 * `~/.config/wsp/config.json`, mode 0600 in a 0700 folder (it holds a token).
 * Only the environment the command was given is read (HOME, XDG_CONFIG_HOME):
 * a caller that passes none has no saved sign-in.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

export interface SavedLogin {
  /** The API base URL signed in to (`--api` at login). */
  api: string;
  token: string;
  /** The organization chosen at login (`--org`); absent: the token's default. */
  org?: string;
  /** Set when `wsp login` minted the token itself (e-mail code): `wsp logout` revokes it. */
  tokenId?: string;
  email?: string;
}

export function configDir(env: Record<string, string | undefined>): string | null {
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, "wsp");
  if (env.HOME) return join(env.HOME, ".config", "wsp");
  return null;
}

export function configFile(env: Record<string, string | undefined>): string | null {
  const dir = configDir(env);
  return dir && join(dir, "config.json");
}

export async function readLogin(env: Record<string, string | undefined>): Promise<SavedLogin | null> {
  const file = configFile(env);
  if (!file) return null;
  const text = await readFile(file, "utf8").catch(() => null);
  if (text === null || text.length > 64 * 1024) return null;
  try {
    const v = JSON.parse(text);
    if (typeof v?.api !== "string" || typeof v.token !== "string") return null;
    return {
      api: v.api,
      token: v.token,
      ...(typeof v.org === "string" ? { org: v.org } : {}),
      ...(typeof v.tokenId === "string" ? { tokenId: v.tokenId } : {}),
      ...(typeof v.email === "string" ? { email: v.email } : {}),
    };
  } catch {
    return null;
  }
}

/** Written to a 0600 file beside it, then renamed: never readable by others, never half written. */
export async function writeLogin(env: Record<string, string | undefined>, login: SavedLogin): Promise<string> {
  const dir = configDir(env);
  if (!dir) throw new Error("No config folder: set HOME or XDG_CONFIG_HOME");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, "config.json");
  const part = `${file}.${process.pid}.tmp`;
  await writeFile(part, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 });
  await chmod(part, 0o600);
  await rename(part, file);
  return file;
}

export async function removeLogin(env: Record<string, string | undefined>): Promise<void> {
  const file = configFile(env);
  if (file) await rm(file, { force: true });
}
