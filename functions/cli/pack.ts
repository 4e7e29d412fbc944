/**
 * Packs a folder into a gzipped tarball for a folder upload, honouring its
 * ignore files (shared/storage/pack-node.ts: `.gitignore` at any depth, the root
 * `.dockerignore`, `.git/` left out, symbolic links and special files skipped).
 * The folder's own link to its project (`.wsp/`, see link.ts) is left out too.
 */
import { type Listing, listFolder as listAny, packFolder } from "../../shared/storage/pack-node";
import { LINK_DIR } from "./link";

export type { Listing };
export { packFolder };

export async function listFolder(root: string): Promise<Listing> {
  return listAny(root, { exclude: [LINK_DIR] });
}
