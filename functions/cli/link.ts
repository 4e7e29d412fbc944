/**
 * The folder's link to its project: `.wsp/project.json` ({projectId, orgId, api};
 * never a token), written after the first deploy of a folder and read by the next,
 * so deploying the same folder again updates that project instead of creating a
 * second one. `.wsp/` is never packed. Delete it to deploy the folder as a new project.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";

export const LINK_DIR = ".wsp";
export const LINK_FILE = `${LINK_DIR}/project.json`;

export interface FolderLink {
  projectId: string;
  orgId: string;
  /** The API base URL it was deployed to. */
  api: string;
}

/** The folder's link, or null when it has none (or an unreadable one). */
export async function readLink(folder: string): Promise<FolderLink | null> {
  const text = await readFile(join(folder, LINK_FILE), "utf8").catch(() => null);
  if (text === null || text.length > 64 * 1024) return null;
  try {
    const v = JSON.parse(text);
    if (typeof v?.projectId === "string" && typeof v.orgId === "string" && typeof v.api === "string")
      return { projectId: v.projectId, orgId: v.orgId, api: v.api };
  } catch {}
  return null;
}

export async function writeLink(folder: string, link: FolderLink): Promise<void> {
  await mkdir(join(folder, LINK_DIR), { recursive: true });
  const file = join(folder, LINK_FILE);
  const part = `${file}.${process.pid}.tmp`;
  await writeFile(part, `${JSON.stringify({ projectId: link.projectId, orgId: link.orgId, api: link.api }, null, 2)}\n`);
  await rename(part, file);
}
